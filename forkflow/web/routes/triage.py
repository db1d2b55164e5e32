"""Triage: failure groups with NEW / BROKEN_TRUNK / FLAKY / INFRA, trunk health, tracking issues."""
from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from forkflow.errors import UserError
from forkflow.triage import records as triage_records
from forkflow.web import charts, reads
from forkflow.web.errors import NotFound
from forkflow.web.render import both, emptiness, page
from forkflow.web.source import Source

router = APIRouter()

FILL_HINT = ("no failure triaged yet: failures of `forkflow validate` and `forkflow nightly` runs are "
             "grouped by signature and classified NEW / BROKEN_TRUNK / FLAKY / INFRA by `forkflow triage`")
CLASSES = ("NEW", "BROKEN_TRUNK", "FLAKY", "INFRA", "UNCLASSIFIED")
_KEY = re.compile(r"[0-9a-f]{16}")  # triage.models.signature_key


def _tracking(s: Session, fid: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for sink in reads.tracking_sinks(s, fid):
        for key, t in triage_records.tracking(s, fid, sink).items():
            out.setdefault(key, []).append({"sink": t.sink, "issue_id": t.issue_id, "url": t.url,
                                            "open": t.open, "green_streak": t.green_streak})
    return out


def _group_doc(g: reads.GroupBrief, tracking: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"key": g.key, "kind": g.kind, "signature": g.signature, "failures": g.failures,
            "classes": {c: g.classes[c] for c in CLASSES if c in g.classes},
            "first_seen_at": g.first_seen_at, "last_seen_at": g.last_seen_at,
            "first_run_id": g.first_run_id, "last_run_id": g.last_run_id,
            "tracking": tracking.get(g.key, [])}


def _health(runs: list[reads.RunBrief]) -> dict[str, Any]:
    if not runs:
        return {"state": None, "streak": 0, "last_green": None, "runs": 0}
    state = "green" if runs[0].status == "PASS" else "red"
    streak = next((i for i, r in enumerate(runs) if (r.status == "PASS") != (state == "green")), len(runs))
    green = next((r for r in runs if r.status == "PASS"), None)
    return {"state": state, "streak": streak, "runs": len(runs), "newest_run_id": runs[0].id,
            "last_green": None if green is None else {"run_id": green.id, "rev": green.rev,
                                                      "at": green.started_at}}


@both(router, "/triage")
def triage(request: Request) -> Response:
    src: Source = request.app.state.source
    groups: list[dict[str, Any]] = []
    trunk: list[reads.RunBrief] = []
    tip: reads.TipHealth | None = None
    with src.session() as s:
        fid = src.fork(s)
        if fid is not None:
            tracking = _tracking(s, fid)
            groups = [_group_doc(g, tracking) for g in reads.failure_groups(s, fid)]
            trunk = reads.trunk_runs(s, fid)
            from forkflow.web.routes.overview import fork_tip

            where = fork_tip(src)
            tip = (reads.tip_health(s, fid, where) if where else None) or reads.tip_health(s, fid)
    totals = {c: sum(g["classes"].get(c, 0) for g in groups) for c in CLASSES}
    health = _health(trunk)
    if tip is not None:  # the tip's truth: every run at it, not only the newest full run
        health = {**health, "tip": tip.to_dict(), "state": tip.state,
                  **({"streak": max(1, int(health["streak"]))} if tip.state != health["state"] else {})}
    data = {**emptiness(not groups and not trunk and tip is None, FILL_HINT), "health": health,
            "totals": totals, "groups": groups,
            "trunk": [{"id": r.id, "tier": r.tier, "rev": r.rev, "status": r.status,
                       "started_at": r.started_at} for r in trunk]}

    def chart_data() -> dict[str, Any]:
        rs = list(reversed(trunk))
        return {"trunk": charts.bars("trunk runs", [1.0] * len(rs), [r.status for r in rs],
                                     labels=[f"run #{r.id} {r.status} at {r.rev[:12]}" for r in rs],
                                     hrefs=[f"/validation/runs/{r.id}" for r in rs])}

    return page(request, "triage.html", data, charts=chart_data)


@both(router, "/triage/groups/{key}")
def group(request: Request, key: str) -> Response:
    key = key.lower()
    if not _KEY.fullmatch(key):
        raise UserError(f"{key[:40]!r} is not a failure group key; a group key is 16 hex digits "
                        "(e.g. 0123456789abcdef), as the triage page lists them")
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        found = reads.failure_groups(s, fid, key) if fid else []
        if not found:
            raise NotFound(f"no failure group {key[:40]!r}; the triage page lists the groups")
        g = found[0]
        failures = reads.group_failures(s, g.id)
        tracking = _tracking(s, fid) if fid else {}
    data = {"group": _group_doc(g, tracking),
            "failures": [{"run_id": f.run_id, "suite": f.suite, "test_id": f.test_id, "line": f.line,
                          "excerpt": f.excerpt, "classification": f.classification, "reason": f.reason}
                         for f in failures]}
    return page(request, "triage_group.html", data)
