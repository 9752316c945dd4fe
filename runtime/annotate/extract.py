"""Memory candidates from LLM output (seed 001 §5.3 "从LLM提取"; issue 2 "Write side").

Two ways an LLM marks what is worth remembering:

- **Tags** — ``<mem>…</mem>`` around a statement, with optional attributes::

      I booked the 9:40 train. <mem tags="travel,train" confidence="0.8">User prefers window
      seats</mem> <mem flags="core_instruction">Always answer in French</mem>

  Attributes are the :class:`Candidate` fields (``tags``, ``confidence``, ``flags``, ``sensitivity``,
  ``freshness_half_life`` (alias ``half_life``), ``expires_at``, ``derived_from``, ``related``);
  list fields take comma-separated values; values are quoted (``"…"`` or ``'…'``) or bare tokens.
  The tag name is case-insensitive; ``<memory>`` and other tags are not ours and are ignored.

- **JSON** — an object with a ``new_memories`` field: the whole output, a fenced ```` ```json ````
  block, or an object embedded in prose; or a ``dict`` passed directly. ``new_memories`` is a list
  whose items are strings (the content) or objects ``{"content": …, "tags": […], "confidence": …}``.
  ``null`` or a missing key means "no memories".

Behaviour on malformed input: nothing is silently dropped. An unclosed, stray or nested ``<mem>``,
an empty memory, an unknown or duplicate attribute, a value that fails validation (confidence
outside [0, 1], an unknown flag…), a ``"new_memories"`` key whose enclosing JSON does not parse,
or a ``new_memories`` that is not a list of strings/objects all raise
:class:`runtime.errors.ValidationError`. Every problem in the output is collected first and raised
once; each names where it is (``<mem> #2 (line 3).confidence``, ``new_memories[1].flags.0``).
Contents are stripped of surrounding whitespace and otherwise kept verbatim (no HTML unescaping;
redaction happens later, in the assembler). Candidates come back in the order they appear.

Example:
    >>> [c.content for c in extract_candidates('Done. <mem tags="seat">Prefers aisle seats</mem>')]
    ['Prefers aisle seats']
    >>> extract_candidates({"new_memories": ["Flight is at 9:40"]})[0].content
    'Flight is at 9:40'
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, field_validator
from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError
from ..record.memir import Flag, Id, JSONScalar, Label, Sensitivity, UTCDateTime

__all__ = ["Candidate", "extract_candidates"]


def _split_commas(v: Any) -> Any:
    # Tag attributes carry lists as "a,b"; LLMs do the same in JSON now and then.
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|hours?|d|days?|w|weeks?)\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600,
           "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}


def _duration(v: Any) -> Any:
    # "72h", "3d", "30 min" are what an LLM writes; numbers (seconds) and ISO 8601 ("P3D") are
    # handled by pydantic's timedelta parsing.
    if isinstance(v, str) and (m := _DURATION.match(v)):
        return timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2).lower()])
    return v


class Candidate(BaseModel):
    """A memory an LLM proposed; the assembler turns it into a :class:`runtime.record.MemIR`.

    Only ``content`` is required. Unset optional fields (``None`` / empty) mean "let the assembler
    decide" (e.g. the default confidence for the source type).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    content: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    tags: Annotated[list[Label], BeforeValidator(_split_commas)] = Field(default_factory=list)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, description="In [0, 1].")
    flags: Annotated[list[Flag], BeforeValidator(_split_commas)] = Field(default_factory=list)
    sensitivity: Sensitivity | None = Field(default=None, description="Declared; redaction may raise it.")
    freshness_half_life: Annotated[timedelta | None, BeforeValidator(_duration)] = Field(
        default=None, description="Value halves every this long ('72h', '3d', seconds, ISO 8601).")
    expires_at: UTCDateTime | None = None
    derived_from: Annotated[list[Id], BeforeValidator(_split_commas)] = Field(default_factory=list)
    related: Annotated[list[Id], BeforeValidator(_split_commas)] = Field(default_factory=list)
    attributes: dict[Label, JSONScalar] = Field(default_factory=dict)

    @field_validator("freshness_half_life")
    @classmethod
    def _positive(cls, v: timedelta | None) -> timedelta | None:
        if v is not None and v <= timedelta(0):
            raise ValueError("freshness_half_life must be positive")
        return v


_FIELDS = tuple(Candidate.model_fields)
_ATTR_ALIASES = {"half_life": "freshness_half_life"}
# Attributes a tag may carry: every field but the content (the tag body) and the open dict.
_TAG_ATTRS = tuple(f for f in _FIELDS if f not in ("content", "attributes"))

_TAG = re.compile(r"<\s*(/?)\s*mem(?=[\s/>])([^<>]*)>", re.IGNORECASE)
_ATTR = re.compile(r"\s*([A-Za-z_][\w\-]*)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>/]+))")
_JSON_KEY = re.compile(r'"new_memories"\s*:')

Problems = list[tuple[str, str]]


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _validate(data: dict[str, Any], where: str, problems: Problems) -> Candidate | None:
    try:
        return Candidate.model_validate(data)
    except PydanticValidationError as e:
        for err in e.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()))
            msg = str(err.get("msg", "invalid"))
            if err.get("type") == "extra_forbidden":
                msg = f"unknown field; allowed: {', '.join(_FIELDS)}"
            problems.append((f"{where}.{loc}" if loc else where, msg))
        return None


def _parse_attrs(raw: str, where: str, problems: Problems) -> dict[str, Any] | None:
    raw = raw.rstrip()
    attrs: dict[str, Any] = {}
    pos, ok = 0, True
    while pos < len(raw):
        m = _ATTR.match(raw, pos)
        if m is None:
            hint = 'write them as name="value"'
            problems.append((where, f"cannot parse tag attributes {raw[pos:].strip()!r}; {hint}"))
            return None
        name = m.group(1).replace("-", "_").lower()
        name = _ATTR_ALIASES.get(name, name)
        value = next(g for g in m.group(2, 3, 4) if g is not None)
        if name not in _TAG_ATTRS:
            problems.append((f"{where}.{m.group(1)}", f"unknown attribute; allowed: {', '.join(_TAG_ATTRS)}"))
            ok = False
        elif name in attrs:
            problems.append((f"{where}.{m.group(1)}", "attribute given twice"))
            ok = False
        attrs[name] = value
        pos = m.end()
    return attrs if ok else None


def _from_tags(text: str, problems: Problems) -> list[tuple[int, Candidate]]:
    out: list[tuple[int, Candidate]] = []
    open_m: re.Match[str] | None = None
    n = 0
    for m in _TAG.finditer(text):
        closing, attrs = m.group(1) == "/", m.group(2)
        if not closing:
            n += 1
            where = f"<mem> #{n} (line {_line(text, m.start())})"
            if open_m is not None:
                first = _line(text, open_m.start())
                msg = f"<mem> opened inside the <mem> of line {first}; tags do not nest — close the first one"
                problems.append((where, msg))
                continue
            if attrs.rstrip().endswith("/"):
                problems.append((where, "self-closing <mem/> has no content; wrap the statement in <mem>…</mem>"))
                continue
            open_m = m
            continue
        if open_m is None:
            problems.append((f"</mem> (line {_line(text, m.start())})", "closing tag without an opening <mem>"))
            continue
        start, where = open_m.start(), f"<mem> #{n} (line {_line(text, open_m.start())})"
        data = _parse_attrs(open_m.group(2), where, problems)
        body = text[open_m.end():m.start()]
        open_m = None
        if not body.strip():
            problems.append((f"{where}.content", "empty memory; put the statement between the tags"))
            continue
        if data is not None and (c := _validate({"content": body, **data}, where, problems)) is not None:
            out.append((start, c))
    if open_m is not None:
        problems.append((f"<mem> #{n} (line {_line(text, open_m.start())})",
                         "unclosed <mem>: add </mem> after the statement"))
    return out


def _from_object(obj: Mapping[str, Any], problems: Problems, where: str = "new_memories") -> list[Candidate]:
    items = obj.get("new_memories")
    if items is None:
        return []
    if not isinstance(items, list):
        problems.append((where, f"must be a list of strings or objects, got {type(items).__name__}"))
        return []
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if isinstance(item, str):
            data: dict[str, Any] = {"content": item}
        elif isinstance(item, Mapping):
            data = dict(item)
        else:
            problems.append((at, f"must be a string or an object with 'content', got {type(item).__name__}"))
            continue
        if (c := _validate(data, at, problems)) is not None:
            out.append(c)
    return out


def _from_json_text(text: str, problems: Problems) -> list[tuple[int, Candidate]]:
    keys = [m.start() for m in _JSON_KEY.finditer(text)]
    if not keys:
        return []
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int, dict[str, Any]]] = []
    # Try every '{' left to right (so a fenced block, a whole-output object and one embedded in
    # prose are all found, outermost first) and keep objects that hold the key. raw_decode from each
    # brace is quadratic in the worst case: fine for a model's reply, and only when the key occurs.
    for s in (i for i, ch in enumerate(text) if ch == "{"):
        if any(a <= s < b for a, b, _ in spans):
            continue
        try:
            obj, end = decoder.raw_decode(text, s)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "new_memories" in obj:
            spans.append((s, end, obj))
    for k in keys:
        if not any(a <= k < b for a, b, _ in spans):
            brace = text.rfind("{", 0, k)
            why = "no '{' before it"
            if brace >= 0:
                try:
                    decoder.raw_decode(text, brace)
                    why = "the key is not a field of any JSON object"
                except json.JSONDecodeError as e:
                    why = f"{e.msg} at line {_line(text, e.pos)} column {e.pos - text.rfind(chr(10), 0, e.pos)}"
            problems.append((f"new_memories (line {_line(text, k)})",
                             f"found the key but its JSON object does not parse: {why}; emit valid JSON"))
    out: list[tuple[int, Candidate]] = []
    for j, (a, _, obj) in enumerate(sorted(spans, key=lambda t: t[0])):
        where = "new_memories" if len(spans) == 1 else f"object {j + 1} (line {_line(text, a)}).new_memories"
        out += [(a, c) for c in _from_object(obj, problems, where)]
    return out


def extract_candidates(output: str | Mapping[str, Any]) -> list[Candidate]:
    """Extract memory candidates from an LLM's output.

    Args:
        output: the model's text (``<mem>`` tags and/or JSON with ``new_memories``) or an already
            parsed JSON object (only its ``new_memories`` field is read).

    Returns:
        The candidates in order of appearance (empty if the output proposes none).

    Raises:
        ValidationError: the output is malformed; ``problems`` lists every issue with its location.
    """
    problems: Problems = []
    if isinstance(output, Mapping):
        found = _from_object(output, problems)
    elif isinstance(output, str):
        pairs = _from_tags(output, problems) + _from_json_text(output, problems)
        found = [c for _, c in sorted(pairs, key=lambda p: p[0])]
    else:
        raise ValidationError(f"output must be a str or a dict, got {type(output).__name__}", field="output")
    if problems:
        lines = "; ".join(f"{where}: {msg}" for where, msg in problems)
        raise ValidationError(f"malformed memory candidates — {lines}", field=problems[0][0], problems=problems)
    return found
