"""The redaction detectors: one compiled pattern plus a check per rule, in priority order.

Each check returns the replacement text, or ``None`` to leave a match alone (failed checksum,
context veto). Kept apart from :mod:`runtime.record.redaction` (the types and the fixpoint driver) so the
rules can be read and extended in one place.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable

from .kinds import RedactionKind

__all__ = ["RULES", "Check"]

# --------------------------------------------------------------------------------------------
# Detectors. Each is a compiled pattern plus a check that returns the replacement text, or None
# to leave the match alone (failed checksum, context veto). ASCII mode: \w, \d and \b mean ASCII
# only, so behaviour does not depend on which Unicode digits a text happens to contain.
# --------------------------------------------------------------------------------------------

_F = re.ASCII
_FI = re.ASCII | re.IGNORECASE
# A value that is already a placeholder is never redacted again (keeps redact idempotent).
_NOT_PH = r"(?![\"']?\[[A-Z_]+\])"
Check = Callable[[re.Match[str]], str | None]


def _has_digit(s: str) -> bool:
    return any(c.isdigit() for c in s)


def _entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _keep_prefix(kind: RedactionKind, group: int = 2) -> Check:
    """Replace only ``group``; text before it (a label such as ``password:``) stays."""
    def check(m: re.Match[str]) -> str | None:
        s, e = m.span(group)
        return m.group(0)[: s - m.start()] + kind.placeholder + m.group(0)[e - m.start():]
    return check


def _whole(kind: RedactionKind, ok: Callable[[str], bool] = lambda s: True) -> Check:
    return lambda m: kind.placeholder if ok(m.group(0)) else None


_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY-----"
    r"|(?:\s*[A-Za-z0-9+/=]{16,})*)", _F)  # an unterminated (pasted, truncated) key: its base64 lines
_JWT = re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", _F)
_URL_CRED = re.compile(r"(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]*://[^\s:/@\[\]]+:)" + _NOT_PH + r"([^\s@/\[\]]+)(?=@)", _FI)
_BASIC = re.compile(r"\b(Basic\s+)([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])", _F)
_BEARER = re.compile(r"\b(Bearer\s+)" + _NOT_PH + r"([A-Za-z0-9\-._~+/]{16,}=*)", _FI)
_VENDOR_KEY = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{20,}"        # OpenAI / Anthropic style
    r"|[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}"                   # Stripe
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}"           # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"                           # Slack
    r"|AIza[0-9A-Za-z_\-]{35}"                                   # Google
    r"|glpat-[A-Za-z0-9_\-]{20,}|npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}"
    r")(?![A-Za-z0-9_\-])", _F)
# `name = value` where the name mentions key/token/secret/credential and the value looks random.
_KV_SECRET = re.compile(
    r"(?<![A-Za-z0-9_\-.])([A-Za-z0-9_\-.]*(?:key|token|secret|credential)s?[A-Za-z0-9_\-]*"
    r"[\"']?\s*[:=]\s*[\"']?)" + _NOT_PH + r"([A-Za-z0-9_\-./+~]{16,}={0,2})(?![A-Za-z0-9_\-./+~=])", _FI)
_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9])((?:[A-Za-z0-9]*[_\-.]|(?-i:[a-z0-9]+(?=P)))?"  # db_password, userPassword
    r"(?:pass(?:word|wd|phrase|code)|pwd|pin)[\"']?(?:\s*[:=]\s*|\s+is\s+))" + _NOT_PH +
    r"(\"[^\"\n]+\"|'[^'\n]+'|\S+)", _FI)
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,24}(?![A-Za-z0-9\-])", _F)
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])", _F)
_CARD = re.compile(
    r"(?<![\w+\-.#/$])(?:\d{13,19}|\d{4}([ \-])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{1,3})?|\d{4}([ \-])\d{6}\2\d{4,5})"
    r"(?![\w\-]|[.,]\d)", _F)
_IPV6 = re.compile(
    r"(?<![\w:.])((?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?)(%[A-Za-z0-9]+)?"
    r"(?![\w:]|\.\w)", _F)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)", _F)
_VERSION_BEFORE = re.compile(
    r"\b(?:v|ver|version|release|build|rev|revision|firmware|fw|update|patch|upgrade)\.?\s*$", _FI)
_PHONE_KEYWORD = re.compile(
    r"\b((?:phone|tel(?:ephone)?|mobile|cell(?:phone)?|fax|whats ?app|sms|text me|call me|reach me)"
    r"(?:\s*(?:number|no\.?|nr\.?|#))?(?:\s*[:=]\s*|\s+(?:is|at|on)\s+|\s+))"
    r"(\+?\(?\d[\d ().\-]{5,20}\d)(?!\d)", _FI)
_PHONE_INTL = re.compile(r"(?<![\w+])(?:\+|\b00)[1-9](?:[ .\-]?\(\d{1,4}\)|[ .\-]?\d){6,16}(?![\d\-]|[.,]\d)", _F)
_PHONE_NANP = re.compile(
    r"(?<![\w#/+\-.$:])(?:\([2-9]\d{2}\)[ .\-]?|[2-9]\d{2}[ .\-])\d{3}[ .\-]\d{4}(?![\w\-]|[.,/:]\d)", _F)
_PHONE_TRUNK = re.compile(
    r"(?<![\w#/+\-.$:])0\d{1,4}([ .\-])\d{2,8}(?:\1\d{2,8}){0,3}(?![\w\-]|[.,/:]\d)", _F)


def _password(m: re.Match[str]) -> str | None:
    label, value = m.group(1), m.group(2)
    if value[0] in "\"'":  # keep the quotes so JSON-ish text stays JSON-ish
        return label + value[0] + RedactionKind.password.placeholder + value[-1]
    # "password is required" is prose; "password is hunter2" is a secret. With an explicit
    # ':'/'=' anything counts.
    core = value.rstrip(".,;)")  # sentence punctuation, not part of the password
    if not core or (re.search(r"\sis\s", label, _FI) and not re.search(r"[\d\W_]", core, _F)):
        return None
    return label + RedactionKind.password.placeholder + value[len(core):]


def _basic(m: re.Match[str]) -> str | None:
    try:  # "Basic <base64(user:pass)>": only redact what decodes to a credential pair
        decoded = base64.b64decode(m.group(2), validate=True)
    except (binascii.Error, ValueError):
        return None
    return m.group(1) + RedactionKind.password.placeholder if b":" in decoded else None


def _kv_secret(m: re.Match[str]) -> str | None:
    v = m.group(2)
    if not (_has_digit(v) and any(c.isalpha() for c in v) and _entropy(v) >= 3.0):
        return None
    return m.group(1) + RedactionKind.api_key.placeholder


def _bearer(m: re.Match[str]) -> str | None:
    return m.group(1) + RedactionKind.bearer_token.placeholder if _has_digit(m.group(2)) else None


# Registered IBAN lengths (SWIFT registry); unknown countries fall back to the 15–34 range.
_IBAN_LEN = {"AD": 24, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24, "DE": 22, "DK": 18,
             "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27, "HR": 21, "HU": 28, "IE": 22,
             "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MT": 31, "NL": 18,
             "NO": 15, "PL": 28, "PT": 25, "RO": 24, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "TR": 26}


def _iban_ok(compact: str) -> bool:
    want = _IBAN_LEN.get(compact[:2])
    if (want is not None and len(compact) != want) or not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _iban(m: re.Match[str]) -> str | None:
    s = m.group(0)
    # The pattern is greedy and may swallow a following capitalised word ("… 00 AND"); try the
    # longest prefix that ends at a group boundary and passes the checksum.
    for end in range(len(s), 14, -1):
        if end < len(s) and s[end] != " ":
            continue
        if _iban_ok(s[:end].replace(" ", "")):
            return RedactionKind.iban.placeholder + s[end:]
    return None


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _card(m: re.Match[str]) -> str | None:
    digits = re.sub(r"\D", "", m.group(0))
    # Issuer prefixes 2–6 cover Visa, Mastercard, Amex, Diners, Discover, JCB, UnionPay, Maestro;
    # requiring them keeps Luhn-valid-by-chance order numbers (1 in 10) out.
    if 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn_ok(digits):
        return RedactionKind.card.placeholder
    return None


def _ipv6(m: re.Match[str]) -> str | None:
    addr = m.group(1)
    try:
        ipaddress.IPv6Address(addr)
    except ValueError:
        return None
    # "::" or "ab::cd" in prose/code is not an address anyone leaks; real ones carry a digit.
    return RedactionKind.ip.placeholder if _has_digit(addr) else None


def _ipv4(m: re.Match[str]) -> str | None:
    before = m.string[max(0, m.start() - 24): m.start()]
    return None if _VERSION_BEFORE.search(before) else RedactionKind.ip.placeholder


def _digits_between(lo: int, hi: int, group: int = 0) -> Callable[[re.Match[str]], bool]:
    return lambda m: lo <= sum(c.isdigit() for c in m.group(group)) <= hi


def _phone_keyword(m: re.Match[str]) -> str | None:
    return _keep_prefix(RedactionKind.phone)(m) if _digits_between(7, 15, 2)(m) else None


def _phone_trunk(m: re.Match[str]) -> str | None:
    s = m.group(0)
    # "0.123456789" is a decimal, not a phone: a dotted national number has at least two dots.
    if m.group(1) == "." and s.count(".") < 2:
        return None
    return RedactionKind.phone.placeholder if _digits_between(9, 13)(m) else None


_K = RedactionKind
# Order matters: secrets first (a JWT inside "token=…" is reported as a JWT), then the PII kinds,
# most specific first (an IP is not a phone, a card is not a phone). The gate is a cheap test on
# the lowercased text (any of these substrings present) that skips a rule which cannot fire; None
# = always run. Gates only skip work: the final, fixpoint pass sees fresh gates.
RULES: tuple[tuple[RedactionKind, re.Pattern[str], Check, tuple[str, ...] | None], ...] = (
    (_K.private_key, _PRIVATE_KEY, _whole(_K.private_key), ("private key",)),
    (_K.jwt, _JWT, _whole(_K.jwt), ("eyj",)),
    (_K.password, _URL_CRED, _keep_prefix(_K.password), ("://",)),
    (_K.password, _BASIC, _basic, ("basic",)),
    (_K.bearer_token, _BEARER, _bearer, ("bearer",)),
    (_K.api_key, _VENDOR_KEY, _whole(_K.api_key, lambda s: _has_digit(s) or s.startswith(("xox", "AIza"))),
     ("sk-", "k_live_", "k_test_", "akia", "asia", "agpa", "aida", "aroa", "anpa", "gh", "xox", "aiza",
      "glpat-", "npm_", "hf_")),
    (_K.api_key, _KV_SECRET, _kv_secret, ("key", "token", "secret", "credential")),
    (_K.password, _PASSWORD, _password, ("pass", "pwd", "pin")),
    (_K.email, _EMAIL, _whole(_K.email), ("@",)),
    (_K.iban, _IBAN, _iban, None),
    (_K.card, _CARD, _card, None),
    (_K.ip, _IPV6, _ipv6, (":",)),
    (_K.ip, _IPV4, _ipv4, (".",)),
    (_K.phone, _PHONE_KEYWORD, _phone_keyword,
     ("phone", "tel", "mobile", "cell", "fax", "whats", "sms", "text me", "call me", "reach me")),
    (_K.phone, _PHONE_INTL, lambda m: _K.phone.placeholder if _digits_between(8, 15)(m) else None, ("+", "00")),
    (_K.phone, _PHONE_NANP, _whole(_K.phone), None),
    (_K.phone, _PHONE_TRUNK, _phone_trunk, ("0",)),
)
