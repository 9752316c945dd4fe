"""The redaction detectors: one compiled pattern plus a check per rule, in priority order.

Each check returns the replacement text, or ``None`` to leave a match alone (failed checksum,
context veto). Kept apart from :mod:`runtime.record.redaction` (the types and the fixpoint driver) so the
rules can be read and extended in one place.

Design rules for the patterns (they run on every write):

- no nested unbounded quantifiers over overlapping classes (no catastrophic backtracking); every
  free-text run has an upper bound or a disjoint separator;
- a bare shape only where the shape is distinctive (vendor prefixes, PEM armour, Luhn-valid card
  layouts, mod-97 IBANs, dashed SSNs, street-number + street-type); anything a date, an order number
  or a version could also look like needs a keyword in front (passport, DOB, national ids, spaced SSNs);
- checksums where the value has one (Luhn, IBAN mod-97).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from .kinds import RedactionKind

__all__ = ["RULES", "Check", "Rule"]

# ASCII mode: \w, \d and \b mean ASCII only, so behaviour does not depend on which Unicode digits
# a text happens to contain. Patterns that must read non-ASCII letters (e-mail domains, labels in
# other languages, street names) say so explicitly with _U.
_F = re.ASCII
_FI = re.ASCII | re.IGNORECASE
_U = 0
_UI = re.IGNORECASE
# A value that is already a placeholder is never redacted again (keeps redact idempotent).
_NOT_PH = r"(?![\"']?\[[A-Z_]+\])"
Check = Callable[[re.Match[str]], str | None]
_K = RedactionKind


class Rule(NamedTuple):
    """One detector.

    Attributes:
        kind: what it reports.
        pattern: the compiled pattern.
        check: the replacement for a match, or ``None`` to keep it.
        gate: substrings of the lower-cased text of which one must be present (``None``: always run).
        digit: the rule can only fire when the text contains an ASCII digit.
        anchors: substrings of the lower-cased text of which every match contains one, starting at
            most ``back`` characters after the match starts. On long text the driver then searches
            only around them instead of scanning the whole text (``None``: always scan it all).
        back: see ``anchors``.
    """

    kind: RedactionKind
    pattern: re.Pattern[str]
    check: Check
    gate: tuple[str, ...] | None
    digit: bool
    anchors: tuple[str, ...] | None = None
    back: int = 0


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _has_digit(s: str) -> bool:
    return any("0" <= c <= "9" for c in s)


def _ndigits(s: str) -> int:
    return sum("0" <= c <= "9" for c in s)


def _entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _before(m: re.Match[str], n: int = 32, group: int | str = 0) -> str:
    """The (lower-cased) text just before the match (or before ``group``)."""
    s = m.start(group)
    return m.string[max(0, s - n): s].lower()


def _replace_group(m: re.Match[str], kind: RedactionKind, group: int | str) -> str:
    """The whole match with only ``group`` replaced by ``kind``'s placeholder."""
    s, e = m.span(group)
    whole = m.group(0)
    return whole[: s - m.start()] + kind.placeholder + whole[e - m.start():]


def _keep_prefix(kind: RedactionKind, group: int | str = 2) -> Check:
    """Replace only ``group``; the text around it (a label such as ``password:``) stays."""
    return lambda m: _replace_group(m, kind, group)


def _whole(kind: RedactionKind, ok: Callable[[str], bool] = lambda s: True) -> Check:
    return lambda m: kind.placeholder if ok(m.group(0)) else None


# Words that follow "password is" / "password:" in prose rather than being a password.
_STOPWORDS = frozenset("""
a an the is was are be been being not no none null nil n/a na tbd todo unknown unset empty blank
required optional mandatory needed necessary incorrect correct wrong invalid valid expired expiring
missing same different too very so also still now here there below above in on at of for to from with
by as and or but if that this it its it's my your our their his her them they we you i me see ask
check use enter type set reset change changed hidden secret weak strong long short sensitive
case-sensitive stored saved encrypted hashed protected masked redacted shown displayed generated new old
ok okay fine good bad safe unsafe easy hard simple complex something anything nothing whatever what
which where when how why who later soon yet already just only please sent yes true false off enabled
disabled default auto automatic manual
""".split())


_PH_INSIDE = re.compile(r"\[[A-Z_]+\]")


def _is_prose_word(v: str) -> bool:
    """A lower-case dictionary-ish word that reads as prose after "password is" — or a value that
    already holds a placeholder (never redacted twice)."""
    if _PH_INSIDE.search(v):
        return True
    w = v.lower().strip("\"'.,;:!?()")
    return (w in _STOPWORDS or not w or set(w) <= set("*x•·.-_")
            or (w.isalpha() and w.islower() and w.endswith(("ed", "ing", "ly", "ble", "ful", "less", "ive", "ous"))))


def _strong_password(v: str) -> bool:
    """Letters and digits, and mixed case or a symbol, at least 6 long: a password even without a label."""
    return (len(v) >= 6 and _has_digit(v) and any(c.isalpha() for c in v)
            and (any(not c.isalnum() for c in v) or (any(c.isupper() for c in v) and any(c.islower() for c in v))))


def _nontrivial(v: str) -> bool:
    """Has a digit, a symbol or mixed case: reads as a credential, not a word."""
    return (_has_digit(v) or any(not c.isalnum() for c in v)
            or (any(c.isupper() for c in v) and any(c.islower() for c in v[1:])))


# --------------------------------------------------------------------------------------------
# secrets
# --------------------------------------------------------------------------------------------
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"  # the body is bounded: an 8192-bit RSA key is ~6.5k chars
    r"(?:(?:[^-]|-(?!----)){0,16000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"  # stops at any -----
    r"|(?:\s*[A-Za-z0-9+/=]{16,})*)", _F)  # an unterminated (pasted, truncated) key: its base64 lines
_JWT = re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", _F)
_WEBHOOK = re.compile(
    r"(https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)/"
    r"|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/"
    r"|[a-z0-9\-]+\.webhook\.office\.com/webhookb2/"
    r"|hooks\.zapier\.com/hooks/catch/))([A-Za-z0-9_\-/@]{8,})", _FI)
_URL_CRED = re.compile(
    r"(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]{0,30}://[^\s:/@\[\]]*:)" + _NOT_PH + r"([^\s@/\[\]]+)(?=@)", _FI)
_BASIC = re.compile(r"\b(Basic\s+)([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])", _F)
_BEARER = re.compile(r"\b(Bearer\s+)" + _NOT_PH + r"([A-Za-z0-9\-._~+/]{16,}=*)", _FI)
# "Authorization: <scheme> <credentials>": Basic is a password; every other scheme but Bearer (its
# own rule) a token.
_AUTH_BASIC = re.compile(
    r"\b(authorization[\"']?\s*[:=]\s*[\"']?basic\s+)" + _NOT_PH + r"([A-Za-z0-9+/=]{8,})", _FI)
_AUTH_HEADER = re.compile(
    r"\b(authorization[\"']?\s*[:=]\s*[\"']?(?:(?:token|digest|apikey|api-key|key|sso-key|ssws|bot|hmac"
    r"|negotiate|ntlm|aws4-hmac-sha256)\s+)?)" + _NOT_PH + r"(?!bearer\b|basic\b)([A-Za-z0-9\-._~+/=,:%]{8,})",
    _FI)
_VENDOR_KEY = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-[A-Za-z0-9_\-]{20,}"                                    # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-)
    r"|[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,}"  # Stripe keys, webhook signing secrets
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
    r"|xox[abposre]-[A-Za-z0-9\-]{10,}|xoxe\.xox[bp]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,}|1//0[0-9A-Za-z_\-]{30,}|GOCSPX-[A-Za-z0-9_\-]{20,}"  # Google
    r"|glpat-[A-Za-z0-9_\-]{20,}|npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}"  # GitLab, npm, Hugging Face
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}|dop_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"
    r")(?![A-Za-z0-9_\-])", _F)
# Signed URLs: Azure SAS, AWS/GCS presigned query parameters.
_SIGNATURE = re.compile(
    r"(?<![A-Za-z0-9_\-])((?:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token)=)" + _NOT_PH
    + r"([A-Za-z0-9%+/=_\-.]{16,})", _FI)
# `name = value` where the name mentions key/token/secret/credential and the value looks random.
_KV_SECRET = re.compile(
    r"(?<![A-Za-z0-9_\-.])([A-Za-z0-9_\-.]{0,64}(?:key|token|secret|credential)s?[A-Za-z0-9_\-]{0,64}"
    r"[\"']?\s*[:=]\s*[\"']?)" + _NOT_PH + r"([A-Za-z0-9_\-./+~]{16,}={0,2})(?![A-Za-z0-9_\-./+~=])", _FI)
# Prose: "the API key is X", "secret for the webhook is X", "access token: X", "api key X".
_SECRET_PHRASE = re.compile(
    r"\b((?:api|access|secret|private|client|auth|signing|endpoint|session|refresh|app|master|encryption"
    r"|license|webhook|account)?[ _\-]?(?:key|token|secret)s?"
    r"(?:\s+(?:for|of|to|on)\s+(?:the\s+|my\s+|our\s+|this\s+)?[\w.\-]{1,30})?"
    r"(?:\s*(?:is|was|=|:|->|\u2192)\s*|\s+)[\"'(]?)" + _NOT_PH + r"([A-Za-z0-9_\-./+~]{16,}={0,2})"
    r"(?![A-Za-z0-9_\-./+~=])", _FI)
# A long random-looking token with no label (AWS secret keys, unknown vendors' keys).
_HIGH_ENTROPY = re.compile(r"(?<![A-Za-z0-9+/=_\-.])[A-Za-z0-9+/_\-]{32,}={0,2}(?![A-Za-z0-9+/=_\-])", _F)

# Passwords. Labels in several languages; the value is a quoted string or the next run of non-space.
_PW_LABEL = (r"(?:pass(?:word|wd|phrase|code)|pwd|pword|pw|pass|pin(?:\s*code)?|mot\s+de\s+passe|passwort"
             r"|kennwort|contrase(?:ñ|n)a|senha|wachtwoord|has(?:ł|l)o|пароль|密码|密碼|パスワード|비밀번호"
             r"|şifre|lösenord|adgangskode|salasana)")
_PASSWORD = re.compile(
    r"(?:(?<![A-Za-z0-9])|(?<=[a-z0-9])(?-i:(?=P)))"  # password, db_password, userPassword
    r"((?P<label>" + _PW_LABEL + r")[\"']?"
    r"(?P<sep>\s*(?:[:=\uff1a]|->|=>|\u2192)\s*"
    r"|\s+(?:is|was|est|ist|lautet|heißt|heisst|es|é|è|är|er|jest|это|:)\s+"
    r"|\s*(?:是|は|为|為)\s*"
    r"|\s+(?:for|to|of|on|del|de|du|des|für|vom|von|da|do|della|del)\s+"
    r"(?:the\s+|my\s+|our\s+|your\s+|this\s+|that\s+|la\s+|le\s+|l'|el\s+|die\s+|das\s+|den\s+)?"
    r"[\w\-]{1,20}(?:\s+[\w\-]{1,20})?(?:\s+(?:is|was|es|est|ist|lautet|é|è)\s+|\s*[:=]\s*)"
    r"|(?P<bare>\s+)))" + _NOT_PH +
    r"(?P<v>\"[^\"\n]+\"|'[^'\n]+'|\S+)", _UI)
# "passphrase: purple monkey dishwasher": a passphrase is words, so the rest of the clause.
_PASSPHRASE = re.compile(r"\b(pass\s?phrase\s*[:=]\s*)" + _NOT_PH + r"([^\s\"'][^\n.;,!?\"']{0,99})", _FI)
# "changed my password to X", "use password X", "with password X" (the value must look like one).
_PASSWORD_VERB = re.compile(
    r"\b((?:(?:changed|set|reset|updated)\s+(?:my\s+|the\s+|your\s+|his\s+|her\s+|our\s+)?(?:[\w\-]+\s+)?"
    r"password\s+to|password\s+(?:was|has\s+been|got|is\s+now)\s+(?:changed|set|reset|updated)\s+to"
    r"|(?:use|using|with|try|enter|type)\s+(?:the\s+|my\s+)?password)\s+)" + _NOT_PH +
    r"(\"[^\"\n]+\"|'[^'\n]+'|\S+)", _FI)
# Credential pairs after a login word: "login admin / admin123", "creds are root:toor".
_PAIR_LOGIN = re.compile(
    r"\b((?:login|log\s*in(?:\s+with)?|sign\s*in(?:\s+with)?|creds|credentials|account|benutzer|usuario"
    r"|utilisateur)\b(?:\s+(?:is|are|was|were))?\s*[:=]?\s*(?:the\s+)?(?:default\s+)?"
    r"(?P<u>[^\s/:,;'\"]{1,40})(?:\s*/\s*|:))" + _NOT_PH + r"(?P<p>[^\s/]+)", _FI)
# A well-known default user glued to a password: "admin:admin123", "admin / admin123".
_PAIR_DEFAULT = re.compile(
    r"(?<![\w/.\-@:])((?P<u>admin|root|administrator|guest|sa|postgres|ubuntu|oracle|ftp|operator|demo)"
    r"(?:\s+/\s+|:|/(?=[^\s/]*\d)))" + _NOT_PH + r"(?P<p>[^\s/]+)", _FI)
# "user alice pass X", "ssh as pi, password raspberry", "account is postgres with password X".
_PAIR_WORDS = re.compile(
    r"\b((?:user(?:name)?|login|benutzer(?:name)?|usuario|utilisateur|account|ssh\s+as)\b(?:\s+(?:is|was))?"
    r"\s*[:=]?\s*[^\s,;]{1,40}[,;]?\s+(?:(?:and|with|plus|y|und|et)\s+)?(?:(?:the|a)\s+)?"
    r"(?:password|passwort|kennwort|contraseña|mot\s+de\s+passe|senha|pass|pw|pwd)\b"
    r"(?:\s+(?:is|was|ist|es|est))?\s*[:=]?\s*)" + _NOT_PH + r"(?P<p>[^\s:=]\S*)", _UI)

# --------------------------------------------------------------------------------------------
# personal data
# --------------------------------------------------------------------------------------------
# E-mail: Unicode local parts and domains (IDN), but a CJK run glued to the front ("邮箱是bob@…")
# is prose, not part of the local part.
_CJK = r"\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_LOCAL_CH = rf"(?:[^\W{_CJK}]|[.%+\-])"  # a local part is at most 64 characters (RFC 5321)
_EMAIL = re.compile(
    rf"(?<![^\W{_CJK}])(?<![.%+\-])(?:{_LOCAL_CH}{{1,64}}|(?<!\w)[^\W\d_]{{1,64}})"
    r"@(?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+"
    r"(?:[A-Za-z]{2,24}(?![A-Za-z0-9\-])|xn--[A-Za-z0-9\-]{2,59}|[^\W\d_A-Za-z]{2,24})", _U)
_EMAIL_OBFUSCATED = re.compile(
    r"(?<![\w.+\-])[A-Za-z0-9._%+\-]{1,64}\s{0,3}(?:\[at\]|\(at\)|\{at\})\s*[A-Za-z0-9\-]+"
    r"(?:\s*(?:\[dot\]|\(dot\)|\{dot\}|\.)\s*[A-Za-z0-9\-]+)+", _FI)
# IBAN: compact, or in groups of four; all upper- or all lower-case (never prose words joined up).
_IBAN = re.compile(
    r"(?:[A-Z][A-Z]\d\d(?<![A-Za-z0-9]....)(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4})?)"
    r"|[a-z][a-z]\d\d(?<![A-Za-z0-9]....)(?:[a-z0-9]{11,30}|(?: [a-z0-9]{4}){2,7}(?: [a-z0-9]{1,4})?))"
    r"(?![A-Za-z0-9])", _F)
_CARD = re.compile(
    r"\d(?<![\w+\-.#/$]\d)(?:\d{12,18}|\d{3}([ \-])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{1,3})?|\d{3}([ \-])\d{6}\2\d{4,5})"
    r"(?![\w\-]|[.,]\d)", _F)
_IPV6 = re.compile(
    r"(?<![\w:.])((?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?)(%[A-Za-z0-9]+)?"
    r"(?![\w:]|\.\w)", _F)
_IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}(?:\.\d{1,3}){3}(?![\w]|\.\d)", _F)  # octets checked in _ipv4
_VERSION_BEFORE = re.compile(
    r"\b(?:v|ver|version|release|build|rev|revision|firmware|fw|update|patch|upgrade|python|node|java|jdk|chrome"
    r"|chromium|firefox|safari|edge|windows|ios|ipados|android|macos|\.net|dotnet|ubuntu|debian|kernel|linux|gcc"
    r"|clang|cuda|openssl|nginx|apache|tomcat|postgres(?:ql)?|mysql|redis|docker|kubernetes|terraform|ruby|php"
    r"|perl|npm|pip|sdk|api|app|driver|bios|office|excel|word)\.?\s*$", _FI)
# Product, order and reference numbers: a phone/SSN-shaped value right after one of these is an id.
_ID_BEFORE = re.compile(
    r"\b(?:sku|part|order|model|serial|ref|reference|ticket|invoice|case|item|product|lot|batch|route|tracking"
    r"|confirmation|isbn|code|no|nr|id|po|rma|build|version|account)\b[.:#\s]*(?:number|no\.?|#)?[.:#\s]*$|#\s*$",
    _FI)
_PHONE_KEYWORD = re.compile(
    r"((?:\b(?:phone|tel(?:ephone)?|mobile|cell(?:phone)?|fax|whats ?app|sms|text me|call me|reach me|handy"
    r"|telefon|portable|m[oó]vil|celular|my (?:phone |cell |mobile )?number)|手机|手機|电话|電話|携帯|전화|연락처)"
    r"(?:\s*(?:number|no\.?|nr\.?|#))?(?:\s*[:=]\s*|\s+(?:is|at|on)\s+|\s+))"
    r"(\+?\(?\d[\d ().\-]{5,20}\d)(?!\d)", _FI)
_PHONE_INTL = re.compile(
    r"(?:\+(?<![\w+]\+)|0(?<![\w+]0)0)[1-9](?:[ .\-]?\(\d{1,4}\)|[ .\-]?\d){6,16}(?![\d\-]|[.,]\d)", _F)
_PHONE_NANP = re.compile(
    r"(?<![\w#/+\-.$:])(?:1[ .\-])?(?:\([2-9]\d{2}\)[ .\-]?|[2-9]\d{2}[ .\-])\d{3}[ .\-]\d{4}(?![\w\-]|[.,/:]\d)", _F)
_PHONE_TRUNK = re.compile(
    r"0(?<![\w#/+\-.$:]0)\d{1,4}([ .\-])\d{2,8}(?:\1\d{2,8}){0,3}(?![\w\-]|[.,/:]\d)", _F)

# US Social Security numbers: with a keyword in any layout, bare only as the dashed 3-2-4.
_SSN_KEYWORD = re.compile(
    r"(?i:\b(?:ssn|itin|ss\s?#|ss\s?no\.?|soc(?:ial)?\.?\s*sec(?:urity)?\.?|social)"
    r"(?:\s*/\s*(?:ssn|itin))?(?:\s*(?:number|no\.?|num|#))?)"
    r"(?i:\s*(?:is|was|as|:|=|-|#)\s*|\s*)(\d{3}([ \-.]?)\d{2}\2\d{4})(?![\d\-])", _F)
_SSN_BARE = re.compile(r"(\d(?<![\w\-#/.+$]\d)\d{2})-(\d{2})-(\d{4})(?![\w\-]|[.,/]\d)", _F)
_PHONE_BEFORE = re.compile(r"\b(?:phone|tel|fax|call|ext|dial|mobile|cell)\b[.:#\s]*$", _FI)
_PASSPORT = re.compile(
    r"(?i:(?:(?:num[ée]ro|n[úu]mero|n°|nº)\s{1,2}(?:de\s{1,2}|du\s{1,2}|del\s{1,2})?)?"
    r"(?:passport|reisepass(?:nummer)?|passeport|pasaporte|passaporto|passaporte|paspoort|paszport|паспорт[а-я]*"
    r"|护照(?:号码|号)?|旅券(?:番号)?|여권(?:번호)?|(?-i:PP)(?=\s*(?:no\b|#|number|nr\b)))"
    r"(?P<marker>(?:\s*(?:number|no\.?|nr\.?|num\.?|\#|id|n°|nº|nummer))*)"
    r"(?P<sep>[\s:=\uff1a\#]*(?:(?:is|was|es|est|ist|to)\s+)?[\s:=\uff1a\#]*))"
    r"(?<![A-Za-z0-9])(?P<v>[A-Za-z0-9]{6,10})(?![A-Za-z0-9])", _U)
_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
          r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
          r"|janvier|f[ée]vrier|mars|avril|mai|juin|juillet|ao[uû]t|septembre|octobre|novembre|d[ée]cembre"
          r"|januar|j[äa]nner|februar|m[äa]rz|maerz|juni|juli|oktober|dezember"
          r"|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre|noviembre|diciembre"
          r"|gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|dicembre)\b\.?")
_DATE = (r"(?:\d{4}[\-/.]\d{1,2}[\-/.]\d{1,2}"
         r"|\d{1,2}[\-/.]\d{1,2}[\-/.](?:\d{4}|\d{2})"
         r"|\d{1,2}(?:st|nd|rd|th|er|\.)?\s+(?:of\s+|de\s+)?" + _MONTH + r",?(?:\s+(?:de\s+)?\d{4})?"
         r"|" + _MONTH + r"\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?"
         r"|" + _MONTH + r"\s+\d{4}"
         r"|\d{4}\s*年\s*\d{1,2}\s*月\s*\d{1,2}\s*日)(?!\d)")
_DOB = re.compile(
    r"(?i:(?:\b(?:born(?:\s+on)?(?:\s+the)?|date\s+of\s+birth|birth\s*date|birth\s*day|b-?day|d\.?o\.?b\.?"
    r"|geburtsdatum|geburtstag|geboren(?:\s+am)?|n[ée]e?\s+le|date\s+de\s+naissance|fecha\s+de\s+nacimiento"
    r"|nacid[oa]\s+el|data\s+di\s+nascita|nat[oa]\s+il|data\s+de\s+nascimento|nascid[oa]\s+em)"
    r"|出生日期|生日)"
    r"[\s:=\uff1a\-]*(?:(?:is|was|es|est|ist|on|am|el|le|il|em)\s+)?(?:the\s+)?)"
    r"(?P<d>(?i:" + _DATE + r"))", _U)
_NATID_VALUE = (r"[\s:=\uff1a\#]*(?:(?i:is|was|es|est|ist|är|er)\s+)?[\s:=\uff1a\#]*)"
                r"(?<![A-Za-z0-9])(?P<v>[A-Z0-9]+(?:[ \-./][A-Z0-9]+){0,6})(?![A-Za-z0-9])")
_NATID_CONNECT = r"(?:\s*(?i:number|no\.?|nr\.?|num\.?|\#|card|id|n°|号码|号))*"
_NATID_ABBR = re.compile(
    r"((?:NINO|NI|SIN|DNI|NIE|NIF|NIR|INSEE|BSN|PAN|TIN|CPF|CURP|NRIC)(?![\w])" + _NATID_CONNECT + _NATID_VALUE, _U)
_NATID = re.compile(
    r"(?<!\w)((?:(?i:national\s+insurance(?:\s+number)?|national\s+id(?:entity|entification)?(?:\s+card)?"
    r"|social\s+insurance(?:\s+number)?|aadhaa?r(?:\s+card)?|codice\s+fiscale|steuer-?id"
    r"|steuer(?:identifikations)?nummer|identifikationsnummer|personalausweis(?:nummer)?|ausweisnummer"
    r"|(?:num[ée]ro\s{1,2}de\s{1,2})?s[ée]curit[ée]\s+sociale|num[ée]ro\s{1,2}de\s{1,2}s[ée]cu|burgerservicenummer"
    r"|personnummer|personal\s+id(?:entity)?|id(?:entity)?\s+card|identity\s+(?:card|number)"
    r"|resident\s+id(?:entity)?(?:\s+card)?|tax\s+(?:id|identification)|taxpayer\s+id"
    r"|driver(?:'|\u2019)?s\s{1,2}licen[cs]e|driving\s{1,2}licen[cs]e|health\s+(?:card|insurance)|medicare|nhs)"
    r"|身份证)" + _NATID_CONNECT + _NATID_VALUE, _U)
_CODICE_FISCALE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z](?![A-Za-z0-9])", _F)

# Street addresses. US/UK: number, street name words, street type, then unit, city, state+ZIP or
# postcode. The name words may be lower-case only right after an address cue ("I live at …").
_ST_TYPE = (r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|Way|Terrace"
            r"|Parkway|Pkwy|Circle|Cir|Highway|Hwy|Square|Sq|Close|Crescent|Grove|Gardens|Mews|Row|Alley|Trail"
            r"|Plaza|Walk|Loop|Pike|Turnpike|Expressway|Freeway)")
_ADDR_TAIL = (r"(?:,?\s*(?:Apt\.?|Apartment|Suite|Ste\.?|Unit|Fl(?:oor)?\.?|Room|Rm\.?|\#)\s*[A-Za-z0-9\-]{1,6})?"
              r"(?:,\s*[A-Z][A-Za-z'\-]+(?![A-Za-z0-9])(?:\.(?=\s+[A-Z]))?(?:\s+[A-Z][A-Za-z'\-]+(?![A-Za-z0-9])){0,2})?"
              r"(?:,?\s+[A-Z]{2}\s+\d{5}(?:-\d{4})?|,?\s+[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2}(?![A-Za-z0-9]))?")
_ADDR_US = re.compile(
    r"(?P<num>\d(?<![\w\-/.,$#]\d)\d{0,5}[A-Za-z]?(?:-\d{1,5})?)\s+"
    r"(?P<names>(?:(?:[NSEW]\.?|[A-Za-z][A-Za-z'\-]*|\d{1,3}(?:st|nd|rd|th))\s+){1,4}?)"
    r"(?P<type>(?i:" + _ST_TYPE + r"))\b\.?(?:\s+(?:NE|NW|SE|SW|N|S|E|W)\b\.?)?" + _ADDR_TAIL, _F)
_ADDR_CUE = re.compile(
    r"\b(?:live|lives|living|lived|address|addr|ship|shipping|deliver|delivery|located|move|moving|moved"
    r"|send|mail|stay|staying|house|home|apartment|flat|office|adresse|dirección|indirizzo)\b", _UI)
_ADDR_DE = re.compile(
    r"[A-ZÄÖÜ](?<!\w[A-ZÄÖÜ])(?:[a-zäöüß\-]*?(?:straße|strasse|str\.|gasse|weg|allee|platz|damm|ufer|chaussee"
    r"|straat|gracht|laan|plein|kade|singel|dijk|steeg)"
    r"|[a-zäöüß]+\s+(?:Straße|Strasse|Str\.|Allee|Weg|Platz|Gasse|Damm))"
    r"\s+\d{1,4}\s?[a-zA-Z]?(?![\w\-])(?:,?\s*\d{4,5}(?:\s?[A-Z]{2})?\s+[A-ZÄÖÜ][\wäöüß\-]+)?", _U)
# Any European street name (no street-type word needed: "Unter den Linden 77, 10117 Berlin",
# "Keizersgracht 123, 1015 CJ Amsterdam"): capitalised words (lower-case particles between them), a
# house number, a comma, then a postcode and a capitalised town. The postcode and town are what make it
# an address; a bare four-digit postcode (a year, too) needs an address cue before it (_addr_eu).
_ADDR_EU = re.compile(
    r"(?<![\w\-])[A-ZÄÖÜÉÈ][\wäöüßéèàç'\-]+\.?(?:\s+(?:(?:de|den|der|die|das|des|du|la|le|van|von|am|an|im|in|op"
    r"|aan|het|te|ten|ter|zum|zur|del|di|da)\s+)*[A-ZÄÖÜÉÈ][\wäöüßéèàç'\-]+\.?){0,3}"
    r"\s+\d{1,4}\s?[a-zA-Z]?(?:-\d{1,4})?,\s*(?P<pc>\d{5}|\d{4}\s?[A-Z]{2}|\d{4})\s+[A-ZÄÖÜÉÈ][\wäöüßéèàç\-]+", _U)
_ROMANCE_TYPE = (r"(?:Calle|C/|Avenida|Avda\.?|Plaza|Paseo|Carrer|Carretera|Camino|Ronda|Travesía|Viale|Via"
                 r"|Piazza|Piazzale|Corso|Vicolo|Largo|Rua|Travessa|Praça|Alameda|Estrada)")
_UPPER = "A-ZÁÉÍÓÚÀÈÌÒÙÂÊÎÔÛÃÕÇÑÄÖÜ"
_ADDR_ROMANCE = re.compile(
    rf"(?P<type>{_ROMANCE_TYPE})\s+(?:(?:de|del|de la|de los|de las|dei|della|delle|degli|di|do|da|dos|das)\s+)?"
    rf"[{_UPPER}][\w'\-]*(?:\s+(?:(?:de|del|di|da|do|dos|das|della|la|las|los|y|e)\s+)?[{_UPPER}][\w'\-]*){{0,3}}"
    r"(?P<comma>,?)\s+(?:n[º°o]\.?\s*)?\d{1,4}[a-zA-Z]?(?![\w\-])(?:,?\s*\d{5}\s+[" + _UPPER + r"][\w\-]+)?", _U)
_ADDR_FR = re.compile(
    r"\d(?<![\w,.\-]\d)\d{0,3}(?:\s?(?:bis|ter))?,?\s+(?:(?i:rue|boulevard|bd|allée|impasse|quai|chemin|faubourg|avenue)"
    r"|place|route|cours|passage)\s+(?:(?:de la|de l'|du|des|de|d'|la|le|les|l')\s*)?[" + _UPPER + r"][\w'\-]*"
    r"(?:\s+(?:(?:de la|de l'|du|des|de|d'|la|le|les|l')\s*)?[" + _UPPER + r"][\w'\-]*){0,3}"
    r"(?:,?\s*\d{5}\s+[" + _UPPER + r"][\w\-]+)?", _U)
_PO_BOX = re.compile(
    r"(?<!\w)(?:[Pp]\.?\s?[Oo]\.?\s?(?:Box|BOX|box)|Post\s+Office\s+Box|Postfach|Apartado(?:\s+de\s+[Cc]orreos)?"
    r"|Casilla)\s+\d{1,6}" + _ADDR_TAIL + r"(?:,?\s+\d{4,5}(?![\d\-]))?", _F)


# --------------------------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------------------------
def _password(m: re.Match[str]) -> str | None:
    label, sep, value = m.group("label").lower(), m.group("sep"), m.group("v")
    whole, s = m.group(0), m.start("v") - m.start()
    if value[0] in "\"'" and len(value) > 2:  # keep the quotes so JSON-ish text stays JSON-ish
        return whole[:s] + value[0] + _K.password.placeholder + value[-1] + whole[s + len(value):]
    core = value.rstrip(".,;)")  # sentence punctuation, not part of the password
    explicit = bool(re.match(r"\s*[:=\uff1a]", sep))
    if "=" in sep:  # key=value lists: the value ends at the next separator
        cut = re.search(r"[;&]", core)
        if cut and cut.start() > 0:
            core = core[: cut.start()]
    if not core or _is_prose_word(core):
        return None
    if label.startswith("pin") and not _has_digit(core):
        return None
    if m.group("bare") is not None:  # "PIN 4821", "temp password 7Hk2pQ9z": only a value that looks like one
        if label.startswith("pin"):
            if not (core.isdigit() and 4 <= len(core) <= 8):
                return None
        elif not (_strong_password(core) and label in ("password", "passwort", "kennwort", "passcode", "pwd")):
            return None
    if label in ("pass", "pw") and not explicit and not (
            re.match(r"\s+(is|was)\s", sep) and (label == "pw" or (_has_digit(core) and len(core) >= 6
                                                                   and any(c.isalpha() for c in core)))):
        return None
    if label == "pass" and re.search(
            r"\b(?:boarding|bus|day|season|ski|hall|train|rail|free|backstage|press|guest|visitor|gym|museum|park"
            r"|metro|travel|festival|access|vip|weekly|monthly|annual|hard|e|mountain|bike)[\s\-]*$",
            _before(m, 24, "label")):
        return None
    if not explicit and re.match(r"\s+(?:for|to|of|on)\s", sep) is None and core.isalpha() and core.isupper():
        return None  # "PASSWORD IS REQUIRED" shouting prose
    return whole[:s] + _K.password.placeholder + whole[s + len(core):]


def _passphrase(m: re.Match[str]) -> str | None:
    v = m.group(2).rstrip()
    if _is_prose_word(v.split()[0]) or _PH_INSIDE.search(v):
        return None
    return m.group(1) + _K.password.placeholder + m.group(2)[len(v):]


def _password_verb(m: re.Match[str]) -> str | None:
    v = m.group(2)
    if v[0] in "\"'" and len(v) > 2:
        return m.group(1) + v[0] + _K.password.placeholder + v[-1]
    core = v.rstrip(".,;)")
    if not core or _is_prose_word(core) or not _nontrivial(core):
        return None
    return m.group(1) + _K.password.placeholder + v[len(core):]


_DEFAULT_USERS = frozenset("admin root administrator guest sa postgres ubuntu pi user test oracle ftp operator "
                           "support demo".split())


def _pair(require_nontrivial: bool, symbol: bool = False) -> Check:
    def check(m: re.Match[str]) -> str | None:
        p = m.group("p")
        core = p.rstrip(".,;)")
        if not core or _is_prose_word(core) or ":" in core:
            return None
        u = m.groupdict().get("u") or ""
        if u and (u.isdigit() and core.isdigit()):
            return None  # "10:30", "4/5"
        if require_nontrivial and core.isdigit():
            return None  # "user:1000" (a uid), "admin:8080"
        if require_nontrivial and not _nontrivial(core) and u.lower() not in _DEFAULT_USERS:
            return None  # "sign in with Google/Apple"
        if symbol and (len(core) < 4 or core.isalpha()):
            return None  # a bare "admin:x" needs a password-looking value
        if symbol and m.group(1).endswith("/") and (core.islower() or not any(not c.isalnum() or c.isupper()
                                                                              for c in core)):
            return None  # "admin/users2024" is a path; "admin/Nas2023!" a credential pair
        whole = m.group(0)
        s = m.start("p") - m.start()
        return whole[:s] + _K.password.placeholder + whole[s + len(core):]
    return check


def _pair_words(m: re.Match[str]) -> str | None:
    p = m.group("p")
    core = p.rstrip(".,;)")
    if not core or _is_prose_word(core):
        return None
    return m.group(1) + _K.password.placeholder + p[len(core):]


def _basic(m: re.Match[str]) -> str | None:
    try:  # "Basic <base64(user:pass)>": only redact what decodes to a credential pair
        decoded = base64.b64decode(m.group(2), validate=True)
    except (binascii.Error, ValueError):
        return None
    return m.group(1) + _K.password.placeholder if b":" in decoded else None


def _auth_header(kind: RedactionKind) -> Check:
    def check(m: re.Match[str]) -> str | None:
        v = m.group(2)
        if not _has_digit(v) and len(v) < 16:
            return None  # "Authorization: required"
        return m.group(1) + kind.placeholder
    return check


def _random_looking(v: str, min_digits: int = 1) -> bool:
    return (_ndigits(v) >= min_digits and any(c.isalpha() for c in v) and _entropy(v) >= 3.0)


def _kv_secret(m: re.Match[str]) -> str | None:
    return m.group(1) + _K.api_key.placeholder if _random_looking(m.group(2)) else None


def _secret_phrase(m: re.Match[str]) -> str | None:
    v = m.group(2)
    mixed = any(c.isupper() for c in v) and any(c.islower() for c in v)
    if not _random_looking(v, 2) or not (mixed or len(v) >= 20):
        return None
    return m.group(1) + _K.api_key.placeholder


def _high_entropy(m: re.Match[str]) -> str | None:
    v = m.group(0).rstrip("=")
    if not (any(c.isupper() for c in v) and any(c.islower() for c in v) and _ndigits(v) >= 3):
        return None
    if v.count("-") + v.count("_") > 3 or v.count("/") > 3 or v.startswith("/"):
        return None  # identifiers (some_long_name_v2) and paths have many separators; keys rarely do
    return _K.api_key.placeholder if _entropy(v) >= 4.2 else None


def _bearer(m: re.Match[str]) -> str | None:
    return m.group(1) + _K.bearer_token.placeholder if _has_digit(m.group(2)) else None


def _webhook(m: re.Match[str]) -> str | None:
    return m.group(1) + _K.api_key.placeholder if _has_digit(m.group(2)) else None


def _signature(m: re.Match[str]) -> str | None:
    return m.group(1) + _K.api_key.placeholder if _has_digit(m.group(2)) or "%" in m.group(2) else None


def _email(m: re.Match[str]) -> str | None:
    s = m.group(0)
    if s.lower().startswith("git@") and m.string[m.end(): m.end() + 1] == ":":
        return None  # scp-style git remote, git@github.com:org/repo.git
    return _K.email.placeholder


# Registered IBAN lengths (SWIFT registry); a country not listed here is not an IBAN.
_IBAN_LEN = {"AD": 24, "AE": 23, "AT": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21, "CR": 22, "CY": 28,
             "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27,
             "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26,
             "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27,
             "MD": 24, "ME": 22, "MK": 19, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29,
             "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24,
             "TR": 26, "UA": 29, "AL": 28, "AZ": 28, "BA": 20, "BY": 28, "GT": 28, "IQ": 23, "LC": 32,
             "LY": 25, "MR": 27, "SC": 31, "SD": 18, "ST": 25, "SV": 28, "TL": 23, "VA": 22, "VG": 24, "XK": 20,
             "BI": 27, "DJ": 27, "FK": 18, "MN": 20, "NI": 28, "OM": 23, "RU": 33, "SO": 23, "YE": 30}


def _iban_ok(compact: str) -> bool:
    compact = compact.upper()
    if _IBAN_LEN.get(compact[:2]) != len(compact):
        return False  # unknown country or wrong length for it
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _iban(m: re.Match[str]) -> str | None:
    s = m.group(0)
    # The pattern is greedy and may swallow a following word ("… 00 AND"); try the longest prefix
    # that ends at a group boundary and passes the checksum.
    for end in range(len(s), 14, -1):
        if end < len(s) and s[end] != " ":
            continue
        if _iban_ok(s[:end].replace(" ", "")):
            return _K.iban.placeholder + s[end:]
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
        return _K.card.placeholder
    return None


def _ipv6(m: re.Match[str]) -> str | None:
    addr = m.group(1)
    try:
        ipaddress.IPv6Address(addr)
    except ValueError:
        return None
    # "::" or "ab::cd" in prose/code is not an address anyone leaks; real ones carry a digit.
    return _K.ip.placeholder if _has_digit(addr) else None


_NOT_PERSONAL_V4 = frozenset({"0.0.0.0", "127.0.0.1", "255.255.255.255", "255.255.255.0"})


def _ipv4(m: re.Match[str]) -> str | None:
    if any(int(o) > 255 or (len(o) > 1 and o[0] == "0") for o in m.group(0).split(".")):
        return None
    if (m.group(0) in _NOT_PERSONAL_V4 or _VERSION_BEFORE.search(_before(m, 24))
            or (m.group(0).endswith(".0") and re.match(r"/\d", m.string[m.end(): m.end() + 2]))):
        return None  # "listen on 0.0.0.0", a netmask, "Python 3.12.1.2", a network "10.0.0.0/8"
    return _K.ip.placeholder


def _phone_keyword(m: re.Match[str]) -> str | None:
    return _replace_group(m, _K.phone, 2) if 7 <= _ndigits(m.group(2)) <= 15 else None


def _phone_trunk(m: re.Match[str]) -> str | None:
    s = m.group(0)
    # "0.123456789" is a decimal, not a phone: a dotted national number has at least two dots.
    if m.group(1) == "." and s.count(".") < 2:
        return None
    if _ID_BEFORE.search(_before(m, 28)):
        return None  # "Batch 0012-3344-55"
    return _K.phone.placeholder if 9 <= _ndigits(s) <= 13 else None


def _phone_intl(m: re.Match[str]) -> str | None:
    s = m.group(0)
    if not 8 <= _ndigits(s) <= 15 or (s[0] == "0" and _ID_BEFORE.search(_before(m, 28))):
        return None  # "Batch 0012-3344-55": a 00-prefixed id, not a call abroad
    return _K.phone.placeholder


def _phone_nanp(m: re.Match[str]) -> str | None:
    return None if _ID_BEFORE.search(_before(m, 28)) else _K.phone.placeholder


def _ssn_valid(area: str, group: str, serial: str) -> bool:
    return area not in ("000", "666") and group != "00" and serial != "0000"


def _ssn_keyword(m: re.Match[str]) -> str | None:
    d = re.sub(r"\D", "", m.group(1))
    return _replace_group(m, _K.ssn, 1) if _ssn_valid(d[:3], d[3:5], d[5:]) else None


def _ssn_bare(m: re.Match[str]) -> str | None:
    area, group, serial = m.groups()
    before = _before(m, 28)
    if not _ssn_valid(area, group, serial) or _ID_BEFORE.search(before) or _PHONE_BEFORE.search(before):
        return None
    if area[0] == "9" and not (50 <= int(group) <= 65 or 70 <= int(group) <= 99):
        return None  # 9xx is an ITIN only with these group numbers
    return _K.ssn.placeholder


_PASSPORT_EXPLICIT = re.compile(r"num|nummer|\bno\b|\bnr\b|#|:|=|\uff1a|号|番号|번호|n°|nº|\bid\b"
                                r"|\b(?:is|was|es|est|ist|to)\b", re.IGNORECASE)


def _passport(m: re.Match[str]) -> str | None:
    v = m.group("v")
    explicit = bool(_PASSPORT_EXPLICIT.search(m.group(0)[: m.start("v") - m.start()]))
    n = _ndigits(v)
    if n >= 2 or (explicit and (n >= 1 or (v.isupper() and len(v) >= 8))):
        return _replace_group(m, _K.passport, "v")
    return None


def _national_id(m: re.Match[str]) -> str | None:
    v = m.group("v")
    alnum = sum(c.isalnum() for c in v)
    if _ndigits(v) < 4 or not 6 <= alnum <= 20:
        return None
    return _replace_group(m, _K.national_id, "v")


def _national_id_abbr(m: re.Match[str]) -> str | None:
    if m.start() and (m.string[m.start() - 1].isalnum() or m.string[m.start() - 1] == "_"):
        return None  # inside a word (no leading lookbehind, so sre can skip to the capitals)
    return _national_id(m)


def _codice_fiscale(m: re.Match[str]) -> str | None:
    return _K.national_id.placeholder


def _addr_us(m: re.Match[str]) -> str | None:
    names = m.group("names").split()
    t = m.group("type")
    strict = t[0].isupper() and all(w[0].isupper() or w[0].isdigit() for w in names)
    if not strict and not _ADDR_CUE.search(_before(m, 40)):
        return None
    if len(names) == 1 and names[0].lower() in ("the", "a", "an", "my", "our", "this", "that"):
        return None
    return _K.address.placeholder


def _addr_eu(m: re.Match[str]) -> str | None:
    if len(m.group("pc")) == 4 and not _ADDR_CUE.search(_before(m, 40)):
        return None  # "Chapter 5, 2023 Edition": a four-digit number may be a year
    return _K.address.placeholder


def _addr_romance(m: re.Match[str]) -> str | None:
    if m.start() and m.string[m.start() - 1].isalnum():
        return None  # inside a word (the pattern has no leading lookbehind, so sre can prefix-scan)
    if m.group("type") == "Via" and m.group("comma"):
        return None  # "Via Zoom, 3 people joined"
    return _K.address.placeholder


# Gates: a literal with a capital letter is looked for case-sensitively in the text, any other in
# the lower-cased text; literals that are not ASCII are only looked for in text that is not ASCII.
_PW_GATE = ("pass", "pw", "pin", "kennwort", "contrase", "senha", "wachtwoord", "haslo", "sifre", "losenord",
            "adgangskode", "salasana", "hasło", "пароль", "密码", "密碼", "パスワード", "비밀번호", "şifre", "lösenord")
_NATID_GATE = ("national", "insurance", "aadha", "codice", "steuer", "identifikation", "ausweis", "curit", "sécu",
               "secu", "burgerservice", "personnummer", "card", "personal", "resident", "identity", "tax",
               "licen", "health", "medicare", "nhs", "身份证")
# Every match of _PASSWORD starts at its label, which contains one of these.
_PW_ANCHORS = ("pass", "pw", "pin", "mot", "kennwort", "contrase", "senha", "wachtwoord", "has", "пароль", "密码",
               "密碼", "パスワード", "비밀번호", "şifre", "lösenord", "adgangskode", "salasana")
_VENDOR_ANCHORS = ("sk-", "k_live_", "k_test_", "whsec_", "akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa",
                   "abia", "acca", "gh", "github_pat_", "xox", "xapp-", "aiza", "ya29.", "1//0", "gocspx-", "glpat-",
                   "npm_", "hf_", "sg.", "dop_v1_", "shp")
_DEFAULT_USER_ANCHORS = ("admin", "root", "guest", "sa", "postgres", "ubuntu", "oracle", "ftp", "operator", "demo")
_FR_GATE = ("rue", "bd ", "allée", "allee", "impasse", "quai", "chemin", "faubourg", "avenue", "place", "route",
            "cours", "passage")


def _r(kind: RedactionKind, pattern: re.Pattern[str], check: Check, gate: tuple[str, ...] | None = None,
       digit: bool = False, anchors: tuple[str, ...] | None = None, back: int = 0) -> Rule:
    return Rule(kind, pattern, check, gate, digit, anchors, back)


# Order matters: secrets first (a JWT inside "token=…" is reported as a JWT, a webhook before the
# generic key rules), then the personal-data kinds, most specific first (a DOB is not a phone, an SSN
# is not a phone, a national id is not a card). The gate is a cheap test on the lowercased text (any
# of these substrings present) that skips a rule which cannot fire; ``digit`` skips a rule on text
# without a digit. Gates only skip work: the final, fixpoint pass sees fresh gates.
RULES: tuple[Rule, ...] = (
    _r(_K.private_key, _PRIVATE_KEY, _whole(_K.private_key), ("private key",)),
    _r(_K.jwt, _JWT, _whole(_K.jwt), ("eyj",)),
    _r(_K.api_key, _WEBHOOK, _webhook, ("://",), True),
    _r(_K.password, _URL_CRED, _keep_prefix(_K.password), ("://",), anchors=("://",), back=32),
    _r(_K.bearer_token, _BEARER, _bearer, ("bearer",)),
    _r(_K.password, _AUTH_BASIC, _auth_header(_K.password), ("authorization",)),
    _r(_K.bearer_token, _AUTH_HEADER, _auth_header(_K.bearer_token), ("authorization",)),
    _r(_K.password, _BASIC, _basic, ("basic",)),
    _r(_K.api_key, _VENDOR_KEY, _whole(_K.api_key, lambda s: _has_digit(s) or s.startswith(("xox", "AIza"))),
       _VENDOR_ANCHORS, True, anchors=_VENDOR_ANCHORS, back=1),  # every match holds an anchor: it is a gate too
    _r(_K.api_key, _SIGNATURE, _signature, ("sig", "security-token"), anchors=("sig", "security-token"), back=16),
    _r(_K.api_key, _KV_SECRET, _kv_secret, ("key", "token", "secret", "credential"), True,
       anchors=("key", "token", "secret", "credential"), back=80),
    _r(_K.api_key, _SECRET_PHRASE, _secret_phrase, ("key", "token", "secret"), True,
       anchors=("key", "token", "secret"), back=16),
    _r(_K.api_key, _HIGH_ENTROPY, _high_entropy, None, True),
    _r(_K.password, _PASSPHRASE, _passphrase, ("phrase",)),
    _r(_K.password, _PASSWORD, _password, _PW_GATE, anchors=_PW_ANCHORS),
    _r(_K.password, _PASSWORD_VERB, _password_verb, ("password",)),
    _r(_K.password, _PAIR_WORDS, _pair_words, ("pass", "pw"),
       anchors=("user", "login", "benutzer", "usuario", "utilisateur", "account", "ssh")),
    _r(_K.password, _PAIR_LOGIN, _pair(True), ("/", ":"),
       anchors=("log", "sign", "cred", "account", "benutzer", "usuario", "utilisateur")),
    _r(_K.password, _PAIR_DEFAULT, _pair(True, symbol=True), ("/", ":"), anchors=_DEFAULT_USER_ANCHORS),
    _r(_K.email, _EMAIL, _email, ("@",), anchors=("@",), back=64),  # a local part is at most 64 characters
    _r(_K.email, _EMAIL_OBFUSCATED, _whole(_K.email), ("at]", "at)", "at}"), anchors=("[at]", "(at)", "{at}"),
       back=68),
    _r(_K.date_of_birth, _DOB, _keep_prefix(_K.date_of_birth, "d"),
       ("born", "birth", "bday", "b-day", "dob", "d.o.b", "d.ob", "do.b", "geburt", "geboren", "naissance", "naci",
        "nasc", "nato", "nata", "né", "出生", "生日"), True),
    _r(_K.ssn, _SSN_KEYWORD, _ssn_keyword, ("ssn", "itin", "ss#", "ss #", "ss no", "ssno", "soc"), True),
    _r(_K.ssn, _SSN_BARE, _ssn_bare, ("-",), True),
    _r(_K.passport, _PASSPORT, _passport,
       ("passport", "reisepass", "passeport", "pasaporte", "passaport", "paspoort", "paszport", "PP", "паспорт",
        "护照", "旅券", "여권"), True,
       anchors=("passport", "reisepass", "passeport", "pasaporte", "passaport", "paspoort", "paszport", "pp",
                "паспорт", "护照", "旅券", "여권"), back=16),
    _r(_K.national_id, _NATID, _national_id, _NATID_GATE, True, anchors=_NATID_GATE, back=16),
    _r(_K.national_id, _NATID_ABBR, _national_id_abbr, None, True),
    _r(_K.national_id, _CODICE_FISCALE, _codice_fiscale, None, True),
    _r(_K.address, _PO_BOX, _whole(_K.address), ("box", "postfach", "apartado", "casilla"), True),
    _r(_K.address, _ADDR_US, _addr_us, None, True),
    _r(_K.address, _ADDR_DE, _whole(_K.address), None, True),
    _r(_K.address, _ADDR_EU, _addr_eu, None, True),
    _r(_K.address, _ADDR_ROMANCE, _addr_romance, None, True),
    _r(_K.address, _ADDR_FR, _whole(_K.address), _FR_GATE, True),
    _r(_K.iban, _IBAN, _iban, None, True),
    _r(_K.card, _CARD, _card, None, True),
    _r(_K.ip, _IPV6, _ipv6, (":",), True),
    _r(_K.ip, _IPV4, _ipv4, (".",), True),
    _r(_K.phone, _PHONE_KEYWORD, _phone_keyword,
       ("phone", "tel", "mobile", "cell", "fax", "whats", "sms", "text me", "call me", "reach me", "handy",
        "portable", "movil", "móvil", "celular", "number", "手机", "手機", "电话", "電話", "携帯", "전화", "연락처"), True,
       anchors=("phone", "tel", "mobile", "cell", "fax", "whats", "sms", "text me", "call me", "reach me", "handy",
                "portable", "movil", "móvil", "celular", "number", "手机", "手機", "电话", "電話", "携帯", "전화", "연락처"),
       back=12),
    _r(_K.phone, _PHONE_INTL, _phone_intl, ("+", "00"), True),
    _r(_K.phone, _PHONE_NANP, _phone_nanp, None, True),
    _r(_K.phone, _PHONE_TRUNK, _phone_trunk, ("0",), True),
)
