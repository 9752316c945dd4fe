"""Text statistics: the vectorised list-item count is the regex it replaced, match for match."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from utilitynet.textstats import _LIST_ITEM, _list_item_starts, text_stats

_PIECES = ["\n", " ", "\t", "1", "2", "3", "9", ".", ")", "-", "*", "•", "a", "x", "0", "é", "  ", "\n\n", "12. ",
           "- ", "•\t", "123. "]


def _regex_starts(low: bytes) -> list[int]:
    return [m.start() for m in _LIST_ITEM.finditer(low)]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join), min_size=1, max_size=4),
       st.integers(0, 40))
def test_list_item_starts_are_the_regex_matches(texts: list[str], indent: int) -> None:
    texts = [*texts, "\n" + " " * indent + "1. x"]  # past the vectorised walk's 8 steps too
    low = ("\x00" + "\x00".join(texts) + "\x00").encode().lower()
    got = np.flatnonzero(_list_item_starts(np.frombuffer(low, dtype=np.uint8))).tolist()
    assert got == _regex_starts(low)


def test_list_items_are_counted_per_text() -> None:
    got = text_stats(["options:\n1. a\n2. b\n- c", "no list - here", "- first\n  * nested\n10) ten", "• dot"])
    assert np.expm1(got["list_items_log"]).round().tolist() == [3, 0, 3, 1]
