"""The operator token that guards actions, and the log every action (done or refused) goes to."""
from __future__ import annotations

import hmac
import json
import logging
import threading
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from forkflow.errors import UserError
from forkflow.web.errors import Forbidden
from forkflow.web.render import wants_json

log = logging.getLogger("forkflow.web.actions")
_FILE_LOCK = threading.Lock()

TOKEN_HEADER = "x-forkflow-token"


MAX_FORM = 64 * 1024


async def form_fields(request: Request) -> dict[str, str]:
    """The fields of a urlencoded form or a JSON object body (strings only, first value wins)."""
    body = await request.body()
    if len(body) > MAX_FORM:
        raise UserError(f"the request body is over {MAX_FORM // 1024} KiB; send only the form's fields")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not body:
        return {}
    if kind == "application/json":
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise UserError(f"the body is not valid JSON ({e}); send an object of strings") from None
        if not isinstance(doc, dict):
            raise UserError("the JSON body must be an object, e.g. {\"owner\": ..., \"verdict\": ...}")
        return {str(k): str(v) for k, v in doc.items() if v is not None}
    pairs = urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    out: dict[str, str] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out


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
    if given is None or not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        record(request, action, target, "refused: " + ("no token" if given is None else "wrong token"))
        raise Forbidden("this action needs the operator's token; pass it in the form's token field, "
                        "an X-Forkflow-Token header or an Authorization: Bearer header")


async def action_form(request: Request, action: str, target: str) -> dict[str, str]:
    """An action's form fields, once its body reads and it carries the token; refusals are logged."""
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
    line = json.dumps(entry, ensure_ascii=False, default=str)
    log.info(line)
    path: Path | None = request.app.state.actions_log
    if path is not None:
        with _FILE_LOCK:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
