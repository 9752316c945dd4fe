"""``memir`` — the operator's command line.

Examples:
    memir inspect agent.sqlite
    memir retain agent.sqlite --user u42 --capacity 200 --rules rules.yaml
    memir explain agent.sqlite mem_3f2a...
    memir snapshot agent.sqlite --user u42 -o u42.jsonl
    memir score dump.jsonl -o scored.jsonl --capacity 1000
    memir reembed agent.sqlite
    memir encoder export
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .errors import MemirError

__all__ = ["main", "build_parser"]


def _print(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str, ensure_ascii=False))


def _open(path: str) -> Any:
    from .store import MemoryStore
    return MemoryStore.open(path)


def cmd_inspect(a: argparse.Namespace) -> int:
    with _open(a.db) as store:
        stats = store.admin_stats()
        if a.capacity:
            stats["fill"] = {u: round(n / a.capacity, 3) for u, _, n in store.admin_users()}
        _print(stats)
    return 0


def cmd_retain(a: argparse.Namespace) -> int:
    from .scoring import UtilityScorer
    with _open(a.db) as store:
        scope = store.scope(user_id=a.user, agent_id=a.agent)
        scorer = UtilityScorer(a.model) if a.model else UtilityScorer()
        d = scope.retain(capacity=a.capacity, scorer=scorer, rules=a.rules, method=a.method,
                         forgotten=a.forgotten, dry_run=a.dry_run, budget_tokens=a.budget_tokens)
        _print({**d.summary(), "constraints": [c.model_dump(exclude_none=True) for c in d.constraints]})
    return 0


def cmd_explain(a: argparse.Namespace) -> int:
    with _open(a.db) as store:
        users = [(u, ag) for u, ag, _ in store.admin_users()] if a.user is None else [(a.user, a.agent)]
        for u, ag in users:  # admin path: find the scope that holds the id
            try:
                _print(store.scope(user_id=u, agent_id=ag).explain(a.memory_id).model_dump(mode="json"))
                return 0
            except MemirError:
                continue
    print(f"memir: no memory or decision {a.memory_id!r} in {a.db}", file=sys.stderr)
    return 1


def cmd_snapshot(a: argparse.Namespace) -> int:
    with _open(a.db) as store:
        n = (store.scope(user_id=a.user, agent_id=a.agent).snapshot(a.out) if a.user
             else store.admin_export(a.out))
    print(f"wrote {n} records to {a.out}")
    return 0


def cmd_reembed(a: argparse.Namespace) -> int:
    with _open(a.db) as store:
        n = store.reembed(batch_size=a.batch_size, progress=True)
    print(f"re-embedded {n} memories")
    return 0


def cmd_score(a: argparse.Namespace) -> int:
    from .batch import ScoreConfig, score_dump
    cfg = ScoreConfig(capacity=a.capacity, rules=a.rules, model=a.model, batch_size=a.batch_size,
                      quarantine=a.quarantine, redundancy=a.redundancy, method=a.method, encoder=a.encoder)
    report = score_dump(a.dump, a.out, cfg, progress=not a.quiet)
    _print(report)
    return 0 if report.get("valid", 0) > 0 or report.get("quarantined", 0) == 0 else 2


def cmd_encoder(a: argparse.Namespace) -> int:
    from utilitynet.encoder_export import main as export_main
    return export_main(["--out", a.out] if a.out else [])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memir", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def add(name: str, fn: Any, help_: str, example: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=f"{help_}\n\nexample:\n  {example}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(fn=fn)
        return sp

    sp = add("inspect", cmd_inspect, "counts by type/role/user, fill and the last decisions",
             "memir inspect agent.sqlite --capacity 200")
    sp.add_argument("db")
    sp.add_argument("--capacity", type=int, default=None, help="report fill = memories / capacity per user")

    sp = add("retain", cmd_retain, "run a retention decision for one user",
             "memir retain agent.sqlite --user u42 --capacity 200 --rules rules.yaml")
    sp.add_argument("db")
    sp.add_argument("--user", required=True)
    sp.add_argument("--agent", default="default")
    sp.add_argument("--capacity", type=int, default=None)
    sp.add_argument("--budget-tokens", type=int, default=None)
    sp.add_argument("--rules", default=None, help="YAML rules file (default: built-in rules)")
    sp.add_argument("--model", default=None, help="utility model ONNX (default: checkpoints/utilitynet.onnx)")
    sp.add_argument("--method", default="auto", choices=["auto", "greedy", "exact", "cvxpy"])
    sp.add_argument("--forgotten", default="archive", choices=["archive", "delete"])
    sp.add_argument("--dry-run", action="store_true", help="decide and report, change nothing")

    sp = add("explain", cmd_explain, "why a memory is kept, or was dropped, and when",
             "memir explain agent.sqlite mem_3f2a9c...")
    sp.add_argument("db")
    sp.add_argument("memory_id")
    sp.add_argument("--user", default=None)
    sp.add_argument("--agent", default="default")

    sp = add("snapshot", cmd_snapshot, "dump one user's (or, without --user, every user's) memories as JSONL",
             "memir snapshot agent.sqlite --user u42 -o u42.jsonl")
    sp.add_argument("db")
    sp.add_argument("--user", default=None)
    sp.add_argument("--agent", default="default")
    sp.add_argument("-o", "--out", required=True)

    sp = add("score", cmd_score, "batch-score a MemIR dump (JSONL or Parquet): utility, keep/forget, reason",
             "memir score dump.jsonl -o scored.jsonl --capacity 1000 --rules rules.yaml")
    sp.add_argument("dump")
    sp.add_argument("-o", "--out", required=True)
    sp.add_argument("--capacity", type=int, default=None)
    sp.add_argument("--rules", default=None)
    sp.add_argument("--model", default=None)
    sp.add_argument("--quarantine", default=None, help="where rejected records go (default OUT.quarantine.jsonl)")
    sp.add_argument("--batch-size", type=int, default=8192)
    sp.add_argument("--redundancy", default="batch", choices=["batch", "none"])
    sp.add_argument("--method", default="auto", choices=["auto", "greedy", "exact", "cvxpy"])
    sp.add_argument("--encoder", default="default", choices=["default", "hash"],
                    help="encoder for records without an embedding (hash = test double)")
    sp.add_argument("--quiet", action="store_true")

    sp = add("reembed", cmd_reembed, "re-encode every memory made by another encoder",
             "memir reembed agent.sqlite")
    sp.add_argument("db")
    sp.add_argument("--batch-size", type=int, default=256)

    sp = add("encoder", cmd_encoder, "export the offline all-MiniLM-L6-v2 encoder to ONNX",
             "memir encoder export --out ~/.cache/memir/encoders/all-MiniLM-L6-v2")
    sp.add_argument("action", choices=["export"])
    sp.add_argument("--out", default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memir`` console script; only this function exits."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except MemirError as e:
        print(f"memir: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
