"""Replay: the stored result of `forkflow replay`, real vs forkflow, with its curves and steps."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from forkflow.replay import records
from forkflow.replay.html import HEADERS, charts, every_words, step_rows, summary_lines
from forkflow.web.errors import NotFound
from forkflow.web.render import emptiness, page, wants_json
from forkflow.web.source import Source

router = APIRouter()

FILL_HINT = ("no replay stored yet: run `forkflow replay --since YYYY-MM-DD --until YYYY-MM-DD --every week` "
             "in the fork's checkout; it replays the fork's own history with and without forkflow")


@router.get("/replay")
@router.get("/api/replay")
def replay(request: Request, run: int | None = None) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        found = records.latest(s, fid, run) if fid else None
        others = records.runs(s, fid) if fid else []
    if run is not None and found is None:
        raise NotFound(f"no finished replay #{run}; the list is at /replay")
    if found is None or found.report is None:
        return page(request, "replay.html", {**emptiness(True, FILL_HINT), "runs": []})
    report = found.report
    data = {**emptiness(False, ""), "run": found.id, "report": report,
            "runs": [{"id": r.id, "since": r.since, "until": r.until, "every_seconds": r.every_seconds,
                      "gate": r.gate} for r in others]}
    return page(request, "replay.html", {**data, "svgs": charts(report), "headers": list(HEADERS),
                                         "rows": step_rows(report), "lines": summary_lines(report),
                                         "every": every_words(report["every_seconds"])}
                if not wants_json(request) else data)

