"""Conversations in LoCoMo's layout: a validating reader and the retention-protocol simulator.

LoCoMo (Maharana et al., ACL 2024) stores each conversation as sessions of turns plus QA items
whose ``evidence`` lists the turns (``"D<session>:<n>"``) that answer them. Those evidence ids are
our hindsight labels. A few are malformed in the published data (``"D8:6; D9:17"``, ``"D:11:26"``,
``"D30:05"``), so the reader repairs what it can, drops what it cannot, and reports every repair.

The simulator is the headline protocol of ``../shared/data/locomo/README.md``: stream the turns
session by session; after each session a policy keeps at most ``K = round(p * N)`` turns (``N`` =
the conversation's turn count); forgotten turns never return; at the end, evidence recall = the
share of (question, evidence turn) pairs of categories 1-4 whose turn is still kept. It is pure
numpy so that the trainer, the evaluator and the benchmark all reuse one definition.

Example:
    >>> convs, repairs = load_locomo("locomo-dev.json")          # doctest: +SKIP
    >>> evaluate_retention(convs[0], longest_scorer, 0.10)["recall"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from runtime.errors import ValidationError

__all__ = ["Turn", "QAItem", "Session", "Conversation", "Repair", "RECALL_CATEGORIES", "load_locomo", "parse_locomo", "repair_evidence_id", "parse_session_datetime"]

RECALL_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)
"""Categories counted in evidence recall (5 = adversarial: its evidence marks the trap turn)."""

_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D(\d+):(\d+)")
# A piece of a raw evidence string: "D", optional stray colon, session, colon, turn (zeros allowed).
_EVIDENCE_PIECE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


@dataclass(frozen=True)
class Turn:
    """One utterance.

    Attributes:
        dia_id: canonical id ``"D<session>:<n>"`` (no leading zeros).
        session: session number (1-based, as in the file).
        position: 0-based index of the turn within its session.
        order: 0-based index of the turn in the whole conversation (stream order).
        speaker: speaker name as written in the file.
        text: the utterance.
        caption: BLIP caption of a shared image, or ``None``.
        session_date: the session's raw ``session_N_date_time`` string ("" when absent).
    """

    dia_id: str
    session: int
    position: int
    order: int
    speaker: str
    text: str
    caption: str | None
    session_date: str

    @property
    def full_text(self) -> str:
        """Text with the image caption appended as ``[image: caption]`` (what gets embedded)."""
        return f"{self.text} [image: {self.caption}]" if self.caption else self.text


@dataclass(frozen=True)
class QAItem:
    """A question with its repaired evidence.

    Attributes:
        question: the question text.
        answer: the answer (``adversarial_answer`` for category 5), stringified; ``None`` if absent.
        evidence: canonical dia_ids that exist in the conversation, in file order, deduplicated.
        category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    """

    question: str
    answer: str | None
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Session:
    """One session: its number, raw date string and turns in order."""

    number: int
    date_time: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Repair:
    """One change the reader made to an evidence id (or an id it had to drop).

    Attributes:
        sample_id: the conversation.
        qa_index: index of the QA item in ``qa``.
        raw: the evidence string as found.
        result: the canonical ids it became (empty when dropped).
        reason: why (``"split"``, ``"normalised"``, ``"unparseable"``, ``"unknown turn"``...).
    """

    sample_id: str
    qa_index: int
    raw: str
    result: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        return f"{self.sample_id} qa[{self.qa_index}]: {self.raw!r} -> {list(self.result)} ({self.reason})"


@dataclass(frozen=True)
class Conversation:
    """A validated conversation.

    Attributes:
        sample_id: the file's ``sample_id``.
        speaker_a: first speaker's name.
        speaker_b: second speaker's name.
        sessions: sessions in ascending number.
        qa: QA items (evidence repaired).
    """

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    qa: tuple[QAItem, ...]

    @property
    def turns(self) -> tuple[Turn, ...]:
        """All turns in stream order."""
        return tuple(t for s in self.sessions for t in s.turns)

    @property
    def n_turns(self) -> int:
        """``N`` of the protocol: the conversation's turn count."""
        return sum(len(s.turns) for s in self.sessions)


def repair_evidence_id(raw: str) -> tuple[tuple[str, ...], str | None]:
    """Split and normalise one raw evidence string.

    Args:
        raw: e.g. ``"D8:6; D9:17"``, ``"D:11:26"``, ``"D30:05"`` or a clean ``"D1:3"``.

    Returns:
        ``(ids, reason)``: canonical ids (possibly empty when nothing parses) and ``None`` when the
        input was already canonical, else a short reason for the repair report.
    """
    s = str(raw).strip()
    if _DIA_ID.fullmatch(s) and not re.search(r":0\d", s):
        return (s,), None
    pieces = [p for p in re.split(r"[;,\s]+(?=D)", s) if p.strip()]
    ids: list[str] = []
    for piece in pieces:
        m = _EVIDENCE_PIECE.fullmatch(piece.strip().rstrip(";,"))
        if m:
            ids.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    if not ids:
        return (), "unparseable"
    return tuple(ids), ("split" if len(pieces) > 1 else "normalised")


def parse_session_datetime(text: str) -> datetime | None:
    """Parse LoCoMo's ``"1:56 pm on 8 May, 2023"``; ``None`` when the format differs."""
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
    return None


def _problem(problems: list[tuple[str, str]], where: str, msg: str) -> None:
    problems.append((where, msg))


def _parse_one(raw: Any, idx: int, problems: list[tuple[str, str]],
               repairs: list[Repair]) -> Conversation | None:
    if not isinstance(raw, dict):
        _problem(problems, f"[{idx}]", "a conversation must be an object")
        return None
    sid = str(raw.get("sample_id", f"#{idx}"))
    conv = raw.get("conversation")
    if not isinstance(conv, dict):
        _problem(problems, f"{sid}.conversation", "missing or not an object")
        return None
    for key in ("speaker_a", "speaker_b"):
        if not isinstance(conv.get(key), str):
            _problem(problems, f"{sid}.conversation.{key}", "missing or not a string")
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    if not numbers:
        _problem(problems, f"{sid}.conversation", "no session_N lists")
    sessions: list[Session] = []
    known: set[str] = set()
    order = 0
    for n in numbers:
        turns_raw = conv[f"session_{n}"]
        if not isinstance(turns_raw, list):
            _problem(problems, f"{sid}.conversation.session_{n}", "must be a list of turns")
            continue
        date = conv.get(f"session_{n}_date_time", "")
        turns: list[Turn] = []
        for j, t in enumerate(turns_raw):
            where = f"{sid}.conversation.session_{n}[{j}]"
            if not isinstance(t, dict):
                _problem(problems, where, "a turn must be an object")
                continue
            bad = [f for f in ("speaker", "dia_id", "text") if not isinstance(t.get(f), str)]
            for f in bad:
                _problem(problems, f"{where}.{f}", "missing or not a string")
            if bad:
                continue
            ids, _ = repair_evidence_id(t["dia_id"])
            if len(ids) != 1 or ids[0] in known:
                _problem(problems, f"{where}.dia_id", f"{t['dia_id']!r} is malformed or duplicated")
                continue
            cap = t.get("blip_caption")
            turns.append(Turn(ids[0], n, len(turns), order, t["speaker"], t["text"],
                              cap if isinstance(cap, str) and cap.strip() else None, str(date)))
            known.add(ids[0])
            order += 1
        sessions.append(Session(n, str(date), tuple(turns)))
    qa_raw = raw.get("qa", [])
    if not isinstance(qa_raw, list):
        _problem(problems, f"{sid}.qa", "must be a list")
        qa_raw = []
    qa: list[QAItem] = []
    for i, q in enumerate(qa_raw):
        where = f"{sid}.qa[{i}]"
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            _problem(problems, f"{where}.question", "missing or not a string")
            continue
        cat = q.get("category")
        if not isinstance(cat, int) or cat not in (1, 2, 3, 4, 5):
            _problem(problems, f"{where}.category", f"{cat!r} is not one of 1..5")
            continue
        ev_raw = q.get("evidence", [])
        if not isinstance(ev_raw, list):
            _problem(problems, f"{where}.evidence", "must be a list of dia_ids")
            continue
        evidence: list[str] = []
        for e in ev_raw:
            ids, reason = repair_evidence_id(str(e))
            missing = tuple(x for x in ids if x not in known)
            ids = tuple(x for x in ids if x in known)
            if reason:
                repairs.append(Repair(sid, i, str(e), ids, reason))
            if missing:
                repairs.append(Repair(sid, i, str(e), (), f"unknown turn {', '.join(missing)}"))
            evidence.extend(x for x in ids if x not in evidence)
        ans = q.get("answer", q.get("adversarial_answer"))
        qa.append(QAItem(q["question"], None if ans is None else str(ans), tuple(evidence), cat))
    return Conversation(sid, str(conv.get("speaker_a", "")), str(conv.get("speaker_b", "")),
                        tuple(sessions), tuple(qa))


def parse_locomo(data: Any, *, source: str = "<data>") -> tuple[list[Conversation], list[Repair]]:
    """Validate already-decoded LoCoMo-layout data.

    Args:
        data: the decoded JSON (a list of conversations).
        source: a name for error messages (usually the file path).

    Returns:
        The conversations and every evidence repair made.

    Raises:
        ValidationError: listing every problem found (sample id and field of each), raised once.
    """
    if not isinstance(data, list):
        raise ValidationError(f"{source}: expected a list of conversations (LoCoMo layout), got "
                              f"{type(data).__name__}", field="<root>")
    problems: list[tuple[str, str]] = []
    repairs: list[Repair] = []
    convs = [c for i, raw in enumerate(data) if (c := _parse_one(raw, i, problems, repairs))]
    if problems:
        lines = "; ".join(f"{w}: {m}" for w, m in problems[:20])
        more = f" (+{len(problems) - 20} more)" if len(problems) > 20 else ""
        raise ValidationError(f"{source} is not valid LoCoMo layout — {lines}{more}. Fix these "
                              "fields (see shared/data/locomo/README.md for the layout).",
                              field=problems[0][0], problems=problems)
    return convs, repairs


def load_locomo(path: str | Path) -> tuple[list[Conversation], list[Repair]]:
    """Read and validate a LoCoMo-layout JSON file (see :func:`parse_locomo`)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ValidationError(f"{p}: no such file; pass the path of a LoCoMo-layout JSON file",
                              field="path") from e
    except json.JSONDecodeError as e:
        raise ValidationError(f"{p}: not JSON ({e}); pass a LoCoMo-layout JSON file",
                              field="<root>") from e
    return parse_locomo(data, source=str(p))
