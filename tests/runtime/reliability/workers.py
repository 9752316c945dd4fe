"""Child processes for the reliability tests (run as ``python -m tests.runtime.reliability.workers``).

``crash``: writes (single and ``write_many`` batches), retains and forgets in a loop, appending every
acknowledged write to a side file that is fsynced before the next operation — the parent kills it
with SIGKILL at a random moment and checks that nothing acknowledged was lost.

``stress``: one of several processes mixing writes, recalls, retention and forgetting on a shared
store for a fixed time; every exception that is not one of memir's typed errors is an error, and
so is any typed error that concurrency alone should never cause.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

from runtime import MemoryStore, RetentionPolicy
from runtime.encoders import HashEmbedder
from runtime.errors import MemirError, NotFoundError
from runtime.scoring import make_baseline

DIM = 32


def open_store(path: Path | str, usage_flush_s: float = 0.0) -> MemoryStore:
    policy = RetentionPolicy(capacity=40, scorer=make_baseline("recency"))
    from runtime import StoreConfig
    return MemoryStore.open(path, embedder=HashEmbedder(dim=DIM, seed=0),
                            config=StoreConfig(policy=policy, usage_flush_s=usage_flush_s))


def _ack(fh, lines: list[str]) -> None:  # type: ignore[no-untyped-def]
    fh.write("".join(line + "\n" for line in lines))
    fh.flush()
    os.fsync(fh.fileno())


def crash(db: Path | str, acks: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = open_store(db)
    scope = store.scope(user_id=f"u{seed % 2}", agent_id="a")
    with open(acks, "a", encoding="utf-8") as fh:
        print("ready", flush=True)
        n = 0
        while True:
            op = rng.random()
            n += 1
            if op < 0.45:
                r = scope.write(f"single write {seed}-{n} about topic {rng.randrange(50)}")
                _ack(fh, [json.dumps({"id": r.id, "batch": None})])
            elif op < 0.8:
                batch = f"b{seed}-{n}"
                recs = scope.write_many([{"content": f"batch {batch} item {i}", "tags": [batch]} for i in range(5)])
                _ack(fh, [json.dumps({"id": r.id, "batch": batch}) for r in recs])
            elif op < 0.93:
                scope.retain(forgotten="archive")
            else:
                mine = scope.list(limit=5)
                if mine:
                    victim = rng.choice(mine)
                    batch = next((t for t in victim.metadata.tags if t.startswith("b")), None)
                    # the intent first (a kill may land after it), with the victim's batch: it may be one whose
                    # acknowledgement a kill pre-empted, so the parent cannot look it up
                    _ack(fh, [json.dumps({"forgot": victim.id, "batch": batch})])
                    scope.forget(victim.id, cascade="delete")


TYPED_OK = (NotFoundError,)  # a memory another process forgot a moment ago


def stress(db: Path, out: Path, seed: int, seconds: float) -> None:
    rng = random.Random(seed)
    store = open_store(db)
    users = [store.scope(user_id=u, agent_id="a") for u in ("shared0", "shared1")]
    counts = {"write": 0, "write_many": 0, "recall": 0, "retain": 0, "forget": 0, "list": 0}
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        scope = rng.choice(users)
        op = rng.choice(list(counts))
        try:
            if op == "write":
                scope.write(f"p{seed} note {rng.randrange(1000)} on subject {rng.randrange(20)}")
            elif op == "write_many":
                scope.write_many([f"p{seed} batch {rng.randrange(1000)} {i}" for i in range(4)])
            elif op == "recall":
                hits = scope.recall(f"subject {rng.randrange(20)}", k=5)
                if any(h.record.provenance.user_id != scope.user_id for h in hits):
                    errors.append("cross-user hit")
            elif op == "retain":
                scope.retain(forgotten=rng.choice(["archive", "delete"]))
            elif op == "forget":
                mine = scope.list(limit=10)
                if mine:
                    scope.forget(rng.choice(mine).id, cascade=rng.choice(["redact", "delete"]))
            else:
                scope.list(limit=20)
            counts[op] += 1
        except TYPED_OK:
            counts[op] += 1
        except MemirError as e:
            errors.append(f"{op}: {type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - the point is to count anything untyped
            errors.append(f"{op}: UNTYPED {type(e).__name__}: {e}\n{traceback.format_exc()}")
    store.close()
    out.write_text(json.dumps({"counts": counts, "errors": errors}))


def many(target: str, out: Path, seed: int, seconds: float) -> None:
    """One of many clients on a shared store (file or URL): writes, recalls, retains (archiving,
    so every acknowledged write must survive unless this run forgot it), forgets. Reports the ids
    it was told were written, the ids it forgot, operation counts and every error."""
    rng = random.Random(seed)
    store = open_store(target, usage_flush_s=0.2 if seed % 2 else 0.0)  # half write their usage behind
    users = [store.scope(user_id=u, agent_id="a") for u in ("shared0", "shared1")]
    counts = {"write": 0, "write_many": 0, "recall": 0, "retain": 0, "forget": 0}
    written: list[str] = []
    forgotten: list[str] = []
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        scope = rng.choice(users)
        op = rng.choices(list(counts), weights=[4, 3, 4, 1, 1])[0]
        try:
            if op == "write":
                written.append(scope.write(f"p{seed} note {rng.randrange(1000)} on subject {rng.randrange(20)}").id)
            elif op == "write_many":
                written += [r.id for r in scope.write_many([f"p{seed} batch {rng.randrange(1000)} {i}"
                                                            for i in range(4)])]
            elif op == "recall":
                # half of them can include the archive (PostgreSQL: searched from each process's own
                # cache of the scope, which other clients' writes, archiving and deletions invalidate)
                tier = rng.choice(["working", "any"])
                hits = scope.recall(f"subject {rng.randrange(20)}", k=5, tier=tier)
                if any(h.record.provenance.user_id != scope.user_id for h in hits):
                    errors.append("cross-user hit")
                back = {h.record.id for h in hits} & set(forgotten)
                if back:
                    errors.append(f"recall ({tier}) returned memories this client had forgotten: {sorted(back)}")
            elif op == "retain":
                scope.retain(forgotten="archive")
            else:
                mine = [r for r in scope.list(limit=20) if r.content.startswith(f"p{seed} ")]
                if mine:
                    victim = rng.choice(mine).id
                    forgotten.append(victim)  # the intent first: forget may fail after deleting
                    scope.forget(victim, cascade="delete", scrub=rng.random() < 0.02)
            counts[op] += 1
        except TYPED_OK:
            counts[op] += 1
        except MemirError as e:
            errors.append(f"{op}: {type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - the point is to count anything untyped
            errors.append(f"{op}: UNTYPED {type(e).__name__}: {e}\n{traceback.format_exc()}")
    store.close()
    out.write_text(json.dumps({"counts": counts, "errors": errors, "written": written, "forgotten": forgotten}))


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "crash":
        crash(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
    elif kind == "many":
        many(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        stress(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
