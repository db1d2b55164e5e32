"""Overview: days behind and backlog over time, the tips, the ingestion point, what needs a person."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from forkflow.ledger import records as ledger_records
from forkflow.ledger.report import iso
from forkflow.models import Disposition, Ledger
from forkflow.regress import records as regress_records
from forkflow.regress.alerts import AlertStatus
from forkflow.tiers import records as tiers_records
from forkflow.web import charts, reads
from forkflow.web.render import both, emptiness, page
from forkflow.web.source import Source

router = APIRouter()

FILL_HINT = ("nothing stored for this fork yet: run `forkflow status` in the fork's checkout (each run "
             "adds a point), or `forkflow history --backfill --since YYYY-MM-DD` to rebuild a year of "
             "history from git")


def _ledger_doc(ledger: Ledger) -> dict[str, Any]:
    counts = ledger.counts()
    return {
        "fork_point": ledger.fork_point, "fork_tip": ledger.fork_tip,
        # dates are ISO 8601 in UTC, as in `status --json` (issue 12: these were Unix seconds)
        "upstream_tip": {"sha": ledger.upstream_tip.sha, "date": iso(ledger.upstream_tip.date)},
        "ingestion_point": {"sha": ledger.ingestion_point.sha, "date": iso(ledger.ingestion_point.date),
                            "inferred": ledger.ingestion_point_inferred},
        "days_behind": ledger.days_behind, "backlog": len(ledger.backlog),
        "upstream_commits": len(ledger.entries),
        "counts": {d.value: counts[d] for d in Disposition},
        "out_of_order_picks": len(ledger.out_of_order_picks),
        "computed_at": iso(ledger.computed_at), "notes": list(ledger.notes),
    }


def _snapshot_doc(snap: ledger_records.Snapshot) -> dict[str, Any]:
    return {
        "fork_point": None, "fork_tip": snap.fork_tip,
        "upstream_tip": {"sha": snap.upstream_tip, "date": None},
        "ingestion_point": {"sha": snap.ingestion_point, "date": None, "inferred": snap.inferred},
        "days_behind": snap.days_behind, "backlog": snap.backlog,
        "upstream_commits": sum(snap.counts.values()),
        "counts": {d.value: int(snap.counts.get(d.value, 0)) for d in Disposition},
        "out_of_order_picks": None, "computed_at": iso(int(snap.taken_at.timestamp())), "notes": [],
    }


def fork_tip(src: Source) -> str | None:
    """The fork branch's tip when served from a checkout, else None (the newest trunk run's commit)."""
    if src.ctx is None:
        return None
    return src.ctx.repo.resolve(f"refs/heads/{src.ctx.config.fork_branch}")


def _attention(s: Session, fid: int, tip: str | None = None) -> dict[str, Any]:
    """What needs a person now, across the areas."""
    from forkflow.conflicts import records as conflict_records

    health = reads.tip_health(s, fid, tip) if tip is not None else None
    health = health or reads.tip_health(s, fid)
    alerts = regress_records.alerts(s, fid)
    l3 = tiers_records.l3_requests(s, fid, limit=100)
    groups = reads.failure_groups(s, fid)
    return {
        "open_conflicts": len(conflict_records.conflicts(s, fid, "open")),
        "open_alerts": sum(1 for a in alerts if a.status == AlertStatus.OPEN),
        "regressions": sum(1 for a in alerts if a.direction.value == "regression"),
        # every run on the tip (gate runs, reruns, nightlies), and which one made it red
        "trunk": health.to_dict() if health is not None else None,
        "l3_waiting": sum(1 for r in l3 if r.state == "RAN"),
        "new_failure_groups": sum(1 for g in groups if g.classes.get("NEW")),
    }


def _needs_a_person(attention: dict[str, Any]) -> bool:
    return any(attention[k] for k in ("open_conflicts", "open_alerts", "trunk", "l3_waiting",
                                      "new_failure_groups"))


@both(router, "/")
def overview(request: Request) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        if fid is None:
            return page(request, "overview.html", {"fork": None, **emptiness(True, FILL_HINT),
                                                   "ledger": None, "history": [], "attention": None})
        history = ledger_records.snapshots(s, fid)
        ledger, origin, problem = src.ledger(s, fid)
        attention = _attention(s, fid, fork_tip(src))
    doc = _ledger_doc(ledger) if ledger is not None else (_snapshot_doc(history[-1]) if history else None)
    if ledger is None and history:
        origin = "newest snapshot"
    data = {
        # open alerts or a red trunk show even before the first `forkflow status` snapshot
        "fork": src.fork_name, **emptiness(doc is None and not history and not _needs_a_person(attention),
                                           FILL_HINT),
        "ledger": doc, "ledger_source": origin if doc else "", "problem": problem,
        "history": [{"taken_at": p.taken_at, "source": p.source, "days_behind": p.days_behind,
                     "backlog": p.backlog, "ingestion_point": p.ingestion_point} for p in history],
        "attention": attention,
    }

    def chart_data() -> dict[str, Any]:
        x = [int(p.taken_at.timestamp()) for p in history]
        labels = [p.ingestion_point[:12] for p in history]
        return {
            "days-behind": charts.line("days behind upstream", x, [p.days_behind for p in history],
                                       unit="days", labels=labels, better="lower"),
            "backlog": charts.line("backlog commits", x, [float(p.backlog) for p in history],
                                   unit="commits", labels=labels, better="lower"),
        }

    return page(request, "overview.html", data, charts=chart_data)
