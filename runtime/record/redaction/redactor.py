"""Redaction before anything is stored (issue 2 "Write side"; seed 000 §5.4 "敏感信息脱敏").

Secrets and personal data in a memory's content are replaced by *typed placeholders* (``[EMAIL]``,
``[CARD]``, ``[API_KEY]`` …) before the record reaches the store, an encoder or a log, and the
record's ``sensitivity`` says what was found (``secret`` > ``pii`` > ``none``). A
:class:`Redaction` reports what was found by kind and count only — never the raw value.

Detectors favour precision on ordinary prose (dates, times, prices, versions and order numbers
must come through untouched) while catching the usual shapes:

========================  ===========  =====================================================
placeholder               sensitivity  detector
========================  ===========  =====================================================
``[PRIVATE_KEY]``         secret       PEM ``-----BEGIN … PRIVATE KEY-----`` blocks (also truncated)
``[JWT]``                 secret       three base64url segments starting ``eyJ``
``[PASSWORD]``            secret       ``password: x`` / ``password is x2`` / URL ``user:pw@`` / ``Basic``
``[BEARER_TOKEN]``        secret       ``Bearer <token>`` (≥ 16 chars, has a digit)
``[API_KEY]``             secret       vendor prefixes (``sk-``, ``AKIA``, ``ghp_``, ``xoxb-`` …) and
                                       high-entropy values after ``key=`` / ``token:`` / ``secret=``
``[EMAIL]``               pii          ``local@domain.tld``
``[IBAN]``                pii          country + check digits, mod-97 and country length checked
``[CARD]``                pii          13–19 digits in card layouts, Luhn-checked, IIN starts 2–6
``[IP]``                  pii          IPv4 (valid octets, not after "version") and IPv6
``[PHONE]``               pii          ``+CC …`` / ``00CC …``, NANP ``(415) 555-2671``, trunk-0
                                       national ``020 7946 0958``, any number after "phone:"/"call me at"
========================  ===========  =====================================================

Known limits (tested in ``test_known_limits``): a contiguous national number without a keyword
(``07700900123``) is left alone because it cannot be told from an order id; lowercase IBANs are
not detected; a password's trailing ``.,;)`` is read as sentence punctuation and kept; a 4-part
version number is only recognised after a word like "version"/"v"/"build" (else it is an [IP]).
Detection repeats until no detector fires (removing one value can expose another), so
``redact(redact(x).text)`` finds nothing.

Example:
    >>> r = redact("Mail bob@example.com, key sk-live4f9aJ2kLm0pQr8sTuVwXyZ12")
    >>> r.text
    'Mail [EMAIL], key [API_KEY]'
    >>> r.sensitivity.value
    'secret'
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ...errors import ValidationError
from ..memir import Sensitivity
from .kinds import RedactionKind
from .rules import RULES as _RULES
from .rules import Check

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
        self._rules = tuple(r for r in _RULES if r[0] in chosen)

    def redact(self, text: str) -> Redaction:
        """Replace every enabled kind of sensitive value in ``text`` by its placeholder."""
        if not isinstance(text, str):
            raise ValidationError(f"redact() takes a str, got {type(text).__name__}", field="text")
        counts: Counter[RedactionKind] = Counter()
        for _ in range(_MAX_PASSES):
            fired = 0
            low = text.lower()
            for kind, pattern, check, gate in self._rules:
                if gate is not None and not any(g in low for g in gate):
                    continue
                def sub(m: re.Match[str], kind: RedactionKind = kind, check: Check = check) -> str:
                    nonlocal fired
                    out = check(m)
                    if out is None:
                        return m.group(0)
                    counts[kind] += 1
                    fired += 1
                    return out
                text = pattern.sub(sub, text)
            if not fired:
                break
        findings = tuple(Finding(k, counts[k]) for k in RedactionKind if counts[k])
        return Redaction(text=text, sensitivity=Sensitivity.highest(*(f.kind.sensitivity for f in findings)),
                         findings=findings)

    def contains_sensitive(self, text: str) -> bool:
        """Whether :meth:`redact` would change ``text``."""
        return self.redact(text).changed


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
