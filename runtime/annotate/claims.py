"""Corroboration and contradiction: does a new memory agree with, or contradict, what is stored?

Runs without an LLM on the redacted text. :func:`claim_of` reads a simple claim from a memory (a
subject, a value: numbers with units, dates, names; a negation); :func:`judge` compares the new
memory with its nearest stored memories of the same scope (working tier, and in a ``write_many`` the
batch's earlier items; superseded versions and the version a correction replaces are skipped).
Agreeing memories from *other* sources raise the new memory's confidence by
:func:`corroborated_confidence`; the store records links both ways in the insert's transaction
(:mod:`runtime.store.corroboration`; the link attributes: :mod:`runtime.record.links`). Stored
memories keep their confidence. Switched on by ``EnrichConfig(corroborate=True)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..record.memir import MemIR
from .enrich import EnrichConfig

__all__ = ["Claim", "Judgement", "Neighbour", "claim_of", "corroborated_confidence", "judge", "least_similarity"]

_NUM = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(k|m|bn|%)?(?![\w])", re.I)
_MONTHS = ("january february march april may june july august september october november december "
           "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday "
           "sunday mon tue wed thu fri sat sun today tomorrow yesterday").split()
_MONTH = re.compile(rf"\b({'|'.join(_MONTHS)})\b", re.I)
# The lookaheads name the first letters of the alternatives: most positions fail there, before the
# alternation is tried (both patterns read whole memories, on every write with corroboration on).
_COPULA = re.compile(r"\s(?=[iawhcetsmblr=:])(?:is|are|was|were|will be|has been|have been|costs?|equals?|totals?|=|:|set to|"
                     r"moved to|changed to|becomes|became|lives? in|lived in|works? (?:at|for)|worked (?:at|for)|"
                     r"reports? to|reported to)\s", re.I)
_NAME = re.compile(r"\b[A-Z][\w'-]*[a-z][\w'-]*")  # a capitalised word with a lower-case letter (not EUR, not I)
_NEG = re.compile(r"\b(?=[ncwiad])(?:not|no|never|none|cannot|can't|won't|isn't|aren't|wasn't|weren't|don't|doesn't|didn't)\b",
                  re.I)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("""the a an of for to in on at our my your their his her its this that these those now currently
actually still new total is are was were be been will has have and or with by from about as per s""".split())
_MULT = {"k": 1e3, "m": 1e6, "bn": 1e9}
_SENTENCE_END = (". ", "! ", "? ", "\n")  # a full stop followed by a space: not the point of 40.5


@dataclass(frozen=True)
class Claim:
    """``subject`` words, ``values`` (numbers, amounts, dates, ids) and ``names`` (capitalised words:
    places, people, products) of ``<subject> is <value>``."""

    subject: frozenset[str]
    values: frozenset[str]
    names: frozenset[str] = frozenset()


def claim_of(text: str) -> Claim | None:
    """The claim a memory makes, or ``None`` when it has no ``<subject> <copula> <value>`` shape
    with a number, an amount, a date or a name in the value (copulas include ``lives in``,
    ``works at``, ``reports to``...). The claim is read from the sentence of the first copula only.

    Numbers are normalised (``40k`` = ``40,000`` = ``40000``; ``%`` kept), month and day names
    lower-cased; names are the value's capitalised words other than month and day names, lower-cased
    (all-capital codes such as ``EUR`` are units, not names); the subject is its content words
    (stop words, ``'s`` dropped).

    >>> c = claim_of("Budget for project Orion is now 40k EUR")
    >>> sorted(c.subject), sorted(c.values), sorted(c.names)
    (['budget', 'orion', 'project'], ['40000'], [])
    >>> sorted(claim_of("Alice lives in Lyon since spring").names)
    ['lyon']
    """
    m = _COPULA.search(text)
    if m is None:
        return None
    # The claim is the sentence the copula is in: a long memory's other sentences say other things
    # (and reading them all made judging a long memory cost ~0.4 ms).
    start = max(text.rfind(c, 0, m.start()) for c in _SENTENCE_END) + 1
    ends = [i for i in (text.find(c, m.end()) for c in _SENTENCE_END) if i >= 0]
    subject, value = text[start:m.start()], text[m.end():min(ends, default=len(text))]
    values: set[str] = set()
    for n in _NUM.finditer(value):
        try:
            x = float(n.group(1).replace(",", ""))
        except ValueError:
            continue
        unit = (n.group(2) or "").lower()
        if unit == "%":
            values.add(f"{x:g}%")
        else:
            values.add(f"{x * _MULT.get(unit, 1):.10g}")
    values |= {w.lower()[:3] for w in _MONTH.findall(value)}
    names = {w.lower() for w in _NAME.findall(value) if not _MONTH.fullmatch(w)}
    words = {w for w in _WORD.findall(subject.lower().replace("'s", "")) if w not in _STOP}
    if not (values or names) or not words:
        return None
    return Claim(frozenset(words), frozenset(values), frozenset(names))


@dataclass(frozen=True)
class Judgement:
    """How a new memory relates to its stored neighbours (ids in similarity order)."""

    agrees: tuple[str, ...] = ()
    independent: tuple[str, ...] = ()
    contradicts: tuple[str, ...] = ()
    confidence: float | None = None


@dataclass(frozen=True)
class Neighbour:
    """What judging reads of a stored memory: its id, content, source ``(source_type, source_entity)``
    and confidence (the store builds these from stored JSON without parsing whole records)."""

    id: str
    content: str
    source: tuple[str, str | None]
    confidence: float

    @classmethod
    def of(cls, rec: MemIR) -> Neighbour:
        return cls(rec.id, rec.content, _source(rec), rec.metadata.confidence)


def _same_subject(a: Claim, b: Claim) -> bool:
    return len(a.subject & b.subject) / len(a.subject | b.subject) >= 0.6


def _compare(a: Claim, b: Claim) -> bool | None:
    """Whether two claims about one subject agree (``True``), conflict (``False``), or say nothing
    comparable (``None``): values when both have values (any difference conflicts), else names when
    both have names (no name in common conflicts: ``Lyon`` vs ``Paris``; ``Dana`` vs ``Dana Kim`` agree)."""
    if a.values and b.values:
        return a.values == b.values
    if a.names and b.names:
        return bool(a.names & b.names)
    return None


def _source(rec: MemIR) -> tuple[str, str | None]:
    return rec.provenance.type.value, rec.provenance.source_entity


def judge(new: MemIR, neighbours: Sequence[tuple[MemIR | Neighbour, float]], config: EnrichConfig) -> Judgement:
    """Compare ``new`` with stored ``neighbours`` (``(record or Neighbour, cosine)`` pairs of the same scope).

    The rule, per neighbour:

    - **contradicts** when the cosine is at least ``claim_similarity`` and both make a claim
      (:func:`claim_of`) about the same subject (Jaccard of subject words ≥ 0.6) that conflicts —
      different values, or (without values on both sides) names with none in common; or when the
      cosine is at least ``agree_similarity`` and exactly one of them is negated (not, never, can't...);
    - else **agrees** when the cosine is at least ``agree_similarity``, or both claim the same
      values (or a shared name) about the same subject (and the cosine is at least ``claim_similarity``).

    An agreeing neighbour is **independent** when its source — ``(source_type, source_entity)`` —
    differs from the new memory's; only independent sources raise confidence
    (:func:`corroborated_confidence`), each source counted once, at its highest confidence. A
    memory repeating its own source is linked but proves nothing new.
    """
    mine = claim_of(new.content)
    neg = bool(_NEG.search(new.content))
    src = _source(new)
    agrees, contra, independent = [], [], []
    best: dict[tuple[str, str | None], float] = {}
    for near, sim in neighbours:
        nb = near if isinstance(near, Neighbour) else Neighbour.of(near)
        if nb.id == new.id:
            continue
        theirs = claim_of(nb.content) if sim >= config.claim_similarity else None
        same = (None if mine is None or theirs is None or not _same_subject(mine, theirs)
                else _compare(mine, theirs))
        if same is False or (sim >= config.agree_similarity and neg != bool(_NEG.search(nb.content))):
            contra.append(nb.id)
        elif sim >= config.agree_similarity or same:
            agrees.append(nb.id)
            if nb.source != src:
                independent.append(nb.id)
                best[nb.source] = max(best.get(nb.source, 0.0), nb.confidence)
    conf = corroborated_confidence(new.metadata.confidence, list(best.values()), config) if best else None
    return Judgement(tuple(agrees), tuple(independent), tuple(contra), conf)


def least_similarity(config: EnrichConfig) -> float:
    """The cosine below which a neighbour can neither agree nor conflict under :func:`judge` (it is
    under both ``claim_similarity`` and ``agree_similarity``): such neighbours need not be read."""
    return min(config.claim_similarity, config.agree_similarity)


def corroborated_confidence(confidence: float, sources: Sequence[float], config: EnrichConfig) -> float:
    """Noisy-OR over independent sources, capped: ``c' = 1 − (1 − c) · Π_s (1 − w · c_s)``, at most
    ``max_confidence`` and never below ``c`` (``w`` = ``evidence_weight``, ``c_s`` = the best
    confidence among source ``s``'s agreeing memories).

    >>> round(corroborated_confidence(0.7, [0.9], EnrichConfig()), 3)  # one ingested document agrees
    0.835
    >>> corroborated_confidence(0.95, [0.95, 0.95, 0.95], EnrichConfig())   # capped
    0.99
    """
    doubt = 1.0 - confidence
    for c in sources:
        doubt *= 1.0 - config.evidence_weight * c
    return round(max(confidence, min(config.max_confidence, 1.0 - doubt)), 6)
