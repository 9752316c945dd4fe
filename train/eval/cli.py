"""Evaluate retention policies on the production path: real conversations and held-out simulated tasks.

Commands (``python -m train.eval COMMAND --help`` for each):

- ``lme FILE [FILE ...]``: LongMemEval (its own layout, ``.json`` or ``.json.gz``): every question's
  haystack streamed through the public API under each policy and capacity; evidence recall overall
  and per question type (:mod:`train.eval.lme`). Streams; embeddings are cached on disk.
- ``lme-cv FILE``: 5-fold cross-validation by question of the utility model and the bag-of-words
  baseline, fit on the other folds' rows (:mod:`train.eval.lme_cv`).
- ``locomo FILE [FILE ...]``: conversations in LoCoMo's layout; evidence recall (categories 1–4)
  and retrieval recall@k (:mod:`train.eval.locomo`).
- ``locomo-loo FILE``: leave-one-conversation-out fits of the utility model (research: CC BY-NC data).
- ``synthetic``: held-out families of the simulator: question success, key-fact recall, stale answers,
  forget precision, constraint violations, update latency, cross-user leakage.
- ``confusion``: a generated test set confusable across users, roles and sources; typed retrieval vs
  one untyped pooled index: confusion rates, role consistency, citation accuracy, target recall@k,
  rumour over spec (:mod:`train.eval.confusion`); writes ``OUT.json``, ``OUT.md`` and ``OUT.png``.
- ``all``: what ``make eval`` runs; writes ``OUT.json``, a Markdown summary and PNG plots next to it.
- ``summaries``: session summaries on LongMemEval dev: the share of evidence turns whose key facts
  survive in a working-tier summary once the raw turns are archived, vs lead/longest baselines
  (:mod:`train.eval.summaries`); writes ``OUT.json`` and ``OUT.png``.
- ``discovery``: type discovery on simulator episodes with a planted new category (warranty claims):
  purity and recall of the undescribed clusters, a plot next to ``OUT`` (:mod:`train.eval.discovery`).
- ``tiers``: cold-tier vector formats (float32/float16/int8) on LongMemEval dev through the public
  API: every haystack turn archived, ``recall(tier="archive")``; evidence recall@10, loss vs
  float32 with a bootstrap CI, top-10 agreement, bytes/vector, recall latency
  (:mod:`train.eval.tiers`); writes ``OUT.json`` and ``OUT.png``.
- ``seeds``: one Markdown table and one four-panel figure of the seed features' evaluations, read
  from the reports of ``summaries``, ``tiers``, ``discovery`` and ``confusion`` (:mod:`train.eval.seeds`).

Examples:
    python -m train.eval lme ../shared/data/longmemeval/longmemeval-s-dev.json.gz \\
        --capacities 0.05 0.1 0.2 --policies utilitynet recency longest_user oracle --out reports/lme.json
    python -m train.eval locomo ../shared/data/locomo/locomo-dev.json --capacities 0.1 0.2 \\
        --policies utilitynet recency longest oracle --out reports/locomo.json
    python -m train.eval synthetic --episodes 8 --capacities 0.1 0.2 --out reports/sim.json
    python -m train.eval all --out reports/eval.json
    python -m train.eval discovery --out reports/discovery.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime.errors import MemirError
from runtime.scoring import Scorer

from ..lme.reader import LmeQuestion
from .lme import LME_CAPACITIES, LME_POLICIES, evaluate_lme, iter_questions, lme_oracle, lme_table
from .locomo import (
    DEFAULT_LOCOMO,
    LOCOMO_POLICIES,
    embedder,
    evaluate_locomo,
    load_all,
    locomo_payload,
    locomo_table,
    loo_locomo,
    write_json,
)
from .synthetic import evaluate_synthetic, sim_table

__all__ = ["main"]

SIM_POLICIES = LOCOMO_POLICIES
DEFAULT_LME = DEFAULT_LOCOMO.parents[1] / "longmemeval" / "longmemeval-s-dev.json.gz"
DEFAULT_CACHE = Path("data") / "cache" / "embeddings"


def _lme_sample_args(p: argparse.ArgumentParser, file_help: str) -> None:
    """--file / --questions / --limit / --seed: which LongMemEval dev questions an evaluation runs on."""
    p.add_argument("--file", default=None, help=file_help)
    p.add_argument("--questions", choices=("held-out", "all"), default="held-out",
                   help="held-out = the dev questions the shipped utility model was not fit on (default)")
    p.add_argument("--limit", type=int, default=0, help="sample this many questions with --seed (0 = all)")
    p.add_argument("--seed", type=int, default=0)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m train.eval", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    lm = sub.add_parser("lme", help="LongMemEval on the production path",
                        description="Example: python -m train.eval lme longmemeval-s-dev.json.gz --capacities "
                                    "0.05 0.1 0.2 --policies utilitynet longest_user oracle --out lme.json")
    lm.add_argument("files", nargs="+", help="LongMemEval files (.json or .json.gz), read unchanged")
    lm.add_argument("--capacities", nargs="+", type=float, default=list(LME_CAPACITIES))
    lm.add_argument("--policies", nargs="+", default=list(LME_POLICIES), choices=LME_POLICIES)
    lm.add_argument("--model", default=None, help="ONNX utility model (default: the shipped one)")
    lm.add_argument("--limit", type=int, default=None, help="only the first N questions (smoke runs)")
    lm.add_argument("--cache", default=str(DEFAULT_CACHE), help="embedding cache directory (content-addressed)")
    lm.add_argument("--out", required=True)
    lm.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="processes replaying questions side by side (default: every CPU, e.g. 2)")
    cv = sub.add_parser("lme-cv", help="5-fold cross-validation by question (utility model, bag-of-words)",
                        description="Example: python -m train.eval lme-cv longmemeval-s-dev.json.gz --out cv.json")
    cv.add_argument("file")
    cv.add_argument("--folds", type=int, default=5)
    cv.add_argument("--capacities", nargs="*", type=float, default=list(LME_CAPACITIES),
                    help="budgets as a share of each stream's turns (default 0.05 0.1 0.2; none with "
                         "--budgets: token budgets only)")
    cv.add_argument("--budgets", nargs="*", type=float, default=[],
                    help="also budgets as a share of each stream's tokens (e.g. 0.05 0.1 0.2)")
    cv.add_argument("--baselines", nargs="*", default=["recency", "longest", "longest_user", "memoryos",
                                                       "generative_agents", "oracle"], choices=LME_POLICIES)
    cv.add_argument("--variant", action="append", default=[], metavar="NAME=JSON",
                    help="a learned variant: fit-setting overrides as JSON (repeatable), e.g. "
                         "'no-share={\"session_share\": false}'; default: one, utilitynet-cv, the preset's settings")
    cv.add_argument("--no-bow", action="store_true", help="skip the bag-of-words baseline")
    cv.add_argument("--models", default=None, help="keep the fold models here (<variant>/fold<k>.onnx)")
    cv.add_argument("--preset", default="default", help="train preset whose fit settings are used")
    cv.add_argument("--rows", default="data/lme_rows", help="where the per-question training rows are cached")
    cv.add_argument("--held", choices=("evidence", "uniform"), default=None,
                    help="which held decisions become training groups (train.conversation_rows; default: "
                         "the row configuration's)")
    cv.add_argument("--cache", default=str(DEFAULT_CACHE))
    cv.add_argument("--validation-fold", type=int, default=0,
                    help="the fold make train selects on: never fit on, never reported (default 0)")
    cv.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: every CPU)")
    cd = sub.add_parser("card", help="record a report's figures in a model card, with the data they come from",
                        description="Example: python -m train.eval card reports/locomo.json --key locomo_dev "
                                    "--data 'LoCoMo dev, 5 conversations; never trained on' --card "
                                    "checkpoints/model_card.json")
    cd.add_argument("report", help="a JSON report written by this command (locomo, lme, lme-cv)")
    cd.add_argument("--key", required=True, help="the name under the card's figures (e.g. locomo_dev)")
    cd.add_argument("--data", required=True, help="which data the figures come from, in words")
    cd.add_argument("--card", default="checkpoints/model_card.json", help="the model card to update")
    cv.add_argument("--time-budget-min", type=float, default=None,
                    help="start no new question after this many minutes of evaluation (the report says how many "
                         "questions it covers; every policy runs on each)")
    cv.add_argument("--out", required=True)
    lo = sub.add_parser("locomo", help="conversation benchmark (LoCoMo layout)",
                        description="Example: python -m train.eval locomo conv.json --capacities 0.1 0.2 "
                                    "--policies utilitynet recency longest oracle --out out.json")
    lo.add_argument("files", nargs="+")
    lo.add_argument("--capacities", nargs="*", type=float, default=[0.1, 0.2],
                    help="budgets as a share of each conversation's turns (default 0.1 0.2; none with --budgets: "
                         "token budgets only)")
    lo.add_argument("--budgets", nargs="*", type=float, default=[],
                    help="also budgets as a share of each conversation's tokens (e.g. 0.05 0.1 0.2)")
    lo.add_argument("--policies", nargs="+", default=list(LOCOMO_POLICIES), choices=LOCOMO_POLICIES)
    lo.add_argument("--model", default=None, help="ONNX utility model (default: the shipped one)")
    lo.add_argument("--k", type=int, default=5, help="hits per question for retrieval recall@k")
    lo.add_argument("--out", required=True)
    loo = sub.add_parser("locomo-loo", help="leave-one-conversation-out fit + evaluation of the utility model",
                         description="Example: python -m train.eval locomo-loo conv.json --out loo.json")
    loo.add_argument("files", nargs="+")
    loo.add_argument("--capacities", nargs="+", type=float, default=[0.1, 0.2])
    loo.add_argument("--k", type=int, default=5)
    loo.add_argument("--sim-rounds", nargs="*", default=[], help="data/round_NNN dirs of simulated rows to add")
    loo.add_argument("--fit", default="{}", help='JSON overrides of the LOO FitConfig, e.g. \'{"weight_decay": 1}\'')
    loo.add_argument("--out", required=True)
    sy = sub.add_parser("synthetic", help="held-out simulated families",
                        description="Example: python -m train.eval synthetic --episodes 8 --out sim.json")
    sy.add_argument("--episodes", type=int, default=16)
    sy.add_argument("--capacities", nargs="+", type=float, default=[0.1, 0.2])
    sy.add_argument("--policies", nargs="+", default=list(SIM_POLICIES), choices=SIM_POLICIES)
    sy.add_argument("--model", default=None)
    sy.add_argument("--preset", default="default")
    sy.add_argument("--out", required=True)
    al = sub.add_parser("all", help="synthetic + locomo dev split; JSON, Markdown and plots (make eval)",
                        description="Example: python -m train.eval all --out reports/eval.json")
    al.add_argument("--out", default="reports/eval.json")
    al.add_argument("--episodes", type=int, default=16)
    al.add_argument("--capacities", nargs="+", type=float, default=[0.1, 0.2, 0.3])
    al.add_argument("--preset", default="default", help="train preset whose eval_sim/agent/encoder are used")
    al.add_argument("--locomo", nargs="*", default=[str(DEFAULT_LOCOMO)])
    al.add_argument("--model", default=None)
    cf = sub.add_parser("confusion", help="typed vs untyped pooled retrieval on a confusable test set",
                        description="Example: python -m train.eval confusion --out reports/confusion.json")
    cf.add_argument("--users", type=int, default=60)
    cf.add_argument("--topics-per-user", type=int, default=3)
    cf.add_argument("--k", type=int, default=5)
    cf.add_argument("--seed", type=int, default=0)
    cf.add_argument("--encoder", choices=("onnx", "hash"), default="onnx",
                    help="onnx = all-MiniLM-L6-v2 (the reported figures); hash = fast test double")
    cf.add_argument("--out", default="reports/confusion.json")
    di = sub.add_parser("discovery", help="type discovery: planted new category, purity and recall",
                        description="Example: python -m train.eval discovery --out reports/discovery.json")
    di.add_argument("--episodes", type=int, default=6, help="simulator episodes (default 6)")
    di.add_argument("--seed", type=int, default=7, help="simulator and planting seed (default 7)")
    di.add_argument("--planted", type=int, default=30, help="planted memories per episode (default 30)")
    di.add_argument("--sizes", nargs="+", type=int, default=[3, 5, 8, 12], help="min_cluster_size values swept")
    di.add_argument("--out", default="reports/discovery.json")
    sm = sub.add_parser("summaries", help="session summaries: evidence-turn fact coverage vs lead/longest baselines",
                        description="Example: python -m train.eval summaries --out reports/summaries.json")
    _lme_sample_args(sm, "a LongMemEval file (default: the oracle dev split)")
    sm.add_argument("--threshold", type=float, default=0.5, help="fact recall that counts as covered (default 0.5)")
    sm.add_argument("--out", default="reports/summaries.json")
    ti = sub.add_parser("tiers", help="cold-tier vector formats: archive recall@10 loss, bytes/vector, latency",
                        description="Example: python -m train.eval tiers --limit 24 --out reports/tiers.json")
    _lme_sample_args(ti, "a LongMemEval file (default: the S dev split, full haystacks)")
    ti.add_argument("--k", type=int, default=10)
    ti.add_argument("--repeats", type=int, default=5, help="timed recalls per question and format (default 5)")
    ti.add_argument("--cache", default=str(DEFAULT_CACHE), help="embedding cache directory (content-addressed)")
    ti.add_argument("--workdir", default=None, help="where the temporary stores go (default: the system temp dir; "
                    "a tmpfs such as /dev/shm makes the writes faster)")
    ti.add_argument("--out", default="reports/tiers.json")
    se = sub.add_parser("seeds", help="one table + figure of the seed features' reports (summaries, tiers, "
                        "discovery, confusion)", description="Example: python -m train.eval seeds --reports reports "
                        "--out reports/seeds.md (reads each command's JSON report; run those first)")
    se.add_argument("--reports", default="reports", help="directory holding summaries/tiers/discovery/confusion.json")
    se.add_argument("--out", default="reports/seeds.md")
    for p in (lm, cv, lo, loo, sy, al, di, sm, ti):
        p.add_argument("--no-progress", action="store_true", help="no progress bars")
    for p in (lm, lo, loo, di, sm, ti):
        p.add_argument("--encoder", choices=("onnx", "hash"), default="onnx",
                       help="onnx = all-MiniLM-L6-v2 (production); hash = fast test double")
    return ap


def _lme_scorer(model: str | None) -> Any:
    cache: dict[str, Scorer] = {}

    def make(name: str, q: LmeQuestion) -> Scorer:
        if name == "oracle":
            return lme_oracle(q)
        if name not in cache:
            if name == "utilitynet":
                from runtime.scoring import UtilityScorer
                cache[name] = UtilityScorer(model)
            else:
                from runtime.scoring import make_baseline
                cache[name] = make_baseline(name)  # type: ignore[assignment]
        return cache[name]

    return make


def _cached(kind: str, cache: str) -> Any:
    from ..embedcache import CachedEmbedder
    return CachedEmbedder(embedder(kind), cache)


def record_in_card(card: Path, key: str, data: str, report: Path) -> None:
    """Put a report's recall per policy and capacity under ``figures[key]`` of a model card, with the
    data it was measured on and the command that produced it (the report's own ``args``)."""
    rep = json.loads(report.read_text())
    recall = {pol: {cap: round(float(v["recall"]), 4) for cap, v in caps.items() if isinstance(v, dict) and "recall" in v}
              for pol, caps in rep.get("summary", {}).items() if isinstance(caps, dict)}
    c = json.loads(card.read_text())
    c.setdefault("figures", {})[key] = {"data": data, "report": str(report), "args": rep.get("args"),
                                        "note": rep.get("note"), "questions": rep.get("questions", {}).get("reported")
                                        if isinstance(rep.get("questions"), dict) else None,
                                        "recall": recall}
    card.write_text(json.dumps(c, indent=2, default=float))


def _variants(specs: Sequence[str]) -> dict[str, dict[str, Any]] | None:
    """``NAME=JSON`` arguments → ``{name: fit overrides}`` (``None``: the default single variant)."""
    if not specs:
        return None
    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        name, sep, body = spec.partition("=")
        if not sep or not name:
            raise MemirError(f"--variant {spec!r}: write NAME=JSON, e.g. 'no-share={{\"session_share\": false}}'")
        try:
            overrides = json.loads(body) if body.strip() else {}
        except json.JSONDecodeError as e:
            raise MemirError(f"--variant {name}: the overrides are not JSON ({e})") from e
        if not isinstance(overrides, dict):
            raise MemirError(f"--variant {name}: the overrides must be a JSON object of fit settings")
        out[name] = overrides
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    progress = not getattr(args, "no_progress", False)
    t0 = time.perf_counter()
    record = {k: v for k, v in vars(args).items() if k != "no_progress"}
    try:
        if args.cmd == "card":
            record_in_card(Path(args.card), args.key, args.data, Path(args.report))
            print(f"recorded {args.report} in {args.card} as figures.{args.key}")
            return 0
        if args.cmd == "lme":
            emb = _cached(args.encoder, args.cache)
            qs = iter_questions(args.files)
            if args.limit is not None:
                import itertools
                qs = itertools.islice(qs, args.limit)
            summary = evaluate_lme(qs, _lme_scorer(args.model), args.policies, args.capacities, emb, out=args.out,
                                   args=record, total=args.limit, progress=progress, workers=args.workers)
            from .report import write_report
            write_report({"runs": [], "summary": summary, "note": f"Files: {', '.join(map(str, args.files))}."},
                         Path(args.out))
            print(lme_table(summary))
        elif args.cmd == "lme-cv":
            from ..conversation_rows import RowConfig
            from .lme_cv import run_cv
            if not args.capacities and not args.budgets:
                raise SystemExit("lme-cv: nothing to evaluate; give --capacities and/or --budgets")
            variants = _variants(args.variant)
            payload: dict[str, Any] = run_cv(
                args.file, folds=args.folds, capacities=args.capacities, budgets=args.budgets,
                baselines=args.baselines, variants=variants, bow=not args.no_bow, preset=args.preset,
                rows_dir=args.rows, cache=args.cache, progress=progress, validation_fold=args.validation_fold,
                workers=args.workers, models_dir=args.models,
                row_config=RowConfig() if args.held is None else RowConfig(held=args.held),
                time_budget_s=None if args.time_budget_min is None else 60 * args.time_budget_min)
            payload["args"] = record
            qn = payload["questions"]
            learned = ", ".join(list(payload["variants"]) + ([] if args.no_bow else ["bow"]))
            payload["note"] = (f"{args.folds}-fold cross-validation by question; fold {args.validation_fold} (the "
                               f"promotion fold) is never fit on and never reported. {learned} are fit on "
                               "the other training folds; every policy is scored on the same questions: "
                               f"{qn['reported']} of the {qn['eligible']} held-out questions"
                               + ("." if qn["complete"] else " (the time budget ended the run; the first questions "
                                                              "in file order)."))
            write_json(args.out, payload)
            from .report import write_report
            write_report(payload, Path(args.out))
            print(lme_table(payload["summary"]))
        elif args.cmd in ("locomo", "locomo-loo"):
            convs = load_all(args.files)
            emb = embedder(args.encoder)
            if args.cmd == "locomo":
                if not args.capacities and not args.budgets:
                    raise MemirError("nothing to evaluate: give --capacities and/or --budgets (shares in (0, 1])")
                runs = evaluate_locomo(convs, args.policies, args.capacities, emb, model=args.model, k=args.k,
                                       progress=progress, budgets=args.budgets)
            else:
                runs = loo_locomo(convs, args.capacities, emb, k=args.k, fit_overrides=json.loads(args.fit),
                                  sim_rounds=args.sim_rounds, progress=progress)
            payload = locomo_payload(runs, record)
            write_json(args.out, payload)
            print(locomo_table(payload["summary"]))
        elif args.cmd == "confusion":
            from . import confusion as cf
            data = cf.generate(args.users, args.topics_per_user, seed=args.seed)
            emb = embedder(args.encoder)
            payload = cf.evaluate_confusion(data, emb, k=args.k)
            payload.update(seed=args.seed, args=record, confusability=cf.near_duplicate_share(data, emb))
            paths = cf.write_confusion_report(payload, args.out)
            print(cf.confusion_table(payload))
            print("wrote " + ", ".join(map(str, paths)), file=sys.stderr)
        elif args.cmd == "discovery":
            import tempfile

            from .discovery import evaluate_discovery
            out = Path(args.out)
            with tempfile.TemporaryDirectory() as tmp:
                payload = evaluate_discovery(embedder(args.encoder), episodes=args.episodes, seed=args.seed,
                                             n_planted=args.planted, sizes=args.sizes, workdir=Path(tmp),
                                             plot=out.with_suffix(".png"), progress=progress)
            payload["args"] = record
            write_json(out, payload)
            print("\n".join(f"min_cluster_size {k}: purity {v['purity']:.3f}, recall {v['recall']:.3f}, "
                             f"{v['undescribed']:.1f} undescribed clusters" for k, v in payload["summary"].items()))
        elif args.cmd == "summaries":
            from . import summaries as su
            payload = su.evaluate_summaries(args.file or su.DEFAULT_FILE, limit=args.limit or None, seed=args.seed,
                                            emb=embedder(args.encoder), threshold=args.threshold, progress=progress,
                                            only=su.held_out_questions() if args.questions == "held-out" else None)
            payload["args"].update({k: v for k, v in record.items() if v is not None and k != "encoder"})
            write_json(args.out, payload)
            su.plot_summaries(payload, Path(args.out).with_suffix(".png"))
            print("\n".join(f"{m}: coverage {v['coverage']}, demoted coverage {v['coverage_demoted']}, mean fact "
                             f"recall {v['mean_fact_recall']} (n={v['n']})" for m, v in payload["summary"].items()))
        elif args.cmd == "seeds":
            from . import seeds
            reports = seeds.load_reports(args.reports)
            table = seeds.seeds_table(reports)
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            png = seeds.plot_seeds(reports, out.with_suffix(".png"))
            out.write_text(f"# Seed features: evaluation table\n\n{table}\n\n![the four evaluations]({png.name})\n")
            print(table)
        elif args.cmd == "tiers":
            from . import tiers as tr
            from .summaries import held_out_questions
            tqs = tr.load_questions(args.file or tr.DEFAULT_FILE, limit=args.limit or None, seed=args.seed,
                                    only=held_out_questions() if args.questions == "held-out" else None)
            payload = tr.evaluate_tiers(tqs, _cached(args.encoder, args.cache), k=args.k, repeats=args.repeats,
                                        seed=args.seed, workdir=args.workdir, progress=progress)
            payload["args"] = {**record, "file": args.file or tr.DEFAULT_FILE}
            write_json(args.out, payload)
            tr.plot_tiers(payload, Path(args.out).with_suffix(".png"))
            print(tr.tiers_table(payload))
        elif args.cmd == "synthetic":
            res = evaluate_synthetic(args.episodes, args.capacities, args.policies, model=args.model,
                                     preset=args.preset, progress=progress)
            write_json(args.out, {"synthetic": res})
            print(sim_table(res["rows"]))
        else:
            from .report import write_report
            payload = {"synthetic": evaluate_synthetic(
                args.episodes, args.capacities, SIM_POLICIES, model=args.model, preset=args.preset, progress=progress)}
            files = [f for f in args.locomo if Path(f).is_file()]
            if files:
                convs = load_all(files)
                runs = evaluate_locomo(convs, LOCOMO_POLICIES if _has_model(args.model) else
                                       [p for p in LOCOMO_POLICIES if p != "utilitynet"],
                                       args.capacities, embedder(), model=args.model, progress=progress)
                payload["locomo"] = locomo_payload(runs, {"files": files, "capacities": args.capacities})
            write_json(args.out, payload)
            print(write_report(payload, Path(args.out)))
    except MemirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"done in {time.perf_counter() - t0:.0f}s -> {args.out}", file=sys.stderr)
    return 0


def _has_model(model: str | None) -> bool:
    from runtime.scoring import default_model_path
    ok = Path(model).is_file() if model else default_model_path().is_file()
    if not ok:
        print("no utility model found (run `make train`): utilitynet is left out", file=sys.stderr)
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
