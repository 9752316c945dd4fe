"""Simulator of long-horizon agent tasks: typed event streams with hindsight ground truth.

Pure Python + numpy (no torch, no store). An :class:`Episode` is 100–400 :class:`Event` s — core
instructions, key facts, updates that supersede them, look-alike distractors, chit-chat,
temporary values, secrets with a TTL, tool results and the agent's own inferences — plus
:class:`Question` s at later steps that need the then-current version of specific facts.
Templates and entity pools are split between ``"train"`` and ``"eval"`` and whole families are held
out (seed 001 §4.2, §6.2, pitfall 1). Each event converts to a MemIR record with
:meth:`Event.to_memir`; its :class:`Truth` stays out of it.

Example:
    >>> from train.simulate import SimConfig, generate, summarize
    >>> eps = generate(SimConfig(n_episodes=4, seed=1))
    >>> summarize(eps).n_episodes
    4
"""

from .config import SimConfig
from .events import Episode, Event, Kind, Question, Truth
from .families import FAMILIES, FAMILY_NAMES, FamilySpec, get_family
from .generator import episode_seed, generate, generate_episode
from .pools import SECRET_PATTERN, entity_atoms
from .stats import SimStats, summarize
from .text import SPLITS, Split

__all__ = [
    "FAMILIES",
    "FAMILY_NAMES",
    "SECRET_PATTERN",
    "SPLITS",
    "Episode",
    "Event",
    "FamilySpec",
    "Kind",
    "Question",
    "SimConfig",
    "SimStats",
    "Split",
    "Truth",
    "entity_atoms",
    "episode_seed",
    "generate",
    "generate_episode",
    "get_family",
    "summarize",
]
