"""``SimConfig``: the one frozen config of the simulator (every field documented, validated once)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from runtime.errors import ValidationError

from .families import FAMILY_NAMES
from .text import SPLITS, Split

__all__ = ["SimConfig"]


@dataclass(frozen=True)
class SimConfig:
    """How many episodes of which families to simulate, and the knobs of each episode.

    Attributes:
        n_episodes: number of episodes to generate (≥ 1); families are cycled in a seeded order.
        families: families to draw from (names from ``train.simulate.FAMILY_NAMES``).
        held_out_families: families never generated for ``split="train"`` (subset of ``families``).
        split: ``"train"`` (train templates/entities, non-held-out families) or ``"eval"``
            (eval templates/entities, families chosen by ``eval_families``).
        eval_families: for ``split="eval"``: ``"held_out"`` = only held-out families, ``"all"`` = all.
        min_events: fewest events per episode (≥ 60: room for facts, updates and filler).
        max_events: most events per episode (≥ min_events).
        question_rate: questions per event (≈ 0.04 → 4 questions per 100 events), in (0, 0.3].
        ask_fraction: probability that a slot or rule is ever asked about, in (0, 1]; the rest are
            never needed, so usefulness cannot be read off the slot kind alone.
        update_prob: probability a slot gets (another) update superseding it, in [0, 0.9]
            (a second update has half this probability).
        distractor_rate: look-alike distractors per event, in [0, 0.4].
        min_users: fewest users in a multi-user family (≥ 2).
        max_users: most users in a multi-user family (≥ min_users).
        seed: master seed; episode ``i`` gets its own seed derived from (seed, split, i).
    """

    n_episodes: int = 200
    families: tuple[str, ...] = FAMILY_NAMES
    held_out_families: tuple[str, ...] = ("procurement", "onboarding")
    split: Split = "train"
    eval_families: Literal["held_out", "all"] = "held_out"
    min_events: int = 100
    max_events: int = 400
    question_rate: float = 0.04
    ask_fraction: float = 0.5
    update_prob: float = 0.35
    distractor_rate: float = 0.12
    min_users: int = 2
    max_users: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        # Lists from YAML become tuples so the config stays hashable and frozen all the way down.
        object.__setattr__(self, "families", tuple(self.families))
        object.__setattr__(self, "held_out_families", tuple(self.held_out_families))
        problems: list[tuple[str, str]] = []

        def check(ok: bool, name: str, msg: str) -> None:
            if not ok:
                problems.append((name, msg))

        check(isinstance(self.n_episodes, int) and self.n_episodes >= 1, "n_episodes", "must be an int ≥ 1")
        unknown = [f for f in self.families if f not in FAMILY_NAMES]
        check(not unknown and bool(self.families), "families",
              f"unknown or empty {unknown}; valid: {list(FAMILY_NAMES)}")
        check(len(set(self.families)) == len(self.families), "families", "must not repeat a family")
        stray = [f for f in self.held_out_families if f not in self.families]
        check(not stray, "held_out_families", f"{stray} are not in families {list(self.families)}")
        check(self.split in SPLITS, "split", f"must be one of {SPLITS}, got {self.split!r}")
        check(self.eval_families in ("held_out", "all"), "eval_families", "must be 'held_out' or 'all'")
        check(isinstance(self.min_events, int) and self.min_events >= 60, "min_events", "must be an int ≥ 60")
        check(isinstance(self.max_events, int) and self.max_events >= self.min_events, "max_events",
              f"must be an int ≥ min_events ({self.min_events})")
        check(0 < self.question_rate <= 0.3, "question_rate", "must be in (0, 0.3]")
        check(0 < self.ask_fraction <= 1, "ask_fraction", "must be in (0, 1]")
        check(0 <= self.update_prob <= 0.9, "update_prob", "must be in [0, 0.9]")
        check(0 <= self.distractor_rate <= 0.4, "distractor_rate", "must be in [0, 0.4]")
        check(isinstance(self.min_users, int) and self.min_users >= 2, "min_users", "must be an int ≥ 2")
        check(isinstance(self.max_users, int) and self.max_users >= self.min_users, "max_users",
              f"must be an int ≥ min_users ({self.min_users})")
        check(isinstance(self.seed, int) and self.seed >= 0, "seed", "must be an int ≥ 0")
        if not problems and not self.active_families():
            problems.append(("held_out_families" if self.split == "train" else "eval_families",
                             f"no family left to generate for split={self.split!r}: "
                             + ("hold out fewer families" if self.split == "train"
                                else "hold out at least one family or set eval_families='all'")))
        if problems:
            msg = "; ".join(f"{f}: {m}" for f, m in problems)
            raise ValidationError(f"invalid SimConfig — {msg}", field=problems[0][0], problems=problems)

    def active_families(self) -> tuple[str, ...]:
        """The families this config generates, in ``families`` order."""
        if self.split == "train":
            return tuple(f for f in self.families if f not in self.held_out_families)
        if self.eval_families == "held_out":
            return tuple(f for f in self.families if f in self.held_out_families)
        return self.families

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (tuples as lists) for manifests and YAML."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
