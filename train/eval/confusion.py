"""Confusion evaluation (seed 000 §5.3): typed retrieval vs one untyped pooled index, on a generated
test set built to be confusable across users, roles and sources.

The generator (seeded, deterministic, no LLM) gives each user a few support/sales *cases*, each on one
of six topics handled by one desk (``support/billing``, ``support/technical``, ``sales/accounts``).
Per (user, topic) it writes, through the public API only (``Scope.write_many`` with typed fields):

- ``case``: the user's own complaint or question (``direct_interaction``, the desk's role), in a case
  session — what a *case probe* should find;
- ``spec``: the official document on the topic (``external_ingest``, ``docs.example.com``, confidence
  0.95) ingested in that session — what a *policy probe* should find;
- ``rumour``: a forum post on the same question (``external_ingest``, ``forum.example.com``,
  confidence 0.3), phrased like the question;
- ``note``: a near-duplicate note on the same subject recorded under *another* desk's role in another
  session (a sales call about the double charge, a bug ticket about it...): the wrong-role look-alike;

plus two role-neutral memories (a core instruction and small talk, role ``general``). Every topic is
shared by many users, written from the same paraphrase templates with slot fillers (product, month,
order number): another user's case on the same topic is the cross-user near-duplicate (user A's
complaint vs user B's similar question).

Three retrieval paths answer the same queries with the same ``k`` on the same encoder vectors:

- ``typed``: ``store.scope(user_id=asker).recall(query, k, context=RoleContext(role, sub_role),
  roles=[role], sub_roles=[sub_role])``, formatted by ``runtime.format_context`` (what a user gets);
- ``typed_rank_only``: the same scope and context, no role filter (isolation + re-ranking alone);
- ``untyped``: one pooled index over every user's memories, raw cosine on vectors from the store's
  own encoder (``store.embedder.encode`` of the stored contents), no filter, no re-ranking, formatted
  as plain content without provenance labels. Each distinct text is indexed once, and a hit on a text
  the asker also owns counts as the asker's copy (identical documents in several users' memories are
  not held against the baseline).

Metrics (each over the probes of a path; ``top-k`` = the memories in the prompt block):

- ``cross_user_confusion``: share of probes whose top-k holds a memory of another user;
- ``cross_role_confusion``: share of probes whose top-k holds a memory of another role (the judge
  below says inconsistent);
- ``cross_user_above_target`` / ``cross_role_above_target``: share of probes in which such a memory
  ranks above the target (or the target is missing from a top-k that holds one);
- ``role_consistency``: share of recalled memories the rule-based judge accepts: active role equal to
  the asker's and sub-role equal or absent, or role-neutral (active role ``general``, no sub-role);
- ``citation_accuracy``: share of memories in the prompt block whose provenance is the asker's: its
  user is the asker and its session one of the asker's sessions; on a typed path the block must also
  label that session (``| session: …]``); the untyped block carries no labels, so a memory counts there
  only when it really is the asker's. ``citation_all_correct``: share of probes whose whole block is;
- ``target_recall_at_k``: share of probes whose target (case: the asker's case memory; policy: the
  asker's official document) is in the top-k;
- ``rumour_over_spec`` (policy probes): share of probes in which a low-trust memory on the probe's
  topic (any user's rumour) ranks above every official document on the topic (a spec missing from the
  top-k counts as below).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Item", "MemorySpec", "Probe", "ConfusionSet", "generate", "evaluate_confusion", "metrics",
           "near_duplicate_share", "confusion_table", "write_confusion_report", "PATHS"]

PATHS = ("typed", "typed_rank_only", "untyped")
NEUTRAL_ROLE = "general"
BASE_TIME = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
NOW = BASE_TIME + timedelta(days=90)

# desk → (active_role, sub_role)
DESKS = {"billing": ("support", "billing"), "technical": ("support", "technical"), "sales": ("sales", "accounts")}

# topic → desk, the desk of its wrong-role note, and paraphrase templates with slots {product} {month} {order}.
TOPICS: dict[str, dict[str, Any]] = {
    "double_charge": {
        "desk": "billing", "note_desk": "technical",
        "case": ["I was charged twice for my {product} subscription in {month}, order {order}.",
                 "My card got billed two times for {product} this {month} (order {order}).",
                 "There is a duplicate charge for {product} on my {month} statement, order {order}.",
                 "You took the {product} payment twice in {month}; order number {order}. Not happy."],
        "question": ["Was I double charged for {product} in {month}?",
                     "Did my {product} payment go through twice in {month}?",
                     "What happened with the duplicate {product} charge in {month}?"],
        "note": ["Bug ticket: the {product} checkout submitted the customer's payment twice in {month}.",
                 "Engineering note: duplicate {product} payment captured twice by the checkout in {month}."],
        "spec": ["Official billing policy: duplicate {product} charges are refunded automatically within 5 business days.",
                 "Billing handbook v3: a double charge on {product} is reversed by us within five working days."],
        "rumour": ["Forum post: people say duplicate {product} charges are never refunded, you must dispute with your bank.",
                   "Community thread: how are duplicate {product} charges refunded? Apparently only after 60 days, if ever."],
        "policy": ["How are duplicate {product} charges refunded?",
                   "What is the refund rule when {product} charges me twice?"],
    },
    "refund": {
        "desk": "billing", "note_desk": "sales",
        "case": ["I asked for a refund on {product} in {month} and still have not received it, order {order}.",
                 "My {product} refund requested in {month} never arrived (order {order}).",
                 "Still waiting for the {product} refund I requested in {month}, order {order}.",
                 "Where is my money? I cancelled {product} in {month} and got no refund, order {order}."],
        "question": ["Where is my {product} refund from {month}?",
                     "Has my {product} refund requested in {month} been paid?",
                     "What is the status of the {product} refund I asked for in {month}?"],
        "note": ["Sales call: the customer mentioned a pending {product} refund from {month} while discussing renewal.",
                 "Account review: customer still unhappy about the {product} refund requested in {month}."],
        "spec": ["Official refund policy: {product} refunds are paid within 14 days of the request.",
                 "Refund terms v2: an approved {product} refund reaches the card within fourteen days."],
        "rumour": ["Forum post: how long does a {product} refund take? Someone says three months, and most are denied.",
                   "Reddit rumour: {product} refunds take forever, people waited half a year."],
        "policy": ["How long does a {product} refund take?",
                   "When is a {product} refund paid after the request?"],
    },
    "login": {
        "desk": "technical", "note_desk": "billing",
        "case": ["I cannot log in to {product} since the {month} update; the password reset email never arrives.",
                 "Since the {month} release I am locked out of {product}, no reset email comes.",
                 "Login to {product} fails after the {month} update and the password reset mail is missing.",
                 "The {product} password reset email does not arrive and I can't sign in since {month}."],
        "question": ["Why can't I sign in to {product} after the {month} update?",
                     "Is my {product} login problem since {month} solved?",
                     "What did I report about the {product} password reset in {month}?"],
        "note": ["Billing note: customer locked out of {product} since {month} asked whether they are still charged.",
                 "Invoice dispute: customer could not log in to {product} in {month} and wants a credit."],
        "spec": ["Official {product} help article: if the reset email does not arrive, check spam; links expire after 1 hour.",
                 "{product} support docs: password reset mails can take 10 minutes and the link is valid for one hour."],
        "rumour": ["Forum post: what to do if the {product} password reset email doesn't arrive? Nothing, accounts get locked forever.",
                   "Community rumour: {product} password reset is broken for everyone since the update."],
        "policy": ["What should I do if the {product} password reset email doesn't arrive?",
                   "How long is a {product} password reset link valid?"],
    },
    "rate_limit": {
        "desk": "technical", "note_desk": "sales",
        "case": ["Our {product} API calls fail with error 429 since {month}, about {order} requests per hour.",
                 "We get HTTP 429 from the {product} API since {month} at roughly {order} calls an hour.",
                 "Since {month} the {product} API throttles us with 429 errors ({order} requests/hour).",
                 "The {product} API keeps returning 429 Too Many Requests since {month}; we send {order} per hour."],
        "question": ["Why is the {product} API returning 429 errors since {month}?",
                     "Are our {product} API 429 errors from {month} fixed?",
                     "What did we report about {product} API throttling in {month}?"],
        "note": ["Sales call: the customer hitting {product} API 429 limits since {month} asks about a bigger plan.",
                 "Upsell lead: {product} API throttled with 429s in {month}, interested in higher limits."],
        "spec": ["Official {product} API docs: the rate limit is 1,000 requests per minute per key; a 429 means wait and retry.",
                 "{product} API reference v4: each key may send 1000 requests a minute; on 429, back off and retry."],
        "rumour": ["Forum post: what is the {product} API rate limit? Someone claims free accounts get 10 requests a day.",
                   "Community rumour: {product} secretly throttles API keys to a few calls per hour."],
        "policy": ["What is the {product} API rate limit?",
                   "How many {product} API requests per minute are allowed?"],
    },
    "discount": {
        "desk": "sales", "note_desk": "billing",
        "case": ["We asked about a volume discount for {order} seats of {product} starting in {month}.",
                 "Can we get a discount on {order} {product} seats from {month}?",
                 "Our team wants {order} seats of {product} in {month} and asked for a bulk price.",
                 "Requesting a quote with volume pricing: {order} {product} seats, start {month}."],
        "question": ["What discount did we ask for on {product} seats?",
                     "Did you answer our {product} volume discount request for {month}?",
                     "What was our {product} seat quote for {month}?"],
        "note": ["Billing note: customer disputes the {product} invoice for {order} seats in {month}, expected a discount.",
                 "Invoice check: {order} {product} seats billed in {month} without the promised discount."],
        "spec": ["Official {product} price list: 10% off from 50 seats, 20% off from 200 seats.",
                 "{product} pricing sheet 2026: volume discount of 10 percent at 50 seats and 20 percent at 200."],
        "rumour": ["Forum post: what volume discount does {product} offer? Someone got 70% off by threatening to cancel.",
                   "Rumour on a forum: {product} gives any team of 5 seats half price if you ask."],
        "policy": ["What volume discount does {product} offer?",
                   "How much is the {product} discount for many seats?"],
    },
    "trial": {
        "desk": "sales", "note_desk": "technical",
        "case": ["Our {product} trial ends in {month}; we need an extension for the pilot with {order} users.",
                 "Please extend our {product} trial beyond {month}, the pilot has {order} users.",
                 "We need more time on the {product} trial that expires in {month} ({order} pilot users).",
                 "The {product} trial runs out in {month} and our {order}-user pilot is not finished."],
        "question": ["Can our {product} trial be extended past {month}?",
                     "Was our {product} trial extension for {month} approved?",
                     "What did we ask about the {product} trial ending in {month}?"],
        "note": ["Support ticket: {product} trial account expiring in {month} lost access for {order} pilot users.",
                 "Tech note: the {product} trial workspace of {order} users was disabled at the end of {month}."],
        "spec": ["Official {product} terms: trials last 30 days and can be extended once by 14 days.",
                 "{product} trial policy: a 30-day trial, one extension of two weeks on request."],
        "rumour": ["Forum post: how long can a {product} trial be extended? People say forever if you make new accounts.",
                   "Community rumour: {product} sales extends trials for six months if you complain."],
        "policy": ["How long can a {product} trial be extended?",
                   "Can a {product} trial be extended, and for how long?"],
    },
}
PRODUCTS = ("Pro", "Team", "Business", "Starter", "Enterprise")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
NEUTRAL = ["Always answer in {lang} and keep replies short.", "Please address me as {name}.",
           "Thanks, that was helpful, have a nice weekend!", "I am travelling next week, reply by email only."]
LANGS = ("French", "German", "Spanish", "English", "Italian")
NAMES = ("Dr. Lee", "Ms. Novak", "Mr. Okafor", "Sam", "Alex", "Mrs. Rossi")


@dataclass(frozen=True)
class MemorySpec:
    """One memory to write: its id, its user, text and typed fields (what ``Scope.write_many`` gets)."""

    id: str
    user_id: str
    kind: str  # case | spec | rumour | note | neutral
    topic: str | None
    content: str
    fields: dict[str, Any] = field(hash=False)


@dataclass(frozen=True)
class Probe:
    """A query asked by ``user_id`` in role ``role/sub_role`` about ``topic``; ``target`` is the id of
    the memory it should find (``kind`` case: the asker's case; policy: the asker's official document)."""

    id: str
    kind: str  # case | policy
    user_id: str
    role: str
    sub_role: str
    topic: str
    query: str
    target: str


@dataclass(frozen=True)
class ConfusionSet:
    memories: tuple[MemorySpec, ...]
    probes: tuple[Probe, ...]
    sessions: dict[str, frozenset[str]] = field(hash=False)  # user → their session ids


def generate(users: int = 40, topics_per_user: int = 3, seed: int = 0) -> ConfusionSet:
    """The confusable test set: ``users`` users × ``topics_per_user`` topics each; two probes (case and
    policy) per (user, topic). Deterministic in ``seed``; no model involved."""
    if users < 2 or not 1 <= topics_per_user <= len(TOPICS):
        from runtime.errors import ValidationError
        raise ValidationError(f"need users >= 2 and 1 <= topics_per_user <= {len(TOPICS)}, got {users} and "
                              f"{topics_per_user}", field="users" if users < 2 else "topics_per_user")
    rng = random.Random(seed)
    mems: list[MemorySpec] = []
    probes: list[Probe] = []
    sessions: dict[str, set[str]] = {}
    names = sorted(TOPICS)
    for u in range(users):
        uid = f"user{u:03d}"
        t = BASE_TIME + timedelta(days=rng.randint(0, 20), hours=rng.randint(0, 8))
        s0 = f"{uid}-s0"
        sessions.setdefault(uid, set()).add(s0)
        for j, tpl in enumerate(rng.sample(NEUTRAL, 2)):
            text = tpl.format(lang=rng.choice(LANGS), name=rng.choice(NAMES))
            mems.append(MemorySpec(f"{uid}.neutral{j}", uid, "neutral", None, text, {
                "session_id": s0, "source_type": "direct_interaction", "dialog_role": "user",
                "active_role": NEUTRAL_ROLE, "timestamp": t + timedelta(minutes=j), "created_at": t + timedelta(minutes=j),
                **({"flags": ["core_instruction"]} if j == 0 else {})}))
        for j, topic in enumerate(sorted(rng.sample(names, topics_per_user), key=names.index)):
            spec = TOPICS[topic]
            role, sub = DESKS[spec["desk"]]
            nrole, nsub = DESKS[spec["note_desk"]]
            slots = {"product": rng.choice(PRODUCTS), "month": rng.choice(MONTHS), "order": str(rng.randint(20, 990))}
            t += timedelta(days=rng.randint(1, 6))
            sid, xid = f"{uid}-s{j + 1}", f"{uid}-x{j + 1}"
            sessions[uid] |= {sid, xid}
            base = f"{uid}.{topic}"
            common = {"session_id": sid, "active_role": role, "sub_role": sub}

            def at(minutes: int, t: datetime = t) -> dict[str, Any]:
                return {"timestamp": t + timedelta(minutes=minutes), "created_at": t + timedelta(minutes=minutes)}

            mems.append(MemorySpec(f"{base}.case", uid, "case", topic, rng.choice(spec["case"]).format(**slots), {
                **common, **at(0), "source_type": "direct_interaction", "dialog_role": "user", "source_entity": uid,
                "tags": [f"topic:{topic}"]}))
            mems.append(MemorySpec(f"{base}.spec", uid, "spec", topic, rng.choice(spec["spec"]).format(**slots), {
                **common, **at(2), "source_type": "external_ingest", "dialog_role": "tool", "confidence": 0.95,
                "source_entity": "docs", "source_uri": f"https://docs.example.com/{topic}", "source_version": "3",
                "tags": [f"topic:{topic}"]}))
            mems.append(MemorySpec(f"{base}.rumour", uid, "rumour", topic, rng.choice(spec["rumour"]).format(**slots), {
                **common, **at(3), "source_type": "external_ingest", "dialog_role": "tool", "confidence": 0.3,
                "source_entity": "forum", "source_uri": f"https://forum.example.com/t/{topic}-{rng.randint(100, 999)}",
                "tags": [f"topic:{topic}"]}))
            mems.append(MemorySpec(f"{base}.note", uid, "note", topic, rng.choice(spec["note"]).format(**slots), {
                **at(60 * 24), "session_id": xid, "active_role": nrole, "sub_role": nsub,
                "source_type": "direct_interaction", "dialog_role": "agent", "source_entity": "agent",
                "tags": [f"topic:{topic}"]}))
            probes.append(Probe(f"{base}.q_case", "case", uid, role, sub, topic,
                                rng.choice(spec["question"]).format(**slots), f"{base}.case"))
            probes.append(Probe(f"{base}.q_policy", "policy", uid, role, sub, topic,
                                rng.choice(spec["policy"]).format(**slots), f"{base}.spec"))
    return ConfusionSet(tuple(mems), tuple(probes), {u: frozenset(s) for u, s in sessions.items()})


# ----------------------------------------------------------------------------------------- metrics
@dataclass(frozen=True)
class Item:
    """One recalled memory as the metrics see it. ``labelled``: the prompt block shows its session."""

    id: str
    user_id: str
    session_id: str | None
    active_role: str
    sub_role: str | None
    kind: str
    topic: str | None
    labelled: bool = False


def role_consistent(item: Item, probe: Probe) -> bool:
    """The rule-based judge: same active role and the same (or no) sub-role, or role-neutral."""
    if item.active_role == NEUTRAL_ROLE and item.sub_role is None:
        return True
    return item.active_role == probe.role and item.sub_role in (None, probe.sub_role)


def _cited_ok(item: Item, probe: Probe, sessions: dict[str, frozenset[str]], typed: bool) -> bool:
    own = item.user_id == probe.user_id and item.session_id in sessions.get(probe.user_id, frozenset())
    return own and (item.labelled or not typed)


def _rumour_first(items: Sequence[Item], probe: Probe) -> bool:
    for it in items:
        if it.topic == probe.topic and it.kind in ("spec", "rumour"):
            return it.kind == "rumour"
    return False


def _above_target(items: Sequence[Item], probe: Probe, wrong: Any) -> bool:
    for it in items:
        if it.id == probe.target:
            return False
        if wrong(it):
            return True
    return False


def metrics(results: Sequence[tuple[Probe, Sequence[Item]]], sessions: dict[str, frozenset[str]], *,
            typed: bool) -> dict[str, Any]:
    """The metrics of one path over ``(probe, top-k items in rank order)`` pairs (module docstring)."""
    n = len(results)
    items = [(p, it) for p, its in results for it in its]
    policy = [(p, its) for p, its in results if p.kind == "policy"]

    def share(xs: Iterable[bool], d: int) -> float | None:
        return sum(xs) / d if d else None

    return {
        "probes": n, "recalled": len(items),
        "cross_user_confusion": share((any(it.user_id != p.user_id for it in its) for p, its in results), n),
        "cross_role_confusion": share((any(not role_consistent(it, p) for it in its) for p, its in results), n),
        "cross_user_above_target": share((_above_target(its, p, lambda it, p=p: it.user_id != p.user_id)
                                          for p, its in results), n),
        "cross_role_above_target": share((_above_target(its, p, lambda it, p=p: not role_consistent(it, p))
                                          for p, its in results), n),
        "role_consistency": share((role_consistent(it, p) for p, it in items), len(items)),
        "citation_accuracy": share((_cited_ok(it, p, sessions, typed) for p, it in items), len(items)),
        "citation_all_correct": share((all(_cited_ok(it, p, sessions, typed) for it in its) for p, its in results), n),
        "target_recall_at_k": share((any(it.id == p.target for it in its) for p, its in results), n),
        "rumour_over_spec": share((_rumour_first(its, p) for p, its in policy), len(policy)),
        "policy_probes": len(policy),
    }


# ----------------------------------------------------------------------------------------- the run
_LABEL = re.compile(r"^\[Memory (\d+) - [^|]+\| role: [^|]+\| session: ([^\s|\]]+)[^\n]*\]$", re.M)


def _labels(block: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in _LABEL.finditer(block)}


def _untyped_block(contents: Sequence[str]) -> str:
    return "Relevant memories:\n" + "\n".join(f"{i}. {c}" for i, c in enumerate(contents, 1))


def near_duplicate_share(data: ConfusionSet, embedder: Any) -> dict[str, float]:
    """How confusable the set is on ``embedder``: share of case probes for which another user's case
    on the same topic is at least as similar to the query as the asker's own case, and share of policy
    probes whose own rumour is at least as similar as the own official document."""
    by_id = {m.id: m for m in data.memories}
    mv = dict(zip(by_id, embedder.encode([m.content for m in data.memories])))
    qv = embedder.encode([p.query for p in data.probes])
    cases: dict[str, list[str]] = {}
    for m in data.memories:
        if m.kind == "case" and m.topic:
            cases.setdefault(m.topic, []).append(m.id)
    hit_u = hit_r = n_c = n_p = 0
    for p, q in zip(data.probes, qv):
        tgt = float(q @ mv[p.target])
        if p.kind == "case":
            n_c += 1
            other = [float(q @ mv[i]) for i in cases[p.topic] if by_id[i].user_id != p.user_id]
            hit_u += bool(other) and max(other) >= tgt
        else:
            n_p += 1
            hit_r += float(q @ mv[p.target.replace(".spec", ".rumour")]) >= tgt
    return {"other_user_case_at_least_as_similar": hit_u / max(n_c, 1),
            "own_rumour_at_least_as_similar_as_spec": hit_r / max(n_p, 1)}


def evaluate_confusion(data: ConfusionSet, embedder: Any, *, k: int = 5) -> dict[str, Any]:
    """Write ``data`` through the public API into a fresh store and answer every probe on the three
    paths (module docstring). Returns the payload: metrics per path, overall and per probe kind."""
    from runtime import MemoryStore, RoleContext, format_context

    spec_by_id = {m.id: m for m in data.memories}
    out: dict[str, list[tuple[Probe, list[Item]]]] = {p: [] for p in PATHS}
    example: dict[str, Any] = {}
    t0 = time.perf_counter()
    with MemoryStore.open(":memory:", embedder=embedder) as store:
        stored = []
        by_user: dict[str, list[MemorySpec]] = {}
        for m in data.memories:
            by_user.setdefault(m.user_id, []).append(m)
        for uid, ms in by_user.items():
            stored += store.scope(user_id=uid).write_many(
                [{"content": m.content, "id": m.id, **m.fields} for m in sorted(ms, key=lambda m: m.fields["timestamp"])])
        t_write = time.perf_counter() - t0
        recs = {r.id: r for r in stored}
        # the pooled index holds each distinct text once; a hit on a text the asker also owns counts as
        # the asker's copy (the benefit of the doubt goes to the baseline: identical official documents
        # in several users' memories are not a confusion)
        owners: dict[str, list[str]] = {}
        for r in stored:
            owners.setdefault(r.content, []).append(r.id)
        texts = list(owners)
        pool = np.asarray(store.embedder.encode(texts), dtype=np.float32)
        qv = np.asarray(store.embedder.encode([p.query for p in data.probes]), dtype=np.float32)

        def item(rid: str, labelled: bool = False) -> Item:
            r, s = recs[rid], spec_by_id[rid]
            return Item(rid, r.provenance.user_id, r.provenance.session_id, r.role_context.active_role,
                        r.role_context.sub_role, s.kind, s.topic, labelled)

        for p, q in zip(data.probes, qv):
            scope = store.scope(user_id=p.user_id)
            ctx = RoleContext(active_role=p.role, sub_role=p.sub_role)
            blocks = {}
            for path, flt in (("typed", {"roles": [p.role], "sub_roles": [p.sub_role]}), ("typed_rank_only", {})):
                hits = scope.recall(p.query, k, context=ctx, now=NOW, update_usage=False, **flt)  # type: ignore[arg-type]
                blocks[path] = format_context(hits, now=NOW)
                labels = _labels(blocks[path])
                out[path].append((p, [item(h.record.id, labels.get(i) == h.record.provenance.session_id)
                                      for i, h in enumerate(hits, 1)]))
            top = np.argsort(-(pool @ q), kind="stable")[:k]
            blocks["untyped"] = _untyped_block([texts[i] for i in top])
            out["untyped"].append((p, [item(next((o for o in owners[texts[i]] if recs[o].provenance.user_id == p.user_id),
                                                 owners[texts[i]][0])) for i in top]))
            if not example and p.kind == "case" and any(it.user_id != p.user_id for it in out["untyped"][-1][1]):
                example = {"probe": p.id, "asker": p.user_id, "context": f"{p.role}/{p.sub_role}", "query": p.query,
                           "target": recs[p.target].content, "blocks": blocks}
    payload: dict[str, Any] = {"k": k, "memories": len(data.memories), "users": len(data.sessions),
                               "pooled_index_entries": len(texts),
                               "probes": {"total": len(data.probes),
                                          "case": sum(p.kind == "case" for p in data.probes),
                                          "policy": sum(p.kind == "policy" for p in data.probes)},
                               "encoder": getattr(embedder, "encoder_id", type(embedder).__name__),
                               "write_s": round(t_write, 2), "run_s": round(time.perf_counter() - t0, 2),
                               "summary": {}, "by_kind": {}, "example": example}
    for path, res in out.items():
        typed = path != "untyped"
        payload["summary"][path] = metrics(res, data.sessions, typed=typed)
        payload["by_kind"][path] = {kind: metrics([r for r in res if r[0].kind == kind], data.sessions, typed=typed)
                                    for kind in ("case", "policy")}
    return payload


# ----------------------------------------------------------------------------------------- report
ROWS = (("cross_user_confusion", "cross-user confusion ↓"), ("cross_role_confusion", "cross-role confusion ↓"),
        ("cross_user_above_target", "another user's memory above the target ↓"),
        ("cross_role_above_target", "another role's memory above the target ↓"),
        ("rumour_over_spec", "rumour over spec ↓"), ("role_consistency", "role consistency ↑"),
        ("citation_accuracy", "citation accuracy ↑"), ("citation_all_correct", "probes with every citation right ↑"),
        ("target_recall_at_k", "target recall@k ↑"))
_NAMES = {"typed": "typed (memir: scope + role filter + re-rank)", "typed_rank_only": "typed, no role filter",
          "untyped": "untyped pooled (raw cosine)"}


def _f(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, (int, float)) else "–"


def confusion_table(payload: dict[str, Any]) -> str:
    """The A/B table (Markdown): one row per metric, one column per path."""
    paths = [p for p in PATHS if p in payload["summary"]]
    lines = [f"| metric (k = {payload['k']}) | " + " | ".join(_NAMES[p] for p in paths) + " |",
             "|---|" + "---|" * len(paths)]
    for key, name in ROWS:
        lines.append(f"| {name} | " + " | ".join(_f(payload["summary"][p][key]) for p in paths) + " |")
    for kind in ("case", "policy"):
        for key in ("cross_user_confusion", "target_recall_at_k"):
            lines.append(f"| {kind} probes: {key.replace('_', ' ')} | "
                         + " | ".join(_f(payload["by_kind"][p][kind][key]) for p in paths) + " |")
    return "\n".join(lines)


_SHORT = {"cross_user_confusion": "other user\nin top-k", "cross_role_confusion": "other role\nin top-k",
          "cross_user_above_target": "other user\nabove target", "cross_role_above_target": "other role\nabove target",
          "rumour_over_spec": "rumour\nover spec", "role_consistency": "role\nconsistency",
          "citation_accuracy": "citation\naccuracy", "citation_all_correct": "every citation\nright",
          "target_recall_at_k": "target\nrecall@k"}


def _plot(payload: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = [p for p in PATHS if p in payload["summary"]]
    groups = (ROWS[:5], ROWS[5:])
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2))
    colors = {"typed": "#1f77b4", "typed_rank_only": "#7fb3d5", "untyped": "#d62728"}
    for ax, rows, title in zip(axes, groups, ("confusion (lower is better)", "consistency, citations, recall (higher is better)")):
        x = np.arange(len(rows))
        w = 0.8 / len(paths)
        for j, p in enumerate(paths):
            vals = [payload["summary"][p][k] or 0.0 for k, _ in rows]
            bars = ax.bar(x + (j - (len(paths) - 1) / 2) * w, vals, w, label=_NAMES[p], color=colors[p])
            ax.bar_label(bars, fmt="%.2f", fontsize=7)
        ax.set_xticks(x, [_SHORT[k] for k, _ in rows], fontsize=8)
        ax.set_ylim(0, 1.1)
        ax.set_title(title, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(paths), fontsize=9, frameon=False)
    fig.suptitle(f"Confusion evaluation: typed vs untyped retrieval ({payload['probes']['total']} probes, "
                 f"{payload['users']} users, {payload['memories']} memories, k = {payload['k']}, {payload['encoder']})",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_confusion_report(payload: dict[str, Any], out: str | Path) -> list[Path]:
    """Write ``OUT.json``, ``OUT.md`` (the A/B table) and ``OUT.png`` (the plot); returns the paths."""
    from .locomo import write_json
    p = Path(out)
    write_json(p, payload)
    md, png = p.with_suffix(".md"), p.with_suffix(".png")
    conf = payload.get("confusability", {})
    md.write_text("# Confusion evaluation: typed vs untyped pooled retrieval\n\n"
                  f"{payload['users']} users, {payload['memories']} memories, {payload['probes']['total']} probes "
                  f"({payload['probes']['case']} case, {payload['probes']['policy']} policy), encoder "
                  f"`{payload['encoder']}`, k = {payload['k']}, seed {payload.get('seed')}.\n\n"
                  + (f"Confusability: another user's case at least as similar to the query as the asker's own in "
                     f"{_f(conf.get('other_user_case_at_least_as_similar'))} of case probes; the asker's rumour at least as "
                     f"similar as the official document in {_f(conf.get('own_rumour_at_least_as_similar_as_spec'))} of "
                     "policy probes (raw cosine).\n\n" if conf else "")
                  + confusion_table(payload) + "\n\nMetric definitions: `train/eval/confusion.py` (module docstring).\n")
    _plot(payload, png)
    return [p, md, png]
