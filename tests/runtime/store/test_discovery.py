"""Type discovery: clusters of explicit embeddings, the description score, stable ids, retroactive
tags (both backends), isolation between users, typed errors, and the planted category with the real
encoder."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from typing import Any

import numpy as np
import pytest

from runtime import MemoryStore
from runtime.errors import FilterError, MissingDependencyError, NotFoundError, ValidationError
from runtime.store.discovery import apply_type, discover_types, find_type
from tests.conftest import EMBED_DIM


def _blob(rng: np.random.Generator, centre: np.ndarray, n: int, spread: float = 0.04) -> list[np.ndarray]:
    x = centre[None, :] + spread * rng.standard_normal((n, EMBED_DIM))
    return list((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))


def _centres(rng: np.random.Generator, k: int) -> list[np.ndarray]:
    c = rng.standard_normal((k, EMBED_DIM))
    return list(c / np.linalg.norm(c, axis=1, keepdims=True))


def seed_scopes(store: MemoryStore, seed: int = 3) -> dict[str, Any]:
    """alice: a 'billing'-tagged cluster (10), an unlabelled warranty cluster (10), a sub_role 'pm'
    cluster (8) and scattered memories (12); bob: a warranty cluster near alice's (12)."""
    rng = np.random.default_rng(seed)
    a, b, c, scatter = _centres(rng, 4)
    alice, bob = store.scope(user_id="alice"), store.scope(user_id="bob")
    roles = ["ops", "support"]
    items: list[dict[str, Any]] = []
    for i, v in enumerate(_blob(rng, a, 10)):
        items.append({"content": f"Invoice {i} paid late", "embedding": v, "tags": ["billing", "shared"],
                      "sub_role": roles[i % 2]})
    for i, v in enumerate(_blob(rng, b, 10)):
        items.append({"content": f"Warranty claim {i} for the broken kettle", "embedding": v, "tags": ["shared"],
                      "sub_role": roles[i % 2]})
    for i, v in enumerate(_blob(rng, c, 8)):
        items.append({"content": f"Roadmap item {i} moved", "embedding": v, "tags": ["shared"], "sub_role": "pm"})
    for i in range(12):
        v = rng.standard_normal(EMBED_DIM)
        items.append({"content": f"Misc note {i}", "embedding": (v / np.linalg.norm(v)).astype(np.float32),
                      "tags": ["shared"], "sub_role": roles[i % 2]})
    order = rng.permutation(len(items))
    recs = alice.write_many([items[i] for i in order])
    warranty = {r.id for r in recs if r.content.startswith("Warranty")}
    bob_recs = bob.write_many([{"content": f"Warranty claim {i} for bob's phone", "embedding": v}
                               for i, v in enumerate(_blob(rng, b, 12))])
    return {"alice": alice, "bob": bob, "warranty": warranty, "bob_ids": {r.id for r in bob_recs}}


def test_clusters_are_scored_by_existing_labels(store: MemoryStore) -> None:
    s = seed_scopes(store)
    report = discover_types(s["alice"], min_cluster_size=5)
    assert report.n_memories == 40 and len(report.clusters) == 3
    by_word = {w: next(c for c in report.clusters if all(w in e.content for e in c.exemplars))
               for w in ("Invoice", "Warranty", "Roadmap")}
    billing, warranty, roadmap = by_word["Invoice"], by_word["Warranty"], by_word["Roadmap"]
    assert billing.described and billing.best_label is not None
    # HDBSCAN may attach a scattered memory to a blob: coverage 10/10 or 10/11
    assert (billing.best_label.kind, billing.best_label.value) == ("tag", "billing")
    assert billing.best_label.coverage >= 0.9 and billing.best_label.lift >= 3.6  # 10 of 40 memories carry it
    assert roadmap.described and roadmap.best_label is not None
    assert (roadmap.best_label.kind, roadmap.best_label.value) == ("sub_role", "pm")
    # the warranty cluster: "shared" covers all of it but also the whole scope (lift 1); sub-roles are
    # split half/half (lift 1); direct_interaction is everyone's source: nothing describes it
    assert not warranty.described and warranty.description_score == 0.0 and warranty.best_label is None
    assert set(warranty.member_ids) >= s["warranty"] and warranty.size <= 11
    assert {f.value for f in warranty.labels} >= {"shared"}
    assert report.undescribed == [warranty]
    assert set(warranty.terms[:4]) == {"warranty", "claim", "broken", "kettle"}  # in all of it, nowhere else
    assert len(warranty.exemplars) == 3 and all(e.id in s["warranty"] for e in warranty.exemplars)
    sims = [e.similarity for e in warranty.exemplars]
    assert sims == sorted(sims, reverse=True)


def test_ids_are_stable_and_runs_deterministic(store: MemoryStore) -> None:
    s = seed_scopes(store)
    one = discover_types(s["alice"], min_cluster_size=5)
    two = discover_types(s["alice"], min_cluster_size=5)
    assert one.model_dump() == two.model_dump()
    for c in one.clusters:
        assert c.id == "t_" + hashlib.sha256("\n".join(sorted(c.member_ids)).encode()).hexdigest()[:12]
    und = one.undescribed[0]
    assert find_type(s["alice"], und.id, min_cluster_size=5) == und
    with pytest.raises(NotFoundError, match="discover again"):
        find_type(s["alice"], "t_000000000000", min_cluster_size=5)


def test_apply_tags_the_cluster_retroactively(store: MemoryStore) -> None:
    s = seed_scopes(store)
    alice = s["alice"]
    cluster = discover_types(alice, min_cluster_size=5).undescribed[0]
    before = {r.id: r for r in alice.list()}
    assert apply_type(alice, cluster, "warranty_claim") == cluster.size
    tagged = {r.id for r in alice.list(tags=["warranty_claim"])}
    assert tagged == set(cluster.member_ids) >= s["warranty"]
    for mid in tagged:
        rec = alice.get(mid)
        assert rec.metadata.tags == ["shared", "warranty_claim"]  # old tags kept, the new one appended
        assert rec.content == before[mid].content and rec.metadata.confidence == before[mid].metadata.confidence
    untouched = [r for r in alice.list() if r.id not in tagged]
    assert all(r.model_dump() == before[r.id].model_dump() for r in untouched)
    # recall's typed filter sees the new tag at once (SQLite: the vector cache reloads)
    centre = np.mean([v for r, v in zip(*alice.list_with_vectors()[:2]) if r.id in tagged], axis=0)
    hits = alice.recall(centre / np.linalg.norm(centre), k=20, tags=["warranty_claim"], update_usage=False)
    assert {h.record.id for h in hits} == tagged
    # the cluster is now described by the name it was given, and a second apply changes nothing
    again = discover_types(alice, min_cluster_size=5)
    same = again.cluster(cluster.id)
    assert same.described and same.best_label is not None
    assert (same.best_label.value, same.best_label.coverage) == ("warranty_claim", 1.0)
    assert again.undescribed == []
    assert apply_type(alice, cluster, "warranty_claim") == 0
    assert alice.tag(sorted(tagged)[:2], ["warranty_claim", "kettle"]) == 2  # only the new tag is added
    assert asyncio.run(alice.atag(sorted(tagged)[:1], "kettle")) == 0  # the awaitable twin
    assert alice.get(sorted(tagged)[0]).metadata.tags == ["shared", "warranty_claim", "kettle"]


def test_discover_and_apply_never_cross_users(store: MemoryStore) -> None:
    s = seed_scopes(store)
    alice, bob = s["alice"], s["bob"]
    bob_before = [r.model_dump_json() for r in bob.list(tier="any")]
    report = discover_types(alice, min_cluster_size=5)
    members = {m for c in report.clusters for m in c.member_ids}
    assert not members & s["bob_ids"]  # bob's warranty claims sit on the same centre: never clustered in
    assert not {e.id for c in report.clusters for e in c.exemplars} & s["bob_ids"]
    apply_type(alice, report.undescribed[0], "warranty_claim")
    with pytest.raises(NotFoundError):  # bob's ids through alice's scope: unknown, nothing changes
        apply_type(alice, sorted(s["bob_ids"]), "warranty_claim")
    with pytest.raises(NotFoundError):  # one foreign id among alice's own: nothing is tagged at all
        alice.tag([*sorted(s["warranty"])[:3], sorted(s["bob_ids"])[0]], "other_tag")
    assert alice.count(tags=["other_tag"]) == 0
    assert [r.model_dump_json() for r in bob.list(tier="any")] == bob_before
    assert bob.count(tags=["warranty_claim"]) == 0
    bob_report = discover_types(bob, min_cluster_size=5)
    assert {m for c in bob_report.clusters for m in c.member_ids} <= s["bob_ids"]


@pytest.mark.parametrize("bad, error", [("x'; DROP TABLE memories", FilterError), ("", FilterError),
                                        ("a" * 129, FilterError), ("mail bob@example.com", ValidationError),
                                        ("card 4111 1111 1111 1111", ValidationError)])
def test_bad_tags_are_refused_by_name(store: MemoryStore, bad: str, error: type[Exception]) -> None:
    alice = store.scope(user_id="alice")
    rec = alice.write("a memory", embedding=np.eye(EMBED_DIM, dtype=np.float32)[0])
    with pytest.raises(error) as e:
        alice.tag([rec.id], bad)
    assert getattr(e.value, "field", None)
    assert alice.get(rec.id).metadata.tags == []


def test_parameters_and_small_scopes(store: MemoryStore) -> None:
    alice = store.scope(user_id="alice")
    assert discover_types(alice).clusters == []  # empty scope
    alice.write_many([{"content": f"m{i}", "embedding": np.eye(EMBED_DIM, dtype=np.float32)[i]} for i in range(3)])
    assert discover_types(alice, min_cluster_size=5).clusters == []  # fewer memories than a cluster
    for kw in ({"min_cluster_size": 1}, {"min_coverage": 0.0}, {"min_lift": 0.5}, {"tier": "all"}):
        with pytest.raises(ValidationError) as e:
            discover_types(alice, **kw)
        assert next(iter(kw)) in str(e.value)
    with pytest.raises(ValidationError):
        alice.tag("not-a-list", "x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        alice.tag(["bad id!"], "x")


def test_missing_scikit_learn_names_the_extra(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.cluster", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'memir-runtime\[discovery\]'"):
        discover_types(store.scope(user_id="alice"))


def test_planted_category_with_the_real_encoder(tmp_path: Any) -> None:
    """Two simulator episodes with 30 planted warranty claims each (train.eval.discovery). Measured at
    min_cluster_size 5: purity 1.000 and recall 1.000 on both (6 episodes: purity 1.000, recall 0.967)."""
    from runtime.encoders.onnx import default_encoder_dir
    if not (default_encoder_dir() / "model.onnx").is_file():
        pytest.skip("the ONNX encoder is not exported (memir encoder install)")
    from runtime.encoders import load_default_embedder
    from train.eval.discovery import evaluate_discovery
    payload = evaluate_discovery(load_default_embedder(), episodes=2, seed=7, n_planted=30, sizes=[5],
                                 workdir=tmp_path, progress=False)
    for row in payload["runs"]:
        assert row["purity"] >= 0.9 and row["recall"] >= 0.85, row
        assert row["described_after_apply"] and row["tagged"] == row["tagged_planted"] == row["applied"]
        assert row["other_user_unchanged"]
