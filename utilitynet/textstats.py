"""Length and lexical markers of memory texts, vectorised over a batch (numpy + ``re`` only).

Part of the feature contract: :mod:`utilitynet.features` reads :data:`TEXT_STAT_NAMES` in order.

Why not one regex per marker: Python's ``re`` scans alternations of words at ~20 MB/s, which alone
would cap batch scoring near 30k rows/s. Instead the batch is joined into one NUL-separated byte
string (ASCII-lowercased; offsets preserved) and split into *tokens* — maximal runs of letters
(with inner apostrophes: ``don't``) or of digits — entirely in numpy. Each token gets a 64-bit
polynomial hash, looked up in a small sorted vocabulary of marker words (and word pairs) whose bits
say which markers it is. Date patterns are rules over neighbouring tokens ("3 pm", "10:30",
"may 3", "next week", years 19xx/20xx). A few Chinese markers (seed 001 §4.1 quotes "非常重要",
"务必") are literal regexes, run only when a batch has non-ASCII text. Everything is O(bytes).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

import numpy as np

__all__ = ["TEXT_STATS_SCHEMA", "TEXT_STAT_NAMES", "text_stats"]

TEXT_STAT_NAMES: tuple[str, ...] = (
    "chars_log", "tokens_log", "urgency_log", "exclaim", "question", "numbers_log", "dates_log",
    "names_log", "first_person_log", "second_person_log", "update_markers_log", "greeting_only",
    "image_caption",
    # Dialogue cues (schema v2; measured on LoCoMo: what makes a turn worth remembering).
    "first_person_rate", "past_events_log", "my_noun_log", "questions_log", "ends_question",
    "time_words_log", "caps_words_log", "greeting_any", "reaction", "exclaim_rate",
    # Schema v3: what the facts people ask back for look like (measured on LongMemEval: issue 23).
    "quantities_log", "requests_log", "digression", "list_items_log",
)

_TEXT_FORMULAS = 1
"""Bumped whenever a formula of :func:`text_stats` changes (the names alone would not show it)."""

TEXT_STATS_SCHEMA = f"text-{_TEXT_FORMULAS}-" + hashlib.sha256("\n".join(TEXT_STAT_NAMES).encode()).hexdigest()[:16]
"""A fingerprint of the text statistics (formula version and :data:`TEXT_STAT_NAMES` in order): values
stored under one schema are read back only by code of the same schema (a dump's ``text_stats`` column is
ignored, and the statistics recomputed, otherwise)."""
"""Output keys of :func:`text_stats`, in feature-column order."""

_MAX_COUNT = 1000.0  # counts are clipped before log1p: every column is bounded (≤ log1p(1000) ≈ 6.9)

# Marker bits of a vocabulary word.
(URG, FP, SP, UPD, GREET, DAYW, MONTH_FULL, MONTH, AMPM, REL, PERIOD, ORD, OF, SUBJ, PASTV, ADV, POSS,
 TIMEW, LASTNEXT, REACT, HELLO, NUMW, UNIT, REQ, DIGR, WAY) = (1 << i for i in range(26))

_WORDS: dict[int, str] = {
    # Urgency / importance: must, ASAP, important, always, never, deadline, ...
    URG: "must asap urgent urgently important importantly crucial critical essential vital always never "
         "deadline due require required mandatory immediately priority remember",
    FP: "i me my mine myself we us our ours ourselves i'm i've i'd i'll we're we've",
    SP: "you your yours yourself you're you've you'd you'll",
    # Words announcing a correction or a newer version of a fact (a supersession cue).
    UPD: "actually instead anymore change changed changing update updated updates moved reschedule "
         "rescheduled postponed correction cancel canceled cancelled switch switched replace replaced "
         "revise revised",
    GREET: "hi hello hey hiya yo thanks thank you thx ty ok okay sure cool great nice awesome bye goodbye "
           "see lol haha hahaha yes yeah yep no problem np welcome you're youre sounds good got it alright "
           "wow cheers perfect noted understood absolutely of course definitely agreed me too take care "
           "congrats congratulations morning afternoon evening night glad",
    DAYW: "monday tuesday wednesday thursday friday saturday sunday today tonight tomorrow yesterday weekend",
    MONTH_FULL: "january february march april june july august september october november december",
    MONTH: "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july "
           "august september october november december",
    AMPM: "am pm", REL: "next last this", PERIOD: "week month year", ORD: "st nd rd th", OF: "of",
    # "I/we (+ adverb) <past verb>" = a first-person event; regular past tenses are found by "-ed".
    SUBJ: "i we",
    PASTV: "went got made took had saw did was were began joined ran bought found met won lost gave left "
           "came tried became read wrote built held taught drove flew spent sold kept felt thought knew heard "
           "told put brought caught chose fell grew paid sent sang swam threw woke wore",
    ADV: "just finally recently also actually",
    POSS: "my our",
    TIMEW: "ago since recently just",
    LASTNEXT: "last next",
    REACT: "wow awesome amazing great cool glad proud sounds that's congrats congratulations",
    HELLO: "hey hi hello thanks bye goodbye",  # narrower than GREET: opening/closing words only
    # A quantity is a number (digits or a number word) followed by a unit: "45 minutes", "three months".
    NUMW: "one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty "
          "hundred thousand couple few several dozen",
    UNIT: "year years month months week weeks day days hour hours minute minutes second seconds time times "
          "mile miles km kilometers meter meters pound pounds lbs kg kilograms dollar dollars bucks euro euros "
          "percent people person kids children friends members pages books episodes items pieces sessions "
          "classes cups ounces inches feet steps games photos songs",
    # A request to the other side ("can you recommend…", "any tips"): the asker, not the teller.
    REQ: "please recommend recommendations recommended suggest suggestions tips advice ideas options",
    # A digression that slips a personal fact into a conversation about something else.
    DIGR: "btw incidentally",
    WAY: "way",
}
_PAIRS: dict[tuple[str, str], int] = {
    ("make", "sure"): URG, ("do", "not"): URG, ("don't", "forget"): URG, ("dont", "forget"): URG,
    ("all", "costs"): URG, ("no", "matter"): URG, ("non", "negotiable"): URG,
    ("no", "longer"): UPD, ("not", "anymore"): UPD,
    ("love", "that"): REACT, ("so", "happy"): REACT,
    ("thank", "you"): HELLO, ("take", "care"): HELLO, ("see", "you"): HELLO, ("talk", "soon"): HELLO,
    ("catch", "up"): HELLO, ("how", "are"): HELLO,
    ("can", "you"): REQ, ("could", "you"): REQ, ("would", "you"): REQ, ("help", "me"): REQ, ("give", "me"): REQ,
    ("tell", "me"): REQ, ("show", "me"): REQ, ("any", "tips"): REQ,
    ("speaking", "of"): DIGR, ("side", "note"): DIGR, ("just", "remembered"): DIGR, ("forgot", "to"): DIGR,
    ("by", "the"): WAY,  # "by the way" = this pair followed by the word "way"
}
_CJK = {
    "urg": re.compile("务必|必须|一定|重要|紧急|记住|千万|截止".encode()),
    "fp": re.compile("我".encode()),
    "sp": re.compile("你|您".encode()),
    "upd": re.compile("改|更新|取消|换成".encode()),
    "q": re.compile("？".encode()),
}
_IMAGE = re.compile(rb"\[image:")
# A list item: a line (or the text) that starts with "1." / "2)" / "-" / "*" / "•" and a space. The
# specification of what _list_item_starts finds without running it (tests compare the two).
_LIST_ITEM = re.compile(rb"[\n\x00][ \t]*(?:[0-9]{1,2}[.)]|[-*]|\xe2\x80\xa2)[ \t]")

_Q = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio multiplier: mixes the two key halves / a word pair
_KEY_BYTES = 16  # tokens longer than this are never marker words (the longest is 15 letters)


# One table lookup classifies every byte of the (original-case) batch; each mask is then one AND.
(B_UPPER, B_LOWERISH, B_SPACE, B_PUNCT, B_HIGH, B_CJK, B_LOWER) = (1 << i for i in range(7))
_classes = np.zeros(256, dtype=np.uint8)
for _b in range(256):
    _c = chr(_b)
    _classes[_b] = ((B_UPPER if "A" <= _c <= "Z" else 0)
                       | (B_LOWERISH if ("a" <= _c <= "z" or "0" <= _c <= "9" or _c in ",;:") else 0)
                       | (B_SPACE if _c == " " or "\t" <= _c <= "\r" else 0)
                       | (B_PUNCT if "!" <= _c <= "~" and not _c.isalnum() else 0)
                       | (B_HIGH if _b >= 0xC0 else 0) | (B_CJK if 0xE3 <= _b <= 0xEF else 0)
                       | (B_LOWER if "a" <= _c <= "z" else 0))
_BYTE_CLASS = _classes.tobytes()  # a bytes.translate table
del _b, _c, _classes


_TOKEN_CLASS = bytes(1 if 97 <= b <= 122 else 2 if 48 <= b <= 57 else 0 for b in range(256))  # a-z / 0-9


def _shift(x: np.ndarray, k: int = 1) -> np.ndarray:
    """x[i-k] (k > 0) or x[i+|k|] (k < 0), zero-filled."""
    out = np.zeros_like(x)
    if k > 0:
        out[k:] = x[:-k]
    else:
        out[:k] = x[-k:]
    return out


def _u64_at(buf: np.ndarray) -> np.ndarray:
    """A view whose element i is the (unaligned, native-order) uint64 at byte i of ``buf``."""
    return np.ndarray(shape=(len(buf) - 7,), dtype=np.uint64, buffer=buf, strides=(1,))


# _KEEP[L] masks the first min(L, 8) / the next min(L-8, 8) bytes of a little- or big-endian word.
_KEEP = np.zeros((_KEY_BYTES + 1, 2), dtype=np.uint64)
for _n in range(_KEY_BYTES + 1):
    _KEEP[_n] = np.frombuffer(bytes([0xFF] * _n + [0] * (_KEY_BYTES - _n)), dtype=np.uint64)
del _n
_KEEP_LO, _KEEP_HI = np.ascontiguousarray(_KEEP[:, 0]), np.ascontiguousarray(_KEEP[:, 1])  # 1-d takes are 5× faster


def _mix(k: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: every output bit depends on every input bit (the table slots need it)."""
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> np.uint64(33))


def _tokenize(low: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, is_digit, key) per token of an ASCII-lowercased byte string.

    A token is a maximal run of letters (inner apostrophes included) or of digits. Its key mixes
    its first 16 bytes, read as two unaligned uint64 per token; longer tokens get key 0 (never a
    marker). Only uint8/bool arrays are made per byte: int64 temporaries dominate the cost otherwise.
    """
    a = np.frombuffer(low, dtype=np.uint8)
    # bytes.translate is a C table lookup at memory speed; numpy's take would widen every index to int64
    cls = np.frombuffer(low.translate(_TOKEN_CLASS), dtype=np.int8)  # 0 other, 1 letter, 2 digit
    if b"'" in low:  # an apostrophe between two letters is part of the word ("don't")
        cls = cls.copy()
        cls[1:-1] |= ((a[1:-1] == ord("'")) & (cls[:-2] == 1) & (cls[2:] == 1)).view(np.int8)
    change = np.ones(len(a) + 1, dtype=bool)  # change[i]: byte i starts a new run (i = len: end)
    change[1:-1] = cls[1:] != cls[:-1]
    in_tok = cls != 0
    starts = np.flatnonzero(change[:-1] & in_tok)
    ends = np.flatnonzero(change[1:] & in_tok) + 1
    lengths = ends - starts
    u64 = _u64_at(np.concatenate([a, np.zeros(_KEY_BYTES + 8, dtype=np.uint8)]))
    clipped = np.minimum(lengths, _KEY_BYTES)
    keys = _mix(((u64[starts] & _KEEP_LO.take(clipped)) * _Q) ^ (u64[starts + 8] & _KEEP_HI.take(clipped)))
    keys[lengths > _KEY_BYTES] = 0
    return starts, ends, cls[starts] == 2, keys


def _key(w: str) -> np.ndarray:
    """The key of a single-token word, as a 1-element uint64 array (array maths wraps silently)."""
    _, _, _, k = _tokenize(w.encode())
    if len(k) != 1:
        raise ValueError(f"vocabulary entry {w!r} is not a single token")
    return k


_SPACE_TAB = np.zeros(256, dtype=bool)
_SPACE_TAB[[ord(" "), ord("\t")]] = True
_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[ord("0"):ord("9") + 1] = True


def _list_item_starts(a: np.ndarray) -> np.ndarray:
    """A mask over the bytes ``a`` (records joined by NUL, lower-cased) marking where
    :data:`_LIST_ITEM` matches — the newline or NUL that starts a list item — without running the
    regex over every byte (4 ms per 4,096 records; this is one pass over the candidates). Matches
    cannot overlap: each holds one newline or NUL, at its start, and the greedy ``[ \t]*`` never
    needs to give a byte back (what follows it never starts with a space or tab)."""
    cand = np.flatnonzero((a == ord("\n")) | (a == 0))
    b = np.concatenate([a, np.zeros(8, dtype=np.uint8)])  # every look-ahead below stays inside
    j = cand + 1
    walking = np.flatnonzero(_SPACE_TAB[b[j]])
    for _ in range(8):  # skip each candidate's indentation (rarely more than a few bytes)
        if not len(walking):
            break
        j[walking] += 1
        walking = walking[_SPACE_TAB[b[j[walking]]]]
    if len(walking):  # long runs of blanks: jump to the next other byte in one search
        others = np.flatnonzero(~_SPACE_TAB[b])
        j[walking] = others[np.searchsorted(others, j[walking])]
    c0, c1, c2, c3 = b[j], b[j + 1], b[j + 2], b[j + 3]
    d0, d1 = _DIGIT[c0], _DIGIT[c1]
    close1 = (c1 == ord(".")) | (c1 == ord(")"))
    close2 = (c2 == ord(".")) | (c2 == ord(")"))
    item = ((d0 & close1 & _SPACE_TAB[c2]) | (d0 & d1 & close2 & _SPACE_TAB[c3])
            | (((c0 == ord("-")) | (c0 == ord("*"))) & _SPACE_TAB[c1])
            | ((c0 == 0xE2) & (c1 == 0x80) & (c2 == 0xA2) & _SPACE_TAB[c3]))
    out = np.zeros(len(a), dtype=bool)
    out[cand[item]] = True
    return out


@dataclass(frozen=True)
class _Table:
    """Open-addressing-free hash table: slot = (key >> shift) & mask, collision-free by construction."""

    shift: np.uint64
    mask: np.uint64
    keys: np.ndarray
    bits: np.ndarray

    @classmethod
    def build(cls, entries: dict[int, int]) -> _Table:
        size = 1 << 14  # ~200 mixed keys: a collision-free shift exists at this size with near certainty
        while size <= 1 << 22:
            for shift in range(64 - size.bit_length() + 1):
                slots = {(k >> shift) & (size - 1) for k in entries}
                if len(slots) == len(entries):
                    keys, bits = np.zeros(size, dtype=np.uint64), np.zeros(size, dtype=np.int32)
                    for k, b in entries.items():
                        keys[(k >> shift) & (size - 1)], bits[(k >> shift) & (size - 1)] = k, b
                    return cls(np.uint64(shift), np.uint64(size - 1), keys, bits)
            size <<= 1
        raise ValueError("no collision-free slot function for the marker vocabulary (duplicate keys?)")

    def lookup(self, q: np.ndarray) -> np.ndarray:
        """Bits of each query key (0 when absent). O(len(q)) gathers, no search."""
        slot = (q >> self.shift) & self.mask
        return np.where(self.keys[slot] == q, self.bits[slot], 0)


@cache
def _vocab() -> tuple[_Table, _Table]:
    """Hash tables of marker bits for words and for word pairs (built once, on first use)."""
    bits: dict[int, int] = {}
    for bit, words in _WORDS.items():
        for w in words.split():
            k = int(_key(w)[0])
            bits[k] = bits.get(k, 0) | bit
    pairs: dict[int, int] = {}
    for (w1, w2), bit in _PAIRS.items():
        k = int(_mix(_key(w1) * _Q + _key(w2))[0])
        pairs[k] = pairs.get(k, 0) | bit
    return _Table.build(bits), _Table.build(pairs)


_MIN_CHUNK = 1024  # rows per thread below which a thread costs more than it saves
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (size, pool), shared by every caller
_pool_lock = threading.Lock()


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] < workers:
            _pool = (workers, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memir-textstats"))
        return _pool[1]


def text_stats(contents: Sequence[str], *, workers: int = 1) -> dict[str, np.ndarray]:
    """Per-text length and marker features, each a float64 array of ``len(contents)``.

    Keys are :data:`TEXT_STAT_NAMES`: ``*_log`` = log1p(count, clipped at 1000); the rest are 0/1
    bits. ``tokens`` approximates a sub-word tokenizer (letter/digit runs + punctuation + one per
    non-ASCII character); ``names`` counts capitalised words not at a sentence start;
    ``greeting_only`` = the text is only greeting/thanks words (+ at most one other word, a name).

    Every value depends on its own text only, so ``workers > 1`` splits a large batch over that
    many threads (numpy releases the GIL in its loops): the same result, sooner.
    """
    n = len(contents)
    k = min(int(workers), n // _MIN_CHUNK)
    if k > 1:
        _vocab()  # build the tables once, before the threads race to
        bounds = [int(x) for x in np.linspace(0, n, k + 1)]
        parts = list(_executor(k).map(lambda i: _text_stats(contents[bounds[i]:bounds[i + 1]]), range(k)))
        return {key: np.concatenate([p[key] for p in parts]) for key in TEXT_STAT_NAMES}
    return _text_stats(contents)


def _text_stats(contents: Sequence[str]) -> dict[str, np.ndarray]:
    n = len(contents)
    if n == 0:
        return {k: np.zeros(0) for k in TEXT_STAT_NAMES}
    chars = np.fromiter(map(len, contents), dtype=np.float64, count=n)
    joined = "\x00".join(contents)
    if joined.count("\x00") != n - 1:  # a NUL inside a text would shift every later record
        joined = "\x00".join(s.replace("\x00", " ") for s in contents)
    blob = ("\x00" + joined + "\x00").encode("utf-8", "ignore")
    low = blob.lower()
    a = np.frombuffer(blob, dtype=np.uint8)
    seps = np.flatnonzero(a == 0)  # n + 1 separators: record k is bytes seps[k]+1 .. seps[k+1]-1

    def per_record(mask: np.ndarray) -> np.ndarray:
        # Segment k = [seps[k], seps[k+1]) starts on a separator byte, which no mask selects. The
        # masks are sparse: locating their set bytes beats a dense segmented sum ~8×.
        pos = np.flatnonzero(mask)
        return np.bincount(np.searchsorted(seps, pos, "right") - 1, minlength=n)[:n].astype(np.float64)

    def per_token(mask: np.ndarray) -> np.ndarray:
        return np.bincount(rec[mask], minlength=n)[:n].astype(np.float64)

    def by_regex(rx: re.Pattern[bytes]) -> np.ndarray:
        pos = np.fromiter((m.start() for m in rx.finditer(low)), dtype=np.int64)
        return np.bincount(np.searchsorted(seps, pos, "right") - 1, minlength=n)[:n].astype(np.float64)

    starts, ends, is_digit, keys = _tokenize(low)
    rec = np.searchsorted(seps, starts, "right") - 1
    words, pairs = _vocab()
    bits = words.lookup(keys)
    same_next = np.zeros(len(starts), dtype=bool)  # token i+1 exists and is in the same record
    same_next[:-1] = rec[1:] == rec[:-1]
    pair = np.zeros(len(starts), dtype=np.int32)
    if len(starts) > 1:
        pair[:-1] = np.where(same_next[:-1], pairs.lookup(_mix(keys[:-1] * _Q + keys[1:])), 0)
    bits_any = bits | pair

    # Dates: rules over a token and its neighbours in the same record.
    gap = np.full(len(starts), 1 << 30)
    gap[:-1] = starts[1:] - ends[:-1]
    short_num = is_digit & ((ends - starts) <= 2)
    nxt_bits, prv_bits = _shift(bits, -1) * same_next, _shift(bits) * _shift(same_next)
    nxt_short, prv_short = _shift(short_num, -1) & same_next, _shift(short_num) & _shift(same_next)
    la = np.frombuffer(low, dtype=np.uint8)
    last = len(la) - 1
    c0, c1 = la[starts], la[np.minimum(starts + 1, last)]
    after = la[np.minimum(ends, last)]
    century = ((c0 == ord("1")) & (c1 == ord("9"))) | ((c0 == ord("2")) & (c1 == ord("0")))
    year = is_digit & ((ends - starts) == 4) & century
    sep_next = (after == ord(":")) | (after == ord("/"))
    clock = short_num & sep_next & (gap == 1) & _shift(is_digit, -1) & same_next
    ampm = short_num & ((nxt_bits & AMPM) > 0) & (gap <= 1)
    month_ctx = ((bits & MONTH_FULL) > 0) | nxt_short | prv_short | ((prv_bits & (ORD | OF)) > 0)
    month = ((bits & MONTH) > 0) & month_ctx
    rel = ((bits & REL) > 0) & ((nxt_bits & PERIOD) > 0)
    dates = year | clock | ampm | month | rel | ((bits & DAYW) > 0)

    non_ascii = not blob.isascii()

    def marker(bit: int, cjk: str) -> np.ndarray:
        c = per_token((bits_any & bit) > 0)
        return c + by_regex(_CJK[cjk]) if non_ascii else c

    is_word = ~is_digit
    greet = per_token(is_word & ((bits & GREET) > 0))
    bc = np.frombuffer(blob.translate(_BYTE_CLASS), dtype=np.uint8)
    cjk_chars = per_record((bc & B_CJK) > 0) if non_ascii else np.zeros(n)  # 3-byte lead bytes
    other = per_token(~(is_word & ((bits & GREET) > 0))) + cjk_chars
    upper = (bc & B_UPPER) > 0
    space = (bc & B_SPACE) > 0
    # a capital after a space that follows a lower-case letter, digit or , ; : (not a sentence start)
    mid_caps = np.zeros(len(a), dtype=bool)
    mid_caps[2:] = upper[2:] & ~upper[1:-1] & space[1:-1] & ((bc[:-2] & B_LOWERISH) > 0)
    tokens = np.bincount(rec, minlength=n)[:n] + per_record((bc & B_PUNCT) > 0) + per_record((bc & B_HIGH) > 0)
    question = per_record(a == ord("?")) + (by_regex(_CJK["q"]) if non_ascii else 0.0)

    def log(x: np.ndarray) -> np.ndarray:
        return np.log1p(np.minimum(x, _MAX_COUNT))

    # Dialogue cues. A past verb is an irregular one from the list or a word ending in "-ed".
    ed = is_word & ((ends - starts) >= 3) & (la[np.maximum(ends - 1, 0)] == ord("d")) \
        & (la[np.maximum(ends - 2, 0)] == ord("e"))
    past = ((bits & PASTV) > 0) | ed
    nxt_past, nxt2_past = _shift(past, -1) & same_next, _shift(past, -2) & same_next & _shift(same_next, -1)
    subj = (bits & SUBJ) > 0
    past_event = subj & (nxt_past | (((nxt_bits & ADV) > 0) & nxt2_past))
    my_noun = ((bits & POSS) > 0) & same_next & ~_shift(is_digit, -1)
    time_words = ((bits & (TIMEW | DAYW | MONTH_FULL)) > 0) | (((bits & LASTNEXT) > 0) & ((nxt_bits & (PERIOD | DAYW)) > 0))
    words = per_token(is_word) + cjk_chars
    caps_words = np.zeros(len(a), dtype=bool)  # a capitalised *word* ("Paris"), not "I" / "I'm"
    caps_words[:-1] = mid_caps[:-1] & ((bc[1:] & B_LOWER) > 0)
    # Last non-space byte of each record: step back from its end while on whitespace (rarely more
    # than a step or two; the few records still walking are the only ones touched).
    last_ns = seps[1:] - 1
    walking = np.flatnonzero(space[last_ns] & (last_ns > seps[:-1]))
    for _ in range(8):
        if not len(walking):
            break
        last_ns[walking] -= 1
        j = last_ns[walking]
        walking = walking[space[j] & (j > seps[:-1][walking])]
    for k in walking.tolist():  # a long whitespace tail: strip it in one go
        last_ns[k] = seps[k] + len(blob[seps[k] + 1:last_ns[k] + 1].rstrip(b" \t\n\v\f\r"))
    ends_q = (last_ns > seps[:-1]) & (a[np.maximum(last_ns, 0)] == ord("?"))
    exclaims = per_record(a == ord("!"))
    numberish = is_digit | ((bits & NUMW) > 0)
    quantities = numberish & ((nxt_bits & UNIT) > 0)
    by_the_way = ((pair & WAY) > 0) & ((_shift(bits, -2) & WAY) > 0) & same_next & _shift(same_next, -1)
    digress = (bits_any & DIGR) > 0

    return {
        "chars_log": np.log1p(np.minimum(chars, 1e6)),
        "tokens_log": np.log1p(np.minimum(tokens, 1e6)),
        "urgency_log": log(marker(URG, "urg")),
        "exclaim": (exclaims > 0).astype(np.float64),
        "question": (question > 0).astype(np.float64),
        "numbers_log": log(per_token(is_digit)),
        "dates_log": log(per_token(dates)),
        "names_log": log(per_record(mid_caps)),
        "first_person_log": log(marker(FP, "fp")),
        "second_person_log": log(marker(SP, "sp")),
        "update_markers_log": log(marker(UPD, "upd")),
        "greeting_only": ((greet >= 1) & (other <= 1) & (greet <= 8)).astype(np.float64),
        "image_caption": (by_regex(_IMAGE) > 0).astype(np.float64),
        "first_person_rate": np.minimum(marker(FP, "fp") / np.maximum(words, 1.0), 1.0),
        "past_events_log": log(per_token(past_event)),
        "my_noun_log": log(per_token(my_noun)),
        "questions_log": log(question),
        "ends_question": ends_q.astype(np.float64),
        "time_words_log": log(per_token(time_words)),
        "caps_words_log": log(per_record(caps_words)),
        "greeting_any": (per_token((bits_any & HELLO) > 0) > 0).astype(np.float64),
        "reaction": (per_token((bits_any & REACT) > 0) > 0).astype(np.float64),
        "exclaim_rate": np.minimum(exclaims / np.maximum(words, 1.0), 1.0),
        "quantities_log": log(per_token(quantities)),
        "requests_log": log(per_token((bits_any & REQ) > 0)),
        "digression": (per_token(digress | by_the_way) > 0).astype(np.float64),
        "list_items_log": log(per_record(_list_item_starts(la))),
    }
