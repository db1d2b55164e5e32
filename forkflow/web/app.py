"""The dashboard's FastAPI app: pages over the store, read-only unless the operator set a token.

    app = create_app("sqlite:///.git/forkflow/forkflow.db")   # any store, its one fork
    app = create_app(open_context(repo), token="s3cret")      # a checkout: actions allowed

Every page is server-rendered (Jinja2 templates shipped in the package) and answers the same
data as JSON at `/api/<page>` or with `Accept: application/json`.
"""
from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from forkflow import __version__
from forkflow.context import Context
from forkflow.errors import StoreError, UserError
from forkflow.web.errors import Forbidden, NotFound, Unavailable, pages_message
from forkflow.web.render import html_page, wants_json
from forkflow.web.security import MAX_FORM, ActionLog, BadBody, BodyLimit, HostCheck, note_refusal, record
from forkflow.web.source import open_source

STATIC = Path(__file__).parent / "static"

# Charts are drawn by our own script from JSON blocks: no inline script, no third-party origin.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def create_app(target: str | Context, token: str | None = None, *, fork: str | None = None,
               actions_log: Path | None = None, demo: bool = False,
               allowed_hosts: Sequence[str] | None = None) -> FastAPI:
    """The dashboard over a store URL or a fork's Context.

    Args:
        target: a store URL (shows its one fork, or `fork`), or a Context (actions possible).
        token: the operator token that state-changing actions must carry; None = read-only.
        actions_log: a file every action (done or refused) is appended to, besides logging.
        demo: say on every page that the history shown is simulated sample data.
        allowed_hosts: the Host header names answered (DNS rebinding); None answers any
            (`forkflow serve` always passes its list).
    """
    from forkflow.web.routes import ROUTERS

    app = FastAPI(title="forkflow", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.source = open_source(target, fork)
    app.state.token = token or None
    app.state.actions_log = actions_log
    app.state.demo = demo
    app.state.jobs = {}
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.middleware("http")(_headers)
    # a backstop for every route; actions refuse (and log) bodies over MAX_FORM themselves
    app.add_middleware(BodyLimit, limit=4 * MAX_FORM)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed=tuple(allowed_hosts))
    app.add_middleware(ActionLog)  # outermost: it sees the refusals of the two above
    _handlers(app)
    return app


async def _headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    start = time.perf_counter()
    response = await call_next(request)
    response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - start) * 1000:.1f}"
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    if not request.url.path.startswith("/static/"):
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def error_response(request: Request, status: int, message: str) -> Response:
    """An error as JSON `{"error", "status"}` or as a page that says what to do."""
    if wants_json(request):
        return JSONResponse({"error": message, "status": status}, status_code=status)
    return html_page(request, "error.html", {"status": status, "message": message}, status)


def _handlers(app: FastAPI) -> None:
    """One handler per error class, each with its status (UserError -> 4xx with its message)."""

    def on(cls: type[Exception], status: int | None) -> None:
        async def handle(request: Request, exc: Exception) -> Response:
            code = status if status is not None else getattr(exc, "status_code", 500)
            message = _message(exc, request)
            note_refusal(request, message)  # the actions log's reason, if the route gave none
            return error_response(request, code, message)

        app.add_exception_handler(cls, handle)

    on(NotFound, 404)
    on(Forbidden, 403)
    on(Unavailable, 409)
    on(UserError, 400)
    on(BadBody, None)  # 400, 413 or 415
    on(StoreError, 503)
    on(StarletteHTTPException, None)

    async def bad_request(request: Request, exc: Exception) -> Response:
        message = _message(exc)
        route = request.scope.get("route")
        if request.method == "POST" and isinstance(route, APIRoute):  # an action refused: logged too
            record(request, route.name, request.url.path, f"refused: {message}")
        return error_response(request, 400, message)

    app.add_exception_handler(RequestValidationError, bad_request)


def _message(exc: Exception, request: Request | None = None) -> str:
    if isinstance(exc, RequestValidationError):
        parts = []
        for e in exc.errors():
            where = ".".join(str(x) for x in e.get("loc", ()) if x not in ("path", "query", "body"))
            parts.append(f"{where}: {e.get('msg', 'invalid')}")
        return "bad request: " + "; ".join(parts)
    if isinstance(exc, StarletteHTTPException):
        if exc.status_code == 404:
            return pages_message(request.app.routes if request is not None else ())
        return str(exc.detail)
    # one line, and text that encodes (a lone surrogate from a JSON body is written as its escape)
    return " ".join(str(exc).encode("utf-8", "backslashreplace").decode("utf-8").split())
