"""Forgetting is complete: after ``forget_user`` / ``forget`` the content is in no byte of the
database file, its WAL or its shared-memory file; other users' data is intact; cascades keep
provenance chains explainable (redacted placeholder) or remove them whole (delete)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import file_bytes

from runtime import Flag, MemoryStore
from runtime.errors import NotFoundError, ValidationError


def assert_absent(db: str, needles: dict[str, bytes]) -> None:
    files = file_bytes(db)
    assert files, "no database files found"
    for fname, blob in files.items():
        for what, needle in needles.items():
            assert needle not in blob, f"{what} still present in {fname}"


def assert_present(db: str, needle: bytes) -> None:
    """Positive control: the scan does see data that should be there."""
    assert any(needle in blob for blob in file_bytes(db).values())


def test_forget_user_leaves_no_trace_in_the_file_wal_or_shm(store: MemoryStore) -> None:
    db = store.path
    victim = store.scope(user_id="victim-7f3a")
    other_agent = store.scope(user_id="victim-7f3a", agent_id="helper")
    bystander = store.scope(user_id="bystander")
    markers = [f"QUOKKA{i:03d}ZEPHYR" for i in range(12)]
    recs = victim.write_many([{"content": f"{m} lives at the blue house {i}", "tags": [f"TAGXYLO{i}"],
                               "session_id": f"SESSQWV{i}", "source_entity": f"SPEAKERJQ{i}",
                               "attributes": {"note": f"ATTRVBN{i}"}}
                              for i, m in enumerate(markers[:10])])
    other_agent.write(f"{markers[10]} the helper agent's note")
    victim.write(f"{markers[11]} derived", derived_from=[recs[0].id])
    kept = [bystander.write(f"bystander fact {i} BYSTANDERKEEP") for i in range(5)]
    for m in markers[:3]:  # explain=True logs the query text and the raw top-K
        assert victim.recall(f"where does {m} live", k=3, explain=True)
    assert len(victim.recall_log()) == 3
    _, vecs, _ = victim.list_with_vectors()
    vec_bytes = vecs[1].astype(np.float32).tobytes()
    assert_present(db, markers[0].encode())
    store.checkpoint()  # content now in the main file as well
    assert_present(db, vec_bytes)

    assert store.forget_user("victim-7f3a") == 12
    needles = {m: m.encode() for m in markers}
    needles.update({f"TAGXYLO{i}": f"TAGXYLO{i}".encode() for i in range(10)})
    needles.update({"session": b"SESSQWV", "speaker": b"SPEAKERJQ", "attribute": b"ATTRVBN",
                    "user id": b"victim-7f3a", "vector": vec_bytes, "vector (first half)": vec_bytes[:128]})
    assert_absent(db, needles)                     # while the store is still open
    assert victim.count() == 0 and victim.recall_log() == [] and other_agent.count() == 0
    # everyone else is intact
    assert bystander.count() == 5
    assert [bystander.get(r.id) for r in kept] == kept
    assert bystander.recall("bystander fact 3", k=1)[0].record.content == "bystander fact 3 BYSTANDERKEEP"
    assert_present(db, b"BYSTANDERKEEP")
    store.close()
    assert_absent(db, needles)                     # and after close


def test_forget_delete_cascades_to_descendants_and_scrubs(store: MemoryStore) -> None:
    db = store.path
    me = store.scope(user_id="alice")
    root = me.write("ROOTMARKER the root observation")
    child = me.write("CHILDMARKER inferred from root", derived_from=[root.id], source_type="derived_inference")
    grand = me.write("GRANDMARKER inferred from child", derived_from=[child.id])
    other = me.write("UNRELATEDKEEP an unrelated memory")
    report = me.forget(root.id, cascade="delete")
    assert sorted(report.deleted) == sorted([root.id, child.id, grand.id]) and report.redacted == []
    for r in (root, child, grand):
        with pytest.raises(NotFoundError):
            me.get(r.id)
    assert me.get(other.id) == other
    assert [h.record.id for h in me.recall("inferred root observation", k=10)] == [other.id]
    assert_absent(db, {"root": b"ROOTMARKER", "child": b"CHILDMARKER", "grandchild": b"GRANDMARKER"})
    assert_present(db, b"UNRELATEDKEEP")


def test_forget_redact_leaves_a_placeholder_that_keeps_the_chain(store: MemoryStore) -> None:
    db = store.path
    me = store.scope(user_id="alice")
    root = me.write("ROOTSECRETWORD the user's old address is 12 Elm Street", tags=["ROOTTAG"],
                    session_id="s1", sub_role="travel", attributes={"k": "ROOTATTR"})
    child = me.write("the user moved (derived)", derived_from=[root.id])
    grand = me.write("so ship to the new address", derived_from=[child.id])
    report = me.forget(root.id, cascade="redact", reason="user_request")
    assert (report.deleted, report.redacted) == ([], [root.id])
    ph = me.get(root.id)
    assert Flag.placeholder in ph.metadata.flags
    assert "ROOTSECRETWORD" not in ph.content and "user_request" in ph.content
    assert ph.metadata.tags == [] and ph.metadata.attributes == {}
    # provenance and role are kept so the chain still explains itself
    assert ph.provenance == root.provenance and ph.role_context == root.role_context
    assert me.get(child.id).provenance.derived_from == [root.id]
    assert me.get(grand.id) == grand
    assert me.list(tags=["ROOTTAG"]) == []
    hits = me.recall("old address Elm Street", k=5)
    assert all("ROOTSECRETWORD" not in h.record.content for h in hits)
    assert_absent(db, {"content": b"ROOTSECRETWORD", "tag": b"ROOTTAG", "attribute": b"ROOTATTR",
                       "street": b"12 Elm Street"})
    # a leaf (nothing derives from it) is simply deleted, even with cascade="redact"
    rep = me.forget(grand.id, cascade="redact")
    assert (rep.deleted, rep.redacted) == ([grand.id], [])
    with pytest.raises(NotFoundError):
        me.get(grand.id)


def test_forget_is_scoped_and_validates_its_arguments(store: MemoryStore) -> None:
    bob = store.scope(user_id="bob").write("bob's memory")
    alice = store.scope(user_id="alice")
    with pytest.raises(NotFoundError):
        alice.forget(bob.id)
    assert store.scope(user_id="bob").get(bob.id) == bob
    mine = alice.write("alice's memory")
    with pytest.raises(ValidationError) as ei:
        alice.forget(mine.id, cascade="shred")  # type: ignore[arg-type]
    assert ei.value.field == "cascade"
    assert alice.get(mine.id) == mine
    assert store.forget_user("nobody") == 0
