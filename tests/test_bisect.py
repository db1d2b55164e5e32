"""The bisection loop over scripted probes: every bad input of the issue, and the round bounds."""
from __future__ import annotations

import math
import threading

import numpy as np

from forkflow.bisect.bisector import Bisector, Candidate, Mode, Status
from forkflow.bisect.probes import Measurement, MeasureStatus
from forkflow.bisect.verdict import Verdict
from forkflow.models import Better, Sha


class FakeProbe:
    """Latency 100 ms (3 % noise) before the culprit, +5 % from it on."""

    def __init__(self, culprit: int, *, seed: int = 0, shift: float = 0.05, crash: float = 0.0,
                 missing: frozenset[int] = frozenset(), untestable: frozenset[int] = frozenset(),
                 flaky_fail: float = 0.0) -> None:
        self.culprit, self.shift, self.crash = culprit, shift, crash
        self.missing, self.untestable, self.flaky_fail = missing, untestable, flaky_fail
        self.rng = np.random.default_rng(seed)
        self.lock = threading.Lock()
        self.calls: list[int] = []

    def measure(self, rev: Sha) -> Measurement:
        i = int(rev)
        with self.lock:
            self.calls.append(i)
            r, noise = float(self.rng.random()), float(self.rng.standard_normal())
        if i in self.untestable:
            return Measurement(MeasureStatus.UNTESTABLE, detail="exit 125: build failed")
        if i in self.missing:
            return Measurement(MeasureStatus.MISSING, detail="metric 'lat' not reported")
        if r < self.crash:
            return Measurement(MeasureStatus.ERROR, detail="exit 139: segfault")
        bad = i >= self.culprit
        v = 100 * (1 + self.shift * bad) * (1 + 0.03 * noise)
        return Measurement(MeasureStatus.OK, (v,), unit="ms", better=Better.LOWER)

    def close(self) -> None:
        pass


class PassFailProbe(FakeProbe):
    def measure(self, rev: Sha) -> Measurement:
        i = int(rev)
        with self.lock:
            self.calls.append(i)
            r = float(self.rng.random())
        if i in self.untestable:
            return Measurement(MeasureStatus.UNTESTABLE, detail="exit 125")
        failed = i >= self.culprit or r < self.flaky_fail
        return Measurement(MeasureStatus.OK, passed=not failed)


def cands(n: int) -> list[Candidate]:
    return [Candidate(Sha(str(i)), f"commit {i}") for i in range(n)]


def test_bisect_finds_culprit_in_log2_rounds() -> None:
    for seed, culprit in ((1, 37), (2, 128), (3, 1)):
        out = Bisector(cands(129), FakeProbe(culprit, seed=seed)).run()
        assert out.status is Status.FOUND and out.culprit == culprit
        assert len(out.rounds) <= math.log2(128) + 2
        assert out.confidence > 0.9
        assert all(r.measurements > 0 for r in out.rounds)


def test_bisect_parallel_k4_needs_fewer_rounds() -> None:
    out = Bisector(cands(129), FakeProbe(77, seed=4), parallel=4).run()
    assert out.status is Status.FOUND and out.culprit == 77
    assert len(out.rounds) <= math.ceil(math.log(128, 5)) + 2
    assert max(len(r.probes) for r in out.rounds) == 4


def test_bisect_no_difference_between_the_ends_names_nobody() -> None:
    out = Bisector(cands(20), FakeProbe(10, seed=5, shift=0.0)).run()
    assert out.status is Status.NO_DIFFERENCE and out.culprit is None and out.suspects == ()
    assert "do not differ" in out.message
    assert len(out.rounds) == 1  # only the ends were measured


def test_bisect_good_and_bad_swapped_is_not_a_regression() -> None:
    # the "good" end is slower: a lower-is-better metric improved between the ends
    out = Bisector(cands(20), FakeProbe(10, seed=6, shift=-0.08)).run()
    assert out.status is Status.NOT_A_REGRESSION and out.culprit is None
    assert "swapped" in out.message


def test_bisect_metric_missing_at_some_commits_skips_them() -> None:
    out = Bisector(cands(33), FakeProbe(20, seed=7, missing=frozenset({16, 18}))).run()
    assert out.status is Status.FOUND and out.culprit == 20
    assert set(out.skipped) <= {16, 18} and out.skipped
    assert "not reported" in next(iter(out.skipped.values()))


def test_bisect_skipped_neighbour_makes_suspects() -> None:
    out = Bisector(cands(17), FakeProbe(9, seed=8, untestable=frozenset({8}))).run()
    assert out.status is Status.SUSPECTS and out.culprit is None
    assert out.suspects == (8, 9)


def test_bisect_every_commit_untestable() -> None:
    out = Bisector(cands(6), FakeProbe(3, seed=9, untestable=frozenset({1, 2, 3, 4}))).run()
    assert out.status is Status.SUSPECTS and out.suspects == (1, 2, 3, 4, 5)
    assert "untestable" in out.message
    ends = Bisector(cands(6), FakeProbe(3, seed=9, untestable=frozenset(range(6)))).run()
    assert ends.status is Status.UNTESTABLE and "cannot measure the good end and the bad end" in ends.message


def test_bisect_survives_a_command_that_crashes_at_random() -> None:
    probe = FakeProbe(45, seed=10, crash=0.25)
    out = Bisector(cands(65), probe, parallel=2).run()
    assert out.status is Status.FOUND and out.culprit == 45


def test_bisect_pass_fail_with_a_flaky_test() -> None:
    # the test fails 20 % of the time everywhere, and always from commit 21 on
    out = Bisector(cands(41), PassFailProbe(21, seed=11, flaky_fail=0.2), mode=Mode.PASS_FAIL).run()
    assert out.status is Status.FOUND and out.culprit == 21
    reruns = [len(v) for v in out.runs.values()]
    assert max(reruns) >= 3  # failures were rerun before they counted


def test_bisect_pass_fail_bad_end_passes_means_no_difference() -> None:
    out = Bisector(cands(10), PassFailProbe(99, seed=12), mode=Mode.PASS_FAIL).run()
    assert out.status is Status.NO_DIFFERENCE and "passes at the bad end" in out.message


def test_bisect_pass_fail_verdicts_recorded_per_round() -> None:
    out = Bisector(cands(9), PassFailProbe(5, seed=13), mode=Mode.PASS_FAIL).run()
    assert out.culprit == 5
    decided = {i: v for r in out.rounds for i, v, _ in r.verdicts}
    assert decided[4] is Verdict.GOOD and decided[5] is Verdict.BAD


def test_suite_test_probe_reads_one_test_from_the_suite_report() -> None:
    from forkflow.bisect.probes import MeasureStatus
    from forkflow.bisect.testprobe import outcome_of_test, suite_command
    from forkflow.tiers.reports import ParsedReport, TestOutcome, TestResult
    from forkflow.tiers.tiers import ReportFormat, Suite, Tier

    suite = Suite("unit", Tier.L1, "pytest --junitxml={report} {tests}", ReportFormat.JUNIT, all_tests="tests")
    whole = Suite("lit", Tier.L1, "lit -v {report}", ReportFormat.JUNIT)
    assert suite_command(suite, "tests/t.py::test_a b", "/r.xml", "/a") == "pytest --junitxml=/r.xml 'tests/t.py::test_a b'"
    assert suite_command(suite, "[unit]", "/r.xml", "/a") == "pytest --junitxml=/r.xml tests"
    assert suite_command(whole, "x", "/r.xml", "/a") == "lit -v /r.xml"
    report = ParsedReport((TestResult("t::a", TestOutcome.PASS), TestResult("t::b", TestOutcome.FAIL),
                           TestResult("t::c", TestOutcome.SKIP)))
    assert outcome_of_test(suite, "t::a", report, 1, "").passed is True
    assert outcome_of_test(suite, "t::b", report, 1, "").passed is False
    assert outcome_of_test(suite, "t::c", report, 0, "").passed is True
    assert outcome_of_test(suite, "t::gone", report, 1, "").status is MeasureStatus.UNTESTABLE
    assert outcome_of_test(suite, "t::a", report, 125, "no build").status is MeasureStatus.UNTESTABLE
    crashed = outcome_of_test(suite, "t::a", ParsedReport(problem="no report was written", exists=False), 139, "")
    assert crashed.status is MeasureStatus.ERROR and "no report" in crashed.detail
    assert outcome_of_test(suite, "[unit]", report, 0, "").passed is True
    assert outcome_of_test(suite, "[unit]", ParsedReport(problem="empty"), 0, "").passed is False
