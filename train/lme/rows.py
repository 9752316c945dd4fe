"""LongMemEval questions as labelled training rows (MIT: the rows may ship).

A question's haystack is a labelled conversation: its ``has_answer`` turns are the evidence and
its question the later query (:func:`train.conversation_rows.conversation_rows`). In a
knowledge-update question the evidence of earlier answer sessions holds the old value: once the
update is held too, it is labelled ``superseded`` (half useful: the question may ask for both).

A haystack's filler is of two kinds. Sessions from ShareGPT and UltraChat are chat nobody asks about:
their turns are negatives. The other sessions are simulated user chats built, like the evidence, around
facts that *other* questions ask about — with their ``has_answer`` marks stripped. Their turns are
left **unlabeled** (out of every group): calling a fact that another question asks about "useless"
would teach a question-agnostic retention model the opposite of what it needs. Session ids only shape
the labels; no feature reads them.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from runtime.encoders import Embedder
from runtime.errors import ValidationError

from ..conversation_rows import ConversationRows, RowConfig, conversation_rows
from ..embedcache import CachedEmbedder
from ..workers import ordered_map, progress_bar
from .protocol import lme_turns
from .reader import LmeQuestion, iter_lme

__all__ = ["CONFIG_FILE", "check_row_config", "ensure_rows", "load_rows", "question_rows", "rows_path", "superseded_values", "unlabeled_turns"]


def question_rows(q: LmeQuestion, emb: Embedder, cfg: RowConfig = RowConfig(), *,
                  vectors: np.ndarray | None = None) -> ConversationRows:
    """The training rows of one question (see :mod:`train.conversation_rows`)."""
    return conversation_rows(q.question_id, lme_turns(q), set(q.evidence), emb, cfg, vectors=vectors,
                             superseded=superseded_values(q), unlabeled=unlabeled_turns(q))


_FILLER = ("sharegpt", "ultrachat")


def unlabeled_turns(q: LmeQuestion) -> set[str]:
    """Turns of the haystack's simulated-user sessions that are not this question's evidence sessions
    (copies of other questions' evidence, labels stripped): their usefulness is unknown. A session that
    holds one of this question's evidence turns is labelled, whatever its id says."""
    ev = set(q.evidence)
    return {t.turn_id for s in q.sessions
            if s.session_id not in q.answer_session_ids and not s.session_id.startswith(_FILLER)
            and not any(t.turn_id in ev for t in s.turns) for t in s.turns}


def superseded_values(q: LmeQuestion) -> dict[str, set[str]]:
    """Knowledge updates: evidence id of an earlier answer session → the evidence of the last one."""
    if q.question_type != "knowledge-update":
        return {}
    ev = set(q.evidence)
    by_session = [[t.turn_id for t in s.turns if t.turn_id in ev] for s in q.sessions]
    by_session = [ids for ids in by_session if ids]
    if len(by_session) < 2:
        return {}
    latest = set(by_session[-1])
    return {i: latest for ids in by_session[:-1] for i in ids}


# ---------------------------------------------------------------------------- the per-question cache
def rows_path(rows_dir: Path, qid: str) -> Path:
    return rows_dir / f"{qid}.npz"


def load_rows(path: Path) -> ConversationRows:
    z = np.load(path, allow_pickle=False)
    return ConversationRows(str(z["conversation_id"]), z["X"], z["y"], z["w"], z["tag"].tolist(), z["item_ids"].tolist(),
                            z["decision"], z["step"], z["session"].tolist(), z["kept"])


def _save_rows(path: Path, r: ConversationRows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, conversation_id=np.array(r.conversation_id), X=r.X, y=r.y, w=r.w, tag=np.array(r.tag, dtype=str),
             item_ids=np.array(r.item_ids, dtype=str), decision=r.decision, step=r.step,
             session=np.array(r.session, dtype=str), kept=r.kept)
    tmp.replace(path)


CONFIG_FILE = "row_config.json"
"""Beside the cached rows: the :class:`RowConfig` they were built with."""


def _config_dict(cfg: RowConfig) -> dict[str, Any]:
    d = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()}
    if d["held"] == "evidence":  # the draw count shapes no row of this kind
        d.pop("held_decisions")
    return d


def check_row_config(rows_dir: Path, cfg: RowConfig) -> None:
    """Stamp ``rows_dir`` with ``cfg``, or check that its rows were built with it.

    A folder of rows from before the stamp holds rows of ``held="evidence"`` (the only kind then).

    Raises:
        ValidationError: the folder's rows were built with another configuration.
    """
    stamp = rows_dir / CONFIG_FILE
    want = _config_dict(cfg)
    if stamp.is_file():
        have = json.loads(stamp.read_text(encoding="utf-8"))
    elif rows_dir.is_dir() and any(rows_dir.glob("*.npz")):
        have = _config_dict(RowConfig(**{**asdict(cfg), "held": "evidence"}))
    else:
        have = want
    if have != want:
        diff = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
        raise ValidationError(f"{rows_dir} holds rows built with another row configuration "
                              f"({', '.join(f'{k}: {a!r} there, {b!r} asked' for k, (a, b) in diff.items())}): "
                              "give another rows folder, or delete that one", field="rows_dir")
    rows_dir.mkdir(parents=True, exist_ok=True)
    if not stamp.is_file():
        stamp.write_text(json.dumps(want, sort_keys=True) + "\n", encoding="utf-8")


def ensure_rows(file: str | Path, emb: CachedEmbedder, rows_dir: Path, cfg: RowConfig = RowConfig(), *,
                progress: bool = True, total: int | None = None, workers: int = 1) -> None:
    """Compute and cache the training rows of every question that has none yet (on ``workers``
    processes; each question's file is written atomically, so an interrupted run resumes). The folder
    is stamped with ``cfg`` (:func:`check_row_config`): rows of two configurations never mix."""
    check_row_config(rows_dir, cfg)
    bar = progress_bar(total or 0, "lme rows", progress)

    def one(q: LmeQuestion) -> None:
        _save_rows(rows_path(rows_dir, q.question_id), question_rows(q, emb, cfg))
        emb.save()

    todo = (q for q in iter_lme(file) if not rows_path(rows_dir, q.question_id).is_file())
    if bar is not None and rows_dir.is_dir():
        bar.update(len(list(rows_dir.glob("*.npz"))))
    for _ in ordered_map(one, todo, workers):
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
