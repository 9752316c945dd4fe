"""A redaction evaluation corpus: secrets and personal data in natural sentences, plus benign look-alikes.

Written by hand and generated from the *formats* of the values (vendor token layouts, Luhn, IBAN
mod-97, national-id checksums), never from the detectors' patterns. Every secret is recorded as the
exact substring planted in its sentence; ``core`` names the parts that must be gone for the secret
to count as redacted (the password of a ``user / password`` pair, the street line of an address);
by default the whole secret.

``kind`` is the corpus's own, finer taxonomy (``github_token``, ``slack_webhook`` …); the redactor
may report any placeholder for it — recall only asks whether the value is gone.

Use :func:`secrets` and :func:`benign` (both deterministic: a fixed seed).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

__all__ = ["CREDENTIAL_KINDS", "BenignCase", "Evaluation", "SecretCase", "benign", "evaluate", "secrets"]

SEED = 20250611


@dataclass(frozen=True)
class SecretCase:
    """One planted value: its corpus kind, the sentence, the exact value, and what must be gone."""

    kind: str
    text: str
    secret: str
    core: tuple[str, ...] = field(default=())

    @property
    def must_vanish(self) -> tuple[str, ...]:
        return (self.secret, *self.core)


@dataclass(frozen=True)
class BenignCase:
    """A sentence that looks like it might hold something sensitive but does not."""

    category: str
    text: str


# ---------------------------------------------------------------------------------------------
# value generators (formats and checksums, not detector patterns)
# ---------------------------------------------------------------------------------------------
_ALNUM = string.ascii_letters + string.digits
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "-_"


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    while True:  # a random token with at least one digit (as real ones have, almost always)
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if n < 8 or any(c.isdigit() for c in s) or not any(c.isdigit() for c in alphabet):
            return s


def _luhn_complete(prefix_and_body: str) -> str:
    digits = prefix_and_body + "0"
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return prefix_and_body + str((10 - total % 10) % 10)


def _card(rng: random.Random) -> str:
    brand = rng.choice(["visa", "visa", "mc", "mc2", "amex", "discover", "jcb", "unionpay", "diners"])
    prefix, length = {
        "visa": ("4", 16), "mc": (str(rng.randint(51, 55)), 16), "mc2": (str(rng.randint(2221, 2720)), 16),
        "amex": (rng.choice(["34", "37"]), 15), "discover": (rng.choice(["6011", "65"]), 16),
        "jcb": (str(rng.randint(3528, 3589)), 16), "unionpay": ("62", rng.choice([16, 19])),
        "diners": (rng.choice(["36", "38"]), 14)}[brand]
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    num = _luhn_complete(body)
    style = rng.choice(["plain", "space", "dash", "space"])
    if style == "plain":
        return num
    sep = " " if style == "space" else "-"
    if length == 15:
        return sep.join([num[:4], num[4:10], num[10:]])
    if length == 14:
        return sep.join([num[:4], num[4:10], num[10:]])
    return sep.join(num[i:i + 4] for i in range(0, length, 4))


_IBAN_BBAN = {  # country: layout of the BBAN, n = digit, a = upper letter, c = alnum
    "DE": "n" * 18, "GB": "aaaa" + "n" * 14, "FR": "n" * 10 + "c" * 11 + "nn", "NL": "aaaa" + "n" * 10,
    "ES": "n" * 20, "IT": "a" + "n" * 10 + "c" * 12, "CH": "n" * 5 + "c" * 12, "BE": "n" * 12,
    "AT": "n" * 16, "PL": "n" * 24, "IE": "aaaa" + "n" * 14, "SE": "n" * 20, "PT": "n" * 21,
}


def _iban(rng: random.Random) -> str:
    cc = rng.choice(list(_IBAN_BBAN))
    bban = "".join(rng.choice(string.digits if t == "n" else string.ascii_uppercase if t == "a"
                              else string.ascii_uppercase + string.digits) for t in _IBAN_BBAN[cc])
    num = int("".join(str(int(c, 36)) for c in bban + cc + "00"))
    iban = f"{cc}{98 - num % 97:02d}{bban}"
    return " ".join(iban[i:i + 4] for i in range(0, len(iban), 4)) if rng.random() < 0.6 else iban


def _aws_key_id(rng: random.Random) -> str:
    return rng.choice(["AKIA", "AKIA", "ASIA"]) + _rand(rng, string.ascii_uppercase + "234567", 16)


def _aws_secret(rng: random.Random) -> str:
    while True:
        s = _rand(rng, _B64, 40)
        if any(c in "+/" for c in s):
            return s


def _pem(rng: random.Random, label: str, lines: int = 4, width: int = 64) -> str:
    body = "\n".join(_rand(rng, _B64, width) for _ in range(lines)) + "\n" + _rand(rng, _B64, 20) + "=="
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def _b64url(rng: random.Random, n: int) -> str:
    return _rand(rng, _URLSAFE, n)


def _jwt(rng: random.Random) -> str:
    import base64
    import json
    head = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    body = {"sub": str(rng.randint(10**6, 10**9)), "name": rng.choice(["Ana", "Bo", "Chen Li"]),
            "iat": rng.randint(1_600_000_000, 1_750_000_000)}
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")  # noqa: E731
    return f"{enc(head)}.{enc(body)}.{_b64url(rng, 43)}"


def _ssn(rng: random.Random) -> tuple[str, str, str]:
    while True:
        area = rng.randint(1, 899)
        if area != 666:
            break
    return f"{area:03d}", f"{rng.randint(1, 99):02d}", f"{rng.randint(1, 9999):04d}"


def _verhoeff_digit(num: str) -> str:
    d = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 0, 6, 7, 8, 9, 5], [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
         [3, 4, 0, 1, 2, 8, 9, 5, 6, 7], [4, 0, 1, 2, 3, 9, 5, 6, 7, 8], [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
         [6, 5, 9, 8, 7, 1, 0, 4, 3, 2], [7, 6, 5, 9, 8, 2, 1, 0, 4, 3], [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
         [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]]
    p = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 5, 7, 6, 2, 8, 3, 0, 9, 4], [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
         [8, 9, 1, 6, 0, 4, 3, 5, 2, 7], [9, 4, 5, 3, 1, 2, 6, 8, 7, 0], [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
         [2, 7, 9, 3, 8, 0, 6, 4, 1, 5], [7, 0, 4, 6, 9, 1, 3, 2, 5, 8]]
    inv = [0, 4, 3, 2, 1, 5, 6, 7, 8, 9]
    c = 0
    for i, ch in enumerate(reversed(num)):
        c = d[c][p[(i + 1) % 8][int(ch)]]
    return str(inv[c])


def _national_id(rng: random.Random) -> tuple[str, str]:
    """(id type, value) with a valid checksum where the id has one."""
    t = rng.choice(["nino", "sin", "aadhaar", "dni", "cf", "steuer", "nir", "bsn", "cn", "pan", "personnummer"])
    if t == "nino":
        a = rng.choice("ABCEGHJKLMNOPRSTWXYZ") + rng.choice("ABCEGHJKLMNPRSTWXYZ")
        n = f"{rng.randint(0, 999999):06d}"
        return t, rng.choice([f"{a}{n}{rng.choice('ABCD')}", f"{a} {n[:2]} {n[2:4]} {n[4:]} {rng.choice('ABCD')}"])
    if t == "sin":
        v = _luhn_complete(str(rng.randint(1, 7)) + f"{rng.randint(0, 9999999):07d}")
        return t, rng.choice([f"{v[:3]} {v[3:6]} {v[6:]}", f"{v[:3]}-{v[3:6]}-{v[6:]}", v])
    if t == "aadhaar":
        v = str(rng.randint(2, 9)) + f"{rng.randint(0, 10**10 - 1):010d}"
        v += _verhoeff_digit(v)
        return t, rng.choice([f"{v[:4]} {v[4:8]} {v[8:]}", v])
    if t == "dni":
        n = rng.randint(10**7, 10**8 - 1)
        return t, f"{n}{'TRWAGMYFPDXBNJZSQVHLCKE'[n % 23]}"
    if t == "cf":  # codice fiscale layout: 6 letters, 2 digits, month letter, 2 digits, letter, 3 digits, check
        L = string.ascii_uppercase
        v = ("".join(rng.choice(L) for _ in range(6)) + f"{rng.randint(40, 99)}" + rng.choice("ABCDEHLMPRST")
             + f"{rng.randint(1, 71):02d}" + rng.choice(L) + f"{rng.randint(0, 999):03d}")
        return t, v + rng.choice(L)
    if t == "steuer":
        return t, str(rng.randint(1, 9)) + f"{rng.randint(0, 10**10 - 1):010d}"
    if t == "nir":
        v = (f"{rng.choice('12')}{rng.randint(40, 99)}{rng.randint(1, 12):02d}{rng.randint(1, 95):02d}"
             f"{rng.randint(1, 999):03d}{rng.randint(1, 999):03d}")
        key = 97 - int(v) % 97
        return t, rng.choice([f"{v[0]} {v[1:3]} {v[3:5]} {v[5:7]} {v[7:10]} {v[10:13]} {key:02d}", f"{v}{key:02d}"])
    if t == "bsn":
        while True:
            ds = [rng.randint(0, 9) for _ in range(8)]
            s = sum(d * w for d, w in zip(ds, range(9, 1, -1)))
            last = s % 11
            if last < 10 and ds[0] != 0:
                return t, "".join(map(str, ds)) + str(last)
    if t == "cn":
        body = (f"{rng.randint(110000, 659999)}{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}"
                f"{rng.randint(1, 28):02d}{rng.randint(0, 999):03d}")
        w = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
        return t, body + "10X98765432"[sum(int(c) * x for c, x in zip(body, w)) % 11]
    if t == "pan":
        L = string.ascii_uppercase
        return t, ("".join(rng.choice(L) for _ in range(3)) + rng.choice("PCHFAT") + rng.choice(L)
                   + f"{rng.randint(0, 9999):04d}" + rng.choice(L))
    y, m, d = rng.randint(1950, 2004), rng.randint(1, 12), rng.randint(1, 28)
    return t, f"{y % 100:02d}{m:02d}{d:02d}-{rng.randint(0, 9999):04d}"


_FIRST = ["anna", "ben", "carlos", "dana", "elif", "farid", "grace", "hiro", "ines", "jonas", "kemal", "lena",
          "mateo", "nadia", "omar", "priya", "quinn", "rosa", "sven", "tariq", "uma", "viktor", "wen", "yara"]
_LAST = ["schmidt", "garcia", "nguyen", "okafor", "rossi", "dubois", "kowalski", "tanaka", "silva", "haddad",
         "larsen", "murphy", "ivanova", "mehta", "fischer", "moreau", "costa", "novak"]
_DOMAINS = ["gmail.com", "outlook.com", "example.org", "acme-corp.io", "mail.example.co.uk", "uni-heidelberg.de",
            "fastmail.fm", "proton.me", "company.travel", "sub.dept.example.com", "yahoo.co.jp", "web.de"]


def _email(rng: random.Random) -> str:
    f, la = rng.choice(_FIRST), rng.choice(_LAST)
    local = rng.choice([f"{f}.{la}", f"{f}{la[0]}", f"{f}_{la}{rng.randint(1, 99)}", f"{f[0]}{la}",
                        f"{f}+{rng.choice(['travel', 'news', 'bills'])}", f"{f.title()}.{la.title()}"])
    return f"{local}@{rng.choice(_DOMAINS)}"


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _phone_intl(rng: random.Random) -> str:
    c = rng.randrange(13)
    d = lambda n: _digits(rng, n)  # noqa: E731
    return [
        lambda: f"+1 {rng.randint(201, 989)} {rng.randint(201, 989)} {d(4)}",
        lambda: f"+1-{rng.randint(201, 989)}-{rng.randint(201, 989)}-{d(4)}",
        lambda: f"+1 ({rng.randint(201, 989)}) {rng.randint(201, 989)}-{d(4)}",
        lambda: f"+44 20 {rng.randint(7000, 8999)} {d(4)}",
        lambda: f"+44 (0)7{d(3)} {d(6)}",
        lambda: f"+49 30 {d(8)}",
        lambda: f"+49 151 {d(8)}",
        lambda: f"+33 6 {d(2)} {d(2)} {d(2)} {d(2)}",
        lambda: f"+81 3-{d(4)}-{d(4)}",
        lambda: f"+86 13{d(1)} {d(4)} {d(4)}",
        lambda: f"+91 9{d(4)} {d(5)}",
        lambda: f"+55 11 9{d(4)}-{d(4)}",
        lambda: f"0044 20 {rng.randint(7000, 8999)} {d(4)}",
    ][c]()


def _phone_national(rng: random.Random) -> str:
    c = rng.randrange(12)
    d = lambda n: _digits(rng, n)  # noqa: E731
    a = rng.randint(201, 989)
    return [
        lambda: f"({a}) {rng.randint(201, 989)}-{d(4)}",
        lambda: f"{a}-{rng.randint(201, 989)}-{d(4)}",
        lambda: f"{a}.{rng.randint(201, 989)}.{d(4)}",
        lambda: f"1-800-{rng.randint(201, 989)}-{d(4)}",
        lambda: f"020 {rng.randint(7000, 8999)} {d(4)}",
        lambda: f"07{d(3)} {d(6)}",
        lambda: f"030 {d(8)}",
        lambda: f"0{rng.choice('67')} {d(2)} {d(2)} {d(2)} {d(2)}",
        lambda: f"0151 {d(8)}",
        lambda: f"03-{d(4)}-{d(4)}",
        lambda: f"090-{d(4)}-{d(4)}",
        lambda: f"06-{d(8)}",
    ][c]()


def _ipv4(rng: random.Random) -> str:
    c = rng.randrange(4)
    if c == 0:
        return f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    if c == 1:
        return f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    return f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def _ipv6(rng: random.Random) -> str:
    h = lambda: f"{rng.randint(1, 0xffff):x}"  # noqa: E731
    c = rng.randrange(4)
    if c == 0:
        return ":".join(h() for _ in range(8))
    if c == 1:
        return f"2001:db8:{h()}::{h()}"
    if c == 2:
        return f"fe80::{h()}:{h()}:{h()}:{h()}"
    return f"2a02:{h()}:{h()}:{h()}::{h()}"


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
_MOIS = ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
         "novembre", "décembre"]
_MONATE = ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
           "November", "Dezember"]


def _dob(rng: random.Random, style: int) -> str:
    y, m, d = rng.randint(1940, 2006), rng.randint(1, 12), rng.randint(1, 28)
    return [f"{d:02d}/{m:02d}/{y}", f"{y}-{m:02d}-{d:02d}", f"{d} {_MONTHS[m - 1]} {y}",
            f"{_MONTHS[m - 1]} {d}, {y}", f"{m}/{d}/{y % 100:02d}", f"{d:02d}.{m:02d}.{y}",
            f"{d}. {_MONATE[m - 1]} {y}", f"{d} {_MOIS[m - 1]} {y}", f"{_MONTHS[m - 1][:3]} {d} {y}",
            f"{d}th of {_MONTHS[m - 1]} {y}" if d not in (1, 2, 3, 21, 22, 23) else f"{d} {_MONTHS[m - 1]} {y}",
            f"{y}/{m:02d}/{d:02d}", f"{m}-{d}-{y}"][style % 12]


# ---------------------------------------------------------------------------------------------
# templates per kind ({} is the value)
# ---------------------------------------------------------------------------------------------
def _plant(out: list[SecretCase], kind: str, templates: list[str], values: list[str],
           core: list[tuple[str, ...]] | None = None) -> None:
    for i, v in enumerate(values):
        t = templates[i % len(templates)]
        out.append(SecretCase(kind, t.replace("{}", v), v, core[i] if core else ()))


def _build_secrets() -> list[SecretCase]:
    rng = random.Random(SEED)
    out: list[SecretCase] = []

    _plant(out, "aws_access_key_id", [
        "The access key id is {} for the staging account.",
        "aws_access_key_id = {}",
        "I rotated {} yesterday, the old one is dead.",
        "Use {} with the matching secret in the vault",
        "Found this in a log: AccessKeyId={}, region us-east-1.",
        "export AWS_ACCESS_KEY_ID={}",
        "AWS creds for the bucket: {}",
        "(key id {})",
        "{} is the CI user's key.",
        "Here: {}. Please don't commit it.",
        "\"AccessKeyId\": \"{}\",",
        "key {} belongs to the backup role",
    ], [_aws_key_id(rng) for _ in range(12)])

    _plant(out, "aws_secret_key", [
        "aws_secret_access_key = {}",
        "The secret access key is {} (don't share).",
        "export AWS_SECRET_ACCESS_KEY={}",
        "AWS secret key: {}",
        "\"SecretAccessKey\": \"{}\"",
        "secret key for the backup user is {}.",
        "Here's the AWS secret: {}",
        "I pasted {} into the CI settings as the secret access key.",
        "aws secret={}",
        "new secret key -> {}",
    ], [_aws_secret(rng) for _ in range(10)])

    gh = [rng.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _rand(rng, _ALNUM, 36) for _ in range(8)]
    gh += ["github_pat_" + _rand(rng, _ALNUM, 22) + "_" + _rand(rng, _ALNUM, 59) for _ in range(4)]
    _plant(out, "github_token", [
        "My GitHub token is {}, it has repo scope.",
        "git clone https://{}@github.com/acme/app.git",
        "GITHUB_TOKEN={}",
        "use {} for the release workflow",
        "PAT: {}",
        "The bot authenticates with {}.",
        "token {} expires next month",
        "I generated a fine-grained token ({}) for the deploy.",
        "Set GH_TOKEN to {} and rerun.",
        "{} — that's the personal access token.",
        "fine-grained PAT {} for the docs repo",
        "gh auth login --with-token <<< {}",
    ], gh)

    slack = [rng.choice(["xoxb-", "xoxp-"]) + f"{rng.randint(10**9, 10**13)}-{rng.randint(10**9, 10**13)}-"
             + _rand(rng, _ALNUM, 24) for _ in range(8)]
    slack += ["xoxa-2-" + f"{rng.randint(10**9, 10**12)}-" + _rand(rng, _ALNUM, 32),
              "xapp-1-A0" + _rand(rng, string.ascii_uppercase + string.digits, 9) + f"-{rng.randint(10**12, 10**13)}-"
              + _rand(rng, "0123456789abcdef", 64),
              "xoxe.xoxp-1-" + _rand(rng, _ALNUM, 60)]
    _plant(out, "slack_token", [
        "The Slack bot token is {}.",
        "SLACK_BOT_TOKEN={}",
        "user token {} was revoked",
        "paste {} into the integration settings",
        "Slack: {}",
        "the app uses {} to post alerts",
        "slack_token: \"{}\"",
        "I think {} still works for the #ops channel.",
        "bot token = {}",
        "app-level token {} for socket mode",
        "refresh with {}",
    ], slack)

    hooks = [f"https://hooks.slack.com/services/T{_rand(rng, string.ascii_uppercase + string.digits, 8)}/"
             f"B{_rand(rng, string.ascii_uppercase + string.digits, 10)}/{_rand(rng, _ALNUM, 24)}" for _ in range(8)]
    hooks += [f"https://discord.com/api/webhooks/{rng.randint(10**17, 10**18)}/{_rand(rng, _URLSAFE, 68)}"
              for _ in range(2)]
    _plant(out, "webhook_url", [
        "Post build results to {} please.",
        "The webhook is {}",
        "SLACK_WEBHOOK_URL={}",
        "curl -X POST -d '{\"text\":\"hi\"}' {}",
        "incoming webhook: {} (channel #alerts)",
        "I set the alert hook to {}.",
        "webhook_url: \"{}\"",
        "use {} for the nightly report",
        "The Discord webhook {} posts to #builds.",
        "discord hook -> {}",
    ], hooks)

    stripe = [rng.choice(["sk_live_", "rk_live_", "pk_live_", "sk_test_", "rk_test_"]) + _rand(rng, _ALNUM, rng.choice([24, 32, 99]))
              for _ in range(12)]
    _plant(out, "stripe_key", [
        "Stripe secret key: {}",
        "STRIPE_SECRET_KEY={}",
        "the restricted key {} only reads charges",
        "publishable key {} goes in the frontend",
        "I charged the card with {} by mistake",
        "Use {} for the live account.",
        "stripe.api_key = \"{}\"",
        "Key {} was rolled this morning.",
        "({})",
        "the old test key, {}, can be deleted",
        "our live key is {} - rotate it after the audit",
        "{} is in the billing service env.",
    ], stripe)

    whsec = ["whsec_" + _rand(rng, _ALNUM, 32) for _ in range(8)]
    _plant(out, "stripe_webhook_secret", [
        "The webhook signing secret is {}.",
        "STRIPE_WEBHOOK_SECRET={}",
        "endpoint secret {} for the checkout hook",
        "Verify signatures with {}",
        "signing secret: {}",
        "I copied {} from the dashboard.",
        "whsec for prod: {}",
        "{} is the local stripe listen secret",
    ], whsec)

    oai = ["sk-" + _rand(rng, _ALNUM, 48) for _ in range(4)]
    oai += ["sk-proj-" + _rand(rng, _URLSAFE, rng.choice([48, 100, 156])) for _ in range(5)]
    oai += ["sk-svcacct-" + _rand(rng, _URLSAFE, 64)]
    _plant(out, "openai_key", [
        "My OpenAI key is {}",
        "OPENAI_API_KEY={}",
        "openai.api_key = '{}'",
        "Here is the key for the bot: {}.",
        "use {} for the embeddings job",
        "the project key ({}) has a $50 limit",
        "I leaked {} on a gist, revoke it!",
        "key={}",
        "Try {} — it should work now.",
        "service account key {} for the batch runner",
    ], oai)

    ant = ["sk-ant-api03-" + _rand(rng, _URLSAFE, 93) + "AA" for _ in range(6)]
    ant += ["sk-ant-admin01-" + _rand(rng, _URLSAFE, 93) + "AA" for _ in range(2)]
    _plant(out, "anthropic_key", [
        "ANTHROPIC_API_KEY={}",
        "The Claude key is {}.",
        "x-api-key: {}",
        "use {} in the eval harness",
        "I put {} in .env",
        "Anthropic admin key: {}",
        "key ({}) belongs to the research workspace",
        "\"api_key\": \"{}\"",
    ], ant)

    gkeys = ["AIza" + _rand(rng, _URLSAFE, 35) for _ in range(10)]
    _plant(out, "google_api_key", [
        "Maps API key: {}",
        "GOOGLE_API_KEY={}",
        "The Firebase config has apiKey: \"{}\".",
        "https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={}",
        "use {} for the places autocomplete",
        "the YouTube key {} hit its quota",
        "{} is restricted to our domain",
        "key {} for Gemini",
        "I found {} in the APK.",
        "api key is {}",
    ], gkeys)

    ya29 = ["ya29." + _rand(rng, _URLSAFE, rng.choice([120, 160, 200])) for _ in range(8)]
    ya29 += ["1//0" + _rand(rng, _URLSAFE, 99), "GOCSPX-" + _rand(rng, _URLSAFE, 28)]
    _plant(out, "google_oauth", [
        "access_token={}",
        "The OAuth access token is {}.",
        "curl -H \"Authorization: Bearer {}\" https://www.googleapis.com/drive/v3/files",
        "token: {}",
        "gcloud printed {} as the token",
        "use {} until it expires in an hour",
        "Google token {} (scope drive.readonly)",
        "here you go: {}",
        "the refresh token is {}",
        "client secret {} for the desktop app",
    ], ya29)

    sas = []
    for _ in range(8):
        sig = _rand(rng, _ALNUM, 30) + rng.choice(["%2B", "%2F", ""]) + _rand(rng, _ALNUM, 12) + "%3D"
        sas.append(sig)
    sas_core = [(s,) for s in sas]
    sas_sentences = [
        "Download it from https://acmestore.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=o&sp=r"
        "&se=2025-12-31T00:00:00Z&st=2025-01-01T00:00:00Z&spr=https&sig={}",
        "SAS URL: https://media.blob.core.windows.net/raw?sp=racwdl&st=2024-05-01&se=2024-06-01&sv=2022-11-02&sr=c&sig={}",
        "the container link ...?sv=2021-08-06&se=2024-09-01T12%3A00%3A00Z&sr=b&sp=r&sig={} expires Friday",
        "BlobEndpoint=https://x.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=b&sig={}",
        "sig={}&se=2025-01-01 is the part that matters",
        "Use https://logs.blob.core.windows.net/app/log.txt?sig={}&sv=2020-08-04&sp=r for the upload",
        "Here is the share: https://files.file.core.windows.net/share?sv=2023-01-03&sig={}&sp=rl",
        "The queue SAS is ?sv=2019-12-12&sig={}&se=2030-01-01&sp=raup",
    ]
    for i, s in enumerate(sas):
        out.append(SecretCase("signed_url", sas_sentences[i].replace("{}", s), s, sas_core[i][1:]))

    pems = [_pem(rng, "RSA PRIVATE KEY"), _pem(rng, "PRIVATE KEY"), _pem(rng, "EC PRIVATE KEY", 2),
            _pem(rng, "OPENSSH PRIVATE KEY", 5, 70), _pem(rng, "ENCRYPTED PRIVATE KEY", 3),
            _pem(rng, "DSA PRIVATE KEY", 3), _pem(rng, "PGP PRIVATE KEY BLOCK", 4)]
    trunc = _pem(rng, "RSA PRIVATE KEY", 3).split("\n-----END")[0]
    pems.append(trunc)
    _plant(out, "private_key", [
        "Here is the deploy key:\n{}\nthanks!",
        "{}",
        "id_rsa contents: {}",
        "The server key is\n{}",
        "cat ~/.ssh/id_ed25519 gives\n{}\n",
        "attached:\n\n{}\n\nlet me know",
        "my GPG secret key: {}",
        "pasted the start of it: {} ... the rest got cut off",
    ], pems)

    _plant(out, "jwt", [
        "Session token {} expires in an hour.",
        "Authorization: Bearer {}",
        "jwt={}",
        "the id_token is {}",
        "Cookie: auth={}; Path=/",
        "{} is what the login endpoint returned",
        "Decoded {} on jwt.io and the sub looks right.",
        "token: \"{}\"",
        "?access_token={}&state=xyz",
        "here's a JWT for testing: {}.",
    ], [_jwt(rng) for _ in range(10)])

    bearer = [rng.choice([_rand(rng, "0123456789abcdef", 40), _rand(rng, _ALNUM, 32), _rand(rng, _URLSAFE, 48),
                          _rand(rng, _ALNUM + ".-_~", 36)]) for _ in range(10)]
    _plant(out, "bearer_token", [
        "curl -H 'Authorization: Bearer {}' https://api.example.com/v1/me",
        "Authorization: Bearer {}",
        "the bearer token is {}",
        "use bearer {} for the staging API",
        "headers = {\"Authorization\": \"Bearer {}\"}",
        "Bearer {} works, the old one 401s.",
        "auth: Bearer {}",
        "I sent 'Bearer {}' and got a 403.",
        "Set the header to Bearer {}.",
        "-H \"authorization: bearer {}\"",
    ], bearer)

    import base64
    basics = []
    for _ in range(5):
        pair = f"{rng.choice(_FIRST)}:{_rand(rng, _ALNUM + '!@#', 12)}"
        basics.append(base64.b64encode(pair.encode()).decode())
    basics += [base64.b64encode(_rand(rng, _ALNUM, 24).encode()).decode()]  # a key, not user:pass
    toks = [_rand(rng, "0123456789abcdef", 40) for _ in range(3)] + ["gho_" + _rand(rng, _ALNUM, 36)]
    auth_vals = basics + toks
    auth_t = [
        "Authorization: Basic {}",
        "curl -H 'Authorization: Basic {}' https://intranet.example.com",
        "the header was authorization: basic {} (admin creds)",
        "\"Authorization\": \"Basic {}\"",
        "Authorization:Basic {}",
        "Basic auth header Authorization: Basic {}",
        "Authorization: token {}",
        "-H 'Authorization: token {}'",
        "header Authorization: Token {} for the old API",
        "Authorization: token {}",
    ]
    _plant(out, "auth_header", auth_t, auth_vals)

    gen_vals = [rng.choice([_rand(rng, "0123456789abcdef", 32), _rand(rng, _ALNUM, 24), _rand(rng, _ALNUM, 40),
                            _rand(rng, _URLSAFE, 32)]) for _ in range(14)]
    _plant(out, "generic_secret", [
        "api_key={}",
        "GET /v1/data?apikey={}&page=2",
        "config: {\"client_secret\": \"{}\"}",
        "SECRET_KEY = '{}'",
        "token: {}",
        "The API key is {}.",
        "x-api-key: {}",
        "my secret for the webhook is {}",
        "apiKey: {}",
        "DJANGO_SECRET_KEY={}",
        "api key {} for the weather service",
        "auth_token={}",
        "Here's the access token: {}",
        "the client secret is {} (confidential app)",
    ], gen_vals)

    other = ["glpat-" + _rand(rng, _URLSAFE, 20), "npm_" + _rand(rng, _ALNUM, 36), "hf_" + _rand(rng, _ALNUM, 34),
             "glpat-" + _rand(rng, _URLSAFE, 20), "hf_" + _rand(rng, _ALNUM, 34),
             "SG." + _rand(rng, _URLSAFE, 22) + "." + _rand(rng, _URLSAFE, 43),
             "dop_v1_" + _rand(rng, "0123456789abcdef", 64), "shpat_" + _rand(rng, "0123456789abcdef", 32)]
    _plant(out, "vendor_token", [
        "GitLab token {} for the runner",
        "//registry.npmjs.org/:_authToken={}",
        "HF_TOKEN={}",
        "use {} to push the package",
        "Hugging Face token: {}",
        "SendGrid key {} for transactional mail",
        "DigitalOcean token is {}",
        "Shopify admin token {}",
    ], other)

    pw = ["hunter22", "Tr0ub4dor&3", "S0mmer2024!", "correct-horse-battery-staple", "Pa$$w0rd",
          "letmein99", "qwerty123", "Bl4ckC@t", "sunshine", "dragon", "iloveyou2", "Winter#2025",
          "xyz789", "p4ssw0rd", "Azerty!23", "Sonne123", "sol2023", "gatito77", "lune-bleue-42",
          "Zz9!zz9!", "hello", "montana", "123456", "monkey", "chocolate", "Mango_88", "baseball1", "kx8#Lm2q"]
    _plant(out, "password", [
        "my password is {}",
        "The wifi password is {}.",
        "pass: {}",
        "pwd={}",
        "Password: {}",
        "the password for the wifi is {}",
        "password for my laptop: {}",
        "Mot de passe : {}",
        "Passwort: {}",
        "mi contraseña es {}",
        "Mon mot de passe est {}.",
        "Das Passwort ist {}",
        "contraseña: {}",
        "senha: {}",
        "my email password is {}, don't tell anyone",
        "Use password {} to log in.",
        "the password to the router is {}",
        "PASSWORD={}",
        "password = \"{}\"",
        "the pw is {}",
        "door code / password: {}",
        "wachtwoord: {}",
        "пароль: {}",
        "密码是 {}",
        "login password is {}",
        "I changed my password to {} yesterday",
        "new password: {}",
        "Kennwort: {}",
    ], pw)

    pairs = [("admin", "admin123"), ("root", "toor"), ("alice", "S3cure!pw"), ("bob.smith", "Summer2024!"),
             ("sa", "Passw0rd1"), ("guest", "welcome1"), ("pi", "raspberry"), ("ops", "k8s-R0cks"),
             ("jdoe", "hunter2!"), ("admin", "changeme42"), ("postgres", "pg_s3cret"), ("support", "Helpdesk#1")]
    pair_t = [
        "the router login is {user} / {pw}",
        "creds are {user}:{pw}",
        "Log in with {user} / {pw} and change it.",
        "username: {user} password: {pw}",
        "user {user} pass {pw}",
        "credentials: {user}/{pw}",
        "ssh as {user}, password {pw}",
        "login {user} pw {pw}",
        "default login {user}/{pw} still works on the NAS",
        "Benutzer {user}, Passwort {pw}",
        "the DB account is {user} with password {pw}",
        "account: {user} / {pw}",
    ]
    for i, (u, p) in enumerate(pairs):
        t = pair_t[i % len(pair_t)]
        text = t.replace("{user}", u).replace("{pw}", p)
        start = text.index(u)
        secret = text[start:text.index(p, start) + len(p)]
        out.append(SecretCase("credential_pair", text, secret, (p,)))

    urlc = [("admin", "s3cretpw", "https://{u}:{p}@internal.example.com/admin"),
            ("deploy", "Gh7!kq2", "https://{u}:{p}@git.example.org/team/repo.git"),
            ("ftpuser", "ftp2024", "ftp://{u}:{p}@files.example.net/incoming"),
            ("bob", "hunter22", "http://{u}:{p}@192.0.2.10:8080/status"),
            ("svc", "Zx81-pq", "https://{u}:{p}@proxy.corp.local:3128"),
            ("jane", "pa55word", "sftp://{u}:{p}@backup.example.com/home/jane"),
            ("user", "k3yboard", "https://{u}:{p}@registry.example.io/v2/"),
            ("api", "t0pS3cret", "https://{u}:{p}@hooks.example.dev/notify"),
            ("x-access-token", "ghs_" + _rand(rng, _ALNUM, 36), "https://{u}:{p}@github.com/acme/private.git"),
            ("admin", "admin!2024", "http://{u}:{p}@10.0.0.1/")]
    url_t = ["Open {} to see it.", "the mirror is {}", "git remote set-url origin {}", "proxy={}",
             "curl {} -o out", "backup target: {}", "docker login via {}", "notify {} on failure",
             "clone {} into /srv", "router admin page: {}"]
    for i, (u, p, tmpl) in enumerate(urlc):
        url = tmpl.replace("{u}", u).replace("{p}", p)
        out.append(SecretCase("url_credentials", url_t[i].replace("{}", url), f"{u}:{p}", (p,)))

    dbs = [("postgres://app:{p}@db.example.com:5432/prod", "Xk92!mv"),
           ("postgresql://analytics:{p}@10.2.0.7/warehouse", "w4rehouse"),
           ("mysql://root:{p}@localhost:3306/shop", "r00tpw"),
           ("mongodb+srv://svc:{p}@cluster0.ab1cd.mongodb.net/test", "M0ng0Pass"),
           ("redis://:{p}@cache.internal:6379/0", "r3disS3cret"),
           ("amqp://rabbit:{p}@mq.example.com:5672/", "carrot99"),
           ("Server=tcp:sql.example.com,1433;Database=crm;User ID=sa;Password={p};Encrypt=true;", "Sql!2022x"),
           ("jdbc:postgresql://db:5432/app?user=app&password={p}", "jd8cPw"),
           ("Host=db;Username=app;Password={p};Database=orders", "npgsqlPw7"),
           ("mssql://sa:{p}@db.corp:1433/hr", "HrDb#2023")]
    db_t = ["DATABASE_URL={}", "connect with {} for the reports", "The connection string is {}",
            "conn = \"{}\"", "REDIS_URL={}", "broker url {}", "ConnectionStrings__Default=\"{}\"",
            "spring.datasource.url={}", "{}", "the HR db lives at {}"]
    for i, (tmpl, p) in enumerate(dbs):
        conn = tmpl.replace("{p}", p)
        out.append(SecretCase("db_connection", db_t[i].replace("{}", conn), p))

    _plant(out, "card", [
        "Charge the booking to {} please.",
        "my card number is {}",
        "Card: {}, exp 08/27, CVV on the back",
        "use the Visa ending... actually the full number is {}",
        "{} is my Amex",
        "Pay with {}.",
        "card no. {} (the business one)",
        "Kartennummer {}",
        "numéro de carte : {}",
        "The refund went to {} instead of the new card.",
        "cc={}",
        "I typed {} into the form twice.",
        "her Mastercard {} expires 11/26",
        "Put {} on file for the hotel.",
    ], [_card(rng) for _ in range(14)])

    ibans = [_iban(rng) for _ in range(12)]
    ibans.append(_iban(rng).replace(" ", "").lower())
    _plant(out, "iban", [
        "Wire the deposit to {} by Friday.",
        "IBAN: {}",
        "my IBAN is {}",
        "Salary goes to {} every month.",
        "Bitte überweisen Sie an {}.",
        "RIB / IBAN : {}",
        "Refund to {} please.",
        "iban={}",
        "The landlord's account is {} (Deutsche Bank).",
        "Send it to {}, reference INV-2231.",
        "{} is the savings account.",
        "Cuenta: {}",
        "the iban is {} (sorry, lowercase)",
    ], ibans)

    _plant(out, "email", [
        "Please write to {} about the refund.",
        "my email is {}",
        "Email: {}",
        "cc {} on the thread",
        "<{}>",
        "Contact {}.",
        "reach me at {} or on Slack",
        "Mail an {} bitte.",
        "Écrivez à {} pour le devis.",
        "({}) is the billing contact",
        "From: Dana Fischer <{}>",
        "send the invoice to {}, thanks",
        "{} asked about the order",
        "her address is {}",
    ], [_email(rng) for _ in range(14)])

    _plant(out, "email_unicode", [
        "Write to {} please.",
        "my email is {}",
        "Контакт: {}",
        "E-Mail: {}",
        "{} is the new mailbox",
        "send it to {}.",
        "联系邮箱 {}",
        "Email {} for the booking",
        "cc {} too",
        "reach her at {}, she reads it daily",
        "(contact: {})",
        "courriel : {}",
    ], ["user@münchen.de", "пример@пример.рф", "josé.garcía@correo.es", "müller@bücher.de", "info@köln-bonn.de",
        "δοκιμή@παράδειγμα.ελ", "用户@例子.广告", "søren@blåbær.dk", "jürgen.weiß@firma-straße.de",
        "françois@exemple.fr", "siân@caffi.cymru", "ivan.petrov@почта.рф"])

    _plant(out, "phone_intl", [
        "You can call me at {} after six.",
        "My number is {}",
        "Tel: {}",
        "WhatsApp {} for quick questions",
        "The London office is {}, ask for Priya.",
        "{} is her mobile",
        "ring {} if the courier is late",
        "Mon numéro : {}",
        "Handy: {}",
        "(phone {})",
        "reach the hotel on {} before check-in",
        "call {}.",
        "emergency contact: Tom, {}",
        "Fax {} (yes, they still use fax)",
    ], [_phone_intl(rng) for _ in range(14)])

    _plant(out, "phone_national", [
        "Call me at {} tonight.",
        "my cell is {}",
        "phone: {}",
        "The office number is {}.",
        "text me on {}",
        "Her landline is {} and she prefers mornings.",
        "reach the clinic at {}",
        "{} — that's my mobile",
        "Telefon {}",
        "numéro : {}",
        "携帯は{}です",
        "call {} to reschedule",
        "tel. {}",
        "dial {} for support",
    ], [_phone_national(rng) for _ in range(14)])

    _plant(out, "ipv4", [
        "The server at {} is down.",
        "ssh admin@{} -p 2222",
        "my home IP is {}",
        "Blocked {}:8080 after the attack.",
        "ping {}",
        "It resolves to {}.",
        "allowlist {} in the firewall",
        "(from {})",
        "X-Forwarded-For: {}",
        "the printer is on {}",
        "connect to {} on port 5432",
        "NAS at http://{}/ is slow",
    ], [_ipv4(rng) for _ in range(12)])

    _plant(out, "ipv6", [
        "IPv6 {} answered the ping.",
        "my address is {} according to the router",
        "Link-local [{}]:443 responded",
        "ssh -6 {}",
        "blocked {} in the WAF",
        "the VM got {}.",
        "from {} (v6)",
        "add {} to the allowlist",
        "curl http://[{}]:8080/health",
        "ip6: {}",
    ], [_ipv6(rng) for _ in range(10)])

    ssn_t = [
        ("My SSN is {a}-{g}-{s}.", "{a}-{g}-{s}"),
        ("social security number: {a}-{g}-{s}", "{a}-{g}-{s}"),
        ("SSN {a} {g} {s} (from the W-2)", "{a} {g} {s}"),
        ("ssn: {a}{g}{s}", "{a}{g}{s}"),
        ("Her Social Security No. is {a}-{g}-{s}", "{a}-{g}-{s}"),
        ("{a}-{g}-{s} is the SSN on the form", "{a}-{g}-{s}"),
        ("the tax form has {a}-{g}-{s} in box a", "{a}-{g}-{s}"),
        ("SSN#{a}-{g}-{s}", "{a}-{g}-{s}"),
        ("my social is {a}-{g}-{s}", "{a}-{g}-{s}"),
        ("Please verify {a}-{g}-{s} against the application.", "{a}-{g}-{s}"),
        ("social security number {a}{g}{s}", "{a}{g}{s}"),
        ("ITIN/SSN: {a}-{g}-{s}", "{a}-{g}-{s}"),
        ("SS#: {a} {g} {s}", "{a} {g} {s}"),
        ("He gave his SSN as {a}-{g}-{s} over the phone.", "{a}-{g}-{s}"),
    ]
    for t, v in ssn_t:
        a, g, s = _ssn(rng)
        def fill(x: str, a: str = a, g: str = g, s: str = s) -> str:
            return x.replace("{a}", a).replace("{g}", g).replace("{s}", s)
        out.append(SecretCase("ssn", fill(t), fill(v)))

    def passport(r: random.Random) -> str:
        c = r.randrange(7)
        return [lambda: _digits(r, 9), lambda: r.choice("ABCDEFGH") + _digits(r, 8),
                lambda: "C" + _rand(r, "CFGHJKLMNPRTVWXYZ0123456789", 8),
                lambda: _digits(r, 2) + r.choice(string.ascii_uppercase) + r.choice(string.ascii_uppercase) + _digits(r, 5),
                lambda: r.choice("JKLMNPRSTUVWZ") + _digits(r, 7), lambda: "E" + _digits(r, 8),
                lambda: r.choice(["X", "Y", "P"]) + _digits(r, 7)][c]()
    _plant(out, "passport", [
        "Updated my passport number to {} after the renewal.",
        "My passport number is {}.",
        "Passport no. {}, expires 2031",
        "passport: {}",
        "Reisepassnummer {}",
        "numéro de passeport : {}",
        "número de pasaporte {}",
        "passport #{}",
        "I booked the flight with passport {}.",
        "Passport No: {} (issued in Lisbon)",
        "her passport nr is {}",
        "the visa form asks for the passport number: {}",
        "护照号码：{}",
        "passport ID {} — scan attached",
    ], [passport(rng) for _ in range(14)])

    dob_t = [
        "I was born on {}.",
        "DOB: {}",
        "date of birth {}",
        "Date of birth: {}",
        "born {} in Lyon",
        "my birthday is {}",
        "D.O.B. {}",
        "geboren am {}",
        "née le {}",
        "fecha de nacimiento: {}",
        "birth date {}",
        "dob={}",
        "He was born on the {}",
        "Geburtsdatum: {}",
        "Birthdate: {} (for the insurance)",
        "date de naissance : {}",
    ]
    dobs = []
    for i in range(16):
        t = dob_t[i]
        style = {7: 6, 8: 7, 12: 9, 13: 5, 15: 7}.get(i, i % 12)
        if style == 9 and i != 12:
            style = 0
        dobs.append(_dob(rng, style))
    _plant(out, "date_of_birth", dob_t, dobs)

    streets_us = ["Elm Street", "Oak Avenue", "Maple Drive", "Sunset Boulevard", "Pennsylvania Avenue NW",
                  "Baker Street", "Market St", "Lincoln Rd", "Harbor Lane", "Cedar Ct", "Mission Blvd",
                  "Park Place", "W 42nd Street", "Ocean Pkwy"]
    cities = [("Springfield, IL 62704"), ("Austin, TX 78701"), ("San Francisco, CA 94103"),
              ("Brooklyn, NY 11201"), ("Portland, OR 97205"), ("Denver, CO 80202")]
    addrs: list[tuple[str, str, str]] = []  # (sentence, secret, core)
    us_t = ["I live at {}.", "Ship it to {}", "my address is {}", "Our office moved to {} last month.",
            "Deliver to {} (ring twice)", "Address: {}", "the party is at {} on Saturday", "{} is my home address",
            "send the contract to {}, attn. Legal", "We're at {} now"]
    for i in range(10):
        num = str(rng.randint(2, 9999)) + rng.choice(["", "", "", "B"])
        st = streets_us[i % len(streets_us)]
        street = f"{num} {st}"
        unit = rng.choice(["", "", ", Apt 4B", ", Suite 210", " #12"])
        full = street + unit + (", " + rng.choice(cities) if rng.random() < 0.7 else "")
        addrs.append((us_t[i].replace("{}", full), full, street))
    eu = [
        ("Meine Adresse ist {}.", "Hauptstraße 12, 10115 Berlin", "Hauptstraße 12"),
        ("Lieferadresse: {}", "Goethestr. 5a, 80336 München", "Goethestr. 5a"),
        ("wir wohnen jetzt in der {}", "Lindenallee 47, 50968 Köln", "Lindenallee 47"),
        ("J'habite au {}.", "12 rue de la Paix, 75002 Paris", "12 rue de la Paix"),
        ("Adresse : {}", "8 avenue Jean Jaurès, 69007 Lyon", "8 avenue Jean Jaurès"),
        ("Vivo en {}.", "Calle Mayor 10, 28013 Madrid", "Calle Mayor 10"),
        ("La mia casa è in {}", "Via Roma 15, 00184 Roma", "Via Roma 15"),
        ("Send the keys to {}", "221B Baker Street, London NW1 6XE", "221B Baker Street"),
        ("my flat is at {}", "Flat 3, 14 Kings Road, Manchester M1 2AB", "14 Kings Road"),
        ("Ons adres is {}.", "Keizersgracht 123, 1015 CJ Amsterdam", "Keizersgracht 123"),
        ("PO box for the invoices: {}", "P.O. Box 4521, Tulsa, OK 74101", "P.O. Box 4521"),
        ("mail it to {}", "PO Box 77, Wellington 6011", "PO Box 77"),
        ("i live at {} fyi", "42 elm street, springfield", "42 elm street"),
        ("Endereço: {}", "Rua Augusta 1500, São Paulo", "Rua Augusta 1500"),
        ("the new place is {}, 2nd floor", "Schillerstraße 3, 01067 Dresden", "Schillerstraße 3"),
        ("Our HQ: {}", "1600 Amphitheatre Parkway, Mountain View, CA 94043", "1600 Amphitheatre Parkway"),
    ]
    for t, full, core in eu:
        addrs.append((t.replace("{}", full), full, core))
    for sentence, full, core in addrs:
        out.append(SecretCase("address", sentence, full, (core,) if core != full else ()))

    ni_t = {
        "nino": ["My National Insurance number is {}.", "NI number: {}", "NINO {}"],
        "sin": ["my SIN is {}", "Social Insurance Number: {}"],
        "aadhaar": ["Aadhaar: {}", "my aadhaar number is {}", "Aadhaar card no. {}"],
        "dni": ["DNI {}", "mi DNI es {}", "NIF: {}"],
        "cf": ["codice fiscale {}", "Codice Fiscale: {}"],
        "steuer": ["Steuer-ID: {}", "meine Steueridentifikationsnummer ist {}"],
        "nir": ["numéro de sécurité sociale : {}", "mon numéro de sécu est {}"],
        "bsn": ["BSN {}", "mijn burgerservicenummer is {}"],
        "cn": ["身份证号码：{}", "Chinese ID card number {}"],
        "pan": ["PAN: {}", "my PAN card number is {}"],
        "personnummer": ["personnummer {}", "Personnummer: {}"],
    }
    seen: dict[str, int] = {}
    nid: list[tuple[str, str]] = []
    while len(nid) < 20:
        t, v = _national_id(rng)
        if seen.get(t, 0) >= 2:
            continue
        seen[t] = seen.get(t, 0) + 1
        nid.append((ni_t[t][seen[t] - 1 if seen[t] - 1 < len(ni_t[t]) else 0], v))
    for t, v in nid:
        out.append(SecretCase("national_id", t.replace("{}", v), v))

    out += [SecretCase(k, t, v, tuple(c)) for k, t, v, *c in _HANDWRITTEN]
    return out


# Written by hand in a second round, after the first detectors existed and without looking at them:
# the phrasings an external probe reported, and others in the same spirit. (kind, sentence, value, core…)
_HANDWRITTEN: list[tuple[str, ...]] = [
    ("password", "fyi my password is hunter22 lol", "hunter22"),
    ("password", "Wifi: HomeNet, password: 8charsMin!", "8charsMin!"),
    ("password", "mot de passe : Soleil#44", "Soleil#44"),
    ("password", "La contraseña del wifi es perro123", "perro123"),
    ("password", "my bank password is Tulip$88 please forget it", "Tulip$88"),
    ("password", "pw: 0okm9ijn", "0okm9ijn"),
    ("password", "Password -> Xy7!pq", "Xy7!pq"),
    ("password", "the code for the garage door is 4417 and the password is garage44", "garage44"),
    ("password", "I set the password to Rainbow-7 on the shared drive", "Rainbow-7"),
    ("password", "Netflix login: anna@x.io pw starfish9", "starfish9"),
    ("password", "passphrase: purple monkey dishwasher 42", "purple monkey dishwasher 42"),
    ("password", "My passcode is 739201.", "739201"),
    ("password", "PIN 4821 for the card", "4821"),
    ("credential_pair", "admin / admin123", "admin / admin123", "admin123"),
    ("credential_pair", "the NAS is admin/Nas2023! by default", "admin/Nas2023!", "Nas2023!"),
    ("credential_pair", "use root:Toor123 to ssh in", "root:Toor123", "Toor123"),
    ("credential_pair", "username is jsmith and password is Falcon99", "Falcon99"),
    ("credential_pair", "login: m.rossi / pw: Roma2024", "Roma2024"),
    ("credential_pair", "user=svc_backup pass=Bkp#2022", "Bkp#2022"),
    ("ssn", "SSN: 219-09-9999", "219-09-9999"),
    ("ssn", "my social security number is 536-22-8726", "536-22-8726"),
    ("ssn", "Can you check 412-55-0912 in the HR system? it's her SSN", "412-55-0912"),
    ("ssn", "ssn 536228726", "536228726"),
    ("passport", "my passport number is 912803456", "912803456"),
    ("passport", "Passport: K98765432", "K98765432"),
    ("passport", "passport no 5301947C2", "5301947C2"),
    ("date_of_birth", "born on 12/03/1985", "12/03/1985"),
    ("date_of_birth", "DOB: 1985-03-12", "1985-03-12"),
    ("date_of_birth", "date of birth 3 March 1985", "3 March 1985"),
    ("date_of_birth", "I was born March 3rd, 1985 in Ohio", "March 3rd, 1985"),
    ("date_of_birth", "dob 03/12/85", "03/12/85"),
    ("date_of_birth", "Birthday: 7 July 1990", "7 July 1990"),
    ("address", "I live at 1234 Maple Ave, Springfield, IL 62704", "1234 Maple Ave, Springfield, IL 62704",
     "1234 Maple Ave"),
    ("address", "send it to 55 W 14th St, New York, NY 10011", "55 W 14th St, New York, NY 10011", "55 W 14th St"),
    ("address", "my address: 9 Rosewood Close, Bristol BS8 1TH", "9 Rosewood Close, Bristol BS8 1TH",
     "9 Rosewood Close"),
    ("address", "Wohnung in der Müllerstraße 23, 13353 Berlin", "Müllerstraße 23, 13353 Berlin", "Müllerstraße 23"),
    ("address", "we moved to 17 Chestnut Hill Road last spring", "17 Chestnut Hill Road"),
    ("address", "home: 4 Privet Drive, Little Whinging", "4 Privet Drive, Little Whinging", "4 Privet Drive"),
    ("address", "The clinic is at 300 Longwood Ave, Boston", "300 Longwood Ave, Boston", "300 Longwood Ave"),
    ("email_unicode", "user@münchen.de", "user@münchen.de"),
    ("email_unicode", "пример@пример.рф", "пример@пример.рф"),
    ("email_unicode", "mail me: chloé.dupont@exemple.fr!", "chloé.dupont@exemple.fr"),
    ("email", "bob [at] example [dot] com", "bob [at] example [dot] com"),
    ("email", "邮箱是wang.lei@example.cn谢谢", "wang.lei@example.cn"),
    ("google_oauth", "ya29.a0AfH6SMBx8d7Lk2fQ9pZ3rT5uV7wX9yA1bC3dE5fG7hI9jK",
     "ya29.a0AfH6SMBx8d7Lk2fQ9pZ3rT5uV7wX9yA1bC3dE5fG7hI9jK"),
    ("signed_url", "https://acct.blob.core.windows.net/c/f.txt?sp=r&st=2024-01-01&se=2024-12-31"
     "&sig=Ab3dEf%2Bgh7IjKlmN0pQr%2FstUv%3D", "Ab3dEf%2Bgh7IjKlmN0pQr%2FstUv%3D"),
    ("webhook_url", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"),
    ("stripe_webhook_secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    ("auth_header", "Authorization: token 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
     "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"),
    ("auth_header", "Authorization: Basic YWRtaW46cGFzc3dvcmQ=", "YWRtaW46cGFzc3dvcmQ="),
    ("url_credentials", "https://user:pass@host.example.com/x", "user:pass", "pass@"),
    ("aws_access_key_id", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_key", "aws secret: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("github_token", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("slack_token", "xoxp-123456789012-123456789012-123456789012-abcdef0123456789abcdef0123456789",
     "xoxp-123456789012-123456789012-123456789012-abcdef0123456789abcdef0123456789"),
    ("stripe_key", "pk_live_51H8xYzAbCdEfGhIjKlMnOpQr", "pk_live_51H8xYzAbCdEfGhIjKlMnOpQr"),
    ("anthropic_key", "the key is sk-ant-api03-abcdEFGH1234ijklMNOP5678qrstUVWX-abcd",
     "sk-ant-api03-abcdEFGH1234ijklMNOP5678qrstUVWX-abcd"),
    ("generic_secret", "secret=8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92",
     "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92"),
    ("generic_secret", "token: 'c0ffee0ddba11deadbeef1234567890'", "c0ffee0ddba11deadbeef1234567890"),
    ("jwt", "Bearer eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJ4In0.abcDEF123456ghiJKL",
     "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJ4In0.abcDEF123456ghiJKL"),
    ("db_connection", "mongodb://admin:Sup3rS3cret@mongo1:27017/?authSource=admin", "Sup3rS3cret"),
    ("phone_national", "call me on 07911 123456", "07911 123456"),
    ("phone_intl", "my number's +49 (0)30 1234567", "+49 (0)30 1234567"),
    ("phone_national", "ring me at 555-867-5309", "555-867-5309"),
    ("phone_national", "手机 13800138000", "13800138000"),
    ("phone_intl", "tel +33612345678", "+33612345678"),
    ("card", "4242424242424242 exp 12/30 cvc 123", "4242424242424242"),
    ("iban", "IBAN DE44500105175407324931", "DE44500105175407324931"),
    ("ipv4", "ssh pi@192.168.0.42", "192.168.0.42"),
    ("national_id", "NHS number 943 476 5919", "943 476 5919"),
    ("national_id", "driver's license number D1234-56789-01234", "D1234-56789-01234"),
    # Round 3, written before the round-2 fixes were folded in; its misses were then fixed where the fix
    # generalises (a bare "PP no." for passport is left as a known miss).
    ("password", "wifi name is Pretty Fly, the pass is wutang4ever", "wutang4ever"),
    ("password", "Router password = NetGear_5510", "NetGear_5510"),
    ("password", "my icloud pw is Bluebird#7", "Bluebird#7"),
    ("password", "The password for the shared drive: Drv!2024x", "Drv!2024x"),
    ("password", "pwd: Abc12345", "Abc12345"),
    ("password", "Mein Kennwort lautet Schatz2019", "Schatz2019"),
    ("password", "le mot de passe du wifi est chaton42", "chaton42"),
    ("password", "senha do wifi: casa2020", "casa2020"),
    ("password", "the vault password was changed to Ocean-Blue-9", "Ocean-Blue-9"),
    ("password", "\"password\": \"s3cr3t-value\"", "s3cr3t-value"),
    ("password", "DB_PASSWORD=pr0d-db-pw", "pr0d-db-pw"),
    ("password", "temp password 7Hk2pQ9z, change on first login", "7Hk2pQ9z"),
    ("password", "My PIN is 0942", "0942"),
    ("credential_pair", "FTP: user ftpdrop pass Dr0p!ftp", "Dr0p!ftp"),
    ("credential_pair", "creds -> admin / Welcome2024", "Welcome2024"),
    ("credential_pair", "log into the camera with admin:cam12345", "admin:cam12345", "cam12345"),
    ("ssn", "SSN is 078-05-1120 (the famous wallet one)", "078-05-1120"),
    ("ssn", "Social Security #: 123 45 6789", "123 45 6789"),
    ("ssn", "my ssn's 321-54-9876", "321-54-9876"),
    ("passport", "PP no. 533380006", "533380006"),
    ("passport", "passport number: GB1234567", "GB1234567"),
    ("passport", "My passport is 48HG28193, issued 2019", "48HG28193"),
    ("date_of_birth", "DOB 04/07/1992", "04/07/1992"),
    ("date_of_birth", "she was born 1 January 2001", "1 January 2001"),
    ("date_of_birth", "Date of Birth - 1979.11.23", "1979.11.23"),
    ("date_of_birth", "my bday is 14 Feb 1995", "14 Feb 1995"),
    ("date_of_birth", "born on Sept 9, 1988", "Sept 9, 1988"),
    ("address", "Please mail the form to 742 Evergreen Terrace, Springfield", "742 Evergreen Terrace, Springfield",
     "742 Evergreen Terrace"),
    ("address", "My new apartment: 88 Queen St W, Toronto, ON M5H 2N2", "88 Queen St W, Toronto, ON M5H 2N2",
     "88 Queen St W"),
    ("address", "Pick me up at 10 Downing Street", "10 Downing Street"),
    ("address", "address is 350 Fifth Avenue, New York, NY 10118", "350 Fifth Avenue, New York, NY 10118",
     "350 Fifth Avenue"),
    ("address", "Lieferung an Bahnhofstrasse 45, 8001 Zürich", "Bahnhofstrasse 45, 8001 Zürich", "Bahnhofstrasse 45"),
    ("address", "the flat is at 3 Rue Oberkampf, 75011 Paris", "3 Rue Oberkampf, 75011 Paris", "3 Rue Oberkampf"),
    ("address", "I'm at 2500 Ocean Blvd apt 12", "2500 Ocean Blvd"),
    ("email", "Email me at jane.doe+work@corp-mail.co", "jane.doe+work@corp-mail.co"),
    ("email", "her email: ABC.Def@Example.COM", "ABC.Def@Example.COM"),
    ("email_unicode", "contact — m.müller@gmx.de —", "m.müller@gmx.de"),
    ("email", "send to john(at)example(dot)org", "john(at)example(dot)org"),
    ("phone_national", "my cell: (646) 555-0134", "(646) 555-0134"),
    ("phone_intl", "call +1 212 555 0199 x23", "+1 212 555 0199"),
    ("phone_national", "Tel. 089 1234567", "089 1234567"),
    ("phone_intl", "whatsapp me +5511987654321", "+5511987654321"),
    ("phone_national", "reach me on 0412 345 678 (Aus mobile)", "0412 345 678"),
    ("card", "card 5105 1051 0510 5100 exp 09/28", "5105 1051 0510 5100"),
    ("card", "Amex 3714-496353-98431", "3714-496353-98431"),
    ("iban", "send EUR to FR76 3000 6000 0112 3456 7890 189", "FR76 3000 6000 0112 3456 7890 189"),
    ("iban", "IBAN: GB29NWBK60161331926819", "GB29NWBK60161331926819"),
    ("ipv4", "the attacker came from 45.33.32.156", "45.33.32.156"),
    ("ipv6", "my v6 is 2001:4860:4860::8888", "2001:4860:4860::8888"),
    ("openai_key", "OPENAI_API_KEY=\"sk-abcdefghij1234567890ABCDEFGHIJ1234567890abcd\"",
     "sk-abcdefghij1234567890ABCDEFGHIJ1234567890abcd"),
    ("github_token", "github token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
    ("generic_secret", "x-api-key: 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"),
    ("generic_secret", "Here's my Twilio auth token 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    ("aws_secret_key", "AWS_SECRET_ACCESS_KEY: Zx8+Kq2/Lm9Np3Rs5Tu7Vw1Xy4Ab6Cd8Ef0Gh2Ij",
     "Zx8+Kq2/Lm9Np3Rs5Tu7Vw1Xy4Ab6Cd8Ef0Gh2Ij"),
    ("signed_url", "https://s3.amazonaws.com/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="
     "4f2a9c1b7e3d5f6a8b0c2d4e6f8a0b1c3d5e7f9a1b3c5d7e9f0a2b4c6d8e0f1a",
     "4f2a9c1b7e3d5f6a8b0c2d4e6f8a0b1c3d5e7f9a1b3c5d7e9f0a2b4c6d8e0f1a"),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
     "\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"),
    ("webhook_url", "slack webhook https://hooks.slack.com/services/TABCD1234/BABCD5678/abcdEFGHijklMNOPqrstUVWX",
     "abcdEFGHijklMNOPqrstUVWX"),
    ("stripe_key", "use stripe sk_test_4eC39HqLyjWDarjtT1zdp7dc for now", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    ("db_connection", "postgres://reporter:R3p0rt!ng@10.1.2.3:5432/metrics", "R3p0rt!ng"),
    ("national_id", "Aadhaar no: 4567 8912 3456", "4567 8912 3456"),
    ("national_id", "My SIN is 046 454 286", "046 454 286"),
]


# ---------------------------------------------------------------------------------------------
# benign look-alikes
# ---------------------------------------------------------------------------------------------
def _build_benign() -> list[BenignCase]:
    rng = random.Random(SEED + 1)
    b: list[BenignCase] = []

    def add(cat: str, texts: list[str]) -> None:
        b.extend(BenignCase(cat, t) for t in texts)

    add("version", [
        "Upgrade to version 2.4.1 before Friday.", "We pinned numpy 1.26.4 and pandas 2.2.2.",
        "v2.10.4 fixed the crash.", "Release 3.0.0-rc.1 is out.", "Python 3.11.7 is installed.",
        "Chrome 124.0.6367.91 updated overnight.", "firmware 10.0.0.1 is current", "node v20.11.1",
        "the build 2024.03.15 was tagged", "iOS 17.4.1 broke the widget", "Bump lodash from 4.17.20 to 4.17.21.",
        "kernel 6.8.0-31-generic", "Use semver ranges like ^1.2.0 or ~0.9.3.", "pip install numpy==2.4.6",
        "Terraform 1.7.5 and provider 5.42.0", "Java 21.0.2+13-LTS is fine.",
    ])
    add("order_id", [
        "Your order #123-4567-890 has shipped.", "Order number 4111111111111112 was refunded.",
        "ticket JIRA-4521 is blocked", "See PR #8812 and issue #8790.", "Invoice INV-000123 totals 2,450.00 USD.",
        "reference ORD-2023-0456789", "case 00123456 was escalated", "RMA 7734-221-09 approved",
        "Tracking code 9400 1000 0000 0000 0000 00 is on the label.", "confirmation code QX7T9B",
        "booking ref ABC123", "The part number is 123-45-6789-A.", "SKU 123-45-6789 is out of stock",
        "order no. 203-5551234-7788123", "Amazon order 112-7654321-1234567 arrived.",
        "Ticket SUP-20931 mentions the SSN field validation bug.", "PO 4500012345 approved",
        "model number 555-0199-X", "Serial number: SN 2231-88-104",
    ])
    add("date", [
        "The meeting on 2024-03-12 moved to 2024-03-14.", "Dates like 27/10/2023 and 10.27.2023 are both accepted.",
        "Deadline: 12/03/1985 was the original filing date in the archive.", "We launched on March 3, 2021.",
        "Last login 2025-06-01T12:30:00Z", "The contract runs from 01.01.2024 to 31.12.2026.",
        "Her flight lands on 3 March at 10:05.", "born-digital archives from 1999 are in the vault",
        "The company was founded on 12 May 1998.", "I was born in the 90s, so yes I remember dial-up.",
        "Born and raised in Ohio, moved to Denver later.", "the baby is due on 2025-09-14",
        "expires 08/27", "The birthday party is on Saturday at 3pm.",
        "Happy birthday! 🎉", "Q3 2024 report due 2024-10-15",
        "The date of the next release is 2024-11-05.", "Born to Run came out in 1975.",
        "Our anniversary is June 12.", "The deadline is 15.04.2025 for the tax return.",
    ])
    add("price", [
        "It costs $1,299.99, or €1.299,99 in Germany.", "The stock moved +3.25% to 1,234.56 on 2024-03-15.",
        "We sold 1,234,567 units in 2022.", "Rent is £1,450 pcm.", "That's ¥12,800 per night.",
        "Budget: 25k EUR, spent 18,340.50 so far.", "A latte is 4.50 here.", "USD 2,450,000 raised in the seed round",
    ])
    add("time_measure", [
        "Meet me at 10:30 or 16:45.", "The aspect ratio is 16:9.", "It weighs 72.5 kg.", "The room is 4.2 x 3.8 m.",
        "Temperature dropped to -12.5°C at 06:00.", "The run took 1:23:45.", "We drove 420 km in 5.5 hours.",
        "The time range 09:00-17:30 applies Monday to Friday.", "Screen is 2560x1440 at 144 Hz.",
        "Scores: 98.6, 101.2 and 99.95 on run 3.", "Set the timeout to 30000 ms.", "Flight BA 117 departs at 18:25.",
        "The coordinates are 48.8566, 2.3522.", "Lat 37.7749, long -122.4194 is San Francisco.",
        "Accuracy went from 0.8123 to 0.8456.", "Blood pressure 120/80 is normal.", "Vision 20/20 at the checkup",
    ])
    add("ids", [
        "ISBN 978-3-16-148410-0 is on the shelf.", "ISBN-13: 9780306406157", "DOI 10.1000/182 resolves fine.",
        "The commit SHA is 3f786850e387550fdab836ed7e6dc881de23001b.",
        "git cherry-pick a1b2c3d then rebase onto 9fceb02", "Fixed in 4e1243bd22c66e76c2ba9eddc1f91394e57f9f83.",
        "UUID 123e4567-e89b-12d3-a456-426614174000 identifies the job.",
        "request id 9f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b failed with 502",
        "trace_id=4bf92f3577b34da6a3ce929d0e0e4736", "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "MAC address 00:1A:2B:3C:4D:5E belongs to the printer.", "See RFC 7231 section 6.5.1 and ISO 8601.",
        "The docker image digest is sha256:9b2a1f0c...", "user id u_48213, session sess_20231027_1420",
        "Container 8d3f2a1b9c7e started.", "ARN arn:aws:iam::123456789012:role/deploy",
        "The AWS account id is 123456789012.", "The GitHub run id is 8823349921.",
        "Bucket s3://acme-logs/2024/03/ has the files.", "cluster-7f9c-prod is healthy",
        "The K8s pod api-5d9f7c8b6-x2x9q restarted.", "Error E1234: key not found",
        "SKU AB-1234-XY", "invoice 2024-0042", "room 4012, floor 3",
    ])
    add("product_code", [
        "The phone-like code 555-0100 is a test line in movies.", "Model XR-2000-450 ships in May.",
        "Call extension 2345 for sales.", "Lot 20240315-07 failed QA.", "Dial 911 in an emergency.",
        "Press 1 for English, 2 for Spanish.", "Part 100-200-300 is backordered.", "Version code 10203040",
        "An 8-digit number like 12345678 or 87654321 is an order id.", "Batch 0012-3344-55 was recalled.",
        "the hotline is open 24/7", "Error code 0x80070005 again.",
    ])
    add("number", [
        "I have 3 cats and 2 dogs.", "We're 42% done.", "Population grew from 8 000 000 to 9 500 000.",
        "Room 101 is free.", "Step 1.2.3 of section 4.5 covers 0.5% fees.", "pi is 3.14159265358979",
        "The answer is 42.", "Top 10 list: #1 is Rust.", "It scored 9/10.", "Page 12 of 340",
        "25 + 17 = 42", "He ran a 3:59 mile.", "Gate B32, seat 12B, row 14.", "1 in 5 people agreed.",
    ])
    add("password_words", [
        "I forgot my password.", "Password reset link sent to your inbox.", "The password is required for login.",
        "Passwords must have at least 12 characters.", "Please pass the salt.", "Can you pass me the charger?",
        "My password manager is great.", "Change your password every 90 days.", "The password field is empty.",
        "Use a passphrase instead of a password.", "Did you reset the password?", "The password is incorrect.",
        "password-protected PDFs are annoying", "I'll pass on the dessert.", "We passed the audit.",
        "The password is too short.", "Enter your password below.", "The password was changed yesterday.",
        "I don't remember the wifi password.", "Passwordless login via magic links is enabled.",
        "She passed 3 exams.", "the pass rate is 87%", "Boarding pass: seat 12B, gate 7.",
        "What's the password policy?", "The password is the same as before.", "Is the password case-sensitive?",
        "Send me the password later, not here.", "Mot de passe oublié ?", "Passwort vergessen?",
        "¿Olvidaste tu contraseña?", "The PIN pad is broken.", "Passcode required on boot.",
        "Password: see the vault entry.", "PIN: ask the front desk",
    ])
    add("token_key_words", [
        "The token bucket algorithm limits bursts.", "The key is to start small.", "Tokenization splits text into tokens.",
        "Please pass the token to the next function.", "The key insight is that tokens are cheap.",
        "Set the sort key: created_at descending.", "A bearer of bad news arrived at 9am.",
        "The secret is consistency.", "The API key rotation policy is documented at https://example.com/security/keys?page=2.",
        "token limit is 8192", "The access token expires after 3600 seconds.", "Keys are in the top drawer.",
        "Bearer tokens should never be logged.", "The secret sauce is butter.", "primary key: (user_id, created_at)",
        "the authorization header was missing", "Basic arithmetic: 2 + 2 = 4.", "Key West is lovely in March.",
        "The secret santa draw is on Friday.", "api_key=YOUR_API_KEY goes in the config.",
        "Set token=<your token here> before running.", "The signature is valid.",
        "In C++ use std::map; in Rust use HashMap::new().", "sk-learn is not a real package name, scikit-learn is.",
        "Authorization: Bearer <token>", "The webhook fires on push events.",
    ])
    add("address_words", [
        "Main Street is busy on Saturdays.", "We walked 5 blocks down Main Street.", "Take Route 66 west.",
        "The Street Fighter 2 tournament is tonight.", "I ran 5 miles down the road.", "Turn left onto Oak Avenue.",
        "Highway 101 is closed.", "Platform 9 3/4 is a Harry Potter joke.", "The office is on the 3rd floor.",
        "Sesame Street turned 50.", "We met at the cafe near the park.", "Abbey Road is a great album.",
        "Apartment hunting is exhausting.", "The address field is required.", "My email address changed.",
        "2 Broke Girls is a sitcom.", "Chapter 11 covers the avenue of approach.", "The 7 Dwarfs Mine Train ride",
        "I'll be at home after 6.", "Meet at the corner of 5th and Main.",
    ])
    add("net_words", [
        "The IP address is configured by DHCP.", "Use 0.0.0.0 to listen on all interfaces.",
        "Bind to localhost:8080.", "Python 3.12.1.2 is not a version.", "The ratio 1:2:3:4 is fixed.",
        "std::vector<int>::iterator it;", "use the :: operator", "Time 12:30:45.123",
        "the cron is 0 0 * * *", "ranges 10-20, 30-40", "See https://docs.python.org/3/library/re.html for details.",
        "Email is the best channel.", "Send it to the team alias, not to me.", "@channel standup in 5",
        "Follow @memir_dev for updates.", "user@localhost is the default", "the @ sign in the middle",
        "npm i lodash@4.17.21", "docker pull python@sha256", "git@github.com:acme/app.git is the remote",
    ])
    add("ssn_like", [
        "The phone code 555-12-3456 is fake.", "Zip code 90210 is in Beverly Hills.", "Call 1-800-FLOWERS.",
        "The ISBN 0-306-40615-2 is old style.", "Route 123-45 north.", "Gate 3, terminal 2, belt 14.",
        "The score was 3-2 in the 90th minute.", "Rooms 101-105 are booked.", "Year range 1999-2004.",
        "Passport photos cost $15 at the pharmacy.", "My passport expires next year.",
        "The passport office opens at 9.", "National ID cards are mandatory in Spain.",
        "The SSN field should be masked in the UI.", "Enter your date of birth below.",
        "Birthdate validation fails for leap years.", "The DOB column is nullable.",
    ])
    add("handwritten_round2", [
        "The meeting on 2024-03-12 was moved.", "Order #123-4567-890 shipped yesterday.",
        "We released v2.10.4 and 1.2.3 today.", "That'll be $1,299.99 plus tax.", "I forgot my password again.",
        "Password reset link sent.", "Pass the salt, please.", "The token bucket refills every second.",
        "The key is to iterate quickly.", "Ticket PROJ-1234 was closed.",
        "Request 550e8400-e29b-41d4-a716-446655440000 timed out.", "Timestamp 1700000000 is in November 2023.",
        "ISBN 978-0-13-468599-1 is Effective Java.", "The git SHA a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 is on main.",
        "We're at 87.5% of quota.", "She lives on Maple Avenue, I think.", "Our office is near 5th Avenue.",
        "My birthday is coming up soon!", "He was born in Lyon.", "I was born in 1985.",
        "The product code is 800-555-01.", "At 3:45 pm the temperature was 21.5°C.", "We need 2 x 4.5 m of cable.",
        "The password must contain a digit.", "Enter the password twice to confirm.",
        "Reset your password here: https://example.com/reset", "Admin panel is at /admin/settings.",
        "user/admin roles are configured in RBAC.", "The secret to good bread is time.",
        "API keys are managed in the console.", "Call me tomorrow!", "The score was 21-14.",
        "Coordinates 40.7128, -74.0060 are NYC.", "Run `git log --oneline -n 20`.", "Set max_tokens=4096 in the request.",
        "Flight LH 441 at 13:05 from gate Z50.", "Version 10.0.19045.3803 of Windows is installed.",
        "The IPv4 block 10.0.0.0/8 is private.", "Price went from 1.234,56 € to 1.299,00 €.",
        "The route 66 diner opens at 7.", "Please pass along my thanks.", "My passport is in the drawer.",
        "Send the passport copy by Friday.", "DOB field missing in the export.",
        "Use the SSH key in ~/.ssh/id_ed25519.pub.", "The private key should never leave the HSM.",
        "JWTs have three parts separated by dots.", "Our IBAN format validation rejects lowercase.",
        "Card ending in 4242 was charged.", "Dial 0 for the operator.", "Street Fighter 6 came out in 2023.",
        "Log in with your company SSO.", "creds are in 1Password, ask Maria", "login page loads in 300 ms",
        "admin: please review the PR", "root: the tree has 12 nodes", "Born on the Fourth of July is a film.",
        "The date of birth column accepts ISO 8601.", "Page 3 of 12, line 45", "The apartment is 85 m² on the 4th floor.",
        "FM5831 came up as a booking confirmation code option; probably not for us.",
        "Passphrase: see the team vault.", "Day pass: 12 EUR, valid until midnight.",
    ])
    add("handwritten_round3", [
        "Version 3.2.1.4 of the SDK is out.", "Call 911 if anything happens.", "He scored 123-45 in the final.",
        "Order 555-1234 is ready for pickup.", "The lab is in Room 210B.", "Deploy at 09:30 UTC on 2025-02-14.",
        "Grab 2 Main St coffees on the way? lol", "Our SLA is 99.95% uptime.", "Chapter 7: The Password.",
        "I need to pass the exam.", "the admin/user split is confusing", "Birthday cake recipe: 3 eggs, 200 g flour.",
        "We were born ready.", "The key: consistency beats intensity.", "Tokens: 1,024 used of 8,192.",
        "ssh-keygen -t ed25519 -C 'work laptop'", "PIN code requirements: 4 to 6 digits.",
        "The passport office moved to 3rd floor.", "At least 12 characters in your password!",
        "Use HTTP/2 on port 443.", "The parcel weighs 2.5 kg and measures 30x20x10 cm.",
        "Q1 revenue: $4.2M, up 12% YoY.", "The build hash is 9c56cc51b374c3ba189210d5b6d4bf57790d351c.",
        "Conference room 4-B, 2nd floor.", "My flight is UA 123, seat 14C.", "The error was ECONNRESET at 10.5 seconds.",
        "Postcode lookup is broken.", "1-2-3, go!", "About 1 in 3 users forget their password.",
        "An IBAN has up to 34 characters.", "Try the 5 Guys on Main Street.", "Meet at Gate 12, Terminal 3.",
        "Use ISO format YYYY-MM-DD for dates.", "The stock ticker AAPL closed at 189.98.", "The patch 0.9.12 fixed the leak.",
        "We migrated 12,345 users on 3/4.", "The tracking number 1Z999AA10123456784 is UPS.",
        "Call the password hotline for help.", "Session timeout is 30 min.", "The secret ingredient is love.",
    ])
    # A few generated benign numbers with a fixed seed: decimals, large counts, year ranges.
    for _ in range(12):
        x = rng.choice([f"The metric rose to {rng.uniform(0, 100):.2f}% today.",
                        f"We shipped {rng.randint(1000, 999999):,} units.",
                        f"Between {rng.randint(1990, 2010)} and {rng.randint(2011, 2025)} the trend reversed.",
                        f"Latency p99 was {rng.randint(10, 900)} ms at {rng.randint(100, 5000)} rps.",
                        f"Version {rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)} is stable."])
        b.append(BenignCase("generated", x))
    return b


@cache
def secrets() -> tuple[SecretCase, ...]:
    """Every planted secret (deterministic)."""
    return tuple(_build_secrets())


@cache
def benign() -> tuple[BenignCase, ...]:
    """Every benign look-alike sentence (deterministic)."""
    return tuple(_build_benign())


# Corpus kinds that are credentials (the redacted text must be rated ``secret``); the rest is personal data.
CREDENTIAL_KINDS = frozenset({
    "aws_access_key_id", "aws_secret_key", "github_token", "slack_token", "webhook_url", "stripe_key",
    "stripe_webhook_secret", "openai_key", "anthropic_key", "google_api_key", "google_oauth", "signed_url",
    "private_key", "jwt", "bearer_token", "auth_header", "generic_secret", "vendor_token", "password",
    "credential_pair", "url_credentials", "db_connection"})


@dataclass(frozen=True)
class Evaluation:
    """Recall per corpus kind and the false-positive rate on the benign sentences."""

    total: dict[str, int]
    caught: dict[str, int]
    missed: list[tuple[SecretCase, str]]        # (case, redacted text)
    false_positives: list[tuple[BenignCase, str]]
    n_benign: int

    def recall(self, kind: str) -> float:
        return self.caught[kind] / self.total[kind]

    @property
    def overall_recall(self) -> float:
        return sum(self.caught.values()) / sum(self.total.values())

    @property
    def fp_rate(self) -> float:
        return len(self.false_positives) / self.n_benign

    def table(self) -> str:
        """A Markdown table: kind, n, recall; then the overall recall and the false-positive rate."""
        lines = ["| kind | n | recall |", "|---|---:|---:|"]
        lines += [f"| {k} | {self.total[k]} | {self.recall(k):.3f} |" for k in sorted(self.total)]
        lines.append(f"| **all {len(self.total)} kinds** | {sum(self.total.values())} | {self.overall_recall:.3f} |")
        lines.append("")
        lines.append(f"false positives: {len(self.false_positives)} of {self.n_benign} benign sentences "
                     f"({self.fp_rate:.2%})")
        return "\n".join(lines)


def evaluate(redact_text: Callable[[str], str]) -> Evaluation:
    """Run ``redact_text`` over the corpus. A secret counts as caught when none of its
    :attr:`SecretCase.must_vanish` parts is left in the output; a benign sentence is a false positive
    when the output differs from it at all."""
    total: dict[str, int] = {}
    caught: dict[str, int] = {}
    missed: list[tuple[SecretCase, str]] = []
    for c in secrets():
        out = redact_text(c.text)
        ok = not any(part in out for part in c.must_vanish)
        total[c.kind] = total.get(c.kind, 0) + 1
        caught[c.kind] = caught.get(c.kind, 0) + ok
        if not ok:
            missed.append((c, out))
    fps = [(b, out) for b in benign() if (out := redact_text(b.text)) != b.text]
    return Evaluation(total, caught, missed, fps, len(benign()))
