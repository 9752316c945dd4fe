"""Write-time enrichment: tone, intent and urgency; entities as tags; corroboration and contradiction.

Everything here runs without an LLM, on the *redacted* text (the record builder's draft), so
nothing it derives can carry a secret the builder removed. Each part is switched on in
:class:`EnrichConfig` (all off by default), and each has a typed hook for an LLM:

- **Tone** (``tone=True``): the text's embedding goes to the nearest *tone prototype* — the mean
  embedding of a handful of example lines per label (:data:`DEFAULT_TONE_EXAMPLES`: ``neutral``,
  ``frustrated``, ``satisfied``, ``anxious``), embedded once per encoder — if it leads the
  runner-up by ``tone_margin``, else ``neutral``. The label fills ``role_context.tone`` unless the
  caller set one; a label in ``urgent_tones`` (``anxious``) adds ``Flag.urgent``. Intent
  (``question`` | ``request`` | ``statement``) is a rule on the text and goes to
  ``attributes["intent"]``. Hook: ``tone_fn(text) -> ToneResult``.
- **Entities** (``entities=True``): :func:`~runtime.annotate.entities.extract_entities` — regular expressions for ids
  (``order:8812``, ``id:ORD-123``), products with a model number (``product:iphone 15 pro``),
  projects (``project:orion``) and people named after a cue word (``person:alice``) — adds tags.
  Hook: ``entity_fn(text) -> [tag, ...]`` (its tags are redacted by the builder like any tag).
- **Corroboration** (``corroborate=True``): configured here, judged in :mod:`runtime.annotate.claims`
  and applied by the store's write pipeline (:mod:`runtime.store.corroboration`); the link
  attributes a record carries are :mod:`runtime.record.links`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ..encoders.embedder import Embedder, l2_normalize
from ..errors import ValidationError
from ..record.memir import Flag

__all__ = ["DEFAULT_NEUTRAL_TONES", "DEFAULT_REQUIRED_TONES", "DEFAULT_TONE_EXAMPLES", "EnrichConfig", "Enricher", "Enrichment",
           "EntityFn", "ToneFn", "ToneResult"]


@dataclass(frozen=True)
class ToneResult:
    """A tone decision: ``label`` (→ ``role_context.tone``), whether it is urgent, and its margin."""

    label: str
    urgent: bool = False
    score: float = 0.0


ToneFn = Callable[[str], ToneResult]
"""``tone_fn(redacted_text) -> ToneResult``: an LLM (or any classifier) instead of the prototypes."""
"""The attribute a corroboration link is kept under (a comma-separated list of memory ids)."""
EntityFn = Callable[[str], Sequence[str]]
"""``entity_fn(redacted_text) -> tags``: an LLM (or any extractor) instead of the patterns."""

# Support-chat phrasings per tone label; the prototype is their mean embedding. Written for this
# module, separately from the lines the tests report accuracy on.
DEFAULT_TONE_EXAMPLES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "neutral": (
        "My account email is on file.",
        "The meeting is on Tuesday at 10.",
        "I ordered two items last week.",
        "Please send the invoice to accounting.",
        "What are your opening hours?",
        "The package weighs about three kilos.",
        "I use the app on my laptop.",
        "Can you update my shipping address?",
    ),
    "frustrated": (
        "This is the third time I'm asking and nobody helps me.",
        "I'm fed up with this terrible service.",
        "Your app keeps crashing and it's driving me crazy.",
        "This is ridiculous, I want a refund now.",
        "I am really annoyed that my order is late again.",
        "Worst support ever, you keep ignoring my emails.",
        "I'm so angry, you charged me twice.",
        "Unacceptable. Nothing works and nobody cares.",
    ),
    "satisfied": (
        "Thank you so much, that fixed it!",
        "Great service, I really appreciate your help.",
        "Perfect, the replacement arrived and works well.",
        "Thanks, you've been very helpful.",
        "I love the new feature, great job.",
        "Awesome, everything is sorted now.",
        "I'm happy with the refund, thanks a lot.",
        "Brilliant, that was quick, cheers!",
    ),
    "anxious": (
        "I'm worried my payment won't go through before the deadline.",
        "Please hurry, the site is down and customers can't pay.",
        "I need this fixed today or I lose the contract.",
        "I'm scared my data was stolen.",
        "Our production server is down, we need help immediately.",
        "I'm nervous the package won't arrive before my flight.",
        "This is an emergency, my account was hacked.",
        "I'm afraid I'll miss the deadline if this isn't resolved soon.",
    ),
})


# The tone the agent must adopt (seed 000 §4.4, determine_required_tone), from the user's emotion; a
# neutral message by its intent. Labels outside these maps leave the required tone unset.
DEFAULT_REQUIRED_TONES: Mapping[str, str] = MappingProxyType({
    "frustrated": "empathetic",   # acknowledge the problem, apologise, act
    "anxious": "reassuring",      # calm, concrete next step, say when
    "satisfied": "warm",
})
DEFAULT_NEUTRAL_TONES: Mapping[str, str] = MappingProxyType({
    "question": "informative",    # a direct, precise answer
    "request": "helpful",         # confirm and do it
    "statement": "neutral",
})


def _problem_if(p: list[tuple[str, str]], bad: bool, name: str, msg: str) -> None:
    if bad:
        p.append((name, msg))


@dataclass(frozen=True)
class EnrichConfig:
    """What write-time enrichment does (all off by default: docs/agent-api.md gives the measured cost).

    Attributes:
        tone: fill ``tone`` (when the caller gave none), ``attributes["intent"]`` and urgency.
        entities: add entity tags (:func:`~runtime.annotate.entities.extract_entities` or ``entity_fn``).
        corroborate: link and re-score against the scope's nearest memories (``Scope.write``).
        tone_examples: ``{label: [example lines]}``; each label's prototype is their mean embedding.
        tone_margin: cosine lead in [0, 2] the nearest prototype needs over the runner-up, else
            ``neutral_label``.
        neutral_label: the label when no prototype leads clearly (must be a key of ``tone_examples``).
        urgent_tones: labels that add ``Flag.urgent``.
        tone_fn: a classifier (e.g. an LLM call) used instead of the prototypes.
        entity_fn: an extractor (e.g. an LLM call) used instead of the patterns.
        max_entity_tags: most entity tags added to one memory.
        neighbours: nearest memories of the scope compared with a new one.
        agree_similarity: cosine at or above which two memories agree (no value conflicting). 0.9 for
            all-MiniLM-L6-v2: "lives in Lyon" / "lives in Paris" score 0.81, "green" / "blue" 0.86,
            while restatements score 0.9–0.99 (numeric facts also agree through their claims).
        claim_similarity: cosine a pair needs before their claims are compared (a same-subject guard).
        evidence_weight: in (0, 1]: how much one independent agreeing source counts (see
            :func:`corroborated_confidence`).
        max_confidence: the cap corroboration raises confidence to.
        required_tones: ``{tone label: the tone the agent must adopt}``, stored as
            ``attributes["required_tone"]`` with ``tone`` on (unless the write or ``acting_as`` gives one).
        neutral_tones: the same for ``neutral_label``, by intent (``question``/``request``/``statement``).
    """

    tone: bool = False
    entities: bool = False
    corroborate: bool = False
    tone_examples: Mapping[str, Sequence[str]] = field(default_factory=lambda: DEFAULT_TONE_EXAMPLES)
    tone_margin: float = 0.01
    neutral_label: str = "neutral"
    urgent_tones: tuple[str, ...] = ("anxious",)
    tone_fn: ToneFn | None = None
    entity_fn: EntityFn | None = None
    max_entity_tags: int = 8
    neighbours: int = 3
    agree_similarity: float = 0.9
    claim_similarity: float = 0.5
    evidence_weight: float = 0.5
    max_confidence: float = 0.99
    required_tones: Mapping[str, str] = field(default_factory=lambda: DEFAULT_REQUIRED_TONES)
    neutral_tones: Mapping[str, str] = field(default_factory=lambda: DEFAULT_NEUTRAL_TONES)

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        for name in ("tone", "entities", "corroborate"):
            _problem_if(p, not isinstance(getattr(self, name), bool), name, "must be True or False")
        ex = self.tone_examples
        _problem_if(p, not isinstance(ex, Mapping) or len(ex) < 2, "tone_examples",
                    "give at least two labels, each with example lines")
        if isinstance(ex, Mapping):
            for k, v in ex.items():
                _problem_if(p, not isinstance(k, str) or not 0 < len(k.strip()) <= 128, f"tone_examples[{k!r}]",
                            "labels are 1–128 characters")
                _problem_if(p, isinstance(v, str) or not v or not all(isinstance(s, str) and s.strip() for s in v),
                            f"tone_examples[{k!r}]", "give a non-empty list of example lines")
            _problem_if(p, self.neutral_label not in ex, "neutral_label",
                        f"{self.neutral_label!r} is not a label of tone_examples ({sorted(ex)})")
            for i, t in enumerate(self.urgent_tones):
                _problem_if(p, t not in ex, f"urgent_tones[{i}]", f"{t!r} is not a label of tone_examples")
        for name in ("tone_fn", "entity_fn"):
            v = getattr(self, name)
            _problem_if(p, v is not None and not callable(v), name, "must be a callable or None")
        for name, lo, hi in (("tone_margin", 0.0, 2.0), ("agree_similarity", -1.0, 1.0),
                             ("claim_similarity", -1.0, 1.0), ("max_confidence", 0.0, 1.0)):
            v = getattr(self, name)
            _problem_if(p, isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi, name,
                        f"must be a number in [{lo}, {hi}], got {v!r}")
        w = self.evidence_weight
        _problem_if(p, isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 < w <= 1.0,
                    "evidence_weight", f"must be a number in (0, 1], got {w!r}")
        for name, lo, hi in (("max_entity_tags", 1, 64), ("neighbours", 1, 50)):
            v = getattr(self, name)
            _problem_if(p, isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi, name,
                        f"must be an integer in [{lo}, {hi}], got {v!r}")
        for name in ("required_tones", "neutral_tones"):
            m = getattr(self, name)
            _problem_if(p, not isinstance(m, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) and 0 < len(v.strip()) <= 128 for k, v in m.items()),
                name, "give {label: tone}, each tone 1–128 characters")
        if p:
            raise ValidationError.from_problems("EnrichConfig", p)
        for name in ("required_tones", "neutral_tones"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "tone_examples",
                           MappingProxyType({k: tuple(v) for k, v in self.tone_examples.items()}))
        object.__setattr__(self, "urgent_tones", tuple(self.urgent_tones))

    @property
    def any(self) -> bool:
        """Whether the assembler has anything to do (tone or entities)."""
        return self.tone or self.entities


# ---------------------------------------------------------------------------------- the enricher
@dataclass(frozen=True)
class Enrichment:
    """What enrichment decided for one memory (all fields optional: only what was switched on)."""

    tone: ToneResult | None = None
    intent: str | None = None
    tags: tuple[str, ...] = ()
    required_tone: str | None = None

    def fields(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The write fields to add to a draft's ``given`` fields: ``tone`` unless given, tags and
        flags appended, ``intent`` and ``required_tone`` (from the classified emotion) in the
        attributes (a caller's own attribute wins)."""
        out: dict[str, Any] = {}
        if self.tone is not None and not given.get("tone"):
            out["tone"] = self.tone.label
        if self.tone is not None and self.tone.urgent:
            flags = list(given.get("flags") or [])
            if Flag.urgent not in flags and "urgent" not in flags:
                out["flags"] = flags + [Flag.urgent]
        if self.tags:
            tags = list(given.get("tags") or [])
            out["tags"] = tags + [t for t in self.tags if t not in tags]
        if self.intent is not None or self.required_tone is not None:
            attrs = dict(given.get("attributes") or {})
            if self.intent is not None:
                attrs.setdefault("intent", self.intent)
            if self.required_tone is not None:
                attrs.setdefault("required_tone", self.required_tone)
            out["attributes"] = attrs
        return out


class Enricher:
    """Tone (prototypes or ``tone_fn``), intent and entities for one memory. Thread-safe.

    The tone prototypes are embedded once per encoder (by ``encoder_id`` and dimension) on first use.
    """

    def __init__(self, config: EnrichConfig) -> None:
        self.config = config
        self._protos: dict[tuple[str, int], tuple[list[str], np.ndarray]] = {}
        self._lock = threading.Lock()

    def prototypes(self, embedder: Embedder) -> tuple[list[str], np.ndarray]:
        """``(labels, unit prototype matrix)`` for ``embedder`` (computed once, then cached)."""
        key = (embedder.encoder_id, embedder.dim)
        with self._lock:
            got = self._protos.get(key)
            if got is None:
                ex = self.config.tone_examples
                labels = list(ex)
                protos = [l2_normalize(embedder.encode(list(ex[lab]))).mean(axis=0) for lab in labels]
                got = self._protos[key] = (labels, l2_normalize(np.stack(protos)))
            return got

    def tone(self, text: str, vector: np.ndarray | None, embedder: Embedder | None) -> ToneResult | None:
        """The tone of ``text`` from its unit ``vector`` (``None`` without a vector or an encoder)."""
        cfg = self.config
        if cfg.tone_fn is not None:
            res = cfg.tone_fn(text)
            if not isinstance(res, ToneResult):
                raise ValidationError(f"tone_fn must return a ToneResult, got {type(res).__name__}", field="tone_fn")
            return res
        if vector is None or embedder is None:
            return None
        labels, protos = self.prototypes(embedder)
        if protos.shape[1] != vector.shape[0]:
            raise ValidationError(f"embedding has dimension {vector.shape[0]} but the tone prototypes have "
                                  f"{protos.shape[1]}", field="embedding")
        sims = protos @ vector.astype(np.float32)
        order = np.argsort(-sims)
        margin = float(sims[order[0]] - sims[order[1]])
        label = labels[int(order[0])] if margin >= cfg.tone_margin else cfg.neutral_label
        return ToneResult(label, label in cfg.urgent_tones, round(margin, 6))

    def entities(self, text: str) -> list[str]:
        """Entity tags of ``text`` (``entity_fn`` when given, else :func:`~runtime.annotate.entities.extract_entities`)."""
        cfg = self.config
        if cfg.entity_fn is None:
            from .entities import extract_entities  # the patterns compile at the first enriched write
            return extract_entities(text, limit=cfg.max_entity_tags)
        got = cfg.entity_fn(text)
        if isinstance(got, str) or not all(isinstance(t, str) for t in got):
            raise ValidationError("entity_fn must return a list of strings", field="entity_fn")
        return [t.strip() for t in got if t.strip()][:cfg.max_entity_tags]

    def enrich(self, text: str, embed: Callable[[], np.ndarray | None], embedder: Embedder | None) -> Enrichment:
        """Tone, intent and entities of the redacted ``text``, as switched on in the config."""
        cfg = self.config
        tone = intent = None
        if cfg.tone:
            tone = self.tone(text, embed() if cfg.tone_fn is None else None, embedder)
            from .entities import intent_of
            intent = intent_of(text)
        tags = tuple(self.entities(text)) if cfg.entities else ()
        return Enrichment(tone, intent, tags, self.required_tone(tone, intent))

    def required_tone(self, tone: ToneResult | None, intent: str | None) -> str | None:
        """The tone the agent must adopt toward this message: by the user's tone, and for a neutral
        one by its intent (``None`` when tone is off or the label is in neither map)."""
        if tone is None:
            return None
        if tone.label == self.config.neutral_label:
            return self.config.neutral_tones.get(intent or "statement")
        return self.config.required_tones.get(tone.label)
