"""Type discovery on simulator episodes with a planted new category: purity and recall.

For each episode (:mod:`train.simulate`) every user's events are written through the public API
into one store (real encoder by default), and ``n_planted`` memories of a category no family has —
warranty claims, phrased many ways — are slipped into the first user's stream at random positions.
They carry what the neighbouring events carry (sub-role, session, time) and the tags every event
of the episode has, so no existing sub_role, source_type or tag singles them out. Then
:func:`runtime.store.discovery.discover_types` runs on that user's scope and we measure:

- **purity**: share of the *surfaced* cluster (the undescribed cluster holding the most planted
  memories) that is planted;
- **recall**: share of the planted memories inside any undescribed cluster;
- **undescribed precision**: share of all memories in undescribed clusters that are planted (the
  rest are other unlabelled kinds: chit-chat, tool output...), and how many undescribed clusters a
  person would read;
- **applied**: after ``apply_type(..., "warranty_claim")`` on the surfaced cluster, a second run
  reports that cluster as described (by the new tag), and the other user's scope is untouched.

Example:
    python -m train.eval discovery --out reports/discovery.json      # + reports/discovery.png
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime.annotate.assembler import AssemblerConfig
from runtime.annotate.sessions import SessionConfig
from runtime.encoders import Embedder
from runtime.record import MemIR
from runtime.store import MemoryStore, StoreConfig
from runtime.store.discovery import apply_type, discover_types

from ..simulate import Event, SimConfig, generate

__all__ = ["DEFAULT_SIZES", "evaluate_discovery", "planted_memories", "plant_episode", "score_run"]

DEFAULT_SIZES = (3, 5, 8, 12)
PLANTED_TAG = "warranty_claim"

_PRODUCTS = ["dishwasher", "laptop", "washing machine", "headphones", "coffee maker", "vacuum cleaner", "phone",
             "fridge", "blender", "television", "electric kettle", "printer", "microwave", "router"]
_BRANDS = ["Bosch", "Lenovo", "Philips", "Samsung", "Dyson", "Miele", "Sony", "LG", "Braun", "Canon"]
_ISSUES = ["stopped turning on", "leaks water from the bottom", "has a battery that dies within an hour",
           "makes a grinding noise", "stopped heating", "has a cracked hinge", "keeps rebooting",
           "shows a dead pixel line", "trips the breaker", "lost its bluetooth connection for good"]
_TEMPLATES = [
    "Filed a warranty claim with {brand}: the {product} {issue}.",
    "The {product} {issue}; it is still under the {years}-year warranty, so I asked {brand} for a replacement.",
    "{brand} accepted the warranty claim for the {product} — a courier collects it on {day}.",
    "Warranty repair request sent for the {product} because it {issue}.",
    "Need to find the receipt for the {product} to claim the manufacturer's guarantee.",
    "{brand} support says the {product} defect is covered by the warranty, no charge for the repair.",
    "Claim under warranty rejected for the {product}: {brand} says it was water damage, I should appeal.",
    "Sent photos of the faulty {product} to {brand} for the warranty case; they reply within {n} days.",
    "The replacement {product} from the warranty claim arrives {day}.",
    "Reminder: the {product} warranty expires in {n} weeks, file the claim about how it {issue} before then.",
    "Asked the shop to honour the guarantee on the {product}, since it {issue} after {n} months.",
    "{brand} wants the serial number of the {product} before they process the warranty.",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week", "tomorrow"]


def planted_memories(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct warranty-claim memories, phrased with 12 templates over products, brands and faults."""
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        t = _TEMPLATES[len(out) % len(_TEMPLATES)] if len(out) < len(_TEMPLATES) else str(rng.choice(_TEMPLATES))
        text = t.format(brand=rng.choice(_BRANDS), product=rng.choice(_PRODUCTS), issue=rng.choice(_ISSUES),
                        years=int(rng.integers(1, 4)), day=rng.choice(_DAYS), n=int(rng.integers(2, 12)))
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def plant_episode(events: Sequence[Event], user: str, n_planted: int, seed: int) -> tuple[list[MemIR], set[str]]:
    """The user's records in stream order with ``n_planted`` planted ones inserted; and the planted ids."""
    rng = np.random.default_rng(seed)
    mine = [e for e in events if e.user_id == user]
    common = [t for t in mine[0].tags if all(t in e.tags for e in mine)]  # tags every event carries
    texts = planted_memories(rng, n_planted)
    slots = sorted(rng.choice(np.arange(1, len(mine) + 1), size=n_planted, replace=True).tolist())
    out: list[MemIR] = []
    planted: set[str] = set()
    j = 0
    for i, ev in enumerate(mine):
        out.append(ev.to_memir(agent_id="sim"))
        while j < n_planted and slots[j] == i + 1:
            r = ev.to_memir(agent_id="sim")
            pid = f"planted-{seed}-{j}"
            out.append(r.model_copy(update={
                "id": pid, "content": texts[j],
                "provenance": r.provenance.model_copy(update={"derived_from": [], "source_entity": None,
                                                              "trigger": None}),
                "metadata": r.metadata.model_copy(update={"tags": common, "flags": [], "expires_at": None})}))
            planted.add(pid)
            j += 1
    return out, planted


def score_run(report: Any, planted: set[str]) -> dict[str, Any]:
    """Purity, recall and undescribed precision of one discovery report against the planted ids."""
    und = report.undescribed
    hits = [len(planted & set(c.member_ids)) for c in und]
    best = int(np.argmax(hits)) if und and max(hits) > 0 else None
    in_und = sum(hits)
    size_und = sum(c.size for c in und)
    return {
        "clusters": len(report.clusters), "undescribed": len(und),
        "surfaced_id": None if best is None else und[best].id,
        "surfaced_size": 0 if best is None else und[best].size,
        "purity": 0.0 if best is None else hits[best] / und[best].size,
        "recall": in_und / len(planted) if planted else 0.0,
        "recall_surfaced": 0.0 if best is None else hits[best] / len(planted),
        "undescribed_precision": in_und / size_und if size_und else 0.0,
        "planted_described": sum(len(planted & set(c.member_ids)) for c in report.clusters if c.described),
    }


def evaluate_discovery(embedder: Embedder, *, episodes: int = 6, seed: int = 7, n_planted: int = 30,
                       sizes: Sequence[int] = DEFAULT_SIZES, default_size: int = 5, workdir: Path,
                       plot: Path | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the planted-category evaluation; returns the JSON payload (and writes ``plot``)."""
    sizes = sorted(set(sizes) | {default_size})
    cfg = StoreConfig(log_recalls=False, annotate=AssemblerConfig(session=SessionConfig(enabled=False)))
    eps = generate(SimConfig(n_episodes=episodes, seed=seed, min_users=2, max_users=2))
    runs: list[dict[str, Any]] = []
    projection: dict[str, Any] | None = None
    for e_i, ep in enumerate(eps):
        users = sorted({ev.user_id for ev in ep.events})
        target = users[0]
        recs, planted = plant_episode(ep.events, target, n_planted, seed * 1000 + e_i)
        path = workdir / f"discovery-{e_i}.sqlite"
        path.unlink(missing_ok=True)
        with MemoryStore.open(path, embedder=embedder, config=cfg) as store:
            scope = store.scope(user_id=target, agent_id="sim")
            for s in range(0, len(recs), 64):
                scope.write_many(recs[s:s + 64])
            # a bystander with warranty claims of their own: never clustered with the target's, never tagged
            other_scope = store.scope(user_id="bystander", agent_id="sim")
            other_scope.write_many([{"id": f"bystander-{e_i}-{k}", "content": t}
                                    for k, t in enumerate(planted_memories(np.random.default_rng(e_i), 20))])
            for u in users[1:]:
                store.scope(user_id=u, agent_id="sim").write_many(
                    [ev.to_memir(agent_id="sim") for ev in ep.events if ev.user_id == u])
            other_before = [r.model_dump_json() for r in other_scope.list(tier="any")]
            for size in sizes:
                rep = discover_types(scope, min_cluster_size=size)
                row = {"episode": ep.episode_id, "family": ep.family, "memories": rep.n_memories,
                       "planted": len(planted), "min_cluster_size": size, **score_run(rep, planted)}
                runs.append(row)
                if progress:
                    print(f"  {ep.family} size {size}: purity {row['purity']:.3f} recall {row['recall']:.3f} "
                          f"({row['undescribed']} undescribed of {row['clusters']})", file=sys.stderr)
            # name the surfaced cluster of the default run (after the sweep: the tag changes later runs)
            rep = discover_types(scope, min_cluster_size=default_size)
            row = next(r for r in runs if r["episode"] == ep.episode_id and r["min_cluster_size"] == default_size)
            if projection is None:
                projection = _projection(scope, rep, planted)
            if row["surfaced_id"] is not None:
                found = rep.cluster(row["surfaced_id"])  # the same id as in the sweep: ids are stable
                row["applied"] = apply_type(scope, found, PLANTED_TAG)
                again = discover_types(scope, min_cluster_size=default_size)
                same = [c for c in again.clusters if c.id == row["surfaced_id"]]
                row["described_after_apply"] = bool(same and same[0].described)
                tagged = {r.id for r in scope.list(tags=[PLANTED_TAG], tier="any")}
                row["tagged"] = len(tagged)
                row["tagged_planted"] = len(tagged & planted)
                row["surfaced_terms"] = found.terms
                row["surfaced_exemplars"] = [x.content for x in found.exemplars]
            row["other_user_unchanged"] = other_before == [r.model_dump_json() for r in other_scope.list(tier="any")]
        path.unlink(missing_ok=True)
    summary = {str(s): {k: round(float(np.mean([r[k] for r in runs if r["min_cluster_size"] == s])), 4)
                        for k in ("purity", "recall", "recall_surfaced", "undescribed_precision", "undescribed",
                                  "clusters")} for s in sizes}
    payload = {"summary": summary, "runs": runs, "default_min_cluster_size": default_size,
               "n_planted": n_planted, "episodes": episodes, "seed": seed, "encoder": embedder.encoder_id,
               "note": "purity = planted share of the undescribed cluster holding most planted memories; recall = "
                       "planted share inside any undescribed cluster; means over episodes."}
    if plot is not None:
        _plot(summary, sizes, projection, plot)
        payload["plot"] = str(plot)
    return payload


def _projection(scope: Any, report: Any, planted: set[str]) -> dict[str, Any]:
    recs, vecs, _ = scope.list_with_vectors()
    x = np.asarray(vecs, np.float64) - np.asarray(vecs, np.float64).mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)  # PCA to 2-D (deterministic: SVD)
    xy = x @ vt[:2].T
    where = {m: (i, c.described) for i, c in enumerate(report.clusters) for m in c.member_ids}
    return {"xy": xy, "cluster": [where.get(r.id, (-1, True))[0] for r in recs],
            "undescribed": [not where.get(r.id, (-1, True))[1] for r in recs],
            "planted": [r.id in planted for r in recs]}


def _plot(summary: dict[str, Any], sizes: Sequence[int], proj: dict[str, Any] | None, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    for key, style in (("purity", "o-"), ("recall", "s-"), ("undescribed_precision", "^--")):
        ax.plot(list(sizes), [summary[str(s)][key] for s in sizes], style, label=key.replace("_", " "))
    ax.set_xlabel("min_cluster_size")
    ax.set_ylim(0, 1.05)
    ax.set_title("planted category: purity / recall")
    ax.legend(loc="lower right", fontsize=8)
    ax = axes[1]
    if proj is not None:
        xy, cl = proj["xy"], np.asarray(proj["cluster"])
        und, pl = np.asarray(proj["undescribed"]), np.asarray(proj["planted"])
        ax.scatter(xy[cl < 0, 0], xy[cl < 0, 1], s=6, c="lightgrey", label="noise")
        ax.scatter(xy[(cl >= 0) & ~und, 0], xy[(cl >= 0) & ~und, 1], s=8, c=cl[(cl >= 0) & ~und] % 10, cmap="tab10",
                   alpha=0.5, label="described cluster")
        ax.scatter(xy[und, 0], xy[und, 1], s=14, facecolors="none", edgecolors="red", label="undescribed cluster")
        ax.scatter(xy[pl, 0], xy[pl, 1], s=28, marker="x", c="black", label="planted")
        ax.set_title("first episode, 2-D PCA of the embeddings")
        ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
