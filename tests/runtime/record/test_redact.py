"""Redaction: every planted secret is gone, nothing else is mangled, and redact is idempotent."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import ValidationError
from runtime.record import Sensitivity
from runtime.record.redaction import Finding, RedactionKind, Redactor, contains_sensitive, redact

K = RedactionKind
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx9f3kLmN0pQrStUvWxYz1234567890abcdEF\n"
       "q8w7e6r5t4y3u2i1o0pLKJHGFDSAzxcvbnm0987654321QWERTY\n-----END RSA PRIVATE KEY-----")

# (sentence with {} where the value goes, planted value, expected kind)
PLANTED: list[tuple[str, str, RedactionKind]] = [
    # emails
    ("Please write to {} about the refund.", "alice.smith@example.com", K.email),
    ("My travel address is {} (use it for bookings).", "j.doe+travel@mail.example.co.uk", K.email),
    ("Escalate to {}.", "support@acme-corp.io", K.email),
    # phones
    ("You can call me at {} after six.", "+1 (415) 555-2671", K.phone),
    ("The London office is {}, ask for Priya.", "+44 20 7946 0958", K.phone),
    ("Berlin desk: {}", "+49 30 12345678", K.phone),
    ("Mon numéro est le {} le soir.", "+33 1 23 45 67 89", K.phone),
    ("Reach the hotel on {} before check-in.", "(212) 555-0198", K.phone),
    ("Her landline is {} and she prefers mornings.", "020 7946 0958", K.phone),
    ("Text the driver at {} when you land.", "07700 900123", K.phone),
    ("Shanghai contact {} is on WeChat too.", "+86 138 0013 8000", K.phone),
    ("From abroad dial {} instead.", "0044 20 7946 0958", K.phone),
    ("call me at {} tomorrow", "4155552671", K.phone),
    ("Phone number: {}.", "555.867.5309", K.phone),
    # payment cards (Luhn-valid)
    ("Charge the booking to {} please.", "4111 1111 1111 1111", K.card),
    ("Her Mastercard {} expires 08/27.", "5555-5555-5555-4444", K.card),
    ("Amex on file: {}", "378282246310005", K.card),
    ("Use the Discover card {} for groceries.", "6011 1111 1111 1117", K.card),
    ("JCB {} was declined yesterday.", "3530111333300000", K.card),
    ("The new 2-series card is {}.", "2223-0031-2200-3222", K.card),
    ("Amex grouped {} works too", "3782 822463 10005", K.card),
    # IBANs (mod-97 valid)
    ("Wire the deposit to {} by Friday.", "GB82 WEST 1234 5698 7654 32", K.iban),
    ("Salary goes to {} every month.", "DE89 3704 0044 0532 0130 00", K.iban),
    ("Rent account {}, reference APT4.", "FR14 2004 1010 0505 0001 3M02 606", K.iban),
    ("Dutch IBAN {} for the invoice.", "NL91ABNA0417164300", K.iban),
    ("Refund to {} please.", "CH9300762011623852957", K.iban),
    # API keys
    ("Here is the OpenAI key {} for the bot.", "sk-proj-abcDEF1234567890ghijKLMNop", K.api_key),
    ("AWS access key id {} was rotated.", "AKIAIOSFODNN7EXAMPLE", K.api_key),
    ("Use token {} for the repo.", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", K.api_key),
    ("The Slack bot token is {}.", "xoxb-2048-4096-abcdefGHIJKL", K.api_key),
    ("Maps key {} is restricted.", "AIzaSyA1234567890abcdefghijklmnopqrstuv", K.api_key),
    ("Stripe secret {} (test mode).", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", K.api_key),
    ("GET /v1/data?api_key={}&page=2", "9f8e7d6c5b4a39281706f5e4", K.api_key),
    ('config: {{"client_secret": "{}"}}', "Zx9Qw8Er7Ty6Ui5Op4As3Df2", K.api_key),
    ("export AWS_SECRET_ACCESS_KEY={}", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", K.api_key),
    ("gitlab token {} expires soon", "glpat-A1b2C3d4E5f6G7h8I9j0", K.api_key),
    # bearer tokens, JWTs
    ("curl -H 'Authorization: Bearer {}' https://api.example.com", "8f14e45fceea167a5a36dedd4bea2543", K.bearer_token),
    ("Session token {} expires in an hour.", JWT, K.jwt),
    ("Authorization: Bearer {}", JWT, K.jwt),
    # passwords
    ("The wifi password: {}", "Tr0ub4dor&3", K.password),
    ("my password is {} so don't share it", "hunter2", K.password),
    ("Your PIN: {}.", "4821", K.password),
    ("DB url postgres://admin:{}@db.example.com:5432/app", "s3cr3tP4ss", K.password),
    ("Header Authorization: Basic {}", "dXNlcjpwYXNzd29yZA==", K.password),
    ('{{"userPassword": "{}"}}', "correct horse battery", K.password),
    # private keys
    ("Deploy key follows:\n{}\nthanks", PEM, K.private_key),
    # IP addresses
    ("The server at {} is down.", "192.168.1.10", K.ip),
    ("Blocked {}:8080 after the attack.", "203.0.113.42", K.ip),
    ("IPv6 {} answered the ping.", "2001:db8::8a2e:370:7334", K.ip),
    ("Link-local [{}]:443 responded", "fe80::1ff:fe23:4567:890a", K.ip),
    # identity documents, birth dates, addresses
    ("My SSN is {}, please keep it safe.", "219-09-9999", K.ssn),
    ("social security number: {}", "536 22 8726", K.ssn),
    ("Passport no. {} expires in 2031.", "X1234567", K.passport),
    ("My national insurance number is {}.", "QQ 12 34 56 C", K.national_id),
    ("I was born on {} in Leeds.", "12/03/1985", K.date_of_birth),
    ("DOB: {}", "3 March 1985", K.date_of_birth),
    ("Ship it to {} please.", "1600 Pennsylvania Avenue NW, Washington, DC 20500", K.address),
    ("Meine Adresse ist {}.", "Hauptstraße 12, 10115 Berlin", K.address),
]

BENIGN = [
    "The meeting is on 2023-10-27 at 14:23:05 UTC.",
    "Dates like 27/10/2023 and 10.27.2023 are both accepted.",
    "It costs $1,299.99, or €1.299,99 in Germany.",
    "Upgrade to version 2.4.1 (or v1.2.3.4) before Friday.",
    "Python 3.11.7 and numpy 2.4.6 are installed; firmware 10.0.0.1 is current.",
    "Your order number is 4111111111111112.",
    "Card-like but not Luhn: 4111 1111 1111 1112, and 5555-5555-5555-4445.",
    "Order #123-456-7890 shipped with reference ORD-2023-0456789.",
    "Tracking code 9400 1000 0000 0000 0000 00 is on the label.",
    "Meet me at 10:30 or 16:45; the aspect ratio is 16:9.",
    "We sold 1,234,567 units in 2022 and 2,345,678 in 2023.",
    "The population grew from 8 000 000 to 9 500 000.",
    "Read the docs at https://docs.python.org/3/library/re.html for details.",
    "The API key rotation policy is documented at https://example.com/security/keys?page=2.",
    "Please pass the token to the next function; the key is in the vault.",
    "A bearer of bad news arrived at 9am.",
    "Tokenization splits text into tokens; the secret is consistency.",
    "Set the sort key: created_at descending.",
    "The password is required for login.",
    "Passwords must have at least 12 characters.",
    "Flight BA 117 departs at 18:25 from gate B32.",
    "Room 4012, floor 3, building 7.",
    "Call the front desk if you need anything, or call me maybe at noon.",
    "The phone was charged to 80% by 07:45.",
    "Scores: 98.6, 101.2 and 99.95 on run 3.",
    "The commit SHA is 3f786850e387550fdab836ed7e6dc881de23001b.",
    "Use semver ranges like ^1.2.0 or ~0.9.3.",
    "ISBN 978-3-16-148410-0 is on the shelf.",
    "The coordinates are 48.8566, 2.3522.",
    "Invoice INV-000123 totals 2,450.00 USD due 2024-01-31.",
    "Step 1.2.3 of section 4.5 covers 0.5% fees and pi is 0.1234567890.",
    "In C++ use std::map; in Rust use HashMap::new().",
    "The time range 09:00-17:30 applies Monday to Friday.",
    "Temperature dropped to -12.5°C on 01.02.2023 at 06:00 with 10 people outside.",
    "The stock moved +3.25% to 1,234.56 on 2024-03-15.",
    "Build 2024.03.15 was tagged at 3:45pm.",
    "Our user id is u_48213 and the session is sess_20231027_1420.",
    "An 8-digit number like 12345678 or 87654321 is an order id.",
    "UUID 123e4567-e89b-12d3-a456-426614174000 identifies the job.",
    "MAC address 00:1A:2B:3C:4D:5E belongs to the printer.",
    "See RFC 7231 section 6.5.1 and ISO 8601.",
    "Dial extension 2345 for sales; the key insight is that tokens are cheap.",
    "The boarding pass: seat 12B, gate 7.",
    "Install with pip install numpy==2.4.6 or npm i lodash@4.17.21.",
]


def _luhn(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def test_corpus_is_big_enough_and_covers_every_kind() -> None:
    assert len(PLANTED) >= 40 and len(BENIGN) >= 30
    assert {k for _, _, k in PLANTED} == set(RedactionKind)


@pytest.mark.parametrize(("template", "value", "kind"), PLANTED, ids=[f"{k.value}-{i}" for i, (_, _, k) in
                                                                         enumerate(PLANTED)])
def test_planted_value_is_gone_and_placeholder_present(template: str, value: str, kind: RedactionKind) -> None:
    text = template.format(value)
    r = redact(text)
    assert value not in r.text
    assert kind.placeholder in r.text
    assert r.count(kind) == 1
    assert r.sensitivity is kind.sensitivity
    # The prose around the value survives: only the value was replaced.
    assert r.text == template.format(kind.placeholder)


def test_all_planted_in_one_text() -> None:
    text = "\n".join(t.format(v) for t, v, _ in PLANTED)
    r = redact(text)
    for _, v, _ in PLANTED:
        assert v not in r.text
    assert r.sensitivity is Sensitivity.secret
    assert sum(f.count for f in r.findings) == len(PLANTED)


@pytest.mark.parametrize("text", BENIGN)
def test_benign_text_is_byte_identical(text: str) -> None:
    r = redact(text)
    assert r.text == text
    assert r.findings == () and r.sensitivity is Sensitivity.none
    assert not contains_sensitive(text)


def test_card_detector_is_luhn_checked() -> None:
    assert _luhn("4111111111111111") and not _luhn("4111111111111112")
    assert redact("pay 4111111111111111").text == "pay [CARD]"
    assert redact("pay 4111111111111112").text == "pay 4111111111111112"


def test_iban_detector_is_mod97_checked() -> None:
    assert redact("iban GB82 WEST 1234 5698 7654 32").text == "iban [IBAN]"
    assert redact("iban GB83 WEST 1234 5698 7654 32").text == "iban GB83 WEST 1234 5698 7654 32"
    # A capitalised word after the IBAN is not swallowed.
    assert redact("DE89 3704 0044 0532 0130 00 AND X").text == "[IBAN] AND X"


def test_findings_never_carry_the_raw_value() -> None:
    r = redact("mail bob@example.com, card 4111 1111 1111 1111, key sk-proj-abcDEF1234567890ghijKLMNop")
    assert [f.name for f in dataclasses.fields(Finding)] == ["kind", "count"]
    for raw in ("bob@example.com", "4111 1111 1111 1111", "sk-proj-abcDEF1234567890ghijKLMNop"):
        assert raw not in repr(r)
    assert {f.kind for f in r.findings} == {K.email, K.card, K.api_key}


def test_sensitivity_secret_beats_pii() -> None:
    assert redact("a@b.io").sensitivity is Sensitivity.pii
    assert redact("a@b.io password: x9").sensitivity is Sensitivity.secret
    assert Sensitivity.highest() is Sensitivity.none
    assert Sensitivity.highest("pii", Sensitivity.none, "secret") is Sensitivity.secret


def test_redactor_kinds_can_be_disabled_and_bad_kinds_are_named() -> None:
    text = "host 10.0.0.1, mail a@b.io"
    assert Redactor(disable=["ip"]).redact(text).text == "host 10.0.0.1, mail [EMAIL]"
    assert Redactor(kinds=[K.ip]).redact(text).text == "host [IP], mail a@b.io"
    with pytest.raises(ValidationError, match="unknown kind 'zip_code'.*email"):
        Redactor(disable=["zip_code"])


def test_known_limits() -> None:
    """What the module docstring promises not to catch (or to catch) stays that way."""
    assert redact("ref 07700900123").text == "ref 07700900123"
    assert redact("phone: 07700900123").text == "phone: [PHONE]"
    assert redact("iban gb82 west 1234 5698 7654 32").text == "iban [IBAN]"  # lower-case IBANs are found
    assert redact("FM5831 came up as a booking confirmation code").findings == ()  # words are never joined
    assert redact("password: hunter2.").text == "password: [PASSWORD]."
    assert redact("release 1.2.3.4 shipped").text == "release 1.2.3.4 shipped"
    assert redact("Firefox 1.5.0.12 shipped").text == "Firefox 1.5.0.12 shipped"  # after a known product name
    assert redact("Gizmo 1.5.0.12 shipped").text == "Gizmo [IP] shipped"  # an unknown one: read as an address
    with pytest.raises(ValidationError):
        redact(b"bytes")  # type: ignore[arg-type]


def test_placeholders_already_in_text_are_not_counted_again() -> None:
    text = 'password: [PASSWORD], "token": "[API_KEY]", Bearer [BEARER_TOKEN], write to [EMAIL]'
    assert redact(text).findings == ()


# Fragments glued with adversarial separators: hypothesis looks for a concatenation where one
# redaction exposes or creates another.
_FRAGMENTS = st.sampled_from([v for _, v, _ in PLANTED] + BENIGN[:10] + [
    "password", "token=", "key:", "Bearer ", "call me at ", "+1", "00", "0", "@", "[EMAIL]", "::", "version "])
_SEPS = st.sampled_from(["", " ", "=", ":", ".", "-", "@", "\n", '"', "/", "+", ", "])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(_FRAGMENTS | st.text(max_size=12), _SEPS), max_size=8))
def test_redact_is_idempotent(parts: list[tuple[str, str]]) -> None:
    text = "".join(f + s for f, s in parts)
    once = redact(text)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.findings == ()  # converged: nothing left that a detector would fire on


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(PLANTED), min_size=1, max_size=5), st.sampled_from([" ", "\n", "; ", " and "]))
def test_planted_values_never_survive_in_combination(items: list[tuple[str, str, RedactionKind]], sep: str) -> None:
    out = redact(sep.join(t.format(v) for t, v, _ in items)).text
    for _, v, _ in items:
        assert v not in out


@pytest.mark.parametrize("text,gone", [
    ("Ship it to Unter den Linden 77, 10117 Berlin please.", ["Linden 77", "10117"]),
    ("Post it to 10 Downing Street, London SW1A 2AA.", ["Downing", "SW1A", "2AA"]),
    ("I live at 221B Baker Street, London NW1 6XE", ["Baker", "NW1", "6XE"]),
    ("Stuur het naar Keizersgracht 123, 1015 CJ Amsterdam", ["Keizersgracht 123", "1015 CJ"]),
    ("my address is Mariahilfer Straße 12, 1070 Wien", ["Mariahilfer", "1070"]),
])
def test_addresses_without_a_street_type_word_and_uk_postcodes_are_whole(text: str, gone: list[str]) -> None:
    r = redact(text)
    assert "[ADDRESS]" in r.text and not any(g in r.text for g in gone), r.text


@pytest.mark.parametrize("text", ["Read chapter 5, 2023 Edition first", "We need 77 units by 10117 days",
                                  "Windows 10, 2019 Server is fine", "Room 12, 1080 Ti card"])
def test_a_number_comma_number_is_not_an_address_by_itself(text: str) -> None:
    assert redact(text).text == text
