"""LongMemEval in its own layout: a validating, streaming reader.

LongMemEval (Wu et al., ICLR 2025; MIT) stores a JSON list of questions, each with its own haystack
of user–assistant sessions; the turns that hold the answer are marked ``"has_answer": true``. The
files are read unchanged, ``.json`` or ``.json.gz``, **one question at a time** (a question's
haystack is ~1 MB of text: the reader never holds more than one), and every question is validated
before anything is done with it. A malformed item raises a :class:`ValidationError` naming the
file and the item.

A turn's id is ``D<session number, 1-based in haystack order>:<turn number, 1-based>``.

Example:
    >>> for q in iter_lme("longmemeval-s-dev.json.gz"):            # doctest: +SKIP
    ...     print(q.question_id, q.question_type, q.n_turns, q.evidence)
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from runtime.errors import ValidationError

__all__ = ["QUESTION_TYPES", "LmeQuestion", "LmeSession", "LmeTurn", "iter_lme", "parse_question", "parse_lme_date"]

QUESTION_TYPES: tuple[str, ...] = ("single-session-user", "single-session-assistant", "single-session-preference",
                                   "multi-session", "temporal-reasoning", "knowledge-update")

_DATE = re.compile(r"^\s*(\d{4})/(\d{2})/(\d{2})\s*(?:\([A-Za-z]{3}\))?\s*(\d{1,2}):(\d{2})\s*$")
_BAD_ID = re.compile(r"[^A-Za-z0-9_.:@\-]")
_CHUNK = 1 << 22  # characters read per step of the streaming parser


@dataclass(frozen=True)
class LmeTurn:
    """One turn of a haystack session.

    Attributes:
        turn_id: ``D<session>:<turn>`` (both 1-based).
        session: the session's number in haystack order (1-based).
        position: 0-based index of the turn in its session.
        role: ``user`` or ``assistant``.
        content: the text, unchanged.
        has_answer: the turn holds (part of) the answer.
    """

    turn_id: str
    session: int
    position: int
    role: Literal["user", "assistant"]
    content: str
    has_answer: bool


@dataclass(frozen=True)
class LmeSession:
    """One haystack session: its number, its id in the data, its date, its turns."""

    number: int
    session_id: str
    date: datetime
    turns: tuple[LmeTurn, ...]


@dataclass(frozen=True)
class LmeQuestion:
    """One question with its haystack.

    Attributes:
        question_id: the data's id (``*_abs`` = unanswerable: no evidence).
        question_type: one of :data:`QUESTION_TYPES`.
        question, answer: the texts.
        question_date: when it is asked.
        answer_session_ids: the sessions that hold the answer.
        sessions: the haystack, in order.
    """

    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: datetime
    answer_session_ids: tuple[str, ...]
    sessions: tuple[LmeSession, ...]

    @property
    def turns(self) -> tuple[LmeTurn, ...]:
        """Every turn, in stream order."""
        return tuple(t for s in self.sessions for t in s.turns)

    @property
    def n_turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    @property
    def evidence(self) -> tuple[str, ...]:
        """Turn ids marked ``has_answer``."""
        return tuple(t.turn_id for s in self.sessions for t in s.turns if t.has_answer)

    @property
    def answerable(self) -> bool:
        """Counted in evidence recall: not an ``_abs`` question, and it has evidence turns."""
        return not self.question_id.endswith("_abs") and bool(self.evidence)


def parse_lme_date(text: str) -> datetime | None:
    """``"2023/05/20 (Sat) 02:21"`` -> a UTC datetime (``None`` if it does not parse)."""
    m = _DATE.match(text or "")
    if not m:
        return None
    y, mo, d, h, mi = (int(x) for x in m.groups())
    try:
        return datetime(y, mo, d, h, mi, tzinfo=UTC)
    except ValueError:
        return None


def _fail(where: str, msg: str, field: str) -> ValidationError:
    return ValidationError(f"{where}: {msg}", field=field)


def parse_question(raw: Any, *, where: str = "<question>") -> LmeQuestion:
    """Validate one item of the LongMemEval layout (``where`` names it in errors)."""
    if not isinstance(raw, dict):
        raise _fail(where, "each item must be a JSON object", "item")
    keys = ("question_id", "question_type", "question", "question_date", "answer", "haystack_dates",
            "haystack_session_ids", "haystack_sessions")
    missing = [k for k in keys if k not in raw]
    if missing:
        raise _fail(where, f"missing keys {missing}", missing[0])
    qid = raw["question_id"]
    where = f"{where} ({qid})"
    if raw["question_type"] not in QUESTION_TYPES:
        raise _fail(where, f"question_type {raw['question_type']!r} is not one of {list(QUESTION_TYPES)}",
                    "question_type")
    dates, sids, sessions = raw["haystack_dates"], raw["haystack_session_ids"], raw["haystack_sessions"]
    if not (isinstance(sessions, list) and isinstance(dates, list) and isinstance(sids, list)
            and len(sessions) == len(dates) == len(sids)):
        raise _fail(where, "haystack_sessions, haystack_dates and haystack_session_ids must be lists of one "
                           "length", "haystack_sessions")
    qdate = parse_lme_date(str(raw["question_date"]))
    if qdate is None:
        raise _fail(where, f"question_date {raw['question_date']!r} is not 'YYYY/MM/DD (Day) HH:MM'", "question_date")
    out = []
    for si, (sess, date, sid) in enumerate(zip(sessions, dates, sids), 1):
        d = parse_lme_date(str(date))
        if d is None:
            raise _fail(where, f"haystack_dates[{si - 1}] {date!r} is not 'YYYY/MM/DD (Day) HH:MM'", "haystack_dates")
        if not isinstance(sess, list):
            raise _fail(where, f"haystack_sessions[{si - 1}] must be a list of turns", "haystack_sessions")
        turns = []
        for ti, t in enumerate(sess, 1):
            if not (isinstance(t, dict) and t.get("role") in ("user", "assistant") and isinstance(t.get("content"), str)):
                raise _fail(where, f"haystack_sessions[{si - 1}][{ti - 1}] must be {{role: user|assistant, "
                                   "content: str}", "haystack_sessions")
            turns.append(LmeTurn(f"D{si}:{ti}", si, ti - 1, t["role"], t["content"], bool(t.get("has_answer"))))
        out.append(LmeSession(si, _BAD_ID.sub("_", str(sid))[:128] or f"s{si}", d, tuple(turns)))
    return LmeQuestion(str(qid), str(raw["question_type"]), str(raw["question"]), str(raw["answer"]), qdate,
                       tuple(str(x) for x in raw.get("answer_session_ids") or ()), tuple(out))


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _items(fh: IO[str], name: str) -> Iterator[Any]:
    """The elements of a top-level JSON array, decoded one at a time (bounded memory)."""
    dec = json.JSONDecoder()
    buf = ""
    pos = 0
    eof = False

    def fill() -> bool:
        nonlocal buf, pos, eof
        chunk = fh.read(_CHUNK)
        if not chunk:
            eof = True
            return False
        buf = buf[pos:] + chunk
        pos = 0
        return True

    def skip_ws() -> None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf) or not fill():
                return

    skip_ws()
    if pos < len(buf) and buf[pos] == "\ufeff":
        pos += 1
        skip_ws()
    if pos >= len(buf) or buf[pos] != "[":
        raise ValidationError(f"{name}: expected a JSON list of questions", field="file")
    pos += 1
    first = True
    while True:
        skip_ws()
        if pos >= len(buf):
            raise ValidationError(f"{name}: the JSON list is not closed (truncated file?)", field="file")
        if buf[pos] == "]":
            return
        if not first:
            if buf[pos] != ",":
                raise ValidationError(f"{name}: expected ',' between items", field="file")
            pos += 1
            skip_ws()
        while True:
            try:
                obj, end = dec.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as e:
                if eof or not fill():
                    raise ValidationError(f"{name}: invalid JSON ({e.msg})", field="file") from e
        pos = end
        first = False
        yield obj


def iter_lme(path: str | Path) -> Iterator[LmeQuestion]:
    """Stream the questions of a LongMemEval file (``.json`` or ``.json.gz``), validated one by one.

    Raises:
        ValidationError: naming the file and the item that is wrong (``FileNotFoundError`` as a
            ``ValidationError`` too, naming the path).
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"no LongMemEval file at {p}", field="file")
    try:
        with _open(p) as fh:
            for i, raw in enumerate(_items(fh, str(p))):
                yield parse_question(raw, where=f"{p.name} item {i}")
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise ValidationError(f"{p}: cannot be read ({e})", field="file") from e
