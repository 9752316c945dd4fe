"""Policies on held-out simulated tasks: question success, key-fact recall, stale answers, forget
precision, constraint violations, update latency and cross-user leakage (seed 001 §6, seed 000 §5.3)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from runtime.encoders import Embedder
from runtime.scoring import Scorer
from runtime.store import MemoryStore, StoreConfig

from ..agent import AgentConfig, EpisodeRun, run_episode
from ..simulate import Episode

__all__ = ["PolicyFactory", "evaluate_policies", "evaluate_synthetic", "leakage_check", "multi_user_episodes", "sim_table",
           "summarize_runs"]

PolicyFactory = Callable[[Episode], Scorer]


def _forget_precision(ep: Episode, run: EpisodeRun) -> tuple[int, int]:
    """(forgotten items never needed afterwards, forgotten items)."""
    need: dict[str, list[int]] = {}
    for q in ep.questions:
        for a in q.answer_event_ids:
            need.setdefault(a, []).append(q.step)
    good = sum(1 for mid, s in run.forgotten.items() if not any(t >= s for t in need.get(mid, [])))
    return good, len(run.forgotten)


def summarize_runs(pairs: Sequence[tuple[Episode, EpisodeRun]]) -> dict[str, Any]:
    qs = [q for _, r in pairs for q in r.questions]
    good = total = 0
    for ep, r in pairs:
        g, t = _forget_precision(ep, r)
        good, total = good + g, total + t
    lat = np.array([x for _, r in pairs for x in r.update_ms]) if pairs else np.zeros(0)
    mean = (lambda xs: float(np.mean(xs)) if len(xs) else float("nan"))
    return {
        "questions": len(qs),
        "success": mean([q.success for q in qs]),
        "key_fact_recall": mean([q.answer_kept for q in qs]),
        "stale_answer_rate": mean([q.stale for q in qs]),
        "forget_precision": good / total if total else float("nan"),
        "constraint_violations": int(sum(r.violations for _, r in pairs)),
        "cross_user_leaks": int(sum(q.leaked for q in qs)),
        "update_ms_p50": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        "update_ms_p99": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
    }


def evaluate_policies(episodes: Sequence[Episode], policies: Mapping[str, PolicyFactory], embedder: Embedder,
                      agent: AgentConfig, capacities: Sequence[float], *, progress: bool = True) -> list[dict[str, Any]]:
    """One row per (policy, capacity): the summary metrics plus a per-family breakdown."""
    rows = []
    total = len(policies) * len(capacities) * len(episodes)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=total, desc="evaluate", unit="ep", leave=False)
    for cap in capacities:
        cfg = replace(agent, capacity_frac=cap)
        for name, make in policies.items():
            pairs = []
            for ep in episodes:
                pairs.append((ep, run_episode(ep, make(ep), embedder, cfg)))
                if bar is not None:
                    bar.update(1)
            row = {"policy": name, "capacity": cap, **summarize_runs(pairs)}
            fams = sorted({ep.family for ep in episodes})
            row["by_family"] = {f: summarize_runs([(e, r) for e, r in pairs if e.family == f])["success"] for f in fams}
            rows.append(row)
    if bar is not None:
        bar.close()
    return rows


def multi_user_episodes(n: int = 4, seed: int = 2000) -> list[Episode]:
    """Eval-split episodes of the multi-user family (customer support with 2–4 users)."""
    from ..simulate import SimConfig, generate
    cfg = SimConfig(n_episodes=n, split="eval", eval_families="all", families=("customer_support",),
                    held_out_families=(), seed=seed, min_events=100, max_events=250)
    return generate(cfg)


def leakage_check(episodes: Sequence[Episode] | None, embedder: Embedder, k: int = 5) -> dict[str, Any]:
    """Cross-user leakage with typed scopes (one per user) vs. one pooled, unfiltered index.

    Only multi-user episodes count (``None``: :func:`multi_user_episodes`). Returns the share of
    recalled hits that belong to another user, with the typed store (must be 0) and without it.
    """
    if episodes is None or not any(len(ep.user_ids) > 1 for ep in episodes):
        episodes = multi_user_episodes()
    out = {"episodes": 0, "hits_on": 0, "leaks_on": 0, "hits_off": 0, "leaks_off": 0}
    for ep in episodes:
        if len(ep.user_ids) < 2:
            continue
        out["episodes"] += 1
        with MemoryStore.open(":memory:", embedder=embedder, config=StoreConfig(log_recalls=False)) as store:
            pooled = store.scope(user_id="pooled", agent_id="sim")
            owner: dict[str, str] = {}
            for e in ep.events:
                r = e.to_memir(agent_id="sim")
                r = r.model_copy(update={"provenance": r.provenance.model_copy(update={"derived_from": []})})
                store.scope(user_id=e.user_id, agent_id="sim").write(r)
                pooled.write(r.model_copy(update={"id": f"p_{r.id}", "provenance": r.provenance.model_copy(
                    update={"user_id": "pooled"})}))
                owner[f"p_{r.id}"] = e.user_id
            for q in ep.questions:
                on = store.scope(user_id=q.user_id, agent_id="sim").recall(q.text, k=k, now=q.timestamp)
                off = pooled.recall(q.text, k=k, now=q.timestamp)
                out["hits_on"] += len(on)
                out["leaks_on"] += sum(h.record.provenance.user_id != q.user_id for h in on)
                out["hits_off"] += len(off)
                out["leaks_off"] += sum(owner[h.record.id] != q.user_id for h in off)
    return {**out, "leak_rate_on": out["leaks_on"] / max(out["hits_on"], 1),
            "leak_rate_off": out["leaks_off"] / max(out["hits_off"], 1)}


def evaluate_synthetic(episodes: int, capacities: Sequence[float], policies: Sequence[str], *, model: str | None,
                       preset: str = "default", progress: bool = True) -> dict[str, Any]:
    """Held-out families (eval split) of the simulator: per policy × capacity metrics + leakage."""
    from dataclasses import replace

    from runtime.scoring import UtilityScorer, default_model_path, make_baseline

    from ..config import load_preset
    from ..embedcache import cached_embedder
    from ..label import OracleScorer
    from ..simulate import generate

    cfg = load_preset(preset)
    eps = generate(replace(cfg.eval_sim, n_episodes=episodes))
    emb = cached_embedder(cfg.encoder, Path(cfg.data_dir) / "cache" / "embeddings")
    facts: dict[str, Any] = {}
    for name in policies:
        if name == "utilitynet":
            path = Path(model) if model else default_model_path()
            if not path.is_file():
                print(f"skipping utilitynet: no model at {path} (run `make train`)", file=sys.stderr)
                continue
            scorer = UtilityScorer(path)
            facts[name] = lambda ep, s=scorer: s
        elif name == "oracle":
            facts[name] = lambda ep: OracleScorer(ep, emb, cfg.label)
        else:
            facts[name] = lambda ep, n=name: make_baseline(n)
    rows = evaluate_policies(eps, facts, emb, cfg.agent, capacities, progress=progress)
    return {"episodes": len(eps), "families": sorted({e.family for e in eps}), "rows": rows,
            "leakage": leakage_check(eps, emb)}


def sim_table(rows: Sequence[dict[str, Any]]) -> str:
    keys = ("success", "key_fact_recall", "stale_answer_rate", "forget_precision", "constraint_violations",
            "update_ms_p50")
    head = f"{'policy':<18} {'p':>5} " + " ".join(f"{k[:12]:>12}" for k in keys)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['policy']:<18} {r['capacity']:>5.2f} " + " ".join(f"{float(r[k]):>12.3f}" for k in keys))
    return "\n".join(lines)


