"""Redaction before anything is stored (issue 2 "Write side"; seed 000 §5.4 "敏感信息脱敏").

Secrets and personal data in a memory's content are replaced by *typed placeholders* (``[EMAIL]``,
``[CARD]``, ``[API_KEY]`` …) before the record reaches the store, an encoder or a log, and the
record's ``sensitivity`` says what was found (``secret`` > ``pii`` > ``none``). A
:class:`Redaction` reports what was found by kind and count only — never the raw value.

Detectors favour precision on ordinary prose (dates, times, prices, versions, order and ticket
numbers, ISBNs, git SHAs, UUIDs must come through untouched) while catching the usual shapes; the
patterns are in :mod:`.rules`:

=======================  ===========  =====================================================
placeholder              sensitivity  detector
=======================  ===========  =====================================================
``[PRIVATE_KEY]``        secret       PEM ``-----BEGIN … PRIVATE KEY-----`` blocks, PGP key blocks (also truncated)
``[JWT]``                secret       three base64url segments starting ``eyJ``
``[PASSWORD]``           secret       ``password: x`` / ``password is x2`` / ``the password for the wifi is x`` /
                                      ``pass: x``, ``pwd=x``, ``PIN 4821``, labels in 15 languages (``mot de passe``,
                                      ``Passwort``, ``contraseña``, ``密码`` …), ``passphrase: several words``,
                                      credential pairs (``login admin / admin123``, ``root:Toor1``, ``user x pass y``),
                                      URL userinfo ``scheme://user:pw@``, ``Authorization: Basic``
``[BEARER_TOKEN]``       secret       ``Bearer <token>`` (≥ 16 chars, has a digit), ``Authorization: token …``
``[API_KEY]``            secret       vendor prefixes (OpenAI/Anthropic ``sk-``, Stripe ``sk_/rk_/pk_live_``,
                                      ``whsec_``, AWS ``AKIA…``, GitHub ``ghp_``/``github_pat_``, Slack ``xox?-``,
                                      Google ``AIza``/``ya29.``/``GOCSPX-``, GitLab, npm, Hugging Face, SendGrid …),
                                      Slack/Discord/Teams webhook URLs, signed-URL ``sig=``/``X-Amz-Signature=``,
                                      high-entropy values after ``key=``/``token:``/``the API key is``, and bare
                                      ≥ 32-char mixed-case random tokens (AWS secret keys)
``[EMAIL]``              pii          ``local@domain.tld`` incl. Unicode (IDN) names; ``x [at] y [dot] z``
``[IBAN]``               pii          country + check digits, upper- or lower-case, mod-97 and country length checked
``[CARD]``               pii          13–19 digits in card layouts, Luhn-checked, IIN starts 2–6
``[IP]``                 pii          IPv4 (valid octets; not after "version"/a product name, not 0.0.0.0 or a
                                      ``/n`` network) and IPv6
``[PHONE]``              pii          ``+CC …`` / ``00CC …``, NANP ``(415) 555-2671``, trunk-0 national
                                      ``020 7946 0958``, any number after "phone:"/"call me at"/"手机"
``[SSN]``                pii          US SSN: dashed ``123-45-6789`` (valid area/group/serial, not after
                                      "order"/"SKU"/"part"…), any layout after "SSN"/"social security"
``[PASSPORT]``           pii          6–10 alphanumerics after "passport (number/no/#)" in 8 languages
``[NATIONAL_ID]``        pii          after a keyword: UK NINO, Canada SIN, Aadhaar, PAN, DNI/NIE, NIR, BSN,
                                      Steuer-ID, personnummer, Chinese ID, driver's licence, NHS…;
                                      Italian codice fiscale by its shape
``[DATE_OF_BIRTH]``      pii          a date (numeric or with month names in 5 languages) after "born (on)",
                                      "DOB", "date of birth", "birthday", "geboren am", "né le", …
``[ADDRESS]``            pii          house number + street name + street type (+ unit, city, state/ZIP,
                                      postcode): US/UK, German/Dutch ``…straße 12``, French ``12 rue …``,
                                      Spanish/Italian/Portuguese ``Calle … 10``; PO boxes
=======================  ===========  =====================================================

Known limits (tested in ``test_known_limits`` and measured in ``tests/runtime/record/test_redaction_corpus.py``;
numbers: ``python bench/redaction_report.py``): a contiguous national number without a keyword
(``07700900123``) is left alone because it cannot be told from an order id; a year of birth alone
("born in 1985") is kept; an address needs a house number and a street type ("Elm Street" alone is
kept) and lower-case street names only count after an address cue ("I live at …"); a password's
trailing ``.,;)`` is read as sentence punctuation and kept; a 4-part version number after an unknown
product name is read as an [IP]. Detection repeats until no detector fires (removing one value can
expose another), so ``redact(redact(x).text)`` finds nothing.

Example:
    >>> r = redact("Mail bob@example.com, key sk-live4f9aJ2kLm0pQr8sTuVwXyZ12")
    >>> r.text
    'Mail [EMAIL], key [API_KEY]'
    >>> r.sensitivity.value
    'secret'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import ValidationError
from ..memir import Sensitivity
from .kinds import RedactionKind

if TYPE_CHECKING:  # the detectors (~60 compiled patterns) load at the first redact(), not at import
    from .detectors import Check, Rule

__all__ = [
    "Finding",
    "Redaction",
    "RedactionKind",
    "Redactor",
    "contains_sensitive",
    "redact",
]


@dataclass(frozen=True)
class Finding:
    """How many values of one kind were replaced. Deliberately carries no raw value or offset."""

    kind: RedactionKind
    count: int

    @property
    def placeholder(self) -> str:
        return self.kind.placeholder


@dataclass(frozen=True)
class Redaction:
    """The result of :func:`redact`.

    Attributes:
        text: the input with every found value replaced by its placeholder.
        sensitivity: the highest level among the findings (``none`` when nothing was found).
        findings: one :class:`Finding` per kind found, in :class:`RedactionKind` order.
    """

    text: str
    sensitivity: Sensitivity
    findings: tuple[Finding, ...]

    @property
    def changed(self) -> bool:
        """Whether anything was replaced."""
        return bool(self.findings)

    def count(self, kind: RedactionKind | str) -> int:
        """How many values of ``kind`` were replaced."""
        k = RedactionKind(kind)
        return next((f.count for f in self.findings if f.kind is k), 0)



# Removing one value can expose another (a key glued to an email); passes repeat until nothing
# fires, which also makes redact() idempotent. Two passes suffice in practice; the cap is a guard.
_MAX_PASSES = 4
_DIGIT = re.compile(r"[0-9]")


class Redactor:
    """A configured redactor: all kinds by default, or a chosen subset.

    Args:
        kinds: the kinds to detect (default: all).
        disable: kinds to leave alone (applied after ``kinds``).

    Raises:
        ValidationError: an unknown kind name (the message lists the valid ones).

    Example:
        >>> Redactor(disable=["ip"]).redact("host 10.0.0.1, mail a@b.io").text
        'host 10.0.0.1, mail [EMAIL]'
    """

    def __init__(self, kinds: Iterable[RedactionKind | str] | None = None, *,
                 disable: Iterable[RedactionKind | str] = ()) -> None:
        chosen = set(_parse_kinds(kinds, "kinds")) if kinds is not None else set(RedactionKind)
        chosen -= set(_parse_kinds(disable, "disable"))
        self.kinds: frozenset[RedactionKind] = frozenset(chosen)
        self._compiled: tuple[tuple[_Gated, ...], tuple[_Gated, ...], _GateSelector] | None = None

    def _rules(self) -> tuple[tuple[_Gated, ...], tuple[_Gated, ...], _GateSelector]:
        """The enabled rules, their gates compiled at the first use: ``(all, those that need no digit,
        the gate selector)`` (one assignment, so a concurrent first use at worst compiles twice)."""
        if self._compiled is None:
            from .detectors import RULES

            rules = [_compile_gate(r) for r in RULES if r.kind in self.kinds]
            digit = [r.digit for r in RULES if r.kind in self.kinds]
            # Text without a digit skips every rule that needs one, without looking at it.
            self._compiled = (tuple(rules), tuple(r for r, needs in zip(rules, digit) if not needs),
                              _GateSelector(rules, digit))
        return self._compiled

    def redact(self, text: str) -> Redaction:
        """Replace every enabled kind of sensitive value in ``text`` by its placeholder."""
        if not isinstance(text, str):
            raise ValidationError(f"redact() takes a str, got {type(text).__name__}", field="text")
        counts: dict[RedactionKind, int] = {}
        rules_any, rules_no_digit, selector = self._rules()
        for _ in range(_MAX_PASSES):
            fired = 0
            low = text.lower()
            ascii_only = text.isascii()
            has_digit = _DIGIT.search(text) is not None
            selected = len(text) <= _SELECT_MAX_CHARS  # short text: one scan finds the rules whose gate passes
            if selected:
                rules = selector.select(text, low, has_digit, ascii_only)
            else:
                rules = rules_any if has_digit else rules_no_digit
            for kind, pattern, check, g_low, g_uni, g_case, anchor, back in rules:
                if not selected and g_low is not None and not (any(map(low.__contains__, g_low))
                                              or (g_case and any(map(text.__contains__, g_case)))
                                              or (g_uni and not ascii_only and any(map(low.__contains__, g_uni)))):
                    continue
                if anchor is not None and len(text) > _WINDOW_MIN_CHARS and len(low) == len(text):
                    text, n = _apply_windowed(pattern, check, text, low, anchor, back)
                elif pattern.search(text) is None:  # the common case: no callback, no new string
                    continue
                else:
                    text, n = _apply(pattern, check, text)
                if n:
                    counts[kind] = counts.get(kind, 0) + n
                    fired += n
                    low = text.lower()
            if not fired:
                break
        if not counts:
            return Redaction(text=text, sensitivity=Sensitivity.none, findings=())
        findings = tuple(Finding(k, counts[k]) for k in RedactionKind if k in counts)
        return Redaction(text=text, sensitivity=Sensitivity.highest(*(f.kind.sensitivity for f in findings)),
                         findings=findings)

    def contains_sensitive(self, text: str) -> bool:
        """Whether :meth:`redact` would change ``text``."""
        return self.redact(text).changed


def _apply(pattern: re.Pattern[str], check: Check, text: str) -> tuple[str, int]:
    """``pattern.sub`` with ``check`` deciding each replacement; returns the text and how many were made."""
    n = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal n
        out = check(m)
        if out is None:
            return m.group(0)
        n += 1
        return out

    return pattern.sub(sub, text), n


# Text longer than this is searched only around a rule's anchors (when it has some).
_WINDOW_MIN_CHARS = 512
# How far past an anchor a window reaches; a match reaching the window's end is re-matched on the whole text.
_WINDOW_AFTER = 400


def _apply_windowed(pattern: re.Pattern[str], check: Check, text: str, low: str, anchor: re.Pattern[str],
                    back: int) -> tuple[str, int]:
    """What :func:`_apply` gives, found by searching only from ``back`` characters before each anchor
    hit (``low`` is ``text`` lower-cased, the same length) to ``_WINDOW_AFTER`` characters after it
    (overlapping windows merged, so the time stays linear however dense the anchors).

    Equivalent because every match contains an anchor at most ``back`` characters after its start and
    matches are taken left to right without overlap, as ``re.sub`` takes them."""
    n_text = len(text)
    spans: list[list[int]] = []  # windows around the hits, overlapping ones merged: each character searched once
    for hit in anchor.finditer(low):
        start, end = max(0, hit.start() - back), min(n_text, hit.end() + _WINDOW_AFTER)
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    parts: list[str] = []
    last = cursor = count = 0
    for start, end in spans:
        pos = max(cursor, start)
        while pos < end:
            m = pattern.search(text, pos, end)
            if m is None:
                break
            if m.end() > end - 8 and end < n_text:  # it may have been cut short, or a lookahead fooled
                full = pattern.match(text, m.start())
                if full is None:
                    pos = m.start() + 1
                    continue
                m = full
            out = check(m)
            if out is not None:
                parts += (text[last:m.start()], out)
                last = m.end()
                count += 1
            cursor = pos = m.end()
    if not count:
        return text, 0
    parts.append(text[last:])
    return "".join(parts), count


_Gated = tuple[RedactionKind, re.Pattern[str], "Check", tuple[str, ...] | None, tuple[str, ...], tuple[str, ...],
               re.Pattern[str] | None, int]


# Up to this length, one pass of a combined literal scanner picks the gated rules to run (a chat turn:
# ~3x fewer Python steps than testing every rule's gate); longer text tests each gate with `in`,
# which stays linear where a per-position scan of many literals would not.
_SELECT_MAX_CHARS = 1_000


class _GateSelector:
    """Which rules can fire on a short text, found with one scan for every gate literal at once.

    The scanner is a lookahead alternation, longest literal first, tried at every position; a literal
    hidden by a longer one starting at the same position is a prefix of it, so each match also
    brings the literals it contains. A rule runs if it has no gate, or any of its literals is present,
    or (checked directly, they are few) one of its case-sensitive or non-ASCII literals is."""

    def __init__(self, rules: list[_Gated], digit: list[bool]) -> None:
        self.rules = tuple(rules)
        self.digit = tuple(digit)
        lits = sorted({g for r in rules if r[3] is not None for g in r[3]}, key=len, reverse=True)
        self.scan = re.compile("(?=(" + _trie_pattern(lits) + "))") if lits else None
        self.contains = {g: frozenset(h for h in lits if h in g) for g in lits}
        self.always = tuple(i for i, r in enumerate(rules) if r[3] is None)
        self.by_lit: dict[str, tuple[int, ...]] = {
            g: tuple(i for i, r in enumerate(rules) if r[3] is not None and g in r[3]) for g in lits}
        self.direct = tuple(i for i, r in enumerate(rules) if r[3] is not None and (r[4] or r[5]))

    def select(self, text: str, low: str, has_digit: bool, ascii_only: bool) -> Sequence[_Gated]:
        chosen = set(self.always)
        if self.scan is not None:
            found: set[str] = set()
            for m in self.scan.finditer(low):
                found |= self.contains[m.group(1)]
            for g in found:
                chosen.update(self.by_lit[g])
        for i in self.direct:
            if i not in chosen:
                _, _, _, _, g_uni, g_case, _, _ = self.rules[i]
                if (g_case and any(map(text.__contains__, g_case))) or (
                        g_uni and not ascii_only and any(map(low.__contains__, g_uni))):
                    chosen.add(i)
        # exactly the rules whose gate passes (redact() does not test them again)
        return [self.rules[i] for i in sorted(chosen) if has_digit or not self.digit[i]]


def _trie_pattern(literals: Iterable[str]) -> str:
    """An alternation of ``literals`` as a prefix tree: at each position the engine follows the one
    branch whose next character matches instead of trying every literal in turn (145 gate literals:
    ~4x faster a scan), and a longer literal is preferred to its prefix, so the match at a position is
    the longest literal there, as in a longest-first alternation."""
    trie: dict[str, dict] = {}
    for w in literals:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}  # a literal ends here

    def branch(node: dict[str, dict]) -> str:
        kids = [re.escape(ch) + branch(sub) for ch, sub in sorted(node.items()) if ch]
        if not kids:
            return ""
        body = kids[0] if len(kids) == 1 else "(?:" + "|".join(kids) + ")"
        return f"(?:{body})?" if "" in node else body  # greedy: the longer literal first

    return branch(trie)


def _compile_gate(rule: Rule) -> _Gated:
    """Split a rule's gate into ASCII lower-case literals (looked for in the lower-cased text), literals
    with a capital (looked for case-sensitively in the text) and non-ASCII literals (looked for only in
    text that is not ASCII); compile its anchors into one literal pattern for the lower-cased text."""
    anchor = (re.compile("|".join(re.escape(a) for a in sorted(rule.anchors, key=len, reverse=True)))
              if rule.anchors else None)
    if rule.gate is None:
        return rule.kind, rule.pattern, rule.check, None, (), (), anchor, rule.back
    low = tuple(g for g in rule.gate if g.isascii() and g == g.lower())
    case = tuple(g for g in rule.gate if g.isascii() and g != g.lower())
    uni = tuple(g for g in rule.gate if not g.isascii())
    return rule.kind, rule.pattern, rule.check, low, uni, case, anchor, rule.back


def _parse_kinds(kinds: Iterable[RedactionKind | str], field: str) -> list[RedactionKind]:
    out = []
    for k in kinds:
        try:
            out.append(RedactionKind(k))
        except ValueError:
            valid = ", ".join(x.value for x in RedactionKind)
            raise ValidationError(f"Redactor.{field}: unknown kind {k!r}; valid kinds: {valid}",
                                  field=field) from None
    return out


_DEFAULT = Redactor()


def redact(text: str) -> Redaction:
    """Redact every kind with the default :class:`Redactor` (see the module docstring)."""
    return _DEFAULT.redact(text)


def contains_sensitive(text: str) -> bool:
    """Whether ``text`` contains anything :func:`redact` would replace."""
    return _DEFAULT.contains_sensitive(text)
