"""What triage reads and records: a small interface the triage stages use, implemented once over
the store (issue 17); `forkflow.triage.triage.Triager` carries it to the stages."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from forkflow.store.session import Store
from forkflow.tiers import records as tq
from forkflow.tiers.tiers import Tier
from forkflow.triage import records as ts
from forkflow.triage.models import Diagnosis, Failure

if TYPE_CHECKING:  # regress/ pulls numpy: `forkflow triage` starts without it
    from forkflow.regress.records import BisectionRecord

# One rerun of some failed tests of a run: test id -> passed?
Rerunner = Callable[[int, Sequence[str]], dict[str, bool]]


class TriageJournal(Protocol):
    def run(self, run_id: int) -> tq.RunInfo | None: ...
    def runs_for_rev(self, rev: str, tier: Tier) -> list[tq.RunInfo]: ...
    def latest_runs(self, tier: Tier | None, limit: int) -> list[tq.RunInfo]: ...
    def jobs_of_run(self, run_id: int) -> list[tq.JobInfo]: ...
    def bad_outcomes(self, run_id: int) -> list[tq.TestOutcomeInfo]: ...
    def test_outcomes(self, run_id: int) -> list[tq.TestOutcomeInfo]: ...
    def outcomes_of_tests(self, run_ids: Sequence[int], tests: Iterable[str]) -> dict[int, list[tq.TestOutcomeInfo]]: ...
    def suites_of_test(self, test: str) -> list[str]: ...
    def stored_failures(self, run_id: int) -> list[Failure] | None: ...
    def failures_found(self, run_id: int, failures: Sequence[Failure]) -> None: ...
    def stored_verdicts(self, run_id: int) -> list[Diagnosis] | None: ...
    def verdicts_found(self, run_id: int, verdicts: Sequence[Diagnosis]) -> None: ...
    def verdicts_of_tests(self, tests: Sequence[str]) -> list[ts.VerdictPoint]: ...
    def latest_bisection(self, metric: str, good: str, bad: str) -> BisectionRecord | None: ...
    def bisection_done(self, doc: dict[str, Any]) -> int: ...
    def tracking(self, sink: str) -> dict[str, ts.Tracking]: ...
    def tracked(self, record: ts.Tracking) -> None: ...


class StoreTriageJournal:
    """The triage journal over forkflow's store, for one fork."""

    def __init__(self, store: Store, fork_id: int) -> None:
        self.store = store
        self.fork_id = fork_id

    def run(self, run_id: int) -> tq.RunInfo | None:
        """Run `run_id` when it is this fork's."""
        with self.store.session_scope() as s:
            run = tq.get_run(s, run_id)
        return run if run is not None and run.fork_id == self.fork_id else None

    def runs_for_rev(self, rev: str, tier: Tier) -> list[tq.RunInfo]:
        with self.store.session_scope() as s:
            return tq.runs_for_rev(s, self.fork_id, rev, tier)

    def latest_runs(self, tier: Tier | None, limit: int) -> list[tq.RunInfo]:
        """The newest runs of `tier` (None: of every tier), newest first."""
        with self.store.session_scope() as s:
            return tq.latest_runs(s, self.fork_id, tier, limit=limit)

    def jobs_of_run(self, run_id: int) -> list[tq.JobInfo]:
        with self.store.session_scope() as s:
            return tq.jobs_of_run(s, run_id)

    def bad_outcomes(self, run_id: int) -> list[tq.TestOutcomeInfo]:
        with self.store.session_scope() as s:
            return tq.test_outcomes(s, run_id, bad_only=True)

    def test_outcomes(self, run_id: int) -> list[tq.TestOutcomeInfo]:
        with self.store.session_scope() as s:
            return tq.test_outcomes(s, run_id)

    def outcomes_of_tests(self, run_ids: Sequence[int], tests: Iterable[str]) -> dict[int, list[tq.TestOutcomeInfo]]:
        with self.store.session_scope() as s:
            return tq.outcomes_of_tests(s, run_ids, tests)

    def suites_of_test(self, test: str) -> list[str]:
        with self.store.session_scope() as s:
            return tq.suites_of_test(s, self.fork_id, test)

    def stored_failures(self, run_id: int) -> list[Failure] | None:
        with self.store.session_scope() as s:
            return ts.stored_failures(s, run_id)

    def failures_found(self, run_id: int, failures: Sequence[Failure]) -> None:
        """Keep a run's failures unless another triage stored them first (it may have raced us)."""
        with self.store.session_scope() as s:
            if ts.stored_failures(s, run_id) is None:
                ts.save_failures(s, self.fork_id, run_id, failures)

    def stored_verdicts(self, run_id: int) -> list[Diagnosis] | None:
        with self.store.session_scope() as s:
            return ts.stored_verdicts(s, run_id)

    def verdicts_found(self, run_id: int, verdicts: Sequence[Diagnosis]) -> None:
        with self.store.session_scope() as s:
            ts.save_verdicts(s, run_id, verdicts)

    def verdicts_of_tests(self, tests: Sequence[str]) -> list[ts.VerdictPoint]:
        with self.store.session_scope() as s:
            return ts.verdicts_of_tests(s, self.fork_id, tests)

    def latest_bisection(self, metric: str, good: str, bad: str) -> BisectionRecord | None:
        from forkflow.regress import records as rrecords

        with self.store.session_scope() as s:
            return rrecords.latest_bisection(s, self.fork_id, metric, good, bad)

    def bisection_done(self, doc: dict[str, Any]) -> int:
        from forkflow.regress import records as rrecords

        with self.store.session_scope() as s:
            return rrecords.save_bisection(s, self.fork_id, None, doc)

    def tracking(self, sink: str) -> dict[str, ts.Tracking]:
        with self.store.session_scope() as s:
            return ts.tracking(s, self.fork_id, sink)

    def tracked(self, record: ts.Tracking) -> None:
        with self.store.session_scope() as s:
            ts.save_tracking(s, self.fork_id, record)
