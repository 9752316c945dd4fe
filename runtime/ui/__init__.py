"""``memir ui``: a local, read-only web inspector over a store (either backend).

Pages: memories (by tier, with filters; secrets masked), one memory (provenance, lineage, corrections,
recall count), retention decisions (a timeline; each with its items, utilities, reasons, the cut and a
utility histogram), explain, time travel (a slider over past decisions, and what a query would have
recalled then), a recall playground (the score breakdown and the prompt block), and store health.

It binds to localhost and shows one user unless started with ``--admin``; bound to any other address
it requires a token (:mod:`runtime.ui.app` lists its guards). Needs the ``ui`` extra
(``pip install 'memir-runtime[ui]'``: Starlette, Jinja2, uvicorn); nothing here is imported by
``import runtime``.

Example:
    >>> from runtime.store import MemoryStore                               # doctest: +SKIP
    >>> from runtime.ui import Inspector, ScopeKey, create_app             # doctest: +SKIP
    >>> store = MemoryStore.open("agent.sqlite", create=False)              # doctest: +SKIP
    >>> app = create_app(Inspector(store, ScopeKey("u42")))                # an ASGI app  # doctest: +SKIP
"""

from __future__ import annotations

import secrets
import socket
from typing import TYPE_CHECKING

from ..distribution import pip_extra
from ..errors import MissingDependencyError

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ModuleNotFoundError as _missing:  # the web stack lives in the `ui` extra
    raise MissingDependencyError(f"the memir inspector needs {_missing.name}: {pip_extra('ui')}") from None

from ..sockets import bind
from .app import COOKIE, UiSettings, create_app
from .inspector import MASK, Inspector, MemoryFilters, ScopeKey

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["COOKIE", "MASK", "Inspector", "MemoryFilters", "ScopeKey", "UiSettings", "bind", "create_app",
           "new_token", "serve"]


def new_token() -> str:
    """A fresh random token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def serve(store: MemoryStore, *, user_id: str | None = None, agent_id: str = "default", admin: bool = False,
          host: str = "127.0.0.1", port: int = 8765, token: str | None = None, quarantine: str | None = None,
          sock: socket.socket | None = None, log_level: str = "warning") -> None:
    """Serve the inspector over ``store`` until interrupted (uvicorn, one process).

    Args:
        user_id: the user shown (required unless ``admin``).
        agent_id: that user's agent (default ``"default"``).
        admin: show any scope (a users page lists them).
        host: the address to listen on; a non-loopback one needs a ``token``.
        port: the port (``0``: any free one).
        token: required on every request when set.
        quarantine: a ``memir score`` quarantine file for the health page.
        sock: an already bound socket (:func:`bind`) instead of ``port``.
    """
    try:
        import uvicorn
    except ModuleNotFoundError:
        raise MissingDependencyError(f"the memir inspector needs uvicorn: {pip_extra('ui')}") from None
    inspector = Inspector(store, None if user_id is None else ScopeKey(user_id, agent_id), admin=admin,
                          quarantine=quarantine)
    app = create_app(inspector, UiSettings(host=host, token=token))
    sock = sock or bind(host, port)
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off"))
    server.run(sockets=[sock])
