"""Validation: runs per tier with pass/fail/skip and saturation alarms; L3 requests and sign-offs.

The two actions here (an L3 sign-off, re-running a run's failed tests) need the operator's
token, are checked before anything else, and are logged whether done or refused.
"""
from __future__ import annotations

import os

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from forkflow import wiring
from forkflow.errors import ForkflowError, UserError
from forkflow.tiers import records as tq
from forkflow.tiers.tiers import Tier
from forkflow.web import charts, reads
from forkflow.web import jobs as background
from forkflow.web.errors import NotFound, Unavailable
from forkflow.web.render import RowId, both, emptiness, page
from forkflow.web.security import action_done, action_form, record
from forkflow.web.source import Source

router = APIRouter()

FILL_HINT = ("no validation run yet: run `forkflow validate --tier L1` on a commit, `forkflow nightly` on "
             "the trunk, or `forkflow l3 request SUITE` for a manual test")
PER_TIER = 40


def _run_doc(r: tq.RunInfo, counts: dict[str, int],
             alarms: Sequence[tuple[str, Sequence[str]]]) -> dict[str, Any]:
    """`alarms`: (suite, findings) of the run's jobs that have findings."""
    return {"id": r.id, "tier": r.tier.value, "rev": r.rev, "base": r.base, "status": r.status,
            "trigger": r.trigger, "runner": r.runner, "started_at": r.started_at, "finished_at": r.finished_at,
            "summary": r.summary, "passed": counts.get("PASS", 0),
            "failed": counts.get("FAIL", 0) + counts.get("ERROR", 0), "skipped": counts.get("SKIP", 0),
            "alarms": list(r.findings) + [f"{suite}: {f}" for suite, found in alarms for f in found],
            "parent_run_id": r.parent_run_id, "l3_request_id": r.l3_request_id}


def _request_doc(r: tq.L3RequestInfo) -> dict[str, Any]:
    return {"id": r.id, "suite": r.suite, "rev": r.rev, "requested_by": r.requested_by, "note": r.note,
            "requested_at": r.requested_at, "state": r.state,
            "runs": [{"id": x.id, "status": x.status} for x in r.runs],
            "signoffs": [{"owner": x.owner, "verdict": x.verdict, "note": x.note, "signed_at": x.signed_at,
                          "run_id": x.run_id} for x in r.signoffs]}


@both(router, "/validation")
def validation(request: Request) -> Response:
    src: Source = request.app.state.source
    tiers: dict[str, list[dict[str, Any]]] = {t.value: [] for t in Tier}
    requests: list[dict[str, Any]] = []
    with src.session() as s:
        fid = src.fork(s)
        if fid is not None:
            # reruns are shown under the run they rerun, never as runs (or bars) of their own
            every = {t: tq.latest_runs(s, fid, t, limit=PER_TIER * 4) for t in Tier}
            ids = [r.id for rs in every.values() for r in rs]
            counts, alarms = reads.outcome_counts(s, ids), reads.job_alarms(s, ids)
            for t, rs in every.items():
                docs = {r.id: _run_doc(r, counts[r.id], alarms[r.id]) | {"reruns": []}
                        for r in rs if r.parent_run_id is None}
                for r in reversed(rs):
                    if r.parent_run_id in docs:
                        docs[r.parent_run_id]["reruns"].append(
                            {"id": r.id, "status": r.status, "passed": counts[r.id].get("PASS", 0),
                             "failed": counts[r.id].get("FAIL", 0) + counts[r.id].get("ERROR", 0)})
                tiers[t.value] = list(docs.values())[:PER_TIER]
            requests = [_request_doc(r) for r in tq.l3_requests(s, fid, limit=50)]
    data = {**emptiness(not any(tiers.values()) and not requests, FILL_HINT), "tiers": tiers,
            "l3_requests": requests}

    def chart_data() -> dict[str, Any]:
        out = {}
        for tier, rs in tiers.items():
            rs = list(reversed(rs))
            out[f"tier-{tier}"] = charts.bars(
                f"{tier} runs",
                [float(r["passed"] + r["failed"] + r["skipped"]) or 1.0 for r in rs], [r["status"] for r in rs],
                labels=[f"run #{r['id']} {r['status']} {r['rev'][:12]}: {r['passed']} passed, {r['failed']} "
                        f"failed, {r['skipped']} skipped" for r in rs],
                hrefs=[f"/validation/runs/{r['id']}" for r in rs], unit="tests")
        return out

    return page(request, "validation.html", data, charts=chart_data)


@both(router, "/validation/runs/{run_id}")
def run(request: Request, run_id: RowId) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        r = tq.get_run(s, run_id)
        if fid is None or r is None or r.fork_id != fid:
            raise NotFound(f"no validation run {run_id}; the validation page lists the runs")
        jobs = tq.jobs_of_run(s, run_id)
        bad = tq.test_outcomes(s, run_id, bad_only=True)
        counts = reads.outcome_counts(s, [run_id])[run_id]
        reruns = [x for x in tq.runs_for_rev(s, fid, r.rev, r.tier) if x.parent_run_id == run_id]
    job_state = request.app.state.jobs.get(("rerun", run_id))
    data = {"run": _run_doc(r, counts, [(j.suite, j.findings) for j in jobs if j.findings]),
            "jobs": [{"id": j.id, "suite": j.suite, "status": j.status, "returncode": j.returncode,
                      "duration_s": j.duration_s, "tests_ran": j.tests_ran, "tests_expected": j.tests_expected,
                      "tests_counted": j.tests_counted, "findings": list(j.findings), "message": j.message,
                      "log_path": j.log_path, "narrowed": j.narrowed} for j in jobs],
            "failures": [{"suite": t.suite, "test_id": t.test_id, "outcome": t.outcome.value,
                          "message": t.message} for t in bad],
            "rerun": job_state,
            "reruns": [{"id": x.id, "status": x.status, "summary": x.summary} for x in reversed(reruns)]}
    return page(request, "validation_run.html", data)


@both(router, "/validation/l3/{request_id}")
def l3_request(request: Request, request_id: RowId) -> Response:
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        r = tq.get_l3_request(s, fid, request_id) if fid else None
    if r is None:
        raise NotFound(f"no L3 request {request_id}; the validation page lists them (`forkflow l3 list` too)")
    return page(request, "validation_l3.html", {"request": _request_doc(r)})


@router.post("/validation/l3/{request_id}/signoff", name="l3-signoff")
@router.post("/api/validation/l3/{request_id}/signoff", name="l3-signoff")
async def l3_signoff(request: Request, request_id: RowId) -> Response:
    """Record an owner's verdict on an L3 request (the tiers' own signoff checks the owners)."""
    form = await action_form(request, "l3-signoff", f"l3 request {request_id}")
    return await run_in_threadpool(_signoff, request, request_id, form.get("owner", ""),
                                   form.get("verdict", ""), form.get("note", ""))


def _signoff(request: Request, request_id: int, owner: str, verdict: str, note: str) -> Response:
    from forkflow.tiers import l3

    target = f"l3 request {request_id}"
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        exists = fid is not None and tq.get_l3_request(s, fid, request_id) is not None
    if not exists:
        record(request, "l3-signoff", target, "refused: unknown request")
        raise NotFound(f"no L3 request {request_id}; the validation page lists them")
    if src.ctx is None:
        record(request, "l3-signoff", target, "refused: no checkout")
        raise Unavailable("sign-offs check the suite's owners in forkflow.toml: start the dashboard in the "
                          "fork's checkout (FORKFLOW_TOKEN=... forkflow serve --repo PATH)")
    try:
        chosen = l3.SignOff(verdict)
    except ValueError:
        record(request, "l3-signoff", target, "refused: bad verdict", verdict=verdict[:40])
        raise UserError(f"verdict must be accept or reject, not {verdict[:40]!r}") from None
    who = os.environ.get("FORKFLOW_TOKEN_OWNER", "").strip()
    if not who:
        record(request, "l3-signoff", target, "refused: the token has no owner", owner=owner)
        raise Unavailable("sign-offs are bound to the token's owner: start the dashboard with "
                          "FORKFLOW_TOKEN_OWNER=LOGIN (the person the token belongs to), or sign off with "
                          "`forkflow l3 signoff` and [l3] identity")
    if owner and owner != who:
        record(request, "l3-signoff", target, "refused: not the token's owner", owner=owner)
        raise UserError(f"this dashboard's token belongs to '{who}', not '{owner[:80]}': it signs off only "
                        "as its owner")
    owner = who
    try:
        sid = l3.signoff(wiring.validator(src.ctx), request_id, l3.Identity(who, "owner of the dashboard's token"),
                         chosen, note)
    except ForkflowError as e:
        record(request, "l3-signoff", target, f"refused: {e}", owner=owner)
        raise
    record(request, "l3-signoff", target, "done", owner=owner, verdict=chosen.value, signoff_id=sid)
    return action_done(request, f"/validation/l3/{request_id}",
                       {"signoff_id": sid, "request_id": request_id, "owner": owner, "verdict": chosen.value})


@router.post("/validation/runs/{run_id}/rerun", name="rerun")
@router.post("/api/validation/runs/{run_id}/rerun", name="rerun")
async def rerun(request: Request, run_id: RowId) -> Response:
    """Re-run a run's failed tests in the background (to tell flaky from broken)."""
    await action_form(request, "rerun", f"validation run {run_id}")
    return await run_in_threadpool(_rerun, request, run_id)


def _rerun(request: Request, run_id: int) -> Response:
    from forkflow.tiers.validate import rerun_tests

    target = f"validation run {run_id}"
    src: Source = request.app.state.source
    with src.session() as s:
        fid = src.fork(s)
        r = tq.get_run(s, run_id)
        failed = [t.test_id for t in tq.test_outcomes(s, run_id, bad_only=True)] if r else []
    if fid is None or r is None or r.fork_id != fid:
        record(request, "rerun", target, "refused: unknown run")
        raise NotFound(f"no validation run {run_id}; the validation page lists the runs")
    if src.ctx is None:
        record(request, "rerun", target, "refused: no checkout")
        raise Unavailable("re-running needs the fork's checkout: start the dashboard there "
                          "(FORKFLOW_TOKEN=... forkflow serve --repo PATH)")
    if not failed:
        record(request, "rerun", target, "refused: nothing failed")
        raise Unavailable(f"run {run_id} has no failed test to re-run")
    jobs: dict[Any, dict[str, Any]] = request.app.state.jobs
    key = ("rerun", run_id)
    if background.running(jobs, key):
        raise Unavailable(f"a re-run of run {run_id} is already running")
    ctx = src.ctx

    def work() -> dict[str, Any]:
        return {"new_run_id": getattr(rerun_tests(wiring.validator(ctx), run_id, failed), "run_id", None)}

    background.start(jobs, key, f"forkflow-rerun-{run_id}", {"tests": len(failed), "new_run_id": None}, work)
    record(request, "rerun", target, "started", tests=len(failed))
    return action_done(request, f"/validation/runs/{run_id}",
                       {"run_id": run_id, "state": "running", "tests": len(failed)}, status=202)
