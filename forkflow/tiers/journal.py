"""What validation reads and records: a small interface the validation steps use, implemented once
over the store (issue 17), so validation, L3 and nightly take it instead of a store and a fork id."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from forkflow.models import MetricPoint, Sha
from forkflow.regress import records as regress_records
from forkflow.store.session import Store
from forkflow.tiers import records as q
from forkflow.tiers.reports import TestResult
from forkflow.tiers.selection import HISTORY_RUNS, HistoryEntry
from forkflow.tiers.tiers import RunStatus, Tier


@dataclass(frozen=True, slots=True)
class SuiteHistory:
    """What test selection knows of one suite: its newest whole jobs and their tests."""

    last_green_ran: int | None            # tests the newest green whole job ran
    known: tuple[str, ...]                # tests of the newest whole job (when tests can be selected)
    recent_bad: frozenset[str] | None     # tests that failed in the newest whole job's run


class RunJournal(Protocol):
    def suite_history(self, suites: Sequence[tuple[str, bool]]) -> dict[str, SuiteHistory]: ...
    def cofailures(self) -> list[HistoryEntry]: ...
    def last_green_run(self, tier: Tier) -> q.RunInfo | None: ...
    def run_started(self, run: q.NewRun, jobs: Sequence[q.NewJob]) -> tuple[int, list[int]]: ...
    def job_finished(self, job_row: int, done: q.JobFinish, results: Iterable[TestResult],
                     points: Sequence[MetricPoint]) -> None: ...
    def run_finished(self, run_id: int, lost: Sequence[tuple[int, q.JobFinish]], status: RunStatus, summary: str,
                     findings: Sequence[str]) -> None: ...
    def run(self, run_id: int) -> q.RunInfo | None: ...
    def test_outcomes(self, run_id: int) -> list[q.TestOutcomeInfo]: ...
    def runs_for_rev(self, rev: Sha, tier: Tier) -> list[q.RunInfo]: ...
    def jobs_of_run(self, run_id: int) -> list[q.JobInfo]: ...
    def l3_request_added(self, suite: str, rev: Sha, by: str, note: str) -> int: ...
    def l3_request(self, request_id: int) -> q.L3RequestInfo | None: ...
    def l3_requests(self, limit: int) -> list[q.L3RequestInfo]: ...
    def signed_off(self, request_id: int, run_id: int, owner: str, verdict: str, note: str) -> int: ...


class StoreRunJournal:
    """The run journal over forkflow's store, for one fork."""

    def __init__(self, store: Store, fork_id: int) -> None:
        self.store = store
        self.fork_id = fork_id

    def suite_history(self, suites: Sequence[tuple[str, bool]]) -> dict[str, SuiteHistory]:
        """(suite, can select tests) -> its history; one read for all suites."""
        out = {}
        with self.store.session_scope() as s:
            for name, selectable in suites:
                full = q.last_full_job(s, self.fork_id, name)
                green = q.last_full_job(s, self.fork_id, name, green=True)
                known = q.known_tests(s, full.id) if full and selectable else ()
                bad = frozenset(t.test_id for t in q.test_outcomes(s, full.run_id, bad_only=True, suite=name)) \
                    if full is not None else None
                out[name] = SuiteHistory(green.tests_ran if green else None, known, bad)
        return out

    def cofailures(self) -> list[HistoryEntry]:
        with self.store.session_scope() as s:
            return q.cofailure_history(s, self.fork_id, limit=HISTORY_RUNS)

    def last_green_run(self, tier: Tier) -> q.RunInfo | None:
        with self.store.session_scope() as s:
            return q.last_green_run(s, self.fork_id, tier)

    def run_started(self, run: q.NewRun, jobs: Sequence[q.NewJob]) -> tuple[int, list[int]]:
        with self.store.session_scope() as s:
            return q.create_run(s, self.fork_id, run, jobs)

    def job_finished(self, job_row: int, done: q.JobFinish, results: Iterable[TestResult],
                     points: Sequence[MetricPoint]) -> None:
        """One transaction: the job, its per-test outcomes and (L2) its metric points."""
        with self.store.session_scope() as s:
            q.finish_job(s, job_row, done, results)
            if points:
                regress_records.add_metric_points(s, self.fork_id, list(points))

    def run_finished(self, run_id: int, lost: Sequence[tuple[int, q.JobFinish]], status: RunStatus, summary: str,
                     findings: Sequence[str]) -> None:
        with self.store.session_scope() as s:
            for row, done in lost:
                q.finish_job(s, row, done, ())
            q.finish_run(s, run_id, status, summary, findings)

    def run(self, run_id: int) -> q.RunInfo | None:
        """Run `run_id` when it is this fork's."""
        with self.store.session_scope() as s:
            run = q.get_run(s, run_id)
        return run if run is not None and run.fork_id == self.fork_id else None

    def test_outcomes(self, run_id: int) -> list[q.TestOutcomeInfo]:
        with self.store.session_scope() as s:
            return q.test_outcomes(s, run_id)

    def runs_for_rev(self, rev: Sha, tier: Tier) -> list[q.RunInfo]:
        with self.store.session_scope() as s:
            return q.runs_for_rev(s, self.fork_id, rev, tier)

    def jobs_of_run(self, run_id: int) -> list[q.JobInfo]:
        with self.store.session_scope() as s:
            return q.jobs_of_run(s, run_id)

    def l3_request_added(self, suite: str, rev: Sha, by: str, note: str) -> int:
        with self.store.session_scope() as s:
            return q.add_l3_request(s, self.fork_id, suite, rev, by, note)

    def l3_request(self, request_id: int) -> q.L3RequestInfo | None:
        with self.store.session_scope() as s:
            return q.get_l3_request(s, self.fork_id, request_id)

    def l3_requests(self, limit: int) -> list[q.L3RequestInfo]:
        with self.store.session_scope() as s:
            return q.l3_requests(s, self.fork_id, limit)

    def signed_off(self, request_id: int, run_id: int, owner: str, verdict: str, note: str) -> int:
        with self.store.session_scope() as s:
            return q.add_signoff(s, request_id, run_id, owner, verdict, note)
