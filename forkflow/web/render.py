"""One page, two answers: HTML from a template shipped in the package, or the same data as JSON."""
from __future__ import annotations

import dataclasses
import enum
import json
import urllib.parse
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import jinja2
from fastapi import APIRouter, Path as PathParam, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from markupsafe import Markup

from forkflow.render import short

TEMPLATES = Path(__file__).parent / "templates"

MAX_ID = 2**63 - 1
# Every id in a URL (unit, conflict, run, L3 request, alert, bisection) is a store row id: one
# outside 1..2^63-1 is a 400 bad request here, before SQLite would overflow on it.
RowId = Annotated[int, PathParam(ge=1, le=MAX_ID)]


def jsonable(value: Any) -> Any:
    """Dataclasses, Enums, datetimes and tuples as JSON values (fast on long series)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(jsonable(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
               if not f.name.startswith("_")}
        return out
    return str(value)


def script_json(value: Any) -> Markup:
    """JSON safe inside a <script type="application/json"> block: no `<`, `>` or `&` survive."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))



def when(value: datetime | int | float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):  # ISO 8601, as the JSON documents carry dates
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value, tz=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M")


def num(value: float | int | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}g}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def urlpart(value: object) -> str:
    """One path segment, URL-encoded: a metric named `a?x=1#y` or `../../ingestion` links to its
    own page, never elsewhere (issue 13, item 6)."""
    return urllib.parse.quote(str(value), safe="")


def http_url(value: object) -> str:
    """`value` when it is an http(s) URL (a tracking issue's link), else "#": no javascript: links."""
    text = str(value or "")
    return text if text.lower().startswith(("https://", "http://")) else "#"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(short=short, when=when, num=num, pct=pct, script_json=script_json,
                       urlpart=urlpart, http_url=http_url)
    return env


ENV = _env()


def wants_json(request: Request) -> bool:
    """`/api/...`, or an Accept header that asks for JSON rather than HTML."""
    if request.url.path.startswith("/api/"):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def emptiness(is_empty: bool, hint: str) -> dict[str, Any]:
    """A list page's `empty` flag, with the `hint` that says how to fill it only when it is empty."""
    return {"empty": True, "hint": hint} if is_empty else {"empty": False}


def page(request: Request, template: str, data: dict[str, Any], status: int = 200,
         charts: Callable[[], dict[str, Any]] | None = None) -> Response:
    """The page's data as JSON, or rendered with `template` (`d` = data, `charts` for the script)."""
    if wants_json(request):
        return JSONResponse(jsonable(data), status_code=status)
    return html_page(request, template, data, status, charts() if charts is not None else {})


def html_page(request: Request, template: str, data: dict[str, Any], status: int = 200,
              charts: dict[str, Any] | None = None) -> HTMLResponse:
    src = request.app.state.source
    html = ENV.get_template(template).render(
        d=data, charts=charts or {}, request=request, path=request.url.path, fork=src.fork_name,
        store=src.store_label, can_act=request.app.state.token is not None, demo=request.app.state.demo)
    return HTMLResponse(html, status_code=status)


Handler = Callable[..., Response]


def both(router: APIRouter, path: str) -> Callable[[Handler], Handler]:
    """Register a GET handler at `path` and at `/api{path}`."""

    def deco(fn: Handler) -> Handler:
        router.add_api_route(path, fn, methods=["GET"], response_class=HTMLResponse)
        router.add_api_route("/api" + (path if path != "/" else "/overview"), fn, methods=["GET"],
                             response_class=JSONResponse)
        return fn

    return deco
