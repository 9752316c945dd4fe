"""MemIR: exact JSON round-trip (hypothesis) and validation errors that name the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from conftest import memir_records
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError as PydanticValidationError

from runtime.errors import ValidationError
from runtime.record import DialogRole, MemIR, Provenance, SourceType


# ---------------------------------------------------------------- round trip
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memir_records())
def test_json_round_trip_is_exact(rec: MemIR) -> None:
    text = rec.model_dump_json()
    back = MemIR.model_validate_json(text)
    assert back == rec
    assert back.model_dump_json() == text                      # byte-identical second trip
    assert MemIR.model_validate(rec.model_dump(mode="json")) == rec  # the dict path too


@settings(max_examples=40, deadline=None)
@given(memir_records())
def test_round_trip_keeps_real_types_and_utc(rec: MemIR) -> None:
    back = MemIR.model_validate_json(rec.model_dump_json())
    assert isinstance(back.provenance.type, SourceType)
    assert isinstance(back.role_context.dialog_role, DialogRole)
    for dt in (back.created_at, back.provenance.timestamp, back.metadata.expires_at, back.usage.last_accessed_at):
        assert dt is None or dt.utcoffset() == timedelta(0)
    hl = back.metadata.freshness_half_life
    assert hl is None or isinstance(hl, timedelta)


def test_naive_and_offset_datetimes_are_normalised_to_utc() -> None:
    naive = datetime(2024, 3, 1, 12, 0)
    ist = datetime(2024, 3, 1, 17, 30, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    a = MemIR(content="x", created_at=naive, provenance=Provenance(user_id="u"))
    b = MemIR(content="x", created_at=ist, provenance=Provenance(user_id="u"))
    assert a.created_at == b.created_at == datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
    assert a.created_at.tzinfo == UTC and b.created_at.tzinfo == UTC


# ---------------------------------------------------------------- validation names the field
def _ours(body: dict) -> ValidationError:
    with pytest.raises(PydanticValidationError) as ei:
        MemIR.model_validate(body)
    return ValidationError.from_pydantic(ei.value)


@pytest.mark.parametrize(("body", "field"), [
    ({"content": "x", "provenance": {"user_id": "u"}, "metadata": {"confidence": 1.5}}, "metadata.confidence"),
    ({"content": "x", "provenance": {"user_id": "bad id; DROP"}}, "provenance.user_id"),
    ({"content": "x", "provenance": {"user_id": "u", "type": "rumour"}}, "provenance.type"),
    ({"content": "x", "provenance": {"user_id": "u"}, "role_context": {"dialog_role": "narrator"}},
     "role_context.dialog_role"),
    ({"content": "x", "provenance": {"user_id": "u"}, "metadata": {"freshness_half_life": -5}},
     "metadata.freshness_half_life"),
    ({"content": "x", "provenance": {"user_id": "u"}, "metadata": {"attributes": {"k": float("nan")}}},
     "metadata.attributes"),
    ({"content": "x", "provenance": {"user_id": "u"}, "metadata": {"flags": ["immortal"]}}, "metadata.flags.0"),
    ({"content": "   ", "provenance": {"user_id": "u"}}, "content"),
    ({"content": "x", "provenance": {"user_id": "u"}, "colour": "blue"}, "colour"),          # extra="forbid"
    ({"content": "x", "provenance": {"user_id": "u", "mood": 1}}, "provenance.mood"),       # nested forbid
    ({"content": "x", "provenance": {"user_id": "u"}, "created_at": "yesterday"}, "created_at"),
    ({"content": "x"}, "provenance"),
])
def test_validation_error_names_the_field(body: dict, field: str) -> None:
    err = _ours(body)
    assert err.field == field
    assert field in str(err)
    assert (field, err.problems[0][1]) in err.problems


def test_validation_collects_every_problem() -> None:
    err = _ours({"content": "x", "provenance": {"user_id": "u", "type": "nope"},
                 "metadata": {"confidence": -1}})
    fields = {f for f, _ in err.problems}
    assert {"provenance.type", "metadata.confidence"} <= fields


def test_a_record_cannot_derive_from_itself() -> None:
    with pytest.raises(PydanticValidationError, match="own id"):
        MemIR(id="m1", content="x", provenance=Provenance(user_id="u", derived_from=["m1"]))
