"""Where a store lives: an SQLite file path, or a PostgreSQL URL (``postgresql://…``)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["is_postgres_url", "redact_url"]


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL store (``postgresql://…`` or ``postgres://…``)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """The URL without its password (for messages, logs and ``store.path``)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    query = urlencode([(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(parts.query,
                                                                                       keep_blank_values=True)],
                      safe="/:*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
