"""Overview: days behind and backlog over time, the tips, the ingestion point, what needs a person."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from forkflow.ledger import records as ledger_records
from forkflow.ledger.headline import Headline
from forkflow.ledger.report import headline_of, iso, open_conflicts
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


def _ledger_doc(ledger: Ledger, head: Headline) -> dict[str, Any]:
    counts = ledger.counts()
    return {
        "fork_point": ledger.fork_point, "fork_tip": ledger.fork_tip,
        # dates are ISO 8601 in UTC, as in `status --json` (issue 12: these were Unix seconds)
        "upstream_tip": {"sha": ledger.upstream_tip.sha, "date": iso(ledger.upstream_tip.date)},
        # the headline of `status`: days behind counts what is landed or decided (docs/ledger.md)
        "ingestion_point": {"sha": head.point.sha, "date": iso(head.point.date), "inferred": True},
        "days_behind": head.days_behind, "backlog": head.backlog, "headline": head.to_json(),
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
        "days_behind": snap.days_behind, "backlog": snap.backlog, "headline": None,
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
    health = reads.tip_health(s, fid, tip) if tip is not None else None
    health = health or reads.tip_health(s, fid)
    alerts = regress_records.alerts(s, fid)
    l3 = tiers_records.l3_requests(s, fid, limit=100)
    groups = reads.failure_groups(s, fid)
    kept = open_conflicts(s, fid)
    return {
        # a conflict record is one file: the card counts upstream commits, the files beside them
        "open_conflicts": len({sha for sha, _ in kept}),
        "open_conflict_files": len(kept),
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


def as_of(history: list[ledger_records.Snapshot], ledger: Ledger | None) -> list[int]:
    """Each point's date on the chart: the state it measured (its upstream tip's date), not the
    moment `status` ran; a point whose upstream tip the ledger does not list keeps that moment.
    A fork read as of a past date charts at that date, not today's."""
    dates = {e.commit.sha: e.commit.date for e in ledger.entries} if ledger is not None else {}
    if ledger is not None:
        dates[ledger.upstream_tip.sha] = ledger.upstream_tip.date
    out: list[int] = []
    for p in history:
        taken = int(p.taken_at.timestamp())
        out.append(min(taken, dates.get(p.upstream_tip, taken)))
    return out


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
        head = None
        if ledger is not None:
            ctx = src.ctx if origin == "checkout" else None
            head = headline_of(ledger, ctx.config if ctx is not None else None, conflicts=open_conflicts(s, fid),
                               fork_point_date=ctx.repo.commit_date(ledger.fork_point) if ctx is not None else None)
    doc = (_ledger_doc(ledger, head) if ledger is not None and head is not None
           else (_snapshot_doc(history[-1]) if history else None))
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
        x = as_of(history, ledger)
        labels = [p.ingestion_point[:12] for p in history]
        return {
            "days-behind": charts.line("days behind upstream", x, [p.days_behind for p in history],
                                       unit="days", labels=labels, better="lower", floor=0.0),
            "backlog": charts.line("backlog commits", x, [float(p.backlog) for p in history],
                                   unit="commits", labels=labels, better="lower", floor=0.0),
        }

    return page(request, "overview.html", data, charts=chart_data)
