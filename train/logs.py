"""Training on your own chat logs: a plain format, a validating reader, and the rows they give.

**Format** — JSON Lines, one conversation per line, OpenAI-style ``messages``::

    {"id": "support-0042",
     "messages": [
       {"role": "user", "content": "My order 1234 arrived broken", "time": "2024-05-01T09:00:00Z"},
       {"role": "assistant", "content": "Sorry to hear that! A replacement is on its way."},
       {"role": "user", "content": "By the way, I moved to Lyon last week.", "session": "s2",
        "time": "2024-05-09T18:30:00Z"}],
     "keep": [3],
     "questions": [{"question": "Where does the customer live?", "evidence": [3]}]}

- ``id`` (required): a unique conversation id.
- ``messages`` (required): ``role`` is ``user``, ``assistant``, ``system`` or ``tool``; ``content`` is
  text. Optional ``session`` (messages of one session are contiguous; default: one session, or a
  new one after a 30-minute gap when ``time`` is given) and ``time`` (ISO 8601; default: one second
  per message from 2024-01-01).
- Labels, both optional: ``keep`` — message numbers (1-based) worth remembering; ``questions`` —
  later questions with the message numbers that answer them. A conversation without labels is
  refused for training (nothing to learn from); ``memir`` can still ingest it.

A message's memory id is ``m<number>`` (``m3`` above). Every problem is reported with the file and
line it is on, and a malformed line is an error, never a skipped conversation.

**Use** — ``python -m train.logs check FILE...`` validates; ``make train LOGS="a.jsonl b.jsonl"``
(``python -m train.loop --log-files ...``, or a preset's ``log_files: [...]``) adds the files' rows to
every training round, and the model card names them.

**Convert** — ``python -m train.logs convert --from openai|lme IN OUT`` writes this format from:

- ``openai``: JSONL of ``{"messages": [...]}`` (chat fine-tuning / export layout; ``id`` optional). It
  has no labels: add ``keep`` or ``questions`` before training (``check`` says which lines lack them).
- ``lme``: a LongMemEval file (``.json`` / ``.json.gz``): one conversation per question, its sessions
  in order (``session`` = the haystack's session id, ``time`` = the session date) and the question
  with its ``has_answer`` turns as evidence.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runtime.encoders import Embedder
from runtime.errors import MemirError, ValidationError

from .conversation_rows import ConversationRows, RowConfig, conversation_rows
from .stream import StreamTurn

__all__ = ["ChatLog", "convert", "iter_logs", "log_rows", "main", "parse_log"]

_ROLES = {"user": "user", "assistant": "agent", "system": "agent", "tool": "agent"}
_START = datetime(2024, 1, 1, tzinfo=UTC)
_GAP = timedelta(minutes=30)


@dataclass(frozen=True)
class ChatLog:
    """One validated conversation of a log file.

    Attributes:
        conversation_id: its ``id``.
        turns: the messages as the agent writes them (memory ids ``m1``, ``m2``...).
        evidence: memory ids worth remembering (``keep`` and every question's evidence).
        questions: the later questions' texts.
        where: ``file:line`` (for messages).
    """

    conversation_id: str
    turns: tuple[StreamTurn, ...]
    evidence: frozenset[str]
    questions: tuple[str, ...]
    where: str


def _time(v: Any, where: str) -> datetime:
    if not isinstance(v, str):
        raise ValidationError(f"{where}: time must be an ISO 8601 string, got {v!r}", field="time")
    try:
        t = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError as e:
        raise ValidationError(f"{where}: time {v!r} is not ISO 8601 (e.g. 2024-05-01T09:00:00Z)", field="time") from e
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def parse_log(obj: Any, where: str) -> ChatLog:
    """Validate one conversation (``where`` = ``file:line`` in messages)."""
    if not isinstance(obj, dict):
        raise ValidationError(f"{where}: each line must be a JSON object with 'id' and 'messages'", field="line")
    unknown = sorted(set(obj) - {"id", "messages", "keep", "questions"})
    if unknown:
        raise ValidationError(f"{where}: unknown keys {unknown}; valid: id, messages, keep, questions", field=unknown[0])
    cid = obj.get("id")
    if not isinstance(cid, str) or not cid.strip():
        raise ValidationError(f"{where}: 'id' must be a non-empty string", field="id")
    msgs = obj.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValidationError(f"{where}: 'messages' must be a non-empty list", field="messages")
    turns: list[StreamTurn] = []
    session, n_sessions, last = None, 0, None
    for i, m in enumerate(msgs, 1):
        w = f"{where}: messages[{i - 1}]"
        if not isinstance(m, dict) or m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
            raise ValidationError(f"{w} must be {{role: user|assistant|system|tool, content: str}}", field="messages")
        at = _time(m["time"], w) if "time" in m else (last + timedelta(seconds=1) if last else _START)
        if last is not None and at < last:
            raise ValidationError(f"{w}: time goes backwards ({at.isoformat()} < {last.isoformat()})", field="time")
        declared = m.get("session")
        if declared is not None and not isinstance(declared, str):
            raise ValidationError(f"{w}: session must be a string", field="session")
        if declared is not None:
            new = declared != session
            session_name = declared
        else:
            new = session is None or (last is not None and "time" in m and at - last > _GAP)
            session_name = None
        if new:
            n_sessions += 1
            session = session_name if session_name is not None else f"s{n_sessions}"
        turns.append(StreamTurn(f"m{i}", m["content"], f"{cid}.{session}"[:128].replace(" ", "_"), at, m["role"],
                                _ROLES[m["role"]]))  # type: ignore[arg-type]
        last = at
    n = len(turns)

    def numbers(v: Any, field: str) -> set[str]:
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= n for x in v):
            raise ValidationError(f"{where}: {field} must be a list of message numbers 1..{n}", field=field)
        return {f"m{x}" for x in v}

    evidence = numbers(obj["keep"], "keep") if "keep" in obj else set()
    questions = []
    for j, q in enumerate(obj.get("questions") or []):
        if not isinstance(q, dict) or not isinstance(q.get("question"), str) or "evidence" not in q:
            raise ValidationError(f"{where}: questions[{j}] must be {{question: str, evidence: [message numbers]}}",
                                  field="questions")
        evidence |= numbers(q["evidence"], f"questions[{j}].evidence")
        questions.append(q["question"])
    return ChatLog(cid, tuple(turns), frozenset(evidence), tuple(questions), where)


def iter_logs(path: str | Path, *, require_labels: bool = True) -> Iterator[ChatLog]:
    """Every conversation of a log file, validated; errors name the file and the line."""
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"no chat log at {p}", field="file")
    seen: dict[str, int] = {}
    with open(p, encoding="utf-8-sig") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{p}:{line_no}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValidationError(f"{where}: not valid JSON ({e.msg})", field="line") from e
            log = parse_log(obj, where)
            if log.conversation_id in seen:
                raise ValidationError(f"{where}: id {log.conversation_id!r} repeats line {seen[log.conversation_id]}",
                                      field="id")
            seen[log.conversation_id] = line_no
            if require_labels and not log.evidence:
                raise ValidationError(f"{where}: conversation {log.conversation_id!r} has no labels ('keep' or "
                                      "'questions'): there is nothing to learn from it", field="keep")
            yield log


def log_rows(files: Sequence[str | Path], emb: Embedder, cfg: RowConfig = RowConfig()) -> list[ConversationRows]:
    """The training rows of every conversation of ``files`` (validated first, all of them)."""
    logs = [log for f in files for log in iter_logs(f)]
    return [conversation_rows(log.conversation_id, log.turns, set(log.evidence), emb, cfg)
            for log in logs]


def _from_openai(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8-sig") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValidationError(f"{where}: not valid JSON ({e.msg})", field="line") from e
            if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
                raise ValidationError(f"{where}: expected an object with a 'messages' list", field="messages")
            out: dict[str, Any] = {"id": str(obj.get("id") or f"{path.stem}-{line_no}"), "messages": [
                {k: m[k] for k in ("role", "content", "time", "session") if isinstance(m, dict) and k in m}
                for m in obj["messages"]]}
            for k in ("keep", "questions"):
                if k in obj:
                    out[k] = obj[k]
            parse_log(out, where)  # fail here, naming the input line, not later in training
            yield out


def _from_lme(path: Path) -> Iterator[dict[str, Any]]:
    from .lme.reader import iter_lme

    for q in iter_lme(path):
        msgs, evidence, answer = [], [], set(q.evidence)
        for s in q.sessions:
            for t in s.turns:
                msgs.append({"role": "user" if t.role == "user" else "assistant", "content": t.content,
                             "session": s.session_id, "time": s.date.isoformat()})
                if t.turn_id in answer:
                    evidence.append(len(msgs))
        out: dict[str, Any] = {"id": q.question_id, "messages": msgs}
        if evidence:
            out["questions"] = [{"question": q.question, "evidence": evidence}]
        yield out


def convert(src: str, inp: str | Path, out: str | Path) -> int:
    """Convert ``inp`` (``src`` = ``openai`` or ``lme``) to this format at ``out`` (written atomically);
    returns the number of conversations."""
    readers = {"openai": _from_openai, "lme": _from_lme}
    if src not in readers:
        raise ValidationError(f"--from must be one of {sorted(readers)}, got {src!r}", field="from")
    inp, out = Path(inp), Path(out)
    if not inp.is_file():
        raise ValidationError(f"no input at {inp}", field="file")
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for conv in readers[src](inp):
                fh.write(json.dumps(conv, ensure_ascii=False) + "\n")
                n += 1
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return n


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.logs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ck = sub.add_parser("check", help="validate chat-log files and report what they hold",
                        description="Example: python -m train.logs check my_chats.jsonl")
    ck.add_argument("files", nargs="+")
    ck.add_argument("--unlabelled-ok", action="store_true", help="accept conversations without labels")
    cv = sub.add_parser("convert", help="write this format from another layout",
                        description="Example: python -m train.logs convert --from openai chats.jsonl logs.jsonl")
    cv.add_argument("--from", dest="src", required=True, choices=("openai", "lme"))
    cv.add_argument("input")
    cv.add_argument("output")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "convert":
            n = convert(a.src, a.input, a.output)
            print(json.dumps({"conversations": n, "output": a.output}))
            return 0
        total = {"conversations": 0, "messages": 0, "labelled turns": 0, "questions": 0}
        for f in a.files:
            for log in iter_logs(f, require_labels=not a.unlabelled_ok):
                total["conversations"] += 1
                total["messages"] += len(log.turns)
                total["labelled turns"] += len(log.evidence)
                total["questions"] += len(log.questions)
    except (MemirError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(total))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
