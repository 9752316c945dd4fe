"""Text that cannot be stored or embedded (lone surrogates, from broken decoders) and rules text that
looks like a path: a typed ValidationError naming the field, never a tokenizer's TypeError or an
OSError, and nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import MemoryStore
from runtime.errors import ValidationError
from runtime.retention.rules import load_rules

BAD = "x\ud800y"


@pytest.mark.parametrize("call,field", [
    (lambda s: s.write(BAD), "content"),
    (lambda s: s.write("fine", tags=["ok", BAD]), "tags.1"),
    (lambda s: s.write("fine", attributes={"pw": BAD}), "attributes.pw"),
    (lambda s: s.write("fine", attributes={BAD: "v"}), "attributes.x\ud800y (a key)"),
    (lambda s: s.write("fine", session_id=BAD), "session_id"),
    (lambda s: s.write_many(["fine", BAD]), "[1].content"),
    (lambda s: s.recall(BAD), "query"),
])
def test_lone_surrogates_are_refused_by_field_and_nothing_is_written(store: MemoryStore, call: Any,
                                                                   field: str) -> None:
    scope = store.scope(user_id="u")
    with pytest.raises(ValidationError) as ei:
        call(scope)
    assert ei.value.field == field and "surrogate" in str(ei.value)
    assert scope.list() == []


def test_the_real_encoder_refuses_them_too(onnx_encoder: Any) -> None:
    with pytest.raises(ValidationError) as ei:
        onnx_encoder.encode(["fine", BAD])
    assert ei.value.field == "texts[1]"


def test_rules_text_longer_than_a_file_name_is_read_as_yaml() -> None:
    text = "must_keep:\n" + "".join(f"  - name: r{i}\n    when: {{tags: [t{i}]}}\n" for i in range(150))
    assert len(text) > 4096 and len(load_rules(text).must_keep) == 150
    one_line = "must_keep: [" + ", ".join(f"{{name: r{i}, when: {{tags: [t{i}]}}}}" for i in range(200)) + "]"
    assert len(load_rules(one_line).must_keep) == 200
    for not_a_path in ("a" * 5000, "rules\0.yaml"):
        with pytest.raises(ValidationError, match="does not exist") as ei:
            load_rules(not_a_path)
        assert ei.value.field == "rules" and len(str(ei.value)) < 300


@pytest.mark.parametrize("attrs,secret", [
    ({"pw": "password: hunter2"}, "hunter2"),
    ({"password": "my password is hunter2"}, "hunter2"),
    ({"note": "pw: Tr0ub4dor&3", "pw": "Tr0ub4dor&3"}, "Tr0ub4dor&3"),
    ({"token": "api_key=sk-live-abcdefghijklmnop1234"}, "sk-live-abcdefghijklmnop1234"),
])
def test_a_secret_in_an_attribute_value_is_gone_whatever_label_it_carries(store: MemoryStore, attrs: dict[str, str],
                                                                         secret: str) -> None:
    scope = store.scope(user_id="u")
    rec = scope.write("login details", attributes=attrs)
    assert secret not in repr(rec.metadata.attributes) and rec.metadata.sensitivity.value == "secret"
    assert secret not in repr(scope.get(rec.id).metadata.attributes)
