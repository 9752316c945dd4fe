"""The inspector's web app: a small Starlette (ASGI) app rendering Jinja2 templates on the server, with
one light script (the time slider). Every page reads through :class:`~runtime.ui.inspector.Inspector`.

Guards, in order, on every request (:class:`Guard`):

1. **Read-only**: any method but GET and HEAD is refused (405). Nothing the app calls writes.
2. **Host**: bound to a loopback address, only a loopback ``Host`` header is served (a web page
   elsewhere cannot reach the inspector through DNS rebinding).
3. **Token** (always when bound elsewhere; optional on loopback): ``Authorization: Bearer T``, the
   ``memir_ui`` cookie, or ``?token=T`` once (answered with the cookie and a redirect that drops it
   from the address bar). Compared in constant time.

Every response carries a content security policy that allows the app's own script and style only,
no framing, and no referrer.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import MemirError, NotFoundError, ValidationError
from .charts import KEPT, histogram_svg, series_svg
from .inspector import Inspector, MemoryFilters, ScopeKey

__all__ = ["COOKIE", "UiSettings", "create_app"]

HERE = Path(__file__).resolve().parent
COOKIE = "memir_ui"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_log = logging.getLogger("memir.ui")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


@dataclass(frozen=True)
class UiSettings:
    """How the app is served.

    Attributes:
        host: the address the server binds (loopback unless told otherwise).
        token: required on every request when set (always set when ``host`` is not loopback).
    """

    host: str = "127.0.0.1"
    token: str | None = None

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK


def _host_name(header: str) -> str:
    if header.startswith("["):  # [::1]:8765
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """Read-only, host and token checks, and security headers (see the module docstring)."""

    def __init__(self, app: ASGIApp, settings: UiSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is not None:
            await self._secured(refusal)(scope, receive, send)
            return
        token = request.query_params.get("token")
        if token is not None and self.settings.token is not None:  # valid (checked above): move it to a cookie
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")
            await self._secured(response)(scope, receive, send)
            return

        async def send_secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [(k.encode(), v.encode()) for k, v in _HEADERS]
            await send(message)

        await self.app(scope, receive, send_secured)

    def _refusal(self, request: Request) -> Response | None:
        if request.method not in ("GET", "HEAD"):
            return PlainTextResponse("the memir inspector is read-only", status_code=405,
                                     headers={"Allow": "GET, HEAD"})
        if self.settings.loopback and _host_name(request.headers.get("host", "")) not in LOOPBACK:
            return PlainTextResponse("this inspector answers on localhost only", status_code=403)
        expected = self.settings.token
        if expected is not None:
            auth = request.headers.get("authorization", "")
            given = (auth[7:] if auth.lower().startswith("bearer ") else None) \
                or request.query_params.get("token") or request.cookies.get(COOKIE) or ""
            if not hmac.compare_digest(given.encode(), expected.encode()):
                return PlainTextResponse("a token is required: open the address `memir ui` printed "
                                         "(it carries ?token=...)", status_code=401)
        return None

    @staticmethod
    def _secured(response: Response) -> Response:
        for k, v in _HEADERS:
            response.headers[k] = v
        return response


_HEADERS = (("content-security-policy", CSP), ("x-content-type-options", "nosniff"),
            ("referrer-policy", "no-referrer"), ("x-frame-options", "DENY"), ("cache-control", "no-store"))


def create_app(inspector: Inspector, settings: UiSettings | None = None) -> ASGIApp:
    """The inspector's ASGI app over ``inspector`` (serve it with uvicorn: :func:`runtime.ui.serve`)."""
    settings = settings or UiSettings()
    if not settings.loopback and not settings.token:
        raise ValidationError("an inspector bound to a non-loopback address needs a token", field="token")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True)
    templates = Jinja2Templates(env=env)
    env.globals.update(admin=inspector.admin, KEPT=KEPT)
    env.filters["when"] = lambda d: d.strftime("%Y-%m-%d %H:%M:%S") if d is not None else "–"
    env.filters["num"] = lambda v, nd=4: "–" if v is None else f"{v:.{nd}g}"

    def key_of(request: Request) -> ScopeKey:
        return inspector.key(request.query_params.get("user"), request.query_params.get("agent"))

    def page(request: Request, name: str, key: ScopeKey | None, **ctx: Any) -> HTMLResponse:
        scope_q = {} if key is None or not inspector.admin else {"user": key.user_id, "agent": key.agent_id}

        def link(path: str, **params: Any) -> str:
            q = {**scope_q, **{k: v for k, v in params.items() if v not in (None, "")}}
            return path + (f"?{urlencode(q)}" if q else "")

        return templates.TemplateResponse(request, name, {"key": key, "link": link, "scope_q": scope_q,
                                                          "page": name.removesuffix(".html"), **ctx})

    def filters_of(request: Request) -> MemoryFilters:
        q = request.query_params
        return MemoryFilters(**{f: q.get(f, "") for f in MemoryFilters.__dataclass_fields__ if f in q})

    async def home(request: Request) -> Response:
        if inspector.admin and not request.query_params.get("user"):
            return RedirectResponse("/users", status_code=303)
        return RedirectResponse("/memories" + (f"?{request.url.query}" if request.url.query else ""), status_code=303)

    async def users(request: Request) -> Response:
        if not inspector.admin:
            raise NotFoundError("this inspector shows one user; start it with --admin to list every user")
        return page(request, "users.html", None, scopes=inspector.scopes())

    async def memories(request: Request) -> Response:
        key = key_of(request)
        filters = filters_of(request)
        return page(request, "memories.html", key, rows=inspector.memories(key, filters), filters=filters,
                    facets=inspector.facets(key))

    async def memory(request: Request) -> Response:
        key = key_of(request)
        return page(request, "memory.html", key, m=inspector.memory(key, request.path_params["memory_id"]))

    async def explain(request: Request) -> Response:
        key = key_of(request)
        mid = request.path_params["memory_id"]
        e = inspector.explain(key, mid)
        return page(request, "explain.html", key, e=e)

    async def decisions(request: Request) -> Response:
        key = key_of(request)
        return page(request, "decisions.html", key, decisions=inspector.decisions(key))

    async def decision(request: Request) -> Response:
        key = key_of(request)
        d = inspector.decision(key, request.path_params["decision_id"])
        return page(request, "decision.html", key, d=d, histogram=histogram_svg(d["histogram"]))

    async def time_travel(request: Request) -> Response:
        key = key_of(request)
        raw = request.query_params.get("i", "")
        try:
            index = int(raw) if raw.strip() else None
        except ValueError:
            raise ValidationError(f"i={raw!r} is not a decision index", field="i") from None
        q = request.query_params.get("q", "")
        return page(request, "time_travel.html", key, tt=inspector.time_travel(key, index, q))

    async def recall(request: Request) -> Response:
        key = key_of(request)
        q = request.query_params.get("q", "")
        k = _int(request.query_params.get("k", "5"), "k", 1, 50)
        filters = filters_of(request)
        hits, block = inspector.recall(key, q, k, filters) if q.strip() else ([], "")
        return page(request, "recall.html", key, q=q, k=k, hits=hits, block=block, filters=filters,
                    facets=inspector.facets(key))

    async def health(request: Request) -> Response:
        key = key_of(request)
        h = inspector.health(key)
        chart = series_svg([{**p, "at": p["at"].strftime("%Y-%m-%d %H:%M")} for p in h.history],
                           [("working", KEPT), ("archived", "#1c7ed6"), ("deleted", "#c92a2a")])
        return page(request, "health.html", key, h=h, chart=chart)

    async def favicon(request: Request) -> Response:
        return Response(_FAVICON, media_type="image/svg+xml")

    def error_page(request: Request, status: int, text: str) -> Response:
        return templates.TemplateResponse(request, "error.html", {"status": status, "message": text, "key": None,
                                                                   "link": lambda p, **_: p, "page": "error"},
                                          status_code=status)

    def handled(endpoint: Any) -> Any:
        """A page's errors as pages: unknown ids 404, bad input 400 (the message names the field),
        anything else 500 with one line in the server log (no traceback, no content)."""
        async def run(request: Request) -> Response:
            try:
                return await endpoint(request)
            except NotFoundError as e:
                return error_page(request, 404, str(e))
            except MemirError as e:
                return error_page(request, 400, str(e))
            except Exception as e:  # noqa: BLE001 — a page must fail as a page
                _log.error("inspector page %s failed: %s", request.url.path, type(e).__name__)
                return error_page(request, 500, "internal error (see the server log)")
        return run

    async def not_found(request: Request, exc: Exception) -> Response:
        return error_page(request, getattr(exc, "status_code", 404), "no such page")

    pages = [("/", home), ("/users", users), ("/memories", memories), ("/memory/{memory_id}", memory),
             ("/explain/{memory_id}", explain), ("/decisions", decisions), ("/decision/{decision_id}", decision),
             ("/time-travel", time_travel), ("/recall", recall), ("/health", health)]
    routes: list[BaseRoute] = [Route(path, handled(fn)) for path, fn in pages]
    routes += [Route("/favicon.ico", favicon), Mount("/static", StaticFiles(directory=str(HERE / "static")),
                                                     name="static")]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    return Guard(app, settings)


def _int(text: str, name: str, lo: int, hi: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(f"{name}={text!r} is not a whole number", field=name) from None
    if not lo <= value <= hi:
        raise ValidationError(f"{name} must be in {lo}..{hi}, got {value}", field=name)
    return value


_FAVICON = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
            b'fill="#1c7ed6"/><text x="8" y="12" font-size="11" text-anchor="middle" fill="#fff">m</text></svg>')
