"""Ingestion: landing units (bundles and chains) with their commits, routing reasons, L1 results,
landed or waiting, and the conflicts kept for a person.

Re-running a unit (`forkflow ingest --unit ID` in the background) needs the operator's token, is
checked before anything else, and is logged whether done or refused.  A conflict's page and its
approval are in routes/conflicts.py.
"""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from forkflow.conflicts import records as conflict_records
from forkflow.errors import UserError
from forkflow.landing import records as landing_records
from forkflow.ledger import records as ledger_records
from forkflow.models import RETRYABLE_STATES, Disposition, Ledger, MemberOutcome, Sha
from forkflow.web import jobs as background
from forkflow.web import reads
from forkflow.web.errors import NotFound, Unavailable
from forkflow.web.render import RowId, both, emptiness, page
from forkflow.web.render import page as page_of
from forkflow.web.security import action_done, action_form, record
from forkflow.web.source import Source

router = APIRouter()

PAGE_MAX = 10**6
FILL_HINT = ("no landing unit yet: run `forkflow plan` to see the bundles and risk chains, then "
             "`forkflow ingest --land` (or `forkflow demo` for a sample fork)")


def _subjects(ledger: Ledger | None) -> dict[str, tuple[str, int | None]]:
    return {} if ledger is None else {e.commit.sha: (e.commit.subject, e.pr) for e in ledger.entries}


def _l1(runs: list[reads.RunBrief]) -> dict[str, Any] | None:
    return None if not runs else {"run_id": runs[0].id, "status": runs[0].status, "tier": runs[0].tier,
                                  "summary": runs[0].summary}


def _unit_l1(run_id: int | None, candidate: Sha | None, named: dict[int, reads.RunBrief],
             at: dict[Sha, list[reads.RunBrief]]) -> dict[str, Any] | None:
    """A unit's L1: the gate run it names, else the newest run of its candidate."""
    if run_id is not None and run_id in named:
        return _l1([named[run_id]])
    return _l1(at.get(candidate, [])) if candidate else None


SEE_CONFLICTS = "; see `forkflow conflicts`"  # the CLI's pointer in a unit's summary: the page links instead


def _summary(text: str) -> str:
    return text[:-len(SEE_CONFLICTS)] if text.endswith(SEE_CONFLICTS) else text


def _links(ids: list[tuple[int, str]]) -> list[dict[str, Any]]:
    return [{"id": cid, "path": path, "href": f"/ingestion/conflicts/{cid}"} for cid, path in ids]


@both(router, "/ingestion")
def ingestion(request: Request, page: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 1) -> Response:
    """Landing units a page at a time (`?page=N`), grouped by ingest run, the newest run first and
    the units of a run in the order they ran; the open conflicts and the commits that wait."""
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        if fid is None:
            return page_of(request, "ingestion.html", {**emptiness(True, FILL_HINT), "runs": [], "units": [],
                                                       "waiting": [], "conflicts": [], "pager": _pager(1, 0)})
        units, total = reads.units_page(s, fid, page)
        runs = reads.ingest_runs(s, fid, [u.run_id for u in units])
        reasons = landing_records.routing_reasons(s, [u.id for u in units])
        members = reads.unit_members(s, [u.id for u in units])
        checks = reads.runs_at(s, fid, [u.candidate_sha for u in units if u.candidate_sha])
        named = reads.runs_by_id(s, fid, [u.l1_run_id for u in units if u.l1_run_id is not None])
        conflicts = conflict_records.conflicts(s, fid, "open")
        deferred = [d for d in ledger_records.recorded_decisions(s, fid) if d.disposition is Disposition.DEFERRED]
        conflicted = [sha for ms in members.values() for sha, outcome in ms if outcome == MemberOutcome.CONFLICT.value]
        kept = reads.conflict_ids_of(s, fid, conflicted + [d.sha for d in deferred])
        waits_in = reads.newest_units_of(s, fid, [d.sha for d in deferred])
        ledger, _, _ = src.ledger(s, fid)
    subjects = _subjects(ledger)
    docs: list[dict[str, Any]] = [{"id": u.id, "run_id": u.run_id, "kind": u.kind, "name": u.name, "status": u.status,
             "summary": _summary(u.summary), "commits": u.commits, "candidate_sha": u.candidate_sha,
             "updated_at": u.updated_at, "reasons": reasons.get(u.id, {}),
             "l1": _unit_l1(u.l1_run_id, u.candidate_sha, named, checks),
             "retry_of": u.retry_of, "conflicts": _links([x for sha, outcome in members.get(u.id, [])
                                                    if outcome == MemberOutcome.CONFLICT.value
                                                    for x in kept.get(sha, [])])}
            for u in units]
    grouped: list[dict[str, Any]] = []
    for doc in docs:
        if not grouped or grouped[-1]["id"] != doc["run_id"]:
            r = runs.get(doc["run_id"])
            grouped.append({"id": doc["run_id"], "mode": r.mode if r else "", "status": r.status if r else "",
                            "started_at": r.started_at if r else None, "finished_at": r.finished_at if r else None,
                            "units": []})
        grouped[-1]["units"].append(doc)
    data = {
        **emptiness(not total and not conflicts and not deferred, FILL_HINT),
        "runs": grouped, "units": docs, "pager": _pager(page, total),
        "waiting": [{"sha": d.sha, "subject": subjects.get(d.sha, ("", None))[0],
                     "pr": subjects.get(d.sha, ("", None))[1], "reason": d.describe(),
                     "decided_by": d.source.value, "conflicts": _links(kept.get(d.sha, [])),
                     "unit": None if d.sha not in waits_in else {"id": waits_in[d.sha][0], "name": waits_in[d.sha][1],
                                                                 "href": f"/ingestion/units/{waits_in[d.sha][0]}"}}
                    for d in deferred],
        "conflicts": [_conflict_doc(c, full=False) for c in conflicts],
    }
    return page_of(request, "ingestion.html", data)


def _pager(page: int, total: int) -> dict[str, Any]:
    pages = max(1, -(-total // reads.UNITS_PER_PAGE))
    return {"page": page, "pages": pages, "units": total, "per_page": reads.UNITS_PER_PAGE,
            "prev": f"/ingestion?page={page - 1}" if page > 1 else None,
            "next": f"/ingestion?page={page + 1}" if page < pages else None}


def _conflict_doc(c: conflict_records.ConflictInfo, full: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": c.id, "upstream_sha": c.upstream_sha, "subject": c.subject, "path": c.path,
                           "kind": c.kind, "chain": c.chain, "status": c.status, "seen": c.seen,
                           "last_seen": c.last_seen, "tried": list(c.tried)}
    if full:
        doc.update(base_sha=c.base_sha, marked=c.marked, key=c.key)
    return doc


@both(router, "/ingestion/units/{unit_id}")
def unit(request: Request, unit_id: RowId) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        if fid is None or (u := landing_records.unit(s, fid, unit_id)) is None:
            raise NotFound(f"no landing unit {unit_id}; the ingestion page lists them")
        decisions = {d.sha: d for d in ledger_records.recorded_decisions(s, fid)}
        retries = [x.id for x in landing_records.retries_of(s, unit_id)]
        kept = reads.conflict_ids_of(s, fid, [sha for sha, outcome in u.members if outcome is MemberOutcome.CONFLICT])
        runs = reads.runs_at(s, fid, [u.candidate_sha]).get(u.candidate_sha, []) if u.candidate_sha else []
        if u.l1_run is not None and all(r.id != u.l1_run for r in runs):  # a lower unit of a batch
            runs = [*reads.runs_by_id(s, fid, [u.l1_run]).values(), *runs]
        ledger, _, _ = src.ledger(s, fid)
    subjects = _subjects(ledger)
    members = []
    for sha, outcome in u.members:
        d = decisions.get(sha)
        subject, pr = subjects.get(sha, ("", None))
        members.append({"sha": sha, "subject": subject, "pr": pr, "outcome": outcome,
                        "routing_reason": u.reasons.get(sha, ""),
                        "disposition": d.disposition.value if d else None, "reason": d.reason if d else "",
                        "conflicts": _links(kept.get(sha, []) if outcome is MemberOutcome.CONFLICT else [])})
    data = {"unit": {"id": u.id, "run_id": u.run_id, "kind": u.kind, "name": u.name, "status": u.status,
                     "summary": _summary(u.summary), "base_sha": u.base_sha, "candidate_sha": u.candidate_sha,
                     "reasons": dict(u.reasons), "retry_of": u.retry_of, "retried_as": retries},
            "members": members, "runs": runs, "rerun": request.app.state.jobs.get(("unit-rerun", unit_id)),
            "can_rerun": u.status in RETRYABLE_STATES}
    return page(request, "ingestion_unit.html", data)


@router.post("/ingestion/units/{unit_id}/rerun", name="unit-rerun")
@router.post("/api/ingestion/units/{unit_id}/rerun", name="unit-rerun")
async def rerun_unit(request: Request, unit_id: RowId) -> Response:
    """Pick the unit again on the current fork tip, run L1, land it if it passes (in the background)."""
    await action_form(request, "unit-rerun", f"landing unit {unit_id}")
    return await run_in_threadpool(_rerun_unit, request, unit_id)


def _rerun_unit(request: Request, unit_id: int) -> Response:
    from forkflow.landing.wired import check_retry, retry_unit

    target = f"landing unit {unit_id}"
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        known = fid is not None and landing_records.unit(s, fid, unit_id) is not None
    if not known:
        record(request, "unit-rerun", target, "refused: unknown unit")
        raise NotFound(f"no landing unit {unit_id}; the ingestion page lists them")
    if src.ctx is None:
        record(request, "unit-rerun", target, "refused: no checkout")
        raise Unavailable("re-running a unit picks and lands commits: start the dashboard in the fork's "
                          "checkout (forkflow serve --repo PATH --token ...)")
    jobs: dict[Any, dict[str, Any]] = request.app.state.jobs
    key = ("unit-rerun", unit_id)
    if background.running(jobs, key):
        record(request, "unit-rerun", target, "refused: already running")
        raise Unavailable(f"a re-run of unit {unit_id} is already running")
    try:
        check_retry(src.ctx, unit_id)
    except UserError as e:
        record(request, "unit-rerun", target, f"refused: {e}")
        raise Unavailable(str(e)) from None
    ctx = src.ctx

    def work() -> dict[str, Any]:
        report = retry_unit(ctx, unit_id)
        return {"units": [{"id": r.unit_id, "name": r.name, "status": r.status.value, "summary": r.summary}
                          for r in report.results]}

    def after(job: dict[str, Any]) -> None:
        record(request, "unit-rerun", target, job["state"],
               units=[(u["id"], u["status"]) for u in job["units"]], error=job["error"])

    background.start(jobs, key, f"forkflow-unit-rerun-{unit_id}", {"units": []}, work, after)
    record(request, "unit-rerun", target, "started")
    href = f"/ingestion/units/{unit_id}"
    return action_done(request, href, {"unit_id": unit_id, "state": "running", "href": href}, status=202)
