"""The operator token that guards actions, and the log every action (done or refused) goes to.

Every action request (any method but GET, HEAD and OPTIONS) gets one line in the actions log:
the route that handles it writes what it did (`record`); `ActionLog` writes one for a request
that no route logged: refused before it reached one (a foreign Host, an oversize body, an
unknown path or method, a bad path parameter) or failed inside it.
"""
from __future__ import annotations

import hmac
import json
import logging
import re
import threading
import urllib.parse
from datetime import datetime, timezone
from collections.abc import Iterable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from forkflow.errors import UserError
from forkflow.web.errors import Forbidden
from forkflow.web.render import wants_json

log = logging.getLogger("forkflow.web.actions")
_FILE_LOCK = threading.Lock()

TOKEN_HEADER = "x-forkflow-token"


MAX_FORM = 64 * 1024
FORM_TYPES = ("application/x-www-form-urlencoded", "application/json")
ACTION_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_LOGGED = "forkflow_action_logged"  # in the request's state: this request has its line
_REFUSAL = "forkflow_refusal"  # in the request's state: why a middleware refused it


class BadBody(UserError):
    """An action's body that cannot be read: too large (413), of another type (415), or not a
    form or a JSON object of strings (400)."""

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.status_code = status_code


async def _capped_body(request: Request) -> bytes:
    """The body, read in chunks and refused as soon as it passes MAX_FORM: a 400 MB POST used to
    be read whole before the limit and the token were checked (issue 13, item 6)."""
    too_big = BadBody(f"the request body is over {MAX_FORM // 1024} KiB; send only the form's fields")
    length = request.headers.get("content-length", "")
    if length and (not length.isdigit() or int(length) > MAX_FORM):
        raise too_big
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            raise too_big
    return bytes(body)


async def form_fields(request: Request) -> dict[str, str]:
    """The fields of a urlencoded form or a JSON object body (strings only, first value wins);
    BadBody for anything else."""
    body = await _capped_body(request)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not body:
        return {}
    if kind and kind not in FORM_TYPES:
        raise BadBody(f"a body of type {kind[:60]!r} is not read; send a form "
                      "(application/x-www-form-urlencoded) or a JSON object", 415)
    if kind == "application/json":
        return _json_fields(body)
    pairs = urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    out: dict[str, str] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out


def note_refusal(request: Request, message: str) -> None:
    """Why an action request is refused, for `ActionLog` when its route did not log it."""
    if request.method in ACTION_METHODS:
        setattr(request.state, _REFUSAL, message)


def _json_fields(body: bytes) -> dict[str, str]:
    try:
        doc = json.loads(body)
    except RecursionError:
        raise BadBody("the JSON body is nested too deeply; send an object of strings") from None
    except ValueError as e:  # bad JSON, bad UTF-8, a number too long to convert
        raise BadBody(f"the body is not valid JSON ({_printable(str(e))[:120]}); send an object of strings") from None
    if not isinstance(doc, dict):
        raise BadBody("the JSON body must be an object, e.g. {\"owner\": ..., \"verdict\": ...}")
    out: dict[str, str] = {}
    for k, v in doc.items():
        if isinstance(v, (dict, list)):
            raise BadBody(f"the JSON field {_printable(k)[:40]!r} must be a string, not an "
                          f"{'object' if isinstance(v, dict) else 'array'}")
        if v is not None:
            out[k] = v if isinstance(v, str) else str(v)
    if any(_SURROGATE.search(x) for kv in out.items() for x in kv):  # {"token": "\ud800"}
        raise BadBody("the JSON body holds a lone surrogate escape (\\ud800-\\udfff), which is no "
                      "text; send UTF-8 strings")
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")


def _printable(text: str) -> str:
    """`text` that encodes as UTF-8: a lone surrogate written as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def presented_token(request: Request, form_token: str | None) -> str | None:
    """The token a request carries: the X-Forkflow-Token header, a Bearer header, or a form field."""
    header = request.headers.get(TOKEN_HEADER)
    if header:
        return header
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return form_token or None


def require_token(request: Request, action: str, target: str, form_token: str | None) -> None:
    """Refuse (403, logged) unless the request carries the operator's token."""
    expected: str | None = request.app.state.token
    given = presented_token(request, form_token)
    if expected is None:
        record(request, action, target, "refused: read-only dashboard")
        raise Forbidden("this dashboard is read-only; restart it with --token (or FORKFLOW_TOKEN) "
                        "to allow actions")
    if given is None or not hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                                                 expected.encode("utf-8", "surrogatepass")):
        record(request, action, target, "refused: " + ("no token" if given is None else "wrong token"))
        raise Forbidden("this action needs the operator's token; pass it in the form's token field, "
                        "an X-Forkflow-Token header or an Authorization: Bearer header")


async def action_form(request: Request, action: str, target: str) -> dict[str, str]:
    """An action's form fields, once its body reads and it carries the token; refusals are logged."""
    if presented_token(request, None) is not None:  # a header token: checked before any body is read
        require_token(request, action, target, None)
    try:
        form = await form_fields(request)
    except UserError as e:
        record(request, action, target, f"refused: {e}")
        raise
    require_token(request, action, target, form.get("token"))
    return form


def action_done(request: Request, href: str, doc: dict[str, Any], status: int = 200) -> Response:
    """An action's answer: `doc` as JSON to API clients (and callers passing the token header),
    else a 303 to `href` for the browser's form."""
    if wants_json(request) or request.headers.get(TOKEN_HEADER):
        return JSONResponse(doc, status_code=status)
    return RedirectResponse(href, status_code=303)


def record(request: Request, action: str, target: str, outcome: str, **detail: object) -> None:
    """Log one action to the `forkflow.web.actions` logger and the app's actions log file."""
    entry = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "action": action,
             "target": target, "outcome": outcome,
             "client": request.client.host if request.client else "", **detail}
    # the peer is what the socket says (uvicorn runs with proxy_headers off); a proxy's claim is
    # kept beside it, never instead of it (issue 13, item 6)
    claimed = request.headers.get("x-forwarded-for")
    if claimed:
        entry["forwarded_for"] = claimed[:200]
    setattr(request.state, _LOGGED, True)
    line = _one_line(json.dumps(entry, ensure_ascii=False, default=str))
    log.info(line)
    path: Path | None = request.app.state.actions_log
    if path is not None:
        with _FILE_LOCK:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")


def _one_line(line: str) -> str:
    """A JSON line that is one line for every reader and encodes as UTF-8: the separators that
    `str.splitlines` breaks on, and lone surrogates, written as JSON escapes (only strings hold
    them)."""
    return _BREAKERS.sub(lambda m: f"\\u{ord(m[0]):04x}", line)


_BREAKERS = re.compile("[\x1c-\x1e\x85\u2028\u2029\ud800-\udfff]")


class ActionLog:
    """ASGI middleware: one line in the actions log for every action request that the route did
    not log itself, with its status and why: refused by a middleware (foreign Host, oversize
    body), by routing (no such action, a bad path parameter) or an error inside the route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ACTION_METHODS:
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        status = 0

        async def seen(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, seen)
        except Exception:
            if not state.get(_LOGGED):
                _record_scope(scope, "failed: an error inside forkflow (the server's log has it)", 500)
            raise
        if not state.get(_LOGGED):
            outcome = "done" if status < 400 else "failed" if status >= 500 else "refused"
            _record_scope(scope, f"{outcome}: {state.get(_REFUSAL) or _phrase(status)}", status)


def _phrase(status: int) -> str:
    try:
        return f"{HTTPStatus(status).phrase.lower()} (HTTP {status})"
    except ValueError:
        return f"HTTP {status}"


def _record_scope(scope: Scope, outcome: str, status: int) -> None:
    name = getattr(scope.get("route"), "name", None) or f"{scope['method']} (no such action)"
    record(Request(scope), str(name), str(scope.get("path", ""))[:300], outcome, status=status)


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is never read whole, whatever the route
    does with it.  A Content-Length over it gets 413 before a byte is read; a chunked body is cut
    after `limit + 1` bytes and ends there, so the route sees it is too large (and says so)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_FORM) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length and (not length.isdigit() or int(length) > self.limit):
            await _plain(scope, send, 413, f"request body over {self.limit // 1024} KiB")
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            if received > self.limit:  # cut off already: the body has ended for the app
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message["type"] == "http.request":
                body = message.get("body", b"")
                received += len(body)
                if received > self.limit:
                    keep = len(body) - (received - self.limit - 1)
                    return {"type": "http.request", "body": body[:keep], "more_body": False}
            return message

        await self.app(scope, limited_receive, send)


class HostCheck:
    """ASGI middleware: answer only requests whose Host header names this dashboard.  A web page
    on another site can make a browser resolve its own name to 127.0.0.1 (DNS rebinding) and then
    read every page; its requests still say `Host: evil.example`, so they are refused here."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(h.lower().rstrip(".") for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "*" not in self.allowed:
            host = host_name(dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1"))
            if host not in self.allowed:
                await _plain(scope, send, 400, f"unknown Host header {host[:100]!r}: this dashboard answers "
                             "only its own names (add one with `forkflow serve --allowed-host NAME`)")
                return
        await self.app(scope, receive, send)


def host_name(header: str) -> str:
    """The name in a Host header, without its port: `[::1]:8040` -> `::1`, `Web.Example.:80` ->
    `web.example`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0].rstrip(".") if header.count(":") == 1 else header.rstrip(".")


async def _plain(scope: Scope, send: Send, status: int, text: str) -> None:
    scope.setdefault("state", {})[_REFUSAL] = text  # ActionLog's reason, for an action refused here
    body = (text + "\n").encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
