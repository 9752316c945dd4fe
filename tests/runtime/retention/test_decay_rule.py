"""The declarative "unreferenced for N hours → retention priority decays" rule (seed 001 §2.1;
issue 27 item 2): the plan multiplies the model utility of every matching item nobody recalled for
longer than N hours, the solver decides on that, and the decision and ``explain`` name the rule.
Through ``Scope.retain`` on both backends, and through ``memir score``'s two engines."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime import DEFAULT_RULES, FakeScorer, MemoryStore, load_rules
from runtime.errors import ValidationError
from runtime.record import MemIR
from runtime.retention.rules import DecayRule, Match, RuleSet, RuleView

H = timedelta(hours=1)

YAML = """\
must_keep:
  - {name: pinned, when: {flags: [pinned]}}
decays:
  - {name: unreferenced for a day, when: {}, unreferenced_hours: 24, half_life_hours: 24}
"""


def _rec(i: str, created: datetime, *, last: datetime | None = None, role: str = "user") -> MemIR:
    return MemIR.model_validate({"id": i, "content": i, "created_at": created.isoformat(),
                                 "provenance": {"user_id": "u"}, "role_context": {"dialog_role": role},
                                 "usage": {"last_accessed_at": last and last.isoformat()}})


def test_factor_counts_idle_hours_from_the_last_recall_or_the_write(now: datetime) -> None:
    recs = [_rec("fresh", now - 10 * H), _rec("old", now - 72 * H), _rec("recalled", now - 72 * H, last=now - 2 * H),
            _rec("tool", now - 48 * H, role="tool")]
    v = RuleView.from_records(recs)
    rule = DecayRule(name="d", unreferenced_hours=24, half_life_hours=12)
    assert rule.factors(v, now).tolist() == pytest.approx([1.0, 0.5 ** 4, 1.0, 0.5 ** 2])
    assert DecayRule(name="d", unreferenced_hours=24).factors(v, now).tolist() == pytest.approx([1, 0.25, 1, 0.5])
    floored = DecayRule(name="d", unreferenced_hours=24, half_life_hours=12, floor=0.2)
    assert floored.factors(v, now).tolist() == pytest.approx([1.0, 0.2, 1.0, 0.25])
    tools = DecayRule(name="d", when=Match(dialog_roles=["tool"]), unreferenced_hours=24)
    assert tools.factors(v, now).tolist() == pytest.approx([1, 1, 1, 0.5])
    both = RuleSet(decays=[rule, tools]).compile(recs, now)                  # several rules multiply
    assert both.decay.tolist() == pytest.approx([1.0, 0.5 ** 4, 1.0, 0.5 ** 2 * 0.5])
    assert both.decay_reasons[3] == [("d", pytest.approx(0.25)), ("d", pytest.approx(0.5))]


@pytest.mark.parametrize("bad", [{"name": "d", "unreferenced_hours": 0}, {"name": "d", "unreferenced_hours": 24,
                                                                            "floor": 2},
                                 {"name": "d", "unreferenced_hours": 24, "half_life_hours": -1},
                                 {"name": "d", "unreferenced_hours": 24, "after": 3}])
def test_a_bad_decay_rule_is_refused_naming_the_field(bad: dict) -> None:
    with pytest.raises(ValidationError) as ei:
        load_rules({"decays": [bad]})
    assert "decays" in str(ei.value)


def test_retain_honours_the_rule_and_explain_names_it(make_store: Callable[..., MemoryStore], onnx_encoder: Any,
                                                      now: datetime, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(YAML)
    me = make_store(embedder=onnx_encoder).scope(user_id="alice")
    scorer = FakeScorer(lambda r: {"Flight to Lisbon on March 3": 0.6, "Prefers aisle seats": 0.5}.get(r.content, 0.1))
    a = me.write("Flight to Lisbon on March 3", created_at=now - 72 * H)
    b = me.write("Prefers aisle seats", created_at=now - 72 * H)
    assert me.recall("aisle seats", k=1, now=now - 2 * H)[0].record.id == b.id     # b was referenced
    plain = me.retain(1, scorer=scorer, now=now, dry_run=True)
    assert plain.kept == [a.id]                                                    # on model utility: a
    d = me.retain(1, scorer=scorer, rules=str(rules), now=now)
    assert d.kept == [b.id] and d.archived == [a.id]
    item = d.items[a.id]
    assert item.model_utility == pytest.approx(0.6)
    assert item.utility == pytest.approx(0.6 * 0.5 ** 2)                           # 48 h past the day: ×¼
    assert [(x.rule, x.add) for x in item.bonuses] == [("unreferenced for a day", pytest.approx(-0.45))]
    assert d.items[b.id].bonuses == [] and d.items[b.id].utility == pytest.approx(0.5)
    why = me.explain(a.id)
    assert "utility adjusted by unreferenced for a day -0.45" in why.summary
    assert why.history[-1].item.bonuses == item.bonuses                           # as logged


def test_the_default_rules_do_not_decay(store: MemoryStore, now: datetime) -> None:
    assert DEFAULT_RULES.decays == []
    me = store.scope(user_id="alice")
    me.write("old", created_at=now - 1000 * H)
    d = me.retain(1, scorer=FakeScorer(default=0.4), now=now, dry_run=True)
    assert next(iter(d.items.values())).utility == pytest.approx(0.4)


def test_memir_score_engines_agree_with_a_decay_rule(tmp_path: Path) -> None:
    from runtime.batch import score_dump
    from runtime.store.dumps import write_dump
    from tests.runtime.batch.test_engines import NOW, _cfg, _outputs, _same, varied_rows
    from tests.runtime.test_cli import _tiny_model

    model = _tiny_model(tmp_path / "model", 64)
    dump = tmp_path / "dump.jsonl"
    rows = varied_rows(120)
    write_dump(rows, dump)
    rules = tmp_path / "rules.yaml"
    rules.write_text("decays:\n  - {name: a week unreferenced, unreferenced_hours: 168, half_life_hours: 240}\n")
    score_dump(dump, tmp_path / "plain.jsonl", _cfg(model, now=NOW), progress=False)
    score_dump(dump, tmp_path / "rows.jsonl", _cfg(model, now=NOW, rules=str(rules)), engine="rows", progress=False)
    score_dump(dump, tmp_path / "local.jsonl", _cfg(model, now=NOW, rules=str(rules)), progress=False)
    _same(_outputs(tmp_path / "rows.jsonl"), _outputs(tmp_path / "local.jsonl"))
    plain, decayed = _outputs(tmp_path / "plain.jsonl"), _outputs(tmp_path / "local.jsonl")
    lower = [k for k in plain if decayed[k]["utility"] < plain[k]["utility"] - 1e-9]
    assert len(lower) > len(plain) // 2                              # the dump spans months: most decayed
    assert all(decayed[k]["utility"] <= plain[k]["utility"] + 1e-12 for k in plain)
    assert np.isfinite([decayed[k]["utility"] for k in decayed]).all()


def test_compiled_rules_are_built_with_every_field_given(now: datetime) -> None:
    """``compile`` builds its result without validation; a field left to its default_factory would make
    pydantic inspect the factory's signature on every decision (slower than validating)."""
    from runtime.retention.rules import CompiledRules

    c = DEFAULT_RULES.compile([_rec("a", now - 10 * H), _rec("b", now - 72 * H)], now)
    assert c.model_fields_set == set(CompiledRules.model_fields)
    assert len(c.bonus) == len(c.bonus_reasons) == len(c.decay) == len(c.decay_reasons) == 2
