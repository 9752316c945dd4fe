"""Public entry points: one episode from (family, seed, split), or a whole set from a ``SimConfig``.

Everything is a pure function of its explicit seed: each call builds its own
``numpy.random.Generator`` and no global random state is read or written.
"""

from __future__ import annotations

import numpy as np

from .config import SimConfig
from .events import Episode
from .families import FamilySpec, get_family
from .render import render_episode
from .schedule import make_plan
from .text import SPLITS, Split

__all__ = ["episode_seed", "generate", "generate_episode"]

_DEFAULT = SimConfig()


def generate_episode(family: str | FamilySpec, seed: int, split: Split = "train",
                     cfg: SimConfig | None = None) -> Episode:
    """Generate one episode.

    Args:
        family: family name (see ``FAMILY_NAMES``) or a :class:`FamilySpec`.
        seed: the episode's seed (≥ 0); the same (family, seed, split, knobs) gives the same episode.
        split: which template and entity split to word it with.
        cfg: episode knobs (event range, rates, users); its ``n_episodes``/``families``/``seed`` are
            not used here. Defaults to ``SimConfig()``.

    Returns:
        An :class:`Episode` with ``cfg.min_events``–``cfg.max_events`` events.

    Example:
        >>> ep = generate_episode("travel", seed=7)
        >>> 100 <= len(ep.events) <= 400 and len(ep.questions) > 0
        True
    """
    fam = get_family(family)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if seed < 0:
        raise ValueError(f"seed must be ≥ 0, got {seed}")
    cfg = cfg or _DEFAULT
    # The family name is mixed into the stream so two families with one seed are unrelated draws.
    rng = np.random.default_rng([seed, *fam.name.encode()])
    n = int(rng.integers(cfg.min_events, cfg.max_events + 1))
    plan = make_plan(fam, rng, n, cfg, split)
    return render_episode(fam, plan, rng, split, f"{fam.name}.{split}.{seed}", seed)


def episode_seed(master: int, split: Split, index: int) -> int:
    """The seed of episode ``index`` of a set: a stable function of (master seed, split, index)."""
    ss = np.random.SeedSequence([master, SPLITS.index(split), index])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def generate(cfg: SimConfig) -> list[Episode]:
    """Generate ``cfg.n_episodes`` episodes of ``cfg.active_families()`` for ``cfg.split``.

    Families are balanced: the active families are shuffled once (seeded) and cycled, so any
    prefix of the list has them in near-equal numbers.
    """
    fams = list(cfg.active_families())
    order = np.random.default_rng([cfg.seed, SPLITS.index(cfg.split)]).permutation(len(fams))
    return [generate_episode(fams[int(order[i % len(fams)])], episode_seed(cfg.seed, cfg.split, i), cfg.split, cfg)
            for i in range(cfg.n_episodes)]
