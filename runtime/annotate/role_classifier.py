"""Role and sub-role classification for new memories (seed 000 §3.1 "角色识别").

Two lightweight classifiers the seed suggests, tried in order by :class:`RoleClassifier`:

1. **Rules** — ``{sub_role: [regex, ...]}``: the sub-role with the most matching patterns wins.
2. **Prototypes** — each sub-role's description is embedded once; the content goes to the nearest
   one if its cosine clears ``min_similarity`` (and leads the runner-up by ``min_margin``).

Otherwise the agent's current role is kept (``method="context"``). A sub-role maps to its active
role through ``parents`` (seed 000 §3.1: label the sub-role — "billing" vs "technical" support —
not only the top-level role). Used by :class:`runtime.annotate.assembler.ContextAssembler`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numpy as np

from ..encoders.embedder import Embedder, l2_normalize
from ..errors import ValidationError

__all__ = ["RoleClassifier", "RoleConfig", "RoleDecision"]


def _label_ok(s: object) -> bool:
    return isinstance(s, str) and 0 < len(s.strip()) <= 128


def _raise(owner: str, problems: list[tuple[str, str]]) -> None:
    if problems:
        text = "; ".join(f"{f}: {m}" for f, m in problems)
        raise ValidationError(f"invalid {owner} — {text}", field=problems[0][0], problems=problems)


@dataclass(frozen=True)
class RoleConfig:
    """How the sub-role (and through ``parents`` the active role) is classified.

    Attributes:
        rules: ``{sub_role: [regex, ...]}`` searched case-insensitively in the (redacted) content;
            use ``\\b`` for word boundaries. Most matching patterns wins; ties go to the first declared.
        descriptions: ``{sub_role: description}``, embedded as prototypes when no rule matches
            (needs an embedder).
        parents: ``{sub_role: active_role}``; a sub-role without a parent keeps the context's role.
        min_similarity: cosine in [-1, 1] the nearest prototype must reach, else the context's role
            is kept. Encoder specific: ~0.3 for all-MiniLM-L6-v2.
        min_margin: cosine lead in [0, 2] the nearest prototype needs over the runner-up.
        model: when no rule or prototype decides (or none are configured) and neither the caller
            nor ``Scope.acting_as`` named a sub-role, the store classifies it with the shipped
            role model (``runtime.scoring.role_weights``) from the write and the recent dialog —
            the unit mean of the scope's last ``policy.recent_window`` writes — if the store's
            encoder is the one the model was fit on. Default on.
        model_min_weight: the model's top weight (softmax over its ~30 sub-roles) a sub-role needs
            to be filed; below it the write keeps no sub-role (:mod:`runtime.store.dialog_role`).
    """

    rules: Mapping[str, Sequence[str]] = field(default_factory=dict)
    descriptions: Mapping[str, str] = field(default_factory=dict)
    parents: Mapping[str, str] = field(default_factory=dict)
    min_similarity: float = 0.3
    min_margin: float = 0.0
    model: bool = True
    model_min_weight: float = 0.4

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        for sub, pats in self.rules.items():
            if not _label_ok(sub):
                p.append((f"rules[{sub!r}]", "sub-role names are 1–128 characters"))
            if isinstance(pats, str) or not pats:
                p.append((f"rules[{sub!r}]", "give a non-empty list of patterns, e.g. [r'\\binvoice']"))
                continue
            for i, pat in enumerate(pats):
                try:
                    re.compile(pat)
                except (re.error, TypeError) as e:
                    p.append((f"rules[{sub!r}][{i}]", f"not a valid regular expression: {e}"))
        for sub, desc in self.descriptions.items():
            if not _label_ok(sub) or not isinstance(desc, str) or not desc.strip():
                p.append((f"descriptions[{sub!r}]", "needs a sub-role name and a non-empty description"))
        known = set(self.rules) | set(self.descriptions)
        for sub, parent in self.parents.items():
            if sub not in known:
                p.append((f"parents[{sub!r}]", f"unknown sub-role; declared: {sorted(known)}"))
            if not _label_ok(parent):
                p.append((f"parents[{sub!r}]", "active role names are 1–128 characters"))
        if not -1.0 <= self.min_similarity <= 1.0:
            p.append(("min_similarity", f"must be a cosine in [-1, 1], got {self.min_similarity}"))
        if not 0.0 <= self.min_margin <= 2.0:
            p.append(("min_margin", f"must be in [0, 2], got {self.min_margin}"))
        if not isinstance(self.model, bool):
            p.append(("model", f"must be a bool, got {self.model!r}"))
        mw = self.model_min_weight
        if isinstance(mw, bool) or not isinstance(mw, (int, float)) or not 0.0 < mw <= 1.0:
            p.append(("model_min_weight", f"must be a weight in (0, 1], got {mw!r}"))
        _raise("RoleConfig", p)
        for name in ("rules", "descriptions", "parents"):  # freeze a copy of the caller's dicts
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))


@dataclass(frozen=True)
class RoleDecision:
    """The role a memory was filed under and how it was chosen.

    Attributes:
        method: ``explicit`` (caller), ``rules``, ``prototype``, ``model`` (the shipped role model on
            the recent dialog) or ``context`` (kept the current role).
        score: rules: number of patterns matched; prototype/context: cosine of the nearest prototype;
            model: the chosen sub-role's weight.
        matched: the rule patterns that matched.
    """

    active_role: str
    sub_role: str | None
    method: Literal["explicit", "rules", "prototype", "model", "context"]
    score: float | None = None
    matched: tuple[str, ...] = ()


class RoleClassifier:
    """Rules, then prototypes, then the current role (see the module docstring).

    Args:
        config: the :class:`RoleConfig`.
        embedder: required when ``config.descriptions`` is non-empty; prototypes are embedded on
            first use.

    Raises:
        ValidationError: descriptions are configured without an embedder.
    """

    def __init__(self, config: RoleConfig, embedder: Embedder | None = None) -> None:
        if config.descriptions and embedder is None:
            raise ValidationError("RoleConfig.descriptions need an embedder: pass embedder=... "
                                  "(see runtime.encoders) or drop the descriptions", field="embedder")
        self.config, self._embedder = config, embedder
        self._rules = [(sub, [re.compile(p, re.IGNORECASE) for p in pats]) for sub, pats in config.rules.items()]
        self._protos: tuple[list[str], np.ndarray] | None = None

    def explicit(self, active_role: str | None, sub_role: str | None, current_role: str) -> RoleDecision:
        """The caller named the role: a bare sub-role takes its parent (else the current role)."""
        role = active_role or self.config.parents.get(sub_role or "", current_role)
        return RoleDecision(role, sub_role, "explicit")

    def classify(self, text: str, current_role: str, current_sub_role: str | None,
                 embed: Callable[[], np.ndarray | None]) -> RoleDecision:
        """Classify ``text``; ``embed()`` lazily returns its unit-norm embedding (or None).

        The embedding is only requested when no rule matches and prototypes exist.
        """
        parents = self.config.parents
        best: tuple[int, str, list[str]] | None = None
        for sub, pats in self._rules:
            hits = [p.pattern for p in pats if p.search(text)]
            if hits and (best is None or len(hits) > best[0]):
                best = (len(hits), sub, hits)
        if best is not None:
            n, sub, hits = best
            return RoleDecision(parents.get(sub, current_role), sub, "rules", float(n), tuple(hits))
        if self.config.descriptions and (e := embed()) is not None:
            names, protos = self._prototypes()
            if protos.shape[1] != e.shape[0]:
                raise ValidationError(f"embedding has dimension {e.shape[0]} but the role prototypes have "
                                      f"{protos.shape[1]}: pass embeddings from the assembler's encoder",
                                      field="embedding")
            sims = protos @ e
            order = np.argsort(-sims, kind="stable")
            top = float(sims[order[0]])
            second = float(sims[order[1]]) if len(order) > 1 else -1.0
            if top >= self.config.min_similarity and top - second >= self.config.min_margin:
                sub = names[int(order[0])]
                return RoleDecision(parents.get(sub, current_role), sub, "prototype", top)
            return RoleDecision(current_role, current_sub_role, "context", top)
        return RoleDecision(current_role, current_sub_role, "context")

    def _prototypes(self) -> tuple[list[str], np.ndarray]:
        # Embedded on first use, not at construction: building an assembler stays free.
        if self._protos is None:
            assert self._embedder is not None  # checked in __init__
            names = list(self.config.descriptions)
            vecs = l2_normalize(self._embedder.encode([self.config.descriptions[n] for n in names]))
            self._protos = (names, vecs)
        return self._protos
