"""Cross-validation by question on the LongMemEval dev split: the honest dev figure.

Folds are made of question groups (:mod:`train.lme.folds`: a question whose evidence session is
another's filler stays with it). For each fold, the utility model is fit on the other folds'
training rows (:mod:`train.lme.rows`) plus a fixed simulated collection, with its early-stopping
split carved out of *those* questions, and the bag-of-words baseline is fit on their turns; both
are then streamed over the held-out fold's full haystacks on the production path. Baselines that
learn nothing run once over every question. Nothing here chooses a setting by looking at a
held-out fold: the fit settings come from the train preset.

The per-question rows are cached (``rows_dir/<question id>.npz``), as are the embeddings.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime.scoring import Scorer, UtilityScorer, make_baseline
from utilitynet.export import export_onnx
from utilitynet.features import spec_for

from ..conversation_rows import ConversationRows, RowConfig, stack
from ..dataset.groups import FitData, session_segments
from ..embedcache import cached_embedder
from ..lme.folds import fold_of, groups
from ..lme.protocol import lme_turns
from ..lme.reader import LmeQuestion, iter_lme
from ..lme.rows import ensure_rows, load_rows, rows_path
from ..stream import stored_texts
from ..workers import ordered_map, progress_bar
from .bow import BowScorer
from .lme import LmeRun, LmeSummary, lme_oracle, question_vectors, replay_question

__all__ = ["run_cv"]


def rows_fit_data(rows: Sequence[ConversationRows]) -> FitData:
    """Per-question rows as one :class:`~train.dataset.FitData` (question = split group)."""
    parts = [r for r in rows if len(r.y)]
    block = stack(parts)
    g = np.concatenate([np.full(len(r.y), n) for n, r in enumerate(parts)])
    return FitData(block.X, block.y, block.w, g, block.decision, session_segments(block.decision, block.session),
                   block.kept)


def sim_rows(preset: str, emb: Any, cache: Path) -> FitData:
    """A fixed simulated collection (keep-recent, the preset's training episodes), cached."""
    from ..config import load_preset

    cfg = load_preset(preset)
    path = cache / f"sim_rows_{preset}_w{cfg.sim_weight:g}.npz"
    keys = ("X", "y", "w", "groups", "decisions", "sessions", "kept")
    if path.is_file():
        z = np.load(path)
        if all(k in z for k in keys) and z["X"].shape[1] == spec_for(emb.dim, emb.encoder_id).n_features:
            return FitData(*(z[k] for k in keys))
    from runtime.scoring.baselines import RecencyScorer

    from ..agent import run_episode
    from ..dataset import RowBatch, fit_data
    from ..label import label_decisions
    from ..simulate import generate

    rows = RowBatch(spec_for(emb.dim, emb.encoder_id))
    for ep in generate(cfg.sim):
        run = run_episode(ep, RecencyScorer(), emb, cfg.agent, record=True)
        rows.add_run(run, label_decisions(ep, run.decisions, emb, cfg.label), family=ep.family)
    data = fit_data(rows.to_table(), source_weights={"sim": cfg.sim_weight})
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{k: getattr(data, k) for k in keys})
    return data


def _questions(file: str | Path, ids: set[str]) -> Iterator[LmeQuestion]:
    return (q for q in iter_lme(file) if q.question_id in ids)


_MODELS: dict[Path, UtilityScorer] = {}


def _model(path: Path) -> UtilityScorer:
    # Made in the process that uses it: an onnxruntime session is not carried across a fork.
    if path not in _MODELS:
        _MODELS[path] = UtilityScorer(path)
    return _MODELS[path]


def _bow(file: str | Path, ids: set[str]) -> BowScorer:
    texts: list[str] = []
    labels: list[int] = []
    for q in _questions(file, ids):
        turns = lme_turns(q)
        ev = set(q.evidence)
        for t, s in zip(turns, stored_texts(turns)):
            if s:
                texts.append(s)
                labels.append(int(t.memory_id in ev))
    return BowScorer(texts, labels)


def run_cv(file: str | Path, *, folds: int = 5, validation_fold: int = 0,
           capacities: Sequence[float] = (0.05, 0.1, 0.2), budgets: Sequence[float] = (),
           baselines: Sequence[str] = ("recency", "longest", "longest_user", "memoryos", "generative_agents",
                                       "oracle"),
           variants: Mapping[str, Mapping[str, Any]] | None = None, bow: bool = True,
           preset: str = "default", rows_dir: str | Path = "data/lme_rows", cache: str | Path = "data/cache/embeddings",
           workers: int = 1, progress: bool = True, time_budget_s: float | None = None,
           models_dir: str | Path | None = None, row_config: RowConfig = RowConfig()) -> dict[str, Any]:
    """Cross-validated evidence recall of the utility model and the bag-of-words baseline, plus the
    baselines that need no fitting, on one LongMemEval file.

    Fold ``validation_fold`` is the one ``make train`` selects and promotes on (the shipped rows'
    validation split): it is never fit on here either, and never reported. For each other fold every
    learned variant (``variants``: name → overrides of the preset's fit settings; default one,
    ``"utilitynet-cv"``, with the preset's own) and the bag-of-words baseline are fit on the remaining
    folds' rows (built with ``row_config``, cached in ``rows_dir``) plus the preset's simulated rows.
    Then every reported question, in file order, is streamed through *every* policy (the learned ones
    of its own fold) at every budget: each of ``capacities`` as a share of its turns, each of
    ``budgets`` as a share of its tokens. At any moment the finished questions form a like-for-like
    table. With ``time_budget_s`` no new question starts after the budget; the result says how many
    questions it covers. ``models_dir`` keeps the fold models (``<variant>/fold<k>.onnx``).

    Returns ``{"folds", "validation_fold", "questions", "variants", "fits", "summary", "runs"}``.
    """
    import time

    from ..config import load_preset
    from ..fit import FitConfig
    from ..fit import run as fit_run

    if not 0 <= validation_fold < folds:
        raise ValueError(f"validation_fold must be in [0, {folds}), got {validation_fold}")
    variants = dict(variants) if variants is not None else {"utilitynet-cv": {}}
    emb = cached_embedder("onnx", cache)
    fold = fold_of(groups(iter_lme(file)), folds)
    ids = list(fold)
    rows_dir = Path(rows_dir)
    ensure_rows(file, emb, rows_dir, row_config, progress=progress, total=len(ids), workers=workers)
    cfg = load_preset(preset)
    sim = sim_rows(preset, emb, rows_dir.with_name(rows_dir.name + "_sim"))  # make train learns from it too
    spec = spec_for(emb.dim, emb.encoder_id)
    summary = LmeSummary()
    runs: list[dict[str, Any]] = []
    reported = [k for k in range(folds) if k != validation_fold]
    made: dict[str, Scorer] = {}
    fits: dict[str, dict[int, dict[str, Any]]] = {}

    def baseline(name: str) -> Any:
        if name == "oracle":
            return lme_oracle
        return lambda q: made.setdefault(name, make_baseline(name))  # type: ignore[arg-type]

    with tempfile.TemporaryDirectory(prefix="memir-cv-") as tmp:
        keep_models = Path(models_dir) if models_dir is not None else Path(tmp)
        learned: dict[int, dict[str, Any]] = {k: {} for k in reported}
        for k in reported:
            train_ids = {i for i in ids if fold[i] not in (k, validation_fold)}
            real = rows_fit_data([load_rows(rows_path(rows_dir, i)) for i in sorted(train_ids)])
            data = FitData.concat([real, sim])
            for name, overrides in variants.items():
                fit_cfg = FitConfig.from_dict({**cfg.fit.to_dict(), **dict(overrides)})
                print(f"fold {k}, {name}: fit on {len(train_ids)} questions ({len(real)} rows) + {len(sim)} simulated "
                      f"rows", file=sys.stderr)
                fitted = fit_run(fit_cfg, data, spec=spec, out_dir=Path(tmp) / name / f"fold{k}")
                model_path = export_onnx(fitted.model, spec, keep_models / name / f"fold{k}.onnx")
                fits.setdefault(name, {})[k] = {"epochs": fitted.epochs_run, "metrics": fitted.metrics,
                                                "seconds": fitted.seconds}
                learned[k][name] = lambda q, m=model_path: _model(m)
            if bow:
                learned[k]["bow"] = lambda q, b=_bow(file, train_ids): b

        scorers = {name: baseline(name) for name in baselines}
        test_all = [i for i in ids if fold[i] != validation_fold]
        t0 = time.monotonic()
        grid = [(p, "turns") for p in capacities] + [(p, "tokens") for p in budgets]

        def one(q: LmeQuestion) -> list[LmeRun]:
            vecs = question_vectors(q, emb)
            out = []
            for name, make in {**learned[fold[q.question_id]], **scorers}.items():
                for p, unit in grid:
                    run = replay_question(q, make(q), emb, p, vectors=vecs, unit=unit)
                    run.policy = name
                    out.append(run)
            return out

        def todo() -> Iterator[LmeQuestion]:
            for q in _questions(file, set(test_all)):
                if time_budget_s is not None and time.monotonic() - t0 > time_budget_s:
                    return
                yield q

        bar = progress_bar(len(test_all), "evaluate (every policy per question)", progress)
        done: list[str] = []
        for q_runs in ordered_map(one, todo(), workers):
            for run in q_runs:
                summary.add(run)
                runs.append({**run.to_dict(), "fold": fold[run.question_id]})
            done.append(q_runs[0].question_id)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
    return {"folds": fold, "validation_fold": validation_fold, "row_config": row_config.__dict__,
            "questions": {"reported": len(done), "eligible": len(test_all), "complete": len(done) == len(test_all),
                          "ids": done},
            "variants": {k: dict(v) for k, v in variants.items()}, "fits": fits,
            "summary": summary.to_dict(), "runs": runs}
