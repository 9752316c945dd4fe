"""Candidate extraction from LLM output: <mem> tags and JSON new_memories; malformed input raises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runtime.annotate.extract import Candidate, extract_candidates
from runtime.errors import ValidationError
from runtime.record import Flag, Sensitivity


def test_tags_with_attributes_in_order() -> None:
    out = ("I booked the 9:40 train.\n<mem tags=\"travel, train\" confidence=\"0.8\">User prefers window seats</mem>"
           " and <MEM flags='core_instruction,pinned' half-life=72h sensitivity=pii>  Always answer in French </MEM>"
           ' <mem derived_from="mem_1,mem_2" expires_at="2024-05-01T10:00:00Z">Gate code is temporary</mem>')
    c = extract_candidates(out)
    assert [x.content for x in c] == ["User prefers window seats", "Always answer in French", "Gate code is temporary"]
    assert c[0].tags == ["travel", "train"] and c[0].confidence == 0.8 and c[0].flags == []
    assert c[1].flags == [Flag.core_instruction, Flag.pinned] and c[1].freshness_half_life == timedelta(hours=72)
    assert c[1].sensitivity is Sensitivity.pii and c[1].confidence is None
    assert c[2].derived_from == ["mem_1", "mem_2"]
    assert c[2].expires_at == datetime(2024, 5, 1, 10, tzinfo=UTC)


def test_multiline_content_and_other_tags_are_left_alone() -> None:
    out = "<memory>not ours</memory> <b>bold</b> <mem>line one\nline two</mem> <mem-note>x</mem-note>"
    assert [c.content for c in extract_candidates(out)] == ["line one\nline two"]


@pytest.mark.parametrize("output", ["", "Just a normal reply with no memories.", {"reply": "hi"},
                                    {"new_memories": None}, {"new_memories": []}, '{"reply": "x"}',
                                    "Use {braces} freely; they are not JSON."])
def test_no_candidates(output: str | dict) -> None:
    assert extract_candidates(output) == []


def test_json_dict_input() -> None:
    c = extract_candidates({"reply": "ok", "new_memories": [
        "Flight is at 9:40", {"content": "Hotel is the Ritz", "tags": ["hotel"], "confidence": 0.9,
                              "freshness_half_life": 3600, "attributes": {"city": "Paris", "stars": 5}}]})
    assert [x.content for x in c] == ["Flight is at 9:40", "Hotel is the Ritz"]
    assert c[1].freshness_half_life == timedelta(hours=1) and c[1].attributes == {"city": "Paris", "stars": 5}


@pytest.mark.parametrize("template", [
    '{"new_memories": %s}',
    'Here you go:\n```json\n{"answer": "done", "new_memories": %s}\n```\nAnything else?',
    'Sure. ```\n{"new_memories": %s}\n``` bye',
    'Result: {"new_memories": %s} (end)',
    '{"reply": {"text": "nested"}, "new_memories": %s}',
])
def test_json_in_text_whole_fenced_or_embedded(template: str) -> None:
    items = '["A fact", {"content": "Another", "tags": "x,y", "confidence": "0.5", "freshness_half_life": "3d"}]'
    c = extract_candidates(template % items)
    assert [x.content for x in c] == ["A fact", "Another"]
    assert c[1].tags == ["x", "y"] and c[1].confidence == 0.5 and c[1].freshness_half_life == timedelta(days=3)


def test_tags_and_json_together_keep_text_order() -> None:
    out = '<mem>first</mem> then {"new_memories": ["second"]} and <mem>third</mem>'
    assert [c.content for c in extract_candidates(out)] == ["first", "second", "third"]


@pytest.mark.parametrize(("output", "where", "says"), [
    ("<mem>User likes tea", "<mem> #1 (line 1)", "unclosed"),
    ("ok\nthen </mem>", "</mem> (line 2)", "without an opening"),
    ("<mem>a <mem>b</mem>", "<mem> #2 (line 1)", "do not nest"),
    ("<mem>   </mem>", "<mem> #1 (line 1).content", "empty"),
    ("<mem/>", "<mem> #1 (line 1)", "self-closing"),
    ('<mem confidence="1.5">x</mem>', "<mem> #1 (line 1).confidence", "less than or equal to 1"),
    ('<mem confidence="high">x</mem>', "<mem> #1 (line 1).confidence", "valid number"),
    ('<mem importance="9">x</mem>', "<mem> #1 (line 1).importance", "unknown attribute; allowed: tags"),
    ('<mem tags="a" tags="b">x</mem>', "<mem> #1 (line 1).tags", "twice"),
    ('<mem tags=>x</mem>', "<mem> #1 (line 1)", 'name="value"'),
    ('<mem flags="important">x</mem>', "<mem> #1 (line 1).flags.0", "core_instruction"),
    ('<mem half_life="-3h">x</mem>', "<mem> #1 (line 1).freshness_half_life", "positive"),
    ('{"new_memories": ["a",]}', "new_memories (line 1)", "does not parse: Expecting value at line 1 column 23"),
    ('```json\n{"new_memories": ["a"}\n```', "new_memories (line 2)", "does not parse"),
    ('{"new_memories": "just one"}', "new_memories", "must be a list"),
    ('{"new_memories": [42]}', "new_memories[0]", "string or an object"),
    ('{"new_memories": [{"text": "a"}]}', "new_memories[0].text", "unknown field; allowed: content"),
    ('{"new_memories": [{"content": "a", "confidence": -0.1}]}', "new_memories[0].confidence", "greater than"),
    ('{"new_memories": [""]}', "new_memories[0].content", "at least 1"),
])
def test_malformed_output_raises_naming_the_problem(output: str, where: str, says: str) -> None:
    with pytest.raises(ValidationError) as ei:
        extract_candidates(output)
    assert where in [f for f, _ in ei.value.problems]  # e.g. an unknown "text" also misses "content"
    assert says in str(ei.value)


def test_every_problem_is_collected_and_raised_once() -> None:
    out = ('<mem confidence="2">a</mem> <mem>ok</mem> <mem foo="1">b</mem>\n'
           '{"new_memories": [{"content": "c", "flags": ["nope"]}, 7]}')
    with pytest.raises(ValidationError) as ei:
        extract_candidates(out)
    assert [f for f, _ in ei.value.problems] == [
        "<mem> #1 (line 1).confidence", "<mem> #3 (line 1).foo", "new_memories[0].flags.0", "new_memories[1]"]


def test_bad_argument_type_and_strict_candidate() -> None:
    with pytest.raises(ValidationError, match="str or a dict"):
        extract_candidates(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Candidate(content="x", importance=3)  # type: ignore[call-arg]
    assert Candidate(content="  padded  ").content == "padded"
