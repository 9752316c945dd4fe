"""What a memory's text says it is for, and what it names: intent (``question`` | ``request`` |
``statement``) and entity tags (ids, products, projects, people), by regular expressions on the
*redacted* text. Used by write-time enrichment (:mod:`runtime.annotate.enrich`) when it is switched on;
kept apart so that a store with enrichment off (the default) never compiles the patterns."""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["extract_entities", "intent_of"]


# ---------------------------------------------------------------------------------------- intent
# Anchored parts are matched at the start only, and the phrase search checks a phrase's first letter
# before trying the alternation: both run on every memory written with enrichment on.
_QUESTION_START = re.compile(r"(?:who|what|when|where|why|how|which|is|are|do|does|did|can|could|will|would|"
                             r"should|may)\b", re.I)
_REQUEST_PHRASE = re.compile(r"\b(?=[pkcwilsh])(?:please|pls|kindly|could you|can you|would you|i need|i want|"
                             r"i'd like|i would like|let me know|send me|help me)\b", re.I)
_REQUEST_START = re.compile(r"(?:send|cancel|refund|update|change|fix|check|call|email|book|reset|remove|add)\b",
                            re.I)


def intent_of(text: str) -> Literal["question", "request", "statement"]:
    """``request`` (please / can you / an imperative first word), ``question`` (ends with "?" or
    opens with a question word), else ``statement``.

    >>> intent_of("Can you cancel order 8812?"), intent_of("When does it ship?"), intent_of("It shipped.")
    ('request', 'question', 'statement')
    """
    t = text.strip()
    if _REQUEST_START.match(t) or _REQUEST_PHRASE.search(t):
        return "request"
    if t.endswith("?") or _QUESTION_START.match(t):
        return "question"
    return "statement"


# -------------------------------------------------------------------------------------- entities
_ID_KINDS = r"order|ticket|case|invoice|booking|reservation|account|ref|reference|tracking|shipment|po"
_KINDS = tuple(_ID_KINDS.split("|"))
_KIND_FIRST = "".join(sorted({k[0] for k in _KINDS}))  # the lookahead fails most positions before the alternation
_KIND_ID = re.compile(rf"\b(?=[{_KIND_FIRST}])({_ID_KINDS})\b(?:\s+(?:no\.?|number|num|id))?\s*[:#]?\s*#?"
                      rf"([A-Z0-9][A-Za-z0-9-]{{2,}})\b", re.I)
_CODE = re.compile(r"(?<![\w-])([A-Z]{2,6}-\d[\dA-Z-]*)\b")
_DASH_DIGIT = re.compile(r"-\d")  # in every code; a search for a literal start is a fast scan
_PROJECT_CUES = ("project", "projet", "team", "product", "app", "plan")
_DIGIT = re.compile(r"\d")
_HASH_ID = re.compile(r"(?<![\w&])#(\d{3,})\b")
_PROJECT = re.compile(rf"\b(?:{'|'.join(_PROJECT_CUES)})\s+([A-Z][A-Za-z0-9-]+)")
_PRODUCT = re.compile(r"\b((?:[A-Z][a-zA-Z]+|[a-z][A-Z][a-zA-Z]+)(?:\s[A-Z][a-zA-Z]+)?)\s((?:[A-Z]{0,3}\d+[A-Za-z0-9]*))"
                      r"(?:\s(Pro|Max|Plus|Mini|Ultra|Air|Lite|SE))?\b")
# The lookahead names every cue's first letter: most word starts fail there, before the alternation
# is tried, which halves the pattern's time on long text (it runs on every memory); same matches.
_PERSON = re.compile(r"\b(?=[wWfFbBcCaAtTdDhHmMnNP])(?:(?i:with|from|by|cc|ask|asked|call|called|contact|contacted|"
                     r"told|tell|thank|thanks|dear|hi|hello|colleague|manager|agent|named)\s+(?:(?:Mr|Ms|Mrs|Dr|Prof)\.?\s+)?"
                     r"|(?:Mr|Ms|Mrs|Dr|Prof)\.?\s+)([A-Z][a-z]+(?:\s[A-Z][a-z]+)?)\b")
# Capitalised words that are not names or products (sentence starts, calendar words, units).
_NOT_NAMES = frozenset("""
the a an i we you he she they it this that these those my our your their his her its monday tuesday wednesday
thursday friday saturday sunday january february march april may june july august september october november
december today tomorrow yesterday support team customer service order ticket invoice version room floor step
page chapter week day month year q1 q2 q3 q4 eur usd gbp chf jpy rs item items level phase gate terminal
""".split())


def extract_entities(text: str, *, limit: int = 8) -> list[str]:
    """Entity tags found in (redacted) ``text``, in order of appearance, deduplicated, at most ``limit``.

    Patterns: ``<kind> [no.|number|id] [#]ID`` → ``<kind>:<id>`` (order, ticket, invoice, booking...);
    a code like ``ORD-123`` → ``id:ORD-123``; ``#8812`` → ``id:8812``; ``project Orion`` →
    ``project:orion``; a capitalised name followed by a model number (``iPhone 15 Pro``,
    ``Galaxy S23``) → ``product:...``; one or two capitalised words after a cue (with, from, by,
    ask, call, contact, thanks, Dr....) → ``person:...``. Redaction placeholders (``[EMAIL]``) never
    match: they are upper-case inside brackets.

    >>> extract_entities("Order #8812 arrived broken; I spoke with Maria Lopez about the iPhone 15 Pro")
    ['order:8812', 'person:maria lopez', 'product:iphone 15 pro']
    """
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []

    def add(start: int, end: int, tag: str) -> None:
        if any(s < end and start < e for s, e in taken):
            return
        taken.append((start, end))
        found.append((start, tag))

    # Each pattern runs only when what it cannot match without is in the text (a long text pays
    # for the patterns that can match it, not for all six).
    digits = _DIGIT.search(text) is not None
    lower = text.lower() if digits else ""
    for m in _KIND_ID.finditer(text) if digits and any(k in lower for k in _KINDS) else ():
        ident = m.group(2)
        if any(c.isdigit() for c in ident):
            add(m.start(), m.end(), f"{m.group(1).lower()}:{ident}")
    for m in _CODE.finditer(text) if digits and _DASH_DIGIT.search(text) else ():
        add(m.start(1), m.end(1), f"id:{m.group(1)}")
    for m in _HASH_ID.finditer(text) if digits and "#" in text else ():
        add(m.start(), m.end(), f"id:{m.group(1)}")
    for m in _PROJECT.finditer(text) if any(k in text for k in _PROJECT_CUES) else ():
        if m.group(1).lower() not in _NOT_NAMES:
            add(m.start(1), m.end(1), f"project:{m.group(1).lower()}")
    for m in _PERSON.finditer(text):
        if all(w.lower() not in _NOT_NAMES for w in m.group(1).split()):
            add(m.start(1), m.end(1), f"person:{m.group(1).lower()}")
    for m in _PRODUCT.finditer(text) if digits else ():
        name = m.group(1)
        if any(w.lower() in _NOT_NAMES for w in name.split()):
            continue
        full = " ".join(g for g in m.groups() if g)
        add(m.start(), m.end(), f"product:{full.lower()}")
    found.sort()
    return list(dict.fromkeys(t for _, t in found))[:limit]
