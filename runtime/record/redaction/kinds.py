"""The kinds of values redaction finds, with their placeholder and sensitivity."""

from __future__ import annotations

from enum import StrEnum

from ..memir import Sensitivity

__all__ = ["RedactionKind"]


class RedactionKind(StrEnum):
    """What a detector found; each kind has a placeholder and a sensitivity level.

    Credentials are ``secret``; personal data is ``pii``. The order is the order findings are
    reported in (secrets first).
    """

    # secrets (credentials)
    private_key = "private_key"
    jwt = "jwt"
    password = "password"
    bearer_token = "bearer_token"
    api_key = "api_key"
    # personal data
    email = "email"
    iban = "iban"
    card = "card"
    ip = "ip"
    phone = "phone"
    ssn = "ssn"
    passport = "passport"
    national_id = "national_id"
    date_of_birth = "date_of_birth"
    address = "address"

    @property
    def placeholder(self) -> str:
        """The text that replaces a found value, e.g. ``[EMAIL]``."""
        return f"[{self.value.upper()}]"

    @property
    def sensitivity(self) -> Sensitivity:
        """``secret`` for credentials, ``pii`` for personal data."""
        return Sensitivity.secret if self in _SECRET_KINDS else Sensitivity.pii


_SECRET_KINDS = frozenset({RedactionKind.private_key, RedactionKind.jwt, RedactionKind.password,
                           RedactionKind.bearer_token, RedactionKind.api_key})
