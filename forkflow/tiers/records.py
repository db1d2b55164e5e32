"""Store reads and writes of validation: runs, jobs, per-test outcomes, L3.  All return dataclasses.

For triage (classifying failures NEW / BROKEN_TRUNK / FLAKY / INFRA):

    with ctx.store.session_scope() as s:
        run = get_run(s, run_id)                       # RunInfo | None (status, rev, base, tier)
        base_runs = runs_for_rev(s, ctx.fork_id, run.base, Tier.L1)   # newest first
        for job in jobs_of_run(s, run_id):             # JobInfo: status PASS/FAIL/INFRA, log_path,
            ...                                        #   artifact_dir, message (with log tail)
        for t in test_outcomes(s, run_id, bad_only=True):   # TestOutcomeInfo: suite, test_id,
            ...                                        #   outcome, duration_s, message
        recent = latest_runs(s, ctx.fork_id, Tier.L1, limit=50)

A job's `status` is INFRA when the runner (not the code) failed: the command could not start,
the Ray head went away, or the two test counts disagreed.  `message` holds the saturation
findings and, for a failing job, the tail of its log (ANSI codes stripped).  To rerun failures
(to spot flaky tests) call `forkflow.tiers.validate.rerun_tests(validator, run_id, test_ids)`; it
returns a new run whose `parent_run_id` is the original.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import desc, select
from sqlalchemy.orm import Session

from forkflow.models import Sha
from forkflow.store.schema_tiers import (
    L3RequestRow,
    L3SignoffRow,
    TestOutcomeRow,
    ValidationJobRow,
    ValidationRunRow,
)
from forkflow.tiers.reports import TestOutcome, TestResult
from forkflow.tiers.selection import HistoryEntry
from forkflow.tiers.tiers import RunStatus, Tier





@dataclass(frozen=True, slots=True)
class RunInfo:
    id: int
    fork_id: int
    tier: Tier
    rev: Sha
    base: Sha | None
    status: RunStatus  # RUNNING | PASS | FAIL | INFRA
    runner: str
    trigger: str
    started_at: datetime
    finished_at: datetime | None
    commit_date: int
    changed_files: tuple[str, ...]
    inventory: tuple[str, ...]
    selection: dict[str, object]
    findings: tuple[str, ...]
    summary: str
    parent_run_id: int | None
    l3_request_id: int | None


@dataclass(frozen=True, slots=True)
class JobInfo:
    id: int
    run_id: int
    suite: str
    status: RunStatus  # PENDING | PASS | FAIL | INFRA
    command: str
    returncode: int | None
    duration_s: float
    log_path: str
    report_path: str
    artifact_dir: str
    message: str
    narrowed: bool
    selected: tuple[str, ...] | None
    tests_reported: int
    tests_ran: int
    tests_counted: int | None
    tests_expected: int | None
    findings: tuple[str, ...]
    metrics: tuple[dict[str, object], ...]
    attempts: int


@dataclass(frozen=True, slots=True)
class TestOutcomeInfo:
    __test__ = False  # not a pytest class

    run_id: int
    job_id: int
    suite: str
    test_id: str
    outcome: TestOutcome
    duration_s: float
    message: str


def _run(r: ValidationRunRow) -> RunInfo:
    return RunInfo(
        id=r.id, fork_id=r.fork_id, tier=Tier(r.tier), rev=Sha(r.rev),
        base=Sha(r.base) if r.base else None, status=RunStatus(r.status), runner=r.runner, trigger=r.trigger,
        started_at=r.started_at, finished_at=r.finished_at,
        commit_date=r.commit_date, changed_files=tuple(json.loads(r.changed_files)),
        inventory=tuple(json.loads(r.inventory)), selection=json.loads(r.selection),
        findings=tuple(json.loads(r.findings)), summary=r.summary, parent_run_id=r.parent_run_id,
        l3_request_id=r.l3_request_id)


def _job(j: ValidationJobRow) -> JobInfo:
    sel = json.loads(j.selected)
    return JobInfo(
        id=j.id, run_id=j.run_id, suite=j.suite, status=RunStatus(j.status), command=j.command,
        returncode=j.returncode, duration_s=j.duration_s, log_path=j.log_path,
        report_path=j.report_path, artifact_dir=j.artifact_dir, message=j.message,
        narrowed=bool(j.narrowed), selected=tuple(sel) if sel is not None else None,
        tests_reported=j.tests_reported, tests_ran=j.tests_ran, tests_counted=j.tests_counted,
        tests_expected=j.tests_expected, findings=tuple(json.loads(j.findings)),
        metrics=tuple(json.loads(j.metrics)), attempts=j.attempts)


# -- writes (used by forkflow.tiers.validate) ----------------------------------------------------

@dataclass(frozen=True, slots=True)
class NewRun:
    tier: Tier
    rev: Sha
    base: Sha | None
    runner: str
    trigger: str
    commit_date: int
    changed_files: tuple[str, ...]
    inventory: tuple[str, ...]
    selection: dict[str, object]
    parent_run_id: int | None = None
    l3_request_id: int | None = None


@dataclass(frozen=True, slots=True)
class NewJob:
    suite: str
    command: str
    log_path: str
    report_path: str
    artifact_dir: str
    narrowed: bool
    selected: tuple[str, ...] | None
    tests_expected: int | None


def create_run(s: Session, fid: int, run: NewRun, jobs: Sequence[NewJob]) -> tuple[int, list[int]]:
    """Insert a RUNNING run and its PENDING jobs; returns (run id, job ids in order)."""
    row = ValidationRunRow(
        fork_id=fid, tier=run.tier.value, rev=run.rev, base=run.base, status=RunStatus.RUNNING,
        runner=run.runner, trigger=run.trigger, commit_date=run.commit_date,
        changed_files=json.dumps(list(run.changed_files)), inventory=json.dumps(list(run.inventory)),
        selection=json.dumps(run.selection), findings="[]", summary="",
        parent_run_id=run.parent_run_id, l3_request_id=run.l3_request_id)
    s.add(row)
    s.flush()
    ids = []
    for j in jobs:
        jr = ValidationJobRow(
            run_id=row.id, suite=j.suite, status=RunStatus.PENDING, command=j.command, log_path=j.log_path,
            report_path=j.report_path, artifact_dir=j.artifact_dir, message="",
            narrowed=int(j.narrowed), selected=json.dumps(list(j.selected) if j.selected is not None else None),
            tests_expected=j.tests_expected, duration_s=0.0, tests_reported=0, tests_ran=0,
            findings="[]", metrics="[]", attempts=0)
        s.add(jr)
        s.flush()
        ids.append(jr.id)
    return row.id, ids


@dataclass(frozen=True, slots=True)
class JobFinish:
    status: RunStatus
    returncode: int | None
    duration_s: float
    message: str
    tests_reported: int
    tests_ran: int
    tests_counted: int | None
    findings: tuple[str, ...]
    metrics: tuple[dict[str, object], ...]
    attempts: int


def finish_job(s: Session, job_id: int, done: JobFinish, results: Iterable[TestResult]) -> None:
    """Record a job's end and its per-test outcomes (one transaction with the caller's)."""
    j = s.get(ValidationJobRow, job_id)
    assert j is not None, job_id
    j.status, j.returncode, j.duration_s, j.message = done.status, done.returncode, done.duration_s, done.message
    j.tests_reported, j.tests_ran, j.tests_counted = done.tests_reported, done.tests_ran, done.tests_counted
    j.findings, j.metrics = json.dumps(list(done.findings)), json.dumps(list(done.metrics))
    j.attempts, j.finished_at = done.attempts, datetime.now(timezone.utc)
    s.add_all(TestOutcomeRow(run_id=j.run_id, job_id=j.id, suite=j.suite, test_id=r.test_id,
                             outcome=r.outcome.value, duration_s=r.duration_s, message=r.message)
              for r in results)


def finish_run(s: Session, run_id: int, status: RunStatus, summary: str, findings: Sequence[str]) -> None:
    r = s.get(ValidationRunRow, run_id)
    assert r is not None, run_id
    r.status, r.summary, r.findings = status, summary, json.dumps(list(findings))
    r.finished_at = datetime.now(timezone.utc)


# -- reads ---------------------------------------------------------------------------------------

def get_run(s: Session, run_id: int) -> RunInfo | None:
    row = s.get(ValidationRunRow, run_id)
    return _run(row) if row else None


def no_such_run(run_id: int) -> str:
    """The one line for a run id this fork's store does not have, and where to find the runs."""
    return (f"no validation run {run_id} in this fork's store; `forkflow serve` lists the runs on its "
            "/validation page (each `validate --json` prints its run_id), or check --store")


def runs_for_rev(s: Session, fid: int, rev: str, tier: Tier | None = None) -> list[RunInfo]:
    """Runs of one fork commit (optionally one tier), newest first."""
    q = select(ValidationRunRow).where(ValidationRunRow.fork_id == fid, ValidationRunRow.rev == rev)
    if tier is not None:
        q = q.where(ValidationRunRow.tier == tier.value)
    return [_run(r) for r in s.scalars(q.order_by(desc(ValidationRunRow.id)))]


def latest_runs(s: Session, fid: int, tier: Tier | None = None, limit: int = 20) -> list[RunInfo]:
    """The newest runs of a fork, newest first."""
    q = select(ValidationRunRow).where(ValidationRunRow.fork_id == fid)
    if tier is not None:
        q = q.where(ValidationRunRow.tier == tier.value)
    return [_run(r) for r in s.scalars(q.order_by(desc(ValidationRunRow.id)).limit(limit))]


def jobs_of_run(s: Session, run_id: int) -> list[JobInfo]:
    q = select(ValidationJobRow).where(ValidationJobRow.run_id == run_id).order_by(ValidationJobRow.id)
    return [_job(j) for j in s.scalars(q)]


def test_outcomes(s: Session, run_id: int, *, bad_only: bool = False,
                  suite: str | None = None) -> list[TestOutcomeInfo]:
    """Per-test outcomes of a run; `bad_only` keeps FAIL and ERROR."""
    q = select(TestOutcomeRow).where(TestOutcomeRow.run_id == run_id)
    if bad_only:
        q = q.where(TestOutcomeRow.outcome.in_([TestOutcome.FAIL.value, TestOutcome.ERROR.value]))
    if suite is not None:
        q = q.where(TestOutcomeRow.suite == suite)
    return [TestOutcomeInfo(t.run_id, t.job_id, t.suite, t.test_id, TestOutcome(t.outcome),
                            t.duration_s, t.message) for t in s.scalars(q.order_by(TestOutcomeRow.id))]


def outcomes_of_tests(s: Session, run_ids: Sequence[int], test_ids: Iterable[str]) -> dict[int, list[TestOutcomeInfo]]:
    """The outcomes of `test_ids` in each of `run_ids` (in each run's order), without the rest."""
    out: dict[int, list[TestOutcomeInfo]] = {i: [] for i in run_ids}
    tests = sorted(set(test_ids))
    rows: list[TestOutcomeRow] = []
    for i in range(0, len(run_ids), 500):
        for j in range(0, len(tests), 500):
            rows += s.scalars(select(TestOutcomeRow).where(TestOutcomeRow.run_id.in_(list(run_ids[i:i + 500])),
                                                           TestOutcomeRow.test_id.in_(tests[j:j + 500])))
    for t in sorted(rows, key=lambda r: r.id):
        out[t.run_id].append(TestOutcomeInfo(t.run_id, t.job_id, t.suite, t.test_id, TestOutcome(t.outcome),
                                             t.duration_s, t.message))
    return out


def last_green_run(s: Session, fid: int, tier: Tier) -> RunInfo | None:
    """The newest PASS run of a tier that ran it whole (no test selection, not a rerun, not L3)."""
    q = (select(ValidationRunRow).where(ValidationRunRow.fork_id == fid, ValidationRunRow.tier == tier.value,
                                        ValidationRunRow.status == RunStatus.PASS)
         .order_by(desc(ValidationRunRow.id)).limit(50))
    for r in s.scalars(q):
        if r.base is None and r.parent_run_id is None and r.trigger != "l3":
            return _run(r)
    return None


def last_full_job(s: Session, fid: int, suite: str, green: bool = False) -> JobInfo | None:
    """The newest job of `suite` that ran the whole suite (no test selection) and reported."""
    q = (select(ValidationJobRow).join(ValidationRunRow, ValidationRunRow.id == ValidationJobRow.run_id)
         .where(ValidationRunRow.fork_id == fid, ValidationJobRow.suite == suite,
                ValidationJobRow.narrowed == 0, ValidationJobRow.tests_reported > 0)
         .order_by(desc(ValidationJobRow.id)).limit(1))
    if green:
        q = q.where(ValidationJobRow.status == RunStatus.PASS)
    j = s.scalar(q)
    return _job(j) if j else None


def suites_of_test(s: Session, fid: int, test: str) -> list[str]:
    """The suites whose stored runs of this fork have a test with this id."""
    rows = s.scalars(select(TestOutcomeRow.suite).distinct().join(
        ValidationRunRow, ValidationRunRow.id == TestOutcomeRow.run_id).where(
        ValidationRunRow.fork_id == fid, TestOutcomeRow.test_id == test))
    return sorted(rows)


def known_tests(s: Session, job_id: int) -> tuple[str, ...]:
    q = select(TestOutcomeRow.test_id).where(TestOutcomeRow.job_id == job_id).order_by(TestOutcomeRow.id)
    return tuple(s.scalars(q))


def cofailure_history(s: Session, fid: int, limit: int = 1000) -> list[HistoryEntry]:
    """The newest finished runs as (changed files, failed (suite, test id)) for test selection."""
    runs = s.execute(select(ValidationRunRow.id, ValidationRunRow.changed_files).where(
        ValidationRunRow.fork_id == fid, ValidationRunRow.status.in_([RunStatus.PASS, RunStatus.FAIL]))
        .order_by(desc(ValidationRunRow.id)).limit(limit)).all()
    if not runs:
        return []
    ids = [r.id for r in runs]
    failed: dict[int, set[tuple[str, str]]] = {i: set() for i in ids}
    for chunk in range(0, len(ids), 500):
        q = select(TestOutcomeRow.run_id, TestOutcomeRow.suite, TestOutcomeRow.test_id).where(
            TestOutcomeRow.run_id.in_(ids[chunk:chunk + 500]),
            TestOutcomeRow.outcome.in_([TestOutcome.FAIL.value, TestOutcome.ERROR.value]))
        for run_id, suite, test_id in s.execute(q):
            failed[run_id].add((suite, test_id))
    return [HistoryEntry(frozenset(json.loads(r.changed_files)), frozenset(failed[r.id])) for r in runs]


# -- L3 ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SignoffInfo:
    id: int
    request_id: int
    run_id: int | None
    owner: str
    verdict: str  # accept | reject
    note: str
    signed_at: datetime


@dataclass(frozen=True, slots=True)
class L3RequestInfo:
    id: int
    suite: str
    rev: Sha
    requested_by: str
    note: str
    requested_at: datetime
    runs: tuple[RunInfo, ...]
    signoffs: tuple[SignoffInfo, ...]

    @property
    def state(self) -> str:
        """REQUESTED, RUNNING, RAN (waiting for sign-off), ACCEPTED or REJECTED."""
        if self.signoffs:
            return "ACCEPTED" if self.signoffs[-1].verdict == "accept" else "REJECTED"
        if not self.runs:
            return "REQUESTED"
        return "RUNNING" if self.runs[0].status == RunStatus.RUNNING else "RAN"


def add_l3_request(s: Session, fid: int, suite: str, rev: Sha, by: str, note: str) -> int:
    row = L3RequestRow(fork_id=fid, suite=suite, rev=rev, requested_by=by, note=note)
    s.add(row)
    s.flush()
    return row.id


def add_signoff(s: Session, request_id: int, run_id: int | None, owner: str, verdict: str, note: str) -> int:
    row = L3SignoffRow(request_id=request_id, run_id=run_id, owner=owner, verdict=verdict, note=note)
    s.add(row)
    s.flush()
    return row.id


def _requests(s: Session, rows: Sequence[L3RequestRow]) -> list[L3RequestInfo]:
    """The requests of `rows`, in their order, with their runs and sign-offs: three queries in all."""
    ids = [r.id for r in rows]
    runs: dict[int, list[RunInfo]] = defaultdict(list)
    signs: dict[int, list[SignoffInfo]] = defaultdict(list)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for x in s.scalars(select(ValidationRunRow).where(ValidationRunRow.l3_request_id.in_(chunk))
                           .order_by(desc(ValidationRunRow.id))):
            runs[x.l3_request_id or 0].append(_run(x))
        for y in s.scalars(select(L3SignoffRow).where(L3SignoffRow.request_id.in_(chunk))
                           .order_by(L3SignoffRow.id)):
            signs[y.request_id].append(SignoffInfo(y.id, y.request_id, y.run_id, y.owner, y.verdict, y.note,
                                                   y.signed_at))
    return [L3RequestInfo(r.id, r.suite, Sha(r.rev), r.requested_by, r.note, r.requested_at,
                          tuple(runs[r.id]), tuple(signs[r.id])) for r in rows]


def get_l3_request(s: Session, fid: int, request_id: int) -> L3RequestInfo | None:
    r = s.get(L3RequestRow, request_id)
    return _requests(s, [r])[0] if r is not None and r.fork_id == fid else None


def l3_requests(s: Session, fid: int, limit: int = 100) -> list[L3RequestInfo]:
    rows = s.scalars(select(L3RequestRow).where(L3RequestRow.fork_id == fid)
                     .order_by(desc(L3RequestRow.id)).limit(limit)).all()
    return _requests(s, rows)
