"""The listening socket the two servers of the CLI bind (``memir mcp serve --transport http`` and
``memir ui``): bound before a server starts, so ``--port 0`` can print the port it got."""

from __future__ import annotations

import socket

__all__ = ["base_url", "bind"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port=0``: any free port; read it back with
    ``sock.getsockname()[1]``).

    Raises:
        OSError: the address is in use or not available.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def base_url(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (an IPv6 host in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"
