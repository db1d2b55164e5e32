"""L2: every metric's series over fork commits, change points and alerts marked, linked to
bisections and their culprit."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from forkflow.regress import records
from forkflow.regress.alerts import config_changes
from forkflow.regress.records import Alert, BisectionRecord
from forkflow.web import charts, reads
from forkflow.web.errors import NotFound
from forkflow.web.render import RowId, both, emptiness, page, urlpart
from forkflow.web.source import Source

router = APIRouter()

FILL_HINT = ("no L2 measurements yet: run `forkflow nightly` (or `forkflow validate --tier L2`) on the "
             "fork's trunk; each run adds one point per metric, and `forkflow detect` opens alerts")


def _culprit(b: BisectionRecord | None) -> dict[str, Any] | None:
    if b is None:
        return None
    c = b.result.get("culprit") or {}
    return {"bisection_id": b.id, "status": b.status, "confidence": b.confidence,
            "fork_commit": b.culprit_fork_sha, "upstream_commit": b.culprit_upstream_sha,
            "pr": b.culprit_pr, "subject": c.get("subject", ""), "message": b.result.get("message", "")}


def _alert_docs(s: Session, fid: int, alerts: Sequence[Alert]) -> list[dict[str, Any]]:
    """Newest first, each with the culprit of its newest bisection."""
    found = records.bisections(s, fid, [a.bisection_id for a in alerts if a.bisection_id is not None])
    return [_alert_doc(a, found.get(a.bisection_id) if a.bisection_id is not None else None)
            for a in reversed(alerts)]


def _alert_doc(a: Alert, b: BisectionRecord | None) -> dict[str, Any]:
    worst = a.worst if a.members else None
    return {"id": a.id, "good_rev": a.good_rev, "bad_rev": a.bad_rev, "direction": a.direction.value,
            "status": a.status, "opened_at": a.opened_at, "metrics": [m.metric for m in a.members],
            "worst": None if worst is None else {"metric": worst.metric, "magnitude": worst.magnitude,
                                                 "before": worst.before, "after": worst.after},
            "members": [{"metric": m.metric, "unit": m.unit, "better": m.better.value,
                         "good_rev": m.good_rev, "bad_rev": m.bad_rev, "before": m.before,
                         "after": m.after, "magnitude": m.magnitude, "pvalue": m.pvalue,
                         "direction": m.direction.value} for m in a.members],
            "culprit": _culprit(b)}


def _marks(series: reads.Series, alerts: list[Alert]) -> list[charts.Mark]:
    mine = [(a, m) for a in alerts for m in a.members if m.metric == series.name]
    if not mine:  # most series of the /l2 page: no need to index their commits
        return []
    index = {rev: i for i, rev in enumerate(series.revs)}
    out = []
    for a, m in mine:
        if m.bad_rev not in index:
            continue
        after = index[m.bad_rev]
        before = index.get(m.good_rev, max(after - 1, 0))
        out.append(charts.Mark(before, after, f"alert #{a.id}: {m.direction.value} {m.magnitude * 100:+.1f}%",
                               f"/l2/alerts/{a.id}", m.direction.value))
    return out


def _series_chart(sr: reads.Series, alerts: list[Alert], compact: bool) -> dict[str, Any]:
    # a small chart's tooltip shows value and date; the metric's own page names each commit
    labels = () if compact else [r[:12] for r in sr.revs]
    return charts.line(sr.name, sr.dates, sr.values, unit=sr.unit, labels=labels,
                       marks=_marks(sr, alerts), href=f"/l2/metrics/{urlpart(sr.name)}", compact=compact,
                       better=sr.better)


def _metric_doc(sr: reads.Series, alerts: list[Alert]) -> dict[str, Any]:
    ids = sorted({a.id for a in alerts for m in a.members if m.metric == sr.name})
    first, last = (sr.values[0], sr.values[-1]) if sr.values else (None, None)
    change = (last - first) / first if first not in (None, 0.0) and last is not None else None
    return {"name": sr.name, "unit": sr.unit, "better": sr.better, "suite": sr.suite,
            "points": len(sr.values), "first": first, "last": last, "change": change,
            "last_rev": sr.revs[-1] if sr.revs else None, "alerts": ids}


@both(router, "/l2")
def l2(request: Request, q: str = "*") -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        names = None if q == "*" else records.metric_names(s, fid, q) if fid else []
        series = reads.all_series(s, fid, names) if fid else []
        alerts = records.alerts(s, fid) if fid else []
        alert_docs = _alert_docs(s, fid, alerts) if fid else []
    hint = FILL_HINT if q == "*" else f"no stored metric matches {q!r}; clear the filter to see every metric"
    data = {**emptiness(not series and not alerts, hint), "filter": q,
            "metrics": [_metric_doc(sr, alerts) for sr in series], "alerts": alert_docs}
    return page(request, "l2.html", data,
                charts=lambda: {f"m{i}": _series_chart(sr, alerts, True) for i, sr in enumerate(series)})


@both(router, "/l2/metrics/{name:path}")
def metric(request: Request, name: str) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        stored = records.metric_series(s, fid, name) if fid is not None else []  # read once, for all below
        if fid is None or not stored:
            raise NotFound(f"no metric named {name!r} in the store; the L2 page lists every metric")
        sr = reads.series_of(name, reads.series_meta(s, fid, [name])[name], stored)
        alerts = [a for a in records.alerts(s, fid) if any(m.metric == name for m in a.members)]
        docs = _alert_docs(s, fid, alerts)
    config = {p.rev: p.config for p in stored}  # what each commit was measured with (the newest)
    points = [{"rev": r, "commit_date": d, "value": v, "measurements": n, "config": config.get(r, "")}
              for r, d, v, n in zip(sr.revs, sr.dates, sr.values, sr.counts)]
    changes = [{"good": c.good_rev, "bad": c.bad_rev, "before_config": c.before_config,
                "after_config": c.after_config, "before": c.before, "after": c.after}
               for c in config_changes(stored)]
    data = {"metric": _metric_doc(sr, alerts), "points": points, "alerts": docs,
            "measured_with": dict(stored[-1].context) if stored else {}, "config_changes": changes}
    return page(request, "l2_metric.html", data, charts=lambda: {"series": _series_chart(sr, alerts, False)})


@both(router, "/l2/alerts/{alert_id}")
def alert(request: Request, alert_id: RowId) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        if fid is None or (a := records.alert(s, fid, alert_id)) is None:
            raise NotFound(f"no L2 alert {alert_id}; the L2 page lists the alerts (`forkflow detect` opens them)")
        (doc,) = _alert_docs(s, fid, [a])
        ids = reads.bisection_ids(s, fid, alert_id)
        found = records.bisections(s, fid, ids)
        bisections = [_culprit(found.get(b)) for b in ids]
        shown = [m.metric for m in a.members][:12]
        series = {sr.name: sr for sr in reads.all_series(s, fid, shown)}
    data = {"alert": doc, "bisections": bisections}
    return page(request, "l2_alert.html", data, charts=lambda: {
        f"m{i}": _series_chart(series[n], [a], False) for i, n in enumerate(shown) if n in series})


@both(router, "/l2/bisections/{bisection_id}")
def bisection(request: Request, bisection_id: RowId) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        if fid is None or (b := records.bisection(s, fid, bisection_id)) is None:
            raise NotFound(f"no bisection {bisection_id}; bisections are listed on their alert's page")
    stages = [{"name": st.get("name", ""), "status": st.get("status", ""), "message": st.get("message", ""),
               "confidence": st.get("confidence"), "suspects": st.get("suspects", []),
               "rounds": len(st.get("rounds", [])), "skipped": st.get("skipped", {})}
              for st in b.result.get("stages", [])]
    data = {"bisection": {"id": b.id, "alert_id": b.alert_id, "metric": b.metric, "status": b.status,
                          "mode": b.result.get("mode", ""), "good": b.result.get("good"),
                          "bad": b.result.get("bad"), "rounds": b.result.get("rounds"),
                          "measurements": b.result.get("measurements")},
            "culprit": _culprit(b) if b.culprit_fork_sha or b.culprit_upstream_sha else None,
            "message": b.result.get("message", ""), "stages": stages}
    return page(request, "l2_bisection.html", data)
