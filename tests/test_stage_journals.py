"""The core stages run on their collaborators alone: a journal held in memory, no store, no Context."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from forkflow.git.repo import Repo
from forkflow.models import MetricPoint, Sha
from forkflow.regress.alerts import AlertDraft, AlertStatus
from forkflow.regress.records import Alert, BisectionRecord
from forkflow.regress.service import detect
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers import records as tq
from forkflow.tiers.reports import TestOutcome
from forkflow.tiers.tiers import RunStatus, Tier
from forkflow.triage import records as ts
from forkflow.triage.models import Classification, Diagnosis, Failure
from forkflow.triage.triage import Triager, TriageSettings, triage_run

CUDA = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _run(run_id: int, rev: str, base: str | None = None) -> tq.RunInfo:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return tq.RunInfo(run_id, 1, Tier.L1, Sha(rev), Sha(base) if base else None, RunStatus.FAIL, "local",
                      "validate", now, now, 0, (), ("unit",), {}, (), "", None, None)


class MemoryTriageJournal:
    """Runs and their failed tests, held in a dict; what triage records is kept for the test to read."""

    def __init__(self, runs: Sequence[tuple[tq.RunInfo, Sequence[tuple[str, str]]]]) -> None:
        self.runs = {r.id: r for r, _ in runs}
        self.bad = {r.id: [tq.TestOutcomeInfo(r.id, 1, "unit", t, TestOutcome.FAIL, 0.1, m) for t, m in failed]
                    for r, failed in runs}
        self.failures: dict[int, list[Failure]] = {}
        self.verdicts: dict[int, list[Diagnosis]] = {}

    def run(self, run_id: int) -> tq.RunInfo | None:
        return self.runs.get(run_id)

    def runs_for_rev(self, rev: str, tier: Tier) -> list[tq.RunInfo]:
        return [r for r in reversed(self.runs.values()) if r.rev == rev and r.tier is tier]

    def latest_runs(self, tier: Tier | None, limit: int) -> list[tq.RunInfo]:
        return [r for r in reversed(self.runs.values()) if tier is None or r.tier is tier][:limit]

    def jobs_of_run(self, run_id: int) -> list[tq.JobInfo]:
        return []

    def bad_outcomes(self, run_id: int) -> list[tq.TestOutcomeInfo]:
        return self.bad.get(run_id, [])

    def test_outcomes(self, run_id: int) -> list[tq.TestOutcomeInfo]:
        return self.bad.get(run_id, [])

    def outcomes_of_tests(self, run_ids: Sequence[int], tests: Iterable[str]) -> dict[int, list[tq.TestOutcomeInfo]]:
        wanted = set(tests)
        return {i: [o for o in self.bad.get(i, []) if o.test_id in wanted] for i in run_ids}

    def suites_of_test(self, test: str) -> list[str]:
        return ["unit"]

    def stored_failures(self, run_id: int) -> list[Failure] | None:
        return self.failures.get(run_id)

    def failures_found(self, run_id: int, failures: Sequence[Failure]) -> None:
        self.failures.setdefault(run_id, list(failures))

    def stored_verdicts(self, run_id: int) -> list[Diagnosis] | None:
        return self.verdicts.get(run_id)

    def verdicts_found(self, run_id: int, verdicts: Sequence[Diagnosis]) -> None:
        self.verdicts[run_id] = list(verdicts)

    def verdicts_of_tests(self, tests: Sequence[str]) -> list[ts.VerdictPoint]:
        return [ts.VerdictPoint(run_id, v.failure.test, v.failure.signature.key, v.classification, v.reason,
                                v.reruns) for run_id, vs in sorted(self.verdicts.items()) for v in vs
                if v.failure.test in tests]

    def latest_bisection(self, metric: str, good: str, bad: str) -> BisectionRecord | None:
        return None

    def bisection_done(self, doc: dict[str, Any]) -> int:
        return 1

    def tracking(self, sink: str) -> dict[str, ts.Tracking]:
        return {}

    def tracked(self, record: ts.Tracking) -> None:
        pass


def test_triage_run_classifies_from_a_journal_in_memory(builder: ForkBuilder) -> None:
    base = builder.upstream_commit({"a.py": "A = 1\n"}, "Initial")
    builder.branch_fork()
    unit = builder.fork_commit({"f.py": "F = 1\n"}, "[fork] feature")
    journal = MemoryTriageJournal([(_run(1, base), [("test_mm", CUDA)]),
                                   (_run(2, unit, base), [("test_mm", CUDA), ("test_new", "KeyError: 'x'")])])
    triager = Triager(Repo.open(builder.f.path), (), journal, TriageSettings(reruns=0))
    report = triage_run(triager, 2)
    got = {v.failure.test: v.classification for v in report.verdicts}
    assert got == {"test_mm": Classification.BROKEN_TRUNK, "test_new": Classification.NEW}
    assert report.compared_with == (1,)
    assert journal.verdicts[2] == list(report.verdicts) and len(journal.failures[2]) == 2


class MemoryMetricJournal:
    def __init__(self, series: dict[str, list[MetricPoint]]) -> None:
        self.by_name = series
        self.drafts: list[AlertDraft] = []

    def series(self, pattern: str) -> dict[str, list[MetricPoint]]:
        return dict(sorted(self.by_name.items()))

    def alerts_found(self, drafts: Sequence[AlertDraft]) -> list[Alert]:
        self.drafts += drafts
        now = datetime(2026, 1, 1, tzinfo=timezone.utc)
        return [Alert(i + 1, d.good_rev, d.bad_rev, d.direction, AlertStatus.OPEN, d.members, now)
                for i, d in enumerate(drafts)]


def test_detect_reads_the_series_once_and_records_one_alert_per_step() -> None:
    from forkflow.models import Better

    values = [100.0 + 0.1 * (i % 3) for i in range(20)] + [120.0 + 0.1 * (i % 3) for i in range(20)]
    points = [MetricPoint(name="mm:ms", rev=Sha(f"{i:040x}"), value=v, unit="ms", better=Better.LOWER,
                          samples=(v,), suite="perf", run_id=i, measured_at=i, commit_date=1000 + i)
              for i, v in enumerate(values)]
    journal = MemoryMetricJournal({"mm:ms": points})
    found = detect(journal)
    assert found.metrics == ("mm:ms",)
    [alert] = found.alerts
    assert alert.good_rev == points[19].rev and alert.bad_rev == points[20].rev
    assert alert.status is AlertStatus.OPEN and len(journal.drafts) == 1
