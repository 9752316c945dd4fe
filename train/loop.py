"""``make train``: simulate → collect → hindsight labels → fit → export → evaluate, in rounds.

Round 0 collects simulated trajectories with keep-most-recent; round r collects with round r−1's
ONNX model (the state distribution shifts with the policy, so each round sees the states its
predecessor creates). Simulated rows aggregate across rounds; every fit also learns from the real
rows the preset names (:mod:`train.sources`: LongMemEval's shipped rows, your labelled chat logs,
LoCoMo for research presets), and every source used or skipped is said in the log and the card.

Selection is honest: the best round is the one that ranks the **real validation rows** best
(LongMemEval questions no fit learns from), never a figure that is reported. Promotion compares that
round with the model already promoted, on the same rows, and never replaces a better model with a
worse one, nor with an equal one (``promote: always`` overrides). Every round writes
``checkpoints/rounds/round_NNN/`` (Lightning checkpoint, ONNX, resolved config, metrics, data manifest,
git commit), a git-ignored working folder: a run that promotes nothing leaves the committed files as
they were, and a promotion changes only the model, its card and the rounds plot.

Example:
    python -m train.loop --preset default --rounds 3
    python -m train.loop --preset tiny                  # the whole loop in about a minute
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from runtime.encoders import Embedder
from runtime.errors import MemirError
from runtime.record.redaction import redact
from runtime.scoring import UtilityScorer, make_baseline
from runtime.scoring.baselines import RecencyScorer
from utilitynet.export import check_parity, export_onnx
from utilitynet.features import spec_for

from . import fit as fit_stage
from .agent import run_episode
from .config import TrainConfig, load_preset
from .dataset import FitData, RowBatch, fit_data, load_rounds, round_dir, write_round
from .embedcache import CachedEmbedder, cached_embedder
from .eval.synthetic import evaluate_policies, leakage_check
from .fit.data import group_recall, roc_auc
from .label import OracleScorer, apply_corrections, counterfactual_agreement, label_decisions
from .simulate import Episode, generate, summarize
from .sources import RealRows, Source, load_lme_rows, warn

__all__ = ["run", "LoopResult", "main"]

CHECKPOINT_FILES = ("model.ckpt", "utilitynet.onnx", "config.yaml", "metrics.json", "data_manifest.json",
                    "git_commit.txt")


@dataclass
class LoopResult:
    rounds: list[dict[str, Any]]
    best_round: int
    promoted: Path
    seconds: float
    promotion: dict[str, Any]


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, timeout=10,
                               cwd=Path(__file__).resolve().parent).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def make_embedder(cfg: TrainConfig) -> CachedEmbedder:
    """The run's encoder behind the content-addressed cache under ``data_dir``."""
    return cached_embedder(cfg.encoder, Path(cfg.data_dir) / "cache" / "embeddings")


def _warm(emb: CachedEmbedder, episodes: Sequence[Episode]) -> None:
    texts = [redact(e.content).text for ep in episodes for e in ep.events]
    texts += [e.content for ep in episodes for e in ep.events]
    texts += [q.text for ep in episodes for q in ep.questions] + [ep.goal for ep in episodes]
    emb.warm(texts)


def _policies(cfg: TrainConfig, model_path: Path | None, emb: Embedder,
              names: Sequence[str] | None = None) -> dict[str, Callable[[Episode], Any]]:
    pols: dict[str, Callable[[Episode], Any]] = {}
    if model_path is not None:
        scorer = UtilityScorer(model_path)
        pols["utilitynet"] = lambda ep: scorer
    for name in (cfg.eval_policies if names is None else names):
        if name == "oracle":
            pols["oracle"] = lambda ep: OracleScorer(ep, emb, cfg.label)
        else:
            pols[name] = (lambda n: (lambda ep: make_baseline(n)))(name)
    return pols


def _bar(items: Sequence[Any], desc: str, progress: bool) -> Any:
    if not progress:
        return items
    from tqdm import tqdm
    return tqdm(items, desc=desc, unit="ep", leave=False)


def run_round(r: int, cfg: TrainConfig, emb: CachedEmbedder, train_eps: list[Episode], eval_eps: list[Episode],
              prev_model: Path | None, real: RealRows | None, progress: bool) -> dict[str, Any]:
    """One round: collect with the previous policy, label (counterfactual corrections applied), write
    data, fit on all rounds plus the real rows, export, evaluate on held-out families and score the
    real validation rows."""
    t0 = time.perf_counter()
    spec = spec_for(emb.dim, emb.encoder_id)
    policy = RecencyScorer() if prev_model is None else UtilityScorer(prev_model)
    rows = RowBatch(spec, round_index=r)
    runs, labels = [], []
    for ep in _bar(train_eps, f"round {r}: collect ({policy.name})", progress):
        run = run_episode(ep, policy, emb, cfg.agent, record=True)
        runs.append(run)
        labels.append(label_decisions(ep, run.decisions, emb, cfg.label))
    n_cf = min(cfg.counterfactual_samples, sum(len(lab.y) for lab in labels))
    cf = counterfactual_agreement(train_eps, runs, labels, policy, emb, cfg.agent, n_samples=n_cf, seed=cfg.seed + r)
    relabelled = apply_corrections(labels, cf.corrections)
    for ep, run, lab in zip(train_eps, runs, labels):
        rows.add_run(run, lab, family=ep.family)
    if r == 0 and cfg.locomo_files:
        from .locomo.rows import add_locomo_rows
        add_locomo_rows(rows, list(cfg.locomo_files), emb, weight=cfg.locomo_weight)
    if r == 0 and cfg.log_files:
        _add_log_rows(rows, cfg, emb)
    t_collect = time.perf_counter() - t0
    data_root = Path(cfg.data_dir)
    write_round(rows, round_dir(data_root, r), overwrite=True, manifest={
        "policy": policy.name, "seed": cfg.seed, "sim": cfg.to_dict()["sim"], "agent": cfg.to_dict()["agent"],
        "label": cfg.to_dict()["label"], "simulation": _stats(train_eps), "locomo_files": list(cfg.locomo_files),
        "log_files": list(cfg.log_files), "counterfactual_relabelled": relabelled})
    data = fit_data(load_rounds([round_dir(data_root, k) for k in range(r + 1)]), source_weights={"sim": cfg.sim_weight})
    if real is not None:  # the real training rows join every fit; their groups and decisions stay apart
        data = FitData.concat([data, real.train])
    y = data.y
    out = round_checkpoint(cfg, r)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    fitted = fit_stage.run(cfg.fit, data, spec=spec, out_dir=out / "lightning")
    shutil.copy(fitted.checkpoint_path, out / "model.ckpt")
    onnx_path = export_onnx(fitted.model, spec, out / "utilitynet.onnx", metadata={
        "round": r, "val_loss": fitted.best_val_loss, "rows": int(len(y)), "git_commit": git_commit()})
    parity = check_parity(fitted.model, onnx_path)
    evals = evaluate_policies(eval_eps, _policies(cfg, onnx_path, emb), emb, cfg.agent, cfg.eval_capacities,
                              progress=progress)
    pos = float((y > 0.2).mean())
    metrics = {
        "round": r, "collect_policy": policy.name, "rows": int(len(y)), "rows_this_round": len(rows),
        "positive_rate": pos, "label_counterfactual_agreement": cf.agreement, "counterfactual_samples": cf.n,
        "counterfactual_relabelled": relabelled, "validation": validation_score(onnx_path, real),
        "val_loss": fitted.best_val_loss, "fit": fitted.metrics, "epochs": fitted.epochs_run,
        "parity_max_abs_diff": {str(k): float(v) for k, v in parity.items()},
        "eval": evals, "seconds": {"collect": t_collect, "total": time.perf_counter() - t0},
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=float))
    (out / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    shutil.copy(round_dir(data_root, r) / "manifest.json", out / "data_manifest.json")
    (out / "git_commit.txt").write_text(git_commit() + "\n")
    shutil.rmtree(out / "lightning", ignore_errors=True)  # the best checkpoint is model.ckpt; logs → metrics
    return metrics


def _add_log_rows(rows: RowBatch, cfg: TrainConfig, emb: Embedder) -> None:
    from .logs import log_rows
    for cr in log_rows(list(cfg.log_files), emb):
        for dec in np.unique(cr.decision):  # one block per retention decision: the ranking loss compares within it
            m = np.flatnonzero(cr.decision == dec)
            rows.add(episode_id=f"log:{cr.conversation_id}", family="logs", decision=int(dec),
                     step=cr.step[m].tolist(), user_id="logs", item_ids=[cr.item_ids[i] for i in m], X=cr.X[m],
                     y=cr.y[m], w=cr.w[m], tags=[cr.tag[i] for i in m], kept=cr.kept[m], source="logs",
                     sessions=[cr.session[i] for i in m])


def _stats(eps: Sequence[Episode]) -> dict[str, Any]:
    st = summarize(eps)
    d = st.to_dict() if hasattr(st, "to_dict") else dict(getattr(st, "__dict__", {}))
    return json.loads(json.dumps(d, default=str))


def _success(m: dict[str, Any]) -> float:
    vals = [row["success"] for row in m["eval"] if row["policy"] == "utilitynet"]
    return float(np.mean(vals)) if vals else float("-inf")


def validation_score(model: Path, real: RealRows | None) -> dict[str, Any] | None:
    """How a model ranks the real validation rows (``None`` without any): ``recall``, the share of
    the evidence inside each decision group's cut (:func:`train.fit.group_recall`; what selection and
    promotion compare), and the pointwise ROC ``auc``."""
    if real is None or not real.has_validation:
        return None
    v = real.val
    try:
        u = UtilityScorer(model).score_features(v.X, v.sessions)
    except MemirError as e:  # another feature schema or encoder: it cannot be compared on these rows
        return {"recall": None, "auc": None, "rows": int(len(v)), "error": str(e).splitlines()[0]}
    s = np.log(np.maximum(u, 1e-300))
    return {"recall": group_recall(s, v.y, v.decisions, v.kept), "recall_se": _bootstrap_se(s, v),
            "auc": roc_auc(s, v.y > 0.5), "rows": int(len(v)),
            "data": "LongMemEval validation questions (rows no fit learns from)"}


def _bootstrap_se(s: np.ndarray, v: FitData, n: int = 200, seed: int = 0) -> float:
    """Standard error of the validation recall, by resampling whole questions (split groups)."""
    qs = np.unique(v.groups)
    rows_of = {q: np.flatnonzero(v.groups == q) for q in qs}
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        pick = rng.choice(qs, size=len(qs), replace=True)
        idx = np.concatenate([rows_of[q] for q in pick])
        # a question drawn twice counts twice: its decision groups get distinct codes per draw
        dec = np.concatenate([v.decisions[rows_of[q]] * len(qs) + k for k, q in enumerate(pick)])
        r = group_recall(s[idx], v.y[idx], dec, v.kept[idx])
        if np.isfinite(r):
            out.append(r)
    return float(np.std(out, ddof=1)) if len(out) > 1 else float("nan")


def _selection(m: dict[str, Any]) -> float:
    v = m.get("validation")
    return float(v["recall"]) if v and v.get("recall") is not None else _success(m)


def select_round(rounds: list[dict[str, Any]]) -> tuple[int, str]:
    """The round to promote, and why: the **earliest** round whose validation recall is within one
    standard error of the best round's (the one-standard-error rule). Later rounds add rows the model
    itself collected in the simulator; a gain smaller than the validation set can resolve is not worth
    the drift towards the simulator that comes with them. Without validation rows: the best held-out
    simulator success."""
    best = max(range(len(rounds)), key=lambda i: _selection(rounds[i]))
    v = rounds[best].get("validation") or {}
    se = v.get("recall_se")
    if v.get("recall") is None or se is None or not np.isfinite(se):
        return best, f"round {best}: the best selection score"
    floor = float(v["recall"]) - float(se)
    pick = min(i for i in range(len(rounds)) if _selection(rounds[i]) >= floor)
    if pick == best:
        return best, f"round {best}: the best validation recall ({v['recall']:.4f})"
    return pick, (f"round {pick}: validation recall {_selection(rounds[pick]):.4f}, within one standard error "
                  f"({se:.4f}) of the best (round {best}, {v['recall']:.4f}): the earliest such round")


def round_checkpoint(cfg: TrainConfig, r: int) -> Path:
    """Where round ``r``'s checkpoint, ONNX model and metrics go: ``<checkpoints_dir>/rounds/round_NNN``,
    a working folder (git-ignored). Only a promoted model and its card (and the rounds plot) are
    written beside it, so a run that promotes nothing leaves the committed files as they were."""
    return Path(cfg.checkpoints_dir) / "rounds" / f"round_{r:03d}"


def _research_only(card: Path) -> bool:
    """Whether a model card says its model was fit on LoCoMo (CC BY-NC): older cards only list the files."""
    try:
        c = json.loads(card.read_text())
    except (OSError, ValueError):
        return False
    if any(s.get("name") == "locomo" and s.get("used") for s in c.get("sources") or []):
        return True
    return bool((c.get("config") or {}).get("locomo_files")) and not c.get("sources")


def promote(cfg: TrainConfig, rounds: list[dict[str, Any]], emb: Embedder, leakage: dict[str, Any],
            sources: list[Source], real: RealRows | None, final: list[dict[str, Any]] | None = None
            ) -> tuple[int, Path, dict[str, Any]]:
    """Pick a round on the validation rows (:func:`select_round`); promote it unless the incumbent is
    better there."""
    best, chosen_why = select_round(rounds)
    src = round_checkpoint(cfg, best)
    dst = Path(cfg.checkpoints_dir) / "utilitynet.onnx"
    research = any(s.used and s.name == "locomo" for s in sources)
    cand = rounds[best].get("validation")
    inc = validation_score(dst, real) if dst.is_file() else None
    c_rec, i_rec = (cand or {}).get("recall"), (inc or {}).get("recall")
    inc_research = _research_only(Path(cfg.checkpoints_dir) / "model_card.json")
    if not dst.is_file():
        decision = {"promoted": True, "why": "no model was promoted before"}
    elif inc_research and not research:
        decision = {"promoted": True, "why": "the promoted model was fit on CC BY-NC data (LoCoMo) and may not stay "
                                             "the shipped default"}
    elif cfg.promote == "always":
        decision = {"promoted": True, "why": "promote: always"}
    elif c_rec is None:
        decision = {"promoted": False, "why": "no real validation rows to compare on: the promoted model is kept"}
    elif i_rec is not None and i_rec >= c_rec:  # a tie keeps the incumbent: a reproduced model changes nothing
        decision = {"promoted": False, "why": f"the promoted model keeps {'more' if i_rec > c_rec else 'as much'} "
                                               f"validation evidence ({i_rec:.4f} {'>' if i_rec > c_rec else '='} "
                                               f"{c_rec:.4f}): kept"}
    else:
        decision = {"promoted": True, "why": f"validation recall {c_rec:.4f} vs the promoted model's "
                                             f"{'n/a (another feature schema)' if i_rec is None else f'{i_rec:.4f}'}"}
    decision.update({"round": best, "selection": chosen_why, "candidate_validation_recall": c_rec,
                     "incumbent_validation_recall": i_rec})
    warn(f"promotion: round {best} {'PROMOTED' if decision['promoted'] else 'not promoted'} — {decision['why']}")
    if not decision["promoted"]:
        return best, dst, decision
    shutil.copy(src / "utilitynet.onnx", dst)
    plot = src.parent / "rounds.png"
    if plot.is_file():  # the promoted model's rounds, beside its card
        shutil.copy(plot, Path(cfg.checkpoints_dir) / "rounds.png")
    spec = spec_for(emb.dim, emb.encoder_id)
    card = {
        "model": "utilitynet", "feature_schema_version": spec.version, "n_features": spec.n_features,
        "encoder_id": emb.encoder_id, "round": best, "git_commit": git_commit(),
        "license_note": ("research only: fit on CC BY-NC data (LoCoMo); not for the shipped default" if research
                         else "fit on the simulator and MIT-licensed data only"),
        "sources": [s.to_dict() for s in sources], "promotion": decision,
        "training_data": {"rows": rounds[best]["rows"], "positive_rate": rounds[best]["positive_rate"],
                          "manifest": json.loads((src / "data_manifest.json").read_text())},
        "figures": {
            "validation": {**(cand or {}), "used_for": "choosing the round and promotion (never reported as a "
                                                      "generalisation figure)"},
            "heldout_simulator": {"rows": rounds[best]["eval"], "data": "simulator, held-out families, eval "
                                                                        "templates and entities"},
        },
        "metrics": {k: rounds[best][k] for k in ("val_loss", "label_counterfactual_agreement",
                                                 "counterfactual_relabelled")},
        "final_eval": final or rounds[best]["eval"], "leakage": leakage,
        "rounds": [{"round": m["round"], "validation_recall": (m.get("validation") or {}).get("recall"),
                    "validation_recall_se": (m.get("validation") or {}).get("recall_se"),
                    "validation_auc": (m.get("validation") or {}).get("auc"),
                    "heldout_success": _success(m)} for m in rounds],
        "config": cfg.to_dict(),
    }
    (Path(cfg.checkpoints_dir) / "model_card.json").write_text(json.dumps(card, indent=2, default=float))
    return best, dst, decision


def plot_rounds(rounds: list[dict[str, Any]], path: Path) -> None:
    """Held-out question success per round, per policy and capacity."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    series: dict[tuple[str, float], list[float]] = {}
    for m in rounds:
        for row in m["eval"]:
            series.setdefault((row["policy"], row["capacity"]), []).append(row["success"])
    for (pol, cap), ys in sorted(series.items()):
        ax.plot(range(len(ys)), ys, marker="o", label=f"{pol} @ {cap:.0%}")
    ax.set_xticks(range(len(rounds)))
    ax.set_xlabel("round")
    ax.set_ylabel("question success (held-out families)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(cfg: TrainConfig, *, progress: bool = True) -> LoopResult:
    """Run every round of ``cfg``; returns the per-round metrics and the promoted model path."""
    t0 = time.perf_counter()
    emb = make_embedder(cfg)
    spec = spec_for(emb.dim, emb.encoder_id)
    real, lme_source = load_lme_rows(cfg.lme_rows, spec)
    sources = [Source("simulator", True, "generated", {"training episodes": cfg.sim.n_episodes,
                                                     "held-out episodes": cfg.eval_sim.n_episodes}),
               lme_source,
               Source("chat logs", bool(cfg.log_files), "yours", {"files": len(cfg.log_files)},
                      reason=None if cfg.log_files else "none configured (log_files)"),
               Source("locomo", bool(cfg.locomo_files), "CC BY-NC 4.0: research only",
                      {"files": len(cfg.locomo_files)},
                      reason=None if cfg.locomo_files else "not in this preset (CC BY-NC)")]
    for s in sources:
        warn(s.line())
    train_eps = generate(cfg.sim)
    eval_eps = generate(cfg.eval_sim)
    _warm(emb, train_eps + eval_eps)
    emb.save()
    rounds: list[dict[str, Any]] = []
    prev: Path | None = None
    for r in range(cfg.rounds):
        m = run_round(r, cfg, emb, train_eps, eval_eps, prev, real, progress)
        rounds.append(m)
        prev = round_checkpoint(cfg, r) / "utilitynet.onnx"
        emb.save()
        if progress:
            util = [f"{row['capacity']:.0%}: {row['success']:.3f}" for row in m["eval"] if row["policy"] == "utilitynet"]
            val = (m.get("validation") or {}).get("auc")
            print(f"round {r}: val_loss={m['val_loss']:.4f} cf_agreement={m['label_counterfactual_agreement']:.2f} "
                  f"(relabelled {m['counterfactual_relabelled']}) validation AUC "
                  f"{'n/a' if val is None else f'{val:.4f}'}; held-out success {', '.join(util)}", file=sys.stderr)
    leakage = leakage_check(eval_eps, emb)
    final: list[dict[str, Any]] = []
    best_round, _ = select_round(rounds)
    if cfg.final_policies:
        final = [row for row in rounds[best_round]["eval"]] + evaluate_policies(
            eval_eps, {k: v for k, v in _policies(cfg, None, emb, cfg.final_policies).items()
                       if k not in {row["policy"] for row in rounds[best_round]["eval"]}},
            emb, cfg.agent, cfg.eval_capacities, progress=progress)
    plot_rounds(rounds, round_checkpoint(cfg, 0).parent / "rounds.png")
    best, promoted, decision = promote(cfg, rounds, emb, leakage, sources, real, final)
    return LoopResult(rounds, best, promoted, time.perf_counter() - t0, decision)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m train.loop", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="default", help="train/configs/<preset>.yaml or a YAML path")
    p.add_argument("--rounds", type=int, default=None, help="override the preset's number of rounds")
    p.add_argument("--checkpoints-dir", default=None)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--log-files", nargs="+", default=None, metavar="FILE",
                   help="your labelled chat logs (train.logs format), added to every round")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    try:
        cfg = load_preset(a.preset, rounds=a.rounds, checkpoints_dir=a.checkpoints_dir, data_dir=a.data_dir,
                          **({"log_files": tuple(a.log_files)} if a.log_files else {}))
    except MemirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res = run(cfg, progress=not a.quiet)
    print(json.dumps({"best_round": res.best_round, "promoted": str(res.promoted), "promotion": res.promotion,
                      "seconds": round(res.seconds, 1),
                      "rounds": [{"round": m["round"], "val_loss": m["val_loss"],
                                  "cf_agreement": m["label_counterfactual_agreement"],
                                  "eval": [{k: row[k] for k in ("policy", "capacity", "success", "key_fact_recall")}
                                           for row in m["eval"]]} for m in res.rounds]}, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
