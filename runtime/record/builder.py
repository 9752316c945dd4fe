"""The one record builder: caller fields -> a validated, redacted :class:`MemIR`.

Every memory that reaches a store goes through :class:`RecordBuilder`, whoever writes it
(``Scope.write``, ``write_many``, corrections, the context assembler, imports of dumps). It runs in
two steps so an annotator can look at the *redacted* text in between:

1. :meth:`RecordBuilder.draft` — field names checked, content length checked, **redaction** of the
   content and of every free-text side field (tags, attribute keys and values, source entity, URI
   and version, trigger, tone, role names), sensitivity = max(declared, found), confidence defaulted
   per source type, urgency markers flagged. Nothing after this step sees raw text.
2. :meth:`RecordBuilder.finish` — the tenant ids, the session and the role (decided by the caller or
   an annotator) are added and the nested record is validated once by MemIR itself, so an error
   names the full path (``metadata.tags.0``).

A record is redacted exactly once: :class:`Draft` carries the redacted text, and
:meth:`RecordBuilder.rebuild` revalidates an already-built record (a dump, a ``MemIR`` passed to
``write``) — redaction is idempotent, so a second pass changes nothing but costs time; the
assembler's output (``Assembly``) is written as is.

Example:
    >>> b = RecordBuilder()
    >>> rec = b.build("Mail bob@example.com ASAP", {"tags": ["ops"]}, user_id="u1", agent_id="default")
    >>> rec.content, rec.metadata.sensitivity.value, [f.value for f in rec.metadata.flags]
    ('Mail [EMAIL] ASAP', 'pii', ['urgent'])
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from types import MappingProxyType
from typing import Any, Literal

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from ..errors import ContentTooLargeError, ValidationError, check_text
from .fields import FIELD_GROUPS, check_field_names
from .memir import DialogRole, Flag, MemIR, Sensitivity, SourceType, UTCDateTime, new_id, utcnow
from .redaction import Finding, RedactionKind, Redactor

__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_URGENCY_PATTERNS", "Draft", "RecordBuilder", "RecordConfig",
           "flatten"]

# Seed 000 §3.1: data from an authoritative API ~0.99, a model's guess ~0.7. Per source type:
DEFAULT_CONFIDENCE: Mapping[SourceType, float] = MappingProxyType({
    # The environment reporting its own state (tool status, errors, rewards) is ground truth about it.
    SourceType.system_feedback: 0.99,
    # Authoritative about the user's own wishes and facts, but can be misheard, vague or revised.
    SourceType.direct_interaction: 0.95,
    # Documents/APIs are reliable but may be stale or low-authority; pass confidence= per source.
    SourceType.external_ingest: 0.9,
    # The agent's own inference or summary: a guess until confirmed.
    SourceType.derived_inference: 0.7,
})

DEFAULT_URGENCY_PATTERNS: tuple[str, ...] = (
    r"\burgent(?:ly)?\b", r"\basap\b", r"\bimmediately\b", r"\bright (?:away|now)\b", r"\bas soon as possible\b",
    r"\bemergency\b", r"\bcritical\b", r"\bdeadline\b", r"\bby (?:today|tonight|tomorrow|eod|end of (?:the )?day)\b",
    r"\b(?:do not|don't|never) forget\b", r"\bmust\b", r"!{2,}", "紧急", "尽快", "立刻", "马上", "务必", "必须",
)

# Seed 000 §3.1 annotates the trigger ("user_query"); over-annotate rather than leave it empty.
_DEFAULT_TRIGGER = {DialogRole.user: "user_message", DialogRole.agent: "agent_message",
                    DialogRole.tool: "tool_result", DialogRole.system: "system_message"}

# Free-text side fields redacted like the content (ids are tenant/scoping keys and plain tokens).
_TEXT_FIELDS = ("source_entity", "trigger", "source_uri", "source_version", "tone", "active_role", "sub_role")

LongContent = Literal["reject", "excerpt"]

# Joins the texts of one record for a single redaction pass: the spaces end a detector's \S+ run
# and U+2063 (invisible separator) is neither a word character nor whitespace.
_SEP = " \u2063\u2063 "
# An attribute value is redacted with its key in front as the label ({"password": "hunter2"} reads as
# "password: hunter2"), when the key is a plain name; a key that is not is redacted on its own.
_LABEL_KEY = re.compile(r"[A-Za-z][A-Za-z _\-]{0,40}")
# Integer attribute values this long are redacted too (a card or phone number stored as a number).
_MIN_REDACTED_INT = 100_000


_META = set(".^$*+?{}[]\\|()")


def _required_literal(pattern: str) -> str:
    """The longest plain text every match of ``pattern`` contains, or ``""`` when none is evident.

    Only literal runs outside any group count, and a character under a quantifier is dropped:
    ``r"\\burgent(?:ly)?\\b"`` → ``"urgent"``, ``r"\\b(?:do not|never) forget\\b"`` → ``" forget"``,
    ``r"!{2,}"`` → ``""``. A top-level alternation gives ``""`` (no text is required).
    """
    if re.compile(pattern).flags & (re.VERBOSE | re.IGNORECASE):  # inline (?x) / (?i): literals mean otherwise
        return ""
    runs, cur, depth, i = [], [], 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt and not nxt.isalnum() and depth == 0:  # an escaped punctuation mark is itself
                cur.append(nxt)
            else:
                runs.append("".join(cur))
                cur = []
            i += 2
            continue
        if c == "|" and depth == 0:
            return ""
        if c in "([":
            runs.append("".join(cur))
            cur = []
            if c == "[":
                i = pattern.find("]", i + 2) + 1 or len(pattern)
                continue
            depth += 1
        elif c == ")":
            depth -= 1
        elif c in "*+?{":
            if cur:
                cur.pop()
            runs.append("".join(cur))
            cur = []
            if c == "{":
                i = pattern.find("}", i) + 1 or len(pattern)
                continue
        elif c in ".^$":
            runs.append("".join(cur))
            cur = []
        elif depth == 0:
            cur.append(c)
        i += 1
    runs.append("".join(cur))
    return max(runs, key=len)


@dataclass(frozen=True)
class RecordConfig:
    """How records are built.

    Attributes:
        redact: replace secrets and personal data before anything is stored (strongly recommended).
        redaction_disable: redaction kinds to leave alone (e.g. ``("ip",)``).
        max_content_chars: longest content kept (characters, after redaction).
        long_content: what happens to longer content (pasted documents, tool output):
            ``"excerpt"`` (default) keeps the first two thirds and the last third of the limit around
            a ``[… N characters omitted …]`` marker and records the full length in
            ``attributes["content_chars"]``, so a long turn never fails a write or a stream;
            ``"reject"`` raises ``ContentTooLargeError`` before any work is done.
        default_confidence: confidence in [0, 1] per source type when the caller gives none.
        urgency_patterns: case-insensitive regexes whose presence sets ``Flag.urgent``.
        inference_requires_parents: refuse ``derived_inference`` without ``derived_from``.
    """

    redact: bool = True
    redaction_disable: tuple[str, ...] = ()
    max_content_chars: int = 16_000
    long_content: LongContent = "excerpt"
    default_confidence: Mapping[Any, float] = field(default_factory=lambda: DEFAULT_CONFIDENCE)
    urgency_patterns: tuple[str, ...] = DEFAULT_URGENCY_PATTERNS
    inference_requires_parents: bool = False

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        if self.max_content_chars < 64:
            p.append(("max_content_chars", f"must be >= 64, got {self.max_content_chars}"))
        if self.long_content not in ("reject", "excerpt"):
            p.append(("long_content", f"must be 'reject' or 'excerpt', got {self.long_content!r}"))
        merged = dict(DEFAULT_CONFIDENCE)
        for k, v in self.default_confidence.items():
            if k not in {s.value for s in SourceType}:
                p.append((f"default_confidence[{k!r}]", f"unknown source type; valid: {[s.value for s in SourceType]}"))
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
                p.append((f"default_confidence[{k!r}]", f"must be a number in [0, 1], got {v!r}"))
            else:
                merged[SourceType(k)] = float(v)
        for i, pat in enumerate(self.urgency_patterns):
            try:
                re.compile(pat)
            except (re.error, TypeError) as e:
                p.append((f"urgency_patterns[{i}]", f"not a valid regular expression: {e}"))
        for i, kind in enumerate(self.redaction_disable):
            if kind not in {k.value for k in RedactionKind}:
                p.append((f"redaction_disable[{i}]", f"unknown kind {kind!r}; valid: {[k.value for k in RedactionKind]}"))
        if p:
            raise ValidationError.from_problems("RecordConfig", p)
        object.__setattr__(self, "default_confidence", MappingProxyType(merged))
        object.__setattr__(self, "urgency_patterns", tuple(self.urgency_patterns))


@dataclass(frozen=True)
class Draft:
    """A memory after step 1: names checked, everything redacted, defaults filled.

    Attributes:
        text: the redacted content (what every later step sees).
        fields: the flat write fields, free text redacted, defaults applied (no session/role yet
            unless the caller gave them).
        findings: what redaction replaced, merged over content and side fields (kind and count).
        sensitivity: max(declared, found).
        confidence_source: ``"declared"`` by the caller or the source type's ``"default"``.
        defaults: whether defaults were filled in (a new memory) or not (a whole record rebuilt).
    """

    text: str
    fields: dict[str, Any]
    findings: tuple[Finding, ...]
    sensitivity: Sensitivity
    confidence_source: Literal["declared", "default"]
    defaults: bool = True


class RecordBuilder:
    """Builds validated, redacted records (see the module docstring). Thread-safe, stateless.

    Args:
        config: the :class:`RecordConfig`.
    """

    def __init__(self, config: RecordConfig | None = None) -> None:
        self.config = config or RecordConfig()
        self._redactor = Redactor(disable=self.config.redaction_disable) if self.config.redact else None
        pats = self.config.urgency_patterns
        # Patterns without capitals are matched case-sensitively against the lower-cased text: an
        # IGNORECASE scan is several times slower (a capital may be a class like \S). Each pattern
        # runs alone, and only when a literal it requires is in the text: Python's re tries every
        # branch of an alternation at every position (~2 MB/s), a substring test runs at memory speed.
        self._lower = not any(c.isupper() for p in pats for c in p)
        flags = 0 if self._lower else re.IGNORECASE
        self._urgent = tuple((_required_literal(p) if self._lower else "", re.compile(p, flags)) for p in pats)

    # ------------------------------------------------------------------ step 1
    def draft(self, content: Any, fields: Mapping[str, Any], *, where: str = "", defaults: bool = True) -> Draft:
        """Check names, redact, fill defaults (with ``defaults``). Raises ``ValidationError`` naming the field."""
        if not isinstance(content, str) or not content.strip():
            raise ValidationError(f"{where}content must be a non-empty string", field="content")
        if "\x00" in content:
            raise ValidationError(f"{where}content must not contain NUL characters", field="content")
        check_text(content, "content", where=where)
        check_field_names(fields, where=where)
        f = dict(fields)
        _check_shapes(f, where)
        _check_texts(f, where)
        text, findings = self._redact_all(content, f)
        text = self._fit_length(text, f, where)
        merged = _merge(findings)
        declared = _enum(Sensitivity, f.get("sensitivity", Sensitivity.none), "metadata.sensitivity", where)
        sensitivity = Sensitivity.highest(declared, *(x.kind.sensitivity for x in merged))
        f["sensitivity"] = sensitivity
        stype = _enum(SourceType, f.get("source_type", SourceType.direct_interaction), "provenance.type", where)
        f["source_type"] = stype
        drole = _enum(DialogRole, f.get("dialog_role", DialogRole.user), "role_context.dialog_role", where)
        f["dialog_role"] = drole
        declared_conf = f.get("confidence") is not None
        if not declared_conf:
            f["confidence"] = self.config.default_confidence[stype]
        if defaults and not f.get("trigger"):
            f["trigger"] = _DEFAULT_TRIGGER[drole]
        if defaults and self._urgent and self._is_urgent(text):
            flags = list(f.get("flags") or [])
            if Flag.urgent not in flags and "urgent" not in flags:
                f["flags"] = flags + [Flag.urgent]
        if f.get("derived_from"):
            f["derived_from"] = list(dict.fromkeys(f["derived_from"]))
        if f.get("supersedes") is not None:
            attrs = dict(f.get("attributes") or {})
            attrs["supersedes"] = f["supersedes"]
            f["attributes"] = attrs
        if (stype is SourceType.derived_inference and self.config.inference_requires_parents
                and not f.get("derived_from")):
            raise ValidationError(f"{where}derived_inference needs derived_from (the ids it rests on): pass "
                                  "derived_from=[...] or set inference_requires_parents=False",
                                  field="provenance.derived_from")
        return Draft(text, f, merged, sensitivity, "declared" if declared_conf else "default", defaults)

    def _is_urgent(self, text: str) -> bool:
        t = text.lower() if self._lower else text
        return any(lit in t and pat.search(t) for lit, pat in self._urgent)

    # ------------------------------------------------------------------ step 2
    def finish(self, draft: Draft, *, user_id: str, agent_id: str, where: str = "", **decided: Any) -> MemIR:
        """Add the tenant ids and any decided fields (``session_id``, ``active_role``, ``sub_role``,
        ``timestamp``...) and validate the record once. Raises ``ValidationError`` naming the path."""
        f = {**draft.fields, **{k: v for k, v in decided.items() if v is not None}}
        body: dict[str, Any] = {"id": f.pop("id", None) or new_id(), "content": draft.text,
                                "created_at": f.pop("created_at", None) or utcnow()}
        f.pop("supersedes", None)
        groups: dict[str, dict[str, Any]] = {"provenance": {"user_id": user_id, "agent_id": agent_id},
                                             "role_context": {}, "metadata": {}, "usage": {}}
        for k, v in f.items():
            g, name = FIELD_GROUPS[k]
            if v is not None or g in ("provenance", "role_context", "usage"):
                groups[g][name] = v
        if draft.defaults and groups["provenance"].get("source_entity") is None:
            groups["provenance"]["source_entity"] = _default_entity(f.get("dialog_role"), user_id, agent_id)
        if groups["role_context"].get("active_role") is None:
            groups["role_context"].pop("active_role", None)
        body.update(groups)
        try:
            return MemIR.model_validate(body)
        except PydanticValidationError as e:
            raise ValidationError.from_pydantic(e, what=f"{where}memory") from e

    def build(self, content: Any, fields: Mapping[str, Any], *, user_id: str, agent_id: str,
              where: str = "") -> MemIR:
        """:meth:`draft` then :meth:`finish` with nothing decided in between."""
        return self.finish(self.draft(content, fields, where=where), user_id=user_id, agent_id=agent_id, where=where)

    def rebuild(self, record: MemIR, *, user_id: str, agent_id: str, where: str = "") -> MemIR:
        """Revalidate an existing record for this scope (a dump line, a ``MemIR`` given to ``write``).

        Raises:
            ValidationError: its tenant fields name another scope, or any field is invalid.
        """
        for key, mine in (("user_id", user_id), ("agent_id", agent_id)):
            given = getattr(record.provenance, key)
            if given != mine:
                raise ValidationError(
                    f"{where}provenance.{key}={given!r} does not match this scope ({mine!r}); "
                    f"write through store.scope({key}={given!r}) instead", field=f"provenance.{key}")
        content, fields = flatten(record)
        draft = self.draft(content, fields, where=where, defaults=False)  # a whole record: redact, add nothing
        return self.finish(draft, user_id=user_id, agent_id=agent_id, where=where)

    # ------------------------------------------------------------------ helpers
    def _redact_all(self, content: str, f: dict[str, Any]) -> tuple[str, list[Finding]]:
        """Redact the content and every free-text side field of ``f`` (in place), in one pass.

        The texts are joined with a separator no detector crosses (spaces around a non-space,
        invisible character); if a detector swallowed one anyway, each text is redacted alone.
        """
        if self._redactor is None:
            return content, []
        slots: list[tuple[str, Any]] = [(n, None) for n in _TEXT_FIELDS if isinstance(f.get(n), str)]
        tags = list(f.get("tags") or [])
        slots += [("tags", i) for i, t in enumerate(tags) if isinstance(t, str)]
        attrs = list(dict(f.get("attributes") or {}).items())
        pre_findings = self._redact_values_alone(attrs)
        labels: dict[int, str] = {}
        for i, (k, v) in enumerate(attrs):
            if isinstance(k, str):
                slots.append(("attr_key", i))
            if isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool) and abs(v) >= _MIN_REDACTED_INT):
                slots.append(("attr_value", i))
                labels[i] = f"{k}: " if isinstance(k, str) and _LABEL_KEY.fullmatch(k) else ""

        def get(slot: tuple[str, Any]) -> str:
            kind, i = slot
            return (tags[i] if kind == "tags" else attrs[i][0] if kind == "attr_key"
                    else labels[i] + str(attrs[i][1]) if kind == "attr_value" else f[kind])

        def label_kept(slot: tuple[str, Any], text: str) -> bool:
            return slot[0] != "attr_value" or text.startswith(labels[slot[1]])

        texts = [content] + [get(sl) for sl in slots]
        out: list[str] | None = None
        findings: list[Finding] = []
        joined = self._redact_joined(texts)
        if joined is not None and all(label_kept(sl, p) for sl, p in zip(slots, joined[0][1:])):
            out, findings = joined
        if out is None:
            out = []
            for slot, t in zip([("content", None), *slots], texts):
                r = self._redactor.redact(t)
                if not label_kept(slot, r.text):  # a detector took the label along: the value on its own
                    labels[slot[1]] = ""
                    r = self._redactor.redact(str(attrs[slot[1]][1]))
                out.append(r.text)
                findings += r.findings
        for (kind, i), new in zip(slots, out[1:]):
            if kind == "tags":
                tags[i] = new
            elif kind == "attr_key":
                attrs[i] = (new, attrs[i][1])
            elif kind == "attr_value":
                value = new[len(labels[i]):]
                old = attrs[i][1]
                attrs[i] = (attrs[i][0], old if not isinstance(old, str) and value == str(old) else value)
            else:
                f[kind] = new
        if "tags" in f and f["tags"] is not None:
            f["tags"] = tags
        if "attributes" in f and f["attributes"] is not None:
            f["attributes"] = dict(attrs)
        return out[0], pre_findings + findings

    def _redact_values_alone(self, attrs: list[tuple[Any, Any]]) -> list[Finding]:
        """Redact each text attribute value on its own first (in place), before the pass that reads it
        after its key as a label (``pw: …``). A value that carries its own label (``"password: hunter2"``)
        would otherwise have that label taken as the key's value (``pw: password``) and the secret after
        it kept."""
        assert self._redactor is not None
        at = [i for i, (_, v) in enumerate(attrs) if isinstance(v, str) and v.strip()]
        if not at:
            return []
        texts = [attrs[i][1] for i in at]
        joined = self._redact_joined(texts)
        if joined is None:
            rs = [self._redactor.redact(t) for t in texts]
            joined = ([r.text for r in rs], [x for r in rs for x in r.findings])
        for i, new in zip(at, joined[0]):
            attrs[i] = (attrs[i][0], new)
        return joined[1]

    def _redact_joined(self, texts: list[str]) -> tuple[list[str], list[Finding]] | None:
        """Redact several texts in one pass, joined by a separator no detector crosses; ``None`` when
        there is one text, a text holds the separator, or a detector swallowed one anyway."""
        assert self._redactor is not None
        if len(texts) < 2 or any(_SEP.strip() in t for t in texts):
            return None
        r = self._redactor.redact(_SEP.join(texts))
        parts = r.text.split(_SEP)
        return (parts, list(r.findings)) if len(parts) == len(texts) else None

    def _fit_length(self, text: str, f: dict[str, Any], where: str) -> str:
        limit = self.config.max_content_chars
        if len(text) <= limit:
            return text
        if self.config.long_content == "reject":
            raise ContentTooLargeError(
                f"{where}content is {len(text)} characters; the limit is {limit} "
                "(RecordConfig.max_content_chars) — split it, summarise it, or set "
                "RecordConfig(long_content='excerpt')", field="content")
        marker = f" [… {len(text) - limit} characters omitted …] "
        room = max(limit - len(marker), 0)
        head, tail = room * 2 // 3, room - room * 2 // 3
        attrs = dict(f.get("attributes") or {})
        attrs["content_chars"] = len(text)
        f["attributes"] = attrs
        return text[:head] + marker + (text[-tail:] if tail else "")


def flatten(record: MemIR) -> tuple[str, dict[str, Any]]:
    """``(content, flat write fields)`` of a record — the inverse of :meth:`RecordBuilder.finish`."""
    p, rc, md, u = record.provenance, record.role_context, record.metadata, record.usage
    fields: dict[str, Any] = {
        "id": record.id, "created_at": record.created_at, "source_type": p.type, "session_id": p.session_id,
        "timestamp": p.timestamp, "source_entity": p.source_entity, "trigger": p.trigger,
        "derived_from": list(p.derived_from), "source_uri": p.source_uri, "source_version": p.source_version,
        "active_role": rc.active_role, "sub_role": rc.sub_role, "dialog_role": rc.dialog_role, "tone": rc.tone,
        "task_id": rc.task_id, "confidence": md.confidence, "freshness_half_life": md.freshness_half_life,
        "expires_at": md.expires_at, "tags": list(md.tags), "related": list(md.related),
        "sensitivity": md.sensitivity, "flags": list(md.flags), "attributes": dict(md.attributes),
        "access_count": u.access_count, "last_accessed_at": u.last_accessed_at, "utility": u.utility,
        "retention_reason": u.retention_reason,
    }
    return record.content, fields


_LIST_FIELDS = ("tags", "flags", "related", "derived_from")
_TIME_FIELDS = ("created_at", "timestamp", "expires_at")
_STR_FIELDS = ("id", "session_id", "task_id", "source_entity", "source_uri", "trigger", "active_role", "sub_role",
               "tone", "supersedes")


@cache
def _time() -> TypeAdapter[datetime]:
    """MemIR's datetime validation for a loose field (its schema is built at the first use)."""
    return TypeAdapter(UTCDateTime)


def _check_texts(value: Any, where: str, path: str = "") -> None:
    """Every string in the fields (keys too, at any depth) must be storable UTF-8."""
    if isinstance(value, str):
        check_text(value, path or "value", where=where)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            at = f"{path}.{k}" if path else str(k)
            if isinstance(k, str):
                check_text(k, f"{at} (a key)", where=where)
            _check_texts(v, where, at)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for i, v in enumerate(value):
            _check_texts(v, where, f"{path}.{i}")


def _check_shapes(f: dict[str, Any], where: str) -> None:
    """Container fields must have their container type before anything iterates them (a bare string
    would be split into characters, a list of pairs taken as a mapping)."""
    for name in _LIST_FIELDS:
        v = f.get(name)
        if v is None:
            continue
        if (isinstance(v, (str, bytes, Mapping)) or not isinstance(v, (list, tuple, set, frozenset))
                or not all(isinstance(x, str) for x in v)):
            raise ValidationError(f"{where}{name} must be a list of strings, got {str(v)[:60]!r} "
                                  f"(e.g. {name}=['x'])", field=name)
    for name in _STR_FIELDS:
        v = f.get(name)
        if v is not None and not isinstance(v, str):
            raise ValidationError(f"{where}{name} must be a string, got {type(v).__name__} ({str(v)[:40]!r})",
                                  field=name)
    for name in _TIME_FIELDS:
        v = f.get(name)
        if v is None or isinstance(v, datetime):
            continue
        if not isinstance(v, str):
            raise ValidationError(f"{where}{name} must be a datetime or an ISO-8601 string, got {type(v).__name__}",
                                  field=name)
        try:
            f[name] = _time().validate_python(v)
        except PydanticValidationError:
            raise ValidationError(f"{where}{name}={v[:40]!r} is not an ISO-8601 datetime (e.g. "
                                  "'2025-06-01T12:00:00Z')", field=name) from None
    v = f.get("attributes")
    if v is not None and not isinstance(v, Mapping):
        raise ValidationError(f"{where}attributes must be a mapping of name to value, got {type(v).__name__} "
                              "(e.g. attributes={'order_id': 'A17'})", field="attributes")


def _merge(findings: list[Finding]) -> tuple[Finding, ...]:
    counts: dict[RedactionKind, int] = {}
    for f in findings:
        counts[f.kind] = counts.get(f.kind, 0) + f.count
    return tuple(Finding(k, counts[k]) for k in RedactionKind if k in counts)


def _enum(cls: Any, value: Any, name: str, where: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        raise ValidationError(f"{where}{name}: {value!r} is not one of {[m.value for m in cls]}", field=name) from None


def _default_entity(role: Any, user_id: str, agent_id: str) -> str | None:
    # The user and the agent are known from the scope; a tool should be named by the caller.
    return {DialogRole.user: user_id, DialogRole.agent: agent_id, DialogRole.system: "system"}.get(role)
