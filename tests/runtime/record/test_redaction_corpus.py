"""Redaction measured on a corpus (``redaction_corpus.py``), and what reaches the SQLite file.

- recall per kind: the share of planted secrets of which nothing that must vanish is left (for a
  ``user / password`` pair, the password; for an address, the street line) — at least 0.97 per kind;
- false positives: a benign look-alike sentence counts when redaction changed it at all — at most 1%;
- findings report exactly the placeholders inserted, credentials rate ``secret``, redaction is idempotent
  on the corpus, pathological inputs stay fast (no catastrophic backtracking);
- end to end through ``MemoryStore``: secrets written in the content and in every free-text side field
  (tags, attribute keys and values, source URI/entity/version, tone, trigger, roles), in a recall query
  and a task goal, are not in the bytes of the ``.sqlite`` / ``-wal`` / ``-shm`` files.

The numbers for the README: ``python bench/redaction_report.py``.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from redaction_corpus import CREDENTIAL_KINDS, Evaluation, benign, evaluate, secrets

from runtime import MemoryStore
from runtime.encoders import HashEmbedder
from runtime.record import RecordBuilder, Sensitivity
from runtime.record.redaction import RedactionKind, redact
from runtime.record.redaction.detectors import RULES
from runtime.record.redaction.redactor import _WINDOW_MIN_CHARS, _apply, _apply_windowed, _compile_gate, _trie_pattern

MIN_RECALL = 0.97
MAX_FP_RATE = 0.01


@pytest.fixture(scope="module")
def evaluation() -> Evaluation:
    return evaluate(lambda t: redact(t).text)


# ---------------------------------------------------------------- the corpus itself
def test_corpus_is_big_varied_and_well_formed() -> None:
    cases, good = secrets(), benign()
    kinds = Counter(c.kind for c in cases)
    assert len(cases) >= 300 and len(kinds) >= 25 and len(good) >= 200
    assert min(kinds.values()) >= 8, kinds  # every kind has enough cases for a recall figure
    for c in cases:
        assert c.text.count(c.secret) == 1, c
        for part in c.core:  # a core part must occur once, or "it is gone" would mean nothing
            assert c.text.count(part) == 1, c
    assert len({c.text for c in cases}) == len(cases)
    assert len({b.text for b in good}) == len(good)
    assert not {c.text for c in cases} & {b.text for b in good}


def test_the_gate_scanner_finds_the_longest_literal_at_every_position_like_an_ordered_alternation() -> None:
    """The gate literals' prefix-tree pattern against the plain longest-first alternation it replaced, on
    text made of the literals themselves (prefixes of one another, overlapping, run together) and of
    the corpus's sentences: the same literal found at the same position, every time."""
    lits = sorted({g for r in RULES if r.gate for g in r.gate if g.isascii() and g == g.lower()}, key=len, reverse=True)
    assert len(lits) > 100 and any(a != b and b.startswith(a) for a in lits for b in lits)  # prefixes of others
    plain = re.compile("(?=(" + "|".join(re.escape(g) for g in lits) + "))")
    tree = re.compile("(?=(" + _trie_pattern(lits) + "))")
    rng = random.Random(5)
    texts = [c.text.lower() for c in secrets()] + [b.text.lower() for b in benign()]
    texts += ["".join(rng.choice(lits)[: rng.randint(1, 12)] + rng.choice(["", " ", "x", "-"]) for _ in range(20))
              for _ in range(2000)]
    found = 0
    for t in texts:
        a = [(m.start(), m.group(1)) for m in plain.finditer(t)]
        assert [(m.start(), m.group(1)) for m in tree.finditer(t)] == a, t
        found += len(a)
    assert found > 10_000


def test_corpus_is_deterministic() -> None:
    from redaction_corpus import _build_benign, _build_secrets
    assert tuple(_build_secrets()) == secrets() and tuple(_build_benign()) == benign()


# ---------------------------------------------------------------- recall and false positives
@pytest.mark.parametrize("kind", sorted({c.kind for c in secrets()}))
def test_recall_per_kind(evaluation: Evaluation, kind: str) -> None:
    missed = [out for c, out in evaluation.missed if c.kind == kind]
    assert evaluation.recall(kind) >= MIN_RECALL, f"{kind}: recall {evaluation.recall(kind):.3f}; left in: {missed}"


def test_false_positive_rate(evaluation: Evaluation) -> None:
    assert evaluation.fp_rate <= MAX_FP_RATE, [out for _, out in evaluation.false_positives]


_PLACEHOLDER = re.compile(r"\[([A-Z_]+)\]")
_BY_PLACEHOLDER = {k.placeholder: k for k in RedactionKind}


def _placeholders(text: str) -> Counter[RedactionKind]:
    return Counter(_BY_PLACEHOLDER[f"[{m}]"] for m in _PLACEHOLDER.findall(text) if f"[{m}]" in _BY_PLACEHOLDER)


def test_findings_count_exactly_the_placeholders_inserted_and_rate_sensitivity() -> None:
    for c in secrets():
        r = redact(c.text)
        assert dict(_placeholders(r.text) - _placeholders(c.text)) == {f.kind: f.count for f in r.findings}, c
        if c.kind in CREDENTIAL_KINDS:
            assert r.sensitivity is Sensitivity.secret, (c, r.text)
        else:
            assert r.sensitivity.rank >= Sensitivity.pii.rank, (c, r.text)


def test_redaction_is_idempotent_on_the_corpus() -> None:
    for text in [c.text for c in secrets()] + [b.text for b in benign()]:
        once = redact(text).text
        again = redact(once)
        assert again.text == once and again.findings == (), text


def test_new_kinds_are_personal_data_and_keep_their_label() -> None:
    for kind in ("ssn", "passport", "national_id", "date_of_birth", "address"):
        assert RedactionKind(kind).sensitivity is Sensitivity.pii
    assert redact("My SSN is 219-09-9999.").text == "My SSN is [SSN]."
    assert redact("passport no. X1234567").text == "passport no. [PASSPORT]"
    assert redact("DOB: 1985-03-12").text == "DOB: [DATE_OF_BIRTH]"
    assert redact("Ship to 42 Elm Street, Springfield, IL 62704.").text == "Ship to [ADDRESS]."
    assert redact("NI number: QQ123456C").text == "NI number: [NATIONAL_ID]"


@pytest.mark.parametrize("text", [
    "1" * 20000, "12 " * 7000, "password: " * 2000, "password is " * 2000, "a@" * 10000, "a@" + "b." * 10000,
    "1:2:" * 5000, "Ab1+" * 5000, "DE89 " + "3704 " * 4000, "born on " * 2000 + "12", "12 Oak " * 3000,
    "-----BEGIN RSA PRIVATE KEY-----\n" * 3000, "user a " * 3000 + "password", "Authorization: " * 2000,
    ("12 " + "Abc " * 5) * 800, "x" * 10000 + "@" + "y" * 10000, "login: a:" * 2000,
])
def test_pathological_inputs_take_linear_time(text: str) -> None:
    t = time.perf_counter()
    redact(text)
    assert time.perf_counter() - t < 2.0  # ~60 ms measured; catastrophic backtracking would take minutes


def test_searching_around_anchors_finds_what_a_full_scan_finds() -> None:
    """Long text is searched only around each rule's anchors; that must change nothing."""
    rng = random.Random(7)
    pool = [c.text for c in secrets()] + [b.text for b in benign()]
    glue = [" ", "\n", ", ", "; ", " and ", "\n\n", "  ", " - ", ": ", "/", "=", ""]
    texts = []
    for _ in range(150):
        parts = rng.sample(pool, rng.randint(15, 50))
        texts.append("".join(p + rng.choice(glue) for p in parts))
    texts.append(("filler " * 100).join(c.text for c in secrets()[:60]))
    anchored = [_compile_gate(r) for r in RULES if r.anchors]
    assert len(anchored) >= 10
    compared = 0
    for text in texts:
        if len(text) <= _WINDOW_MIN_CHARS:
            continue
        low = text.lower()
        if len(low) != len(text):
            continue
        compared += 1
        for _kind, pattern, check, *_gates, anchor, back in anchored:
            assert anchor is not None
            assert _apply_windowed(pattern, check, text, low, anchor, back) == _apply(pattern, check, text), (
                pattern.pattern[:60])
    assert compared >= 100


# ---------------------------------------------------------------- end to end: nothing reaches the file
def _forms(secret: str) -> list[bytes]:
    """How a value could sit in the file: UTF-8, inside JSON with \\u escapes, UTF-16."""
    return sorted({secret.encode(), json.dumps(secret)[1:-1].encode(), secret.encode("utf-16-le")})


def test_selecting_rules_by_one_scan_gives_what_testing_every_gate_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short texts pick their rules with one literal scan; the result must equal the full gate test."""
    import runtime.record.redaction.redactor as mod

    texts = [s.text for s in secrets()] + [b.text for b in benign()]
    texts += [t.upper() for t in texts[:200]] + [t.replace("e", "é") for t in texts[:200]]
    fast = [mod.Redactor().redact(t) for t in texts]
    monkeypatch.setattr(mod, "_SELECT_MAX_CHARS", -1)
    slow = [mod.Redactor().redact(t) for t in texts]
    assert [(r.text, r.findings) for r in fast] == [(r.text, r.findings) for r in slow]


def test_secrets_never_reach_the_sqlite_files(tmp_path: Path) -> None:
    planted = {
        "content_pw": "Tr0ub4dor&3x", "content_card": "4111 1111 1111 1111", "content_ssn": "219-09-9999",
        "tag_key": "sk-proj-abcDEF1234567890ghijKLMNop", "tag_mail": "alice.smith@example.com",
        "attr_key": "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "attr_value": "+44 20 7946 0958",
        "attr_iban": "DE89 3704 0044 0532 0130 00", "uri_pw": "s3cretpw", "entity_mail": "bob@münchen.de",
        "tone_jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
        "trigger_key": "AKIAIOSFODNN7EXAMPLE", "version_ip": "203.0.113.42", "role_dob": "12/03/1985",
        "sub_role_passport": "X1234567", "query_mail": "carol.jones@example.org", "goal_phone": "(415) 555-2671",
        "item2_addr": "1600 Pennsylvania Avenue NW", "attr_password": "hunter2", "attr_card_int": "4111111111111111",
    }
    p = planted
    path = tmp_path / "m.sqlite"
    store = MemoryStore.open(path, embedder=HashEmbedder(dim=32, seed=0))
    try:
        scope = store.scope(user_id="u1", agent_id="a")
        scope.set_task(f"call the client back at {p['goal_phone']}")
        rec = scope.write(
            f"The wifi password is {p['content_pw']}; card {p['content_card']}; SSN {p['content_ssn']}.",
            tags=["ops", p["tag_key"], f"owner {p['tag_mail']}"],
            attributes={p["attr_key"]: "token as a key", "contact": f"phone {p['attr_value']}",
                        "iban": p["attr_iban"], "rows": 3, "password": p["attr_password"],
                        "card": int(p["attr_card_int"])},
            source_uri=f"https://admin:{p['uri_pw']}@host.example.com/x",
            source_entity=f"mail from {p['entity_mail']}",
            tone=f"Bearer {p['tone_jwt']}",
            trigger=f"key {p['trigger_key']}",
            source_version=f"from {p['version_ip']}",
            active_role=f"born on {p['role_dob']}",
            sub_role=f"passport number {p['sub_role_passport']}",
            source_type="external_ingest",
        )
        scope.write_many([f"Deliver to {p['item2_addr']}, Washington, DC 20500", "a plain note"])
        scope.recall(f"what did {p['query_mail']} say", k=2, explain=True)
        # What the caller gets back is redacted too, and rated by the most sensitive finding.
        assert rec.metadata.sensitivity is Sensitivity.secret
        assert rec.provenance.source_uri == "https://admin:[PASSWORD]@host.example.com/x"
        assert "[API_KEY]" in rec.metadata.tags and "[JWT]" in (rec.role_context.tone or "")
        dumped = rec.model_dump_json() + scope.get(rec.id).model_dump_json() + json.dumps(scope.recall_log())
        for name, value in p.items():
            assert value not in dumped, name

        def check_files(when: str) -> None:
            files = {f.name: f.read_bytes() for f in tmp_path.iterdir() if f.name.startswith("m.sqlite")}
            assert "m.sqlite" in files
            for fname, data in files.items():
                for name, value in p.items():
                    for form in _forms(value):
                        assert form not in data, f"{name} found in {fname} ({when})"

        check_files("open, WAL not checkpointed")
    finally:
        store.close()
    check_files("after close")


# ---------------------------------------------------------------- structured attributes
def test_attribute_values_are_read_with_their_key_as_the_label() -> None:
    rec = RecordBuilder().build("note", {"attributes": {
        "password": "hunter2", "phone": "4155552671", "ssn": "219099999", "card": 4111111111111111,
        "api_key": "abc123def456ghi789jkl", "home address": "42 elm street",
        "rows": 120, "ts": 1_700_000_000, "pass": "yes", "status": "ok", "flag": True, "ratio": 0.25,
        "bob@example.com": "owner"}}, user_id="u", agent_id="a")
    assert rec.metadata.attributes == {
        "password": "[PASSWORD]", "phone": "[PHONE]", "ssn": "[SSN]", "card": "[CARD]", "api_key": "[API_KEY]",
        "home address": "[ADDRESS]",
        # plain values keep their value and type
        "rows": 120, "ts": 1_700_000_000, "pass": "yes", "status": "ok", "flag": True, "ratio": 0.25,
        "[EMAIL]": "owner"}  # a key that is itself personal data is redacted on its own
    assert rec.metadata.sensitivity is Sensitivity.secret
    again = RecordBuilder().rebuild(rec, user_id="u", agent_id="a")  # idempotent on a stored record
    assert again.metadata.attributes == rec.metadata.attributes
