"""The TTL holds in the archive too: a memory archived before it expires leaves with the next
retention decision after its expiry (content, vector and id gone from the file)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from runtime import MemoryStore
from runtime.record import utcnow
from runtime.scoring import make_baseline


def test_archived_memory_past_its_ttl_is_deleted_by_the_next_decision(store: MemoryStore, tmp_path: Path) -> None:
    me = store.scope(user_id="alice", agent_id="a")
    now = utcnow()
    temp = me.write("temporary door code QUOKKA-55", expires_at=now + timedelta(hours=1))
    for i in range(6):
        me.write(f"later note {i}")
    scorer = make_baseline("recency")
    d1 = me.retain(3, scorer=scorer, now=now)
    assert temp.id in d1.archived and temp.id not in d1.expired
    later = now + timedelta(hours=2)
    def archived_codes() -> list[str]:
        return [h.record.id for h in me.recall("door code", k=10, tier="archive", include_expired=True, now=later)
                if "QUOKKA" in h.record.content]

    assert archived_codes() == [temp.id]  # past its TTL, still in the archive until a decision runs
    d2 = me.retain(3, scorer=scorer, now=later)
    assert d2.expired == [temp.id] and temp.id in d2.deleted
    assert me.count(tier="any", include_expired=True, now=later) == 6
    assert archived_codes() == []
    store.checkpoint()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("mem.sqlite*"))
    assert b"QUOKKA-55" not in raw
