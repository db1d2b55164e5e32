"""Errors of the dashboard: each one maps to one HTTP status in `app.py`."""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from forkflow.errors import UserError


class NotFound(UserError):
    """An id, name or sha the store does not know (404)."""


class Forbidden(UserError):
    """An action without the operator's token, or with a wrong one (403)."""


class Unavailable(UserError):
    """An action this dashboard cannot do as started (409), e.g. without the fork's checkout."""


def pages_message(routes: Iterable[object]) -> str:
    """The 404 message: every top-level page the app serves, read from its routes so that a new
    page is listed the day it is added (a page with no list of its own, like /commits/SHA, by its
    pattern)."""
    first: dict[str, list[str]] = {}
    for route in _flat(routes):
        path, methods = getattr(route, "path", ""), getattr(route, "methods", None) or set()
        if "GET" not in methods or not path.startswith("/") or path.startswith(("/api/", "/static")):
            continue
        first.setdefault(path.split("/")[1], []).append(path)
    pages = []
    for top, paths in first.items():
        own = "/" + top
        if own in paths:
            pages.append("/ (overview)" if own == "/" else own)
        else:
            pages.append(_pattern(min(paths, key=len)))
    listed = ", ".join(pages[:-1]) + (" and " if len(pages) > 1 else "") + pages[-1] if pages else "/"
    return f"no such page; the pages are {listed}"


def _flat(routes: Iterable[object]) -> Iterator[object]:
    """The routes, with those of an included router (FastAPI keeps it as one entry) in its place."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        yield from _flat(getattr(inner, "routes", ())) if inner is not None else (route,)


def _pattern(path: str) -> str:
    """/commits/{sha} -> /commits/SHA."""
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: m.group(1).upper(), path)
