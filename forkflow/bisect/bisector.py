"""The bisection loop: rounds of K probes, interleaved repeats, verdicts, a narrowed range.

`Bisector(candidates, probe, reporter)` knows nothing about git or the store: candidates are
commits in history order (the good end first, the bad end last), the probe measures one of
them, the reporter hears about progress.  The same loop serves the landing units of the fork
and the replayed prefixes of a bundle.
"""
from __future__ import annotations

import enum
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from forkflow.bisect.probes import Measurement, MeasureStatus, Probe
from forkflow.bisect.state import BisectState
from forkflow.bisect.verdict import (
    Judgement,
    Verdict,
    VerdictPolicy,
    ends_differ,
    is_worse,
    judge_pass_fail,
    judge_samples,
)
from forkflow.models import Better, Sha


class Mode(str, enum.Enum):
    PERF = "perf"
    PASS_FAIL = "pass-fail"


class Status(str, enum.Enum):
    FOUND = "found"                        # one culprit
    SUSPECTS = "suspects"                  # untestable commits hide which one of several
    NO_DIFFERENCE = "no-difference"        # the two ends do not differ
    NOT_A_REGRESSION = "not-a-regression"  # the bad end is better than the good end
    UNTESTABLE = "untestable"              # an end cannot be measured
    FLAKY = "flaky"                        # the failure at the bad end does not reproduce


@dataclass(frozen=True, slots=True)
class Candidate:
    sha: Sha
    subject: str = ""


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One round: the commits probed, how many measurements it took, what was decided."""

    number: int
    probes: tuple[int, ...]
    measurements: int
    verdicts: tuple[tuple[int, Verdict, float], ...]


@dataclass(frozen=True, slots=True)
class BisectOutcome:
    status: Status
    culprit: int | None
    suspects: tuple[int, ...]
    confidence: float
    rounds: tuple[RoundRecord, ...]
    samples: dict[int, tuple[float, ...]]
    runs: dict[int, tuple[bool, ...]]
    skipped: dict[int, str]
    judgements: dict[int, Judgement]
    message: str
    unit: str = ""
    better: Better | None = None

    @property
    def measurements(self) -> int:
        return sum(r.measurements for r in self.rounds)


class Reporter(Protocol):
    def round_started(self, number: int, probes: Sequence[Candidate]) -> None: ...

    def measured(self, candidate: Candidate, measurement: Measurement) -> None: ...

    def round_finished(self, record: RoundRecord) -> None: ...


class NullReporter:
    def round_started(self, number: int, probes: Sequence[Candidate]) -> None:
        pass

    def measured(self, candidate: Candidate, measurement: Measurement) -> None:
        pass

    def round_finished(self, record: RoundRecord) -> None:
        pass


@dataclass
class _Ledger:
    """Everything measured so far, by candidate index."""

    samples: dict[int, list[float]] = field(default_factory=dict)
    runs: dict[int, list[bool]] = field(default_factory=dict)
    errors: dict[int, int] = field(default_factory=dict)   # crashes in a row
    crashes: dict[int, int] = field(default_factory=dict)  # crashes in all
    ok: dict[int, int] = field(default_factory=dict)       # good measurements
    skipped: dict[int, str] = field(default_factory=dict)
    count: int = 0
    unit: str = ""
    better: Better | None = None


class Bisector:
    """Finds the first candidate that behaves like the bad end."""

    def __init__(self, candidates: Sequence[Candidate], probe: Probe, reporter: Reporter | None = None,
                 *, mode: Mode = Mode.PERF, policy: VerdictPolicy = VerdictPolicy(),
                 parallel: int = 1, better: Better | None = None) -> None:
        if len(candidates) < 2:
            raise ValueError("a bisection needs the good and the bad end")
        self.candidates = list(candidates)
        self.probe = probe
        self.reporter = reporter or NullReporter()
        self.mode = mode
        self.policy = policy
        self.parallel = max(1, parallel)
        self.log = _Ledger(better=better)
        self.rounds: list[RoundRecord] = []
        self.judgements: dict[int, Judgement] = {}
        self._pool = ThreadPoolExecutor(self.parallel) if self.parallel > 1 else None

    # -- measuring ---------------------------------------------------------
    def _measure(self, jobs: Sequence[int]) -> None:
        cands = [self.candidates[i] for i in jobs]
        if self._pool is not None:
            results = list(self._pool.map(lambda c: self.probe.measure(c.sha), cands))
        else:
            results = [self.probe.measure(c.sha) for c in cands]
        for i, m in zip(jobs, results):
            self._record(i, m)

    def _record(self, i: int, m: Measurement) -> None:
        log = self.log
        log.count += 1
        self.reporter.measured(self.candidates[i], m)
        if m.status is MeasureStatus.OK:
            log.errors.pop(i, None)
            log.ok[i] = log.ok.get(i, 0) + 1
            if m.passed is not None:
                log.runs.setdefault(i, []).append(m.passed)
            else:
                log.samples.setdefault(i, []).extend(m.samples)
            log.unit = log.unit or m.unit
            if log.better is None and m.better is not None:
                log.better = m.better
        elif m.status is MeasureStatus.ERROR:
            # a crash is retried; a commit is skipped after max_errors crashes in a row before it
            # ever measured (it does not build or run), or when it has crashed more often than it
            # measured (at least 4 * max_errors times).  A commit that measured before and then
            # crashes a few times in a row is a flaky command, not an untestable commit.
            log.errors[i] = log.errors.get(i, 0) + 1
            log.crashes[i] = log.crashes.get(i, 0) + 1
            ok = log.ok.get(i, 0)
            if (ok == 0 and log.errors[i] >= self.policy.max_errors
                    or log.crashes[i] >= 4 * self.policy.max_errors and log.crashes[i] > ok):
                log.skipped[i] = f"crashed {log.crashes[i]} times ({m.detail})"
        else:
            log.skipped[i] = m.detail or m.status.value

    def _finish_round(self, number: int, probes: Sequence[int], before: int,
                      decided: dict[int, Judgement]) -> None:
        rec = RoundRecord(number, tuple(probes), self.log.count - before,
                          tuple((i, j.verdict, round(j.confidence, 4)) for i, j in sorted(decided.items())))
        self.rounds.append(rec)
        self.reporter.round_finished(rec)

    # -- the loop ------------------------------------------------------------
    def run(self) -> BisectOutcome:
        try:
            early = self._ends()
            if early is not None:
                return early
            state = BisectState(len(self.candidates))
            while not state.is_done:
                probes = state.next_probes(self.parallel)
                decided = self._round(len(self.rounds), probes)
                state = state.with_verdicts({i: j.verdict for i, j in decided.items()})
            return self._outcome(state)
        finally:
            if self._pool is not None:
                self._pool.shutdown()

    def _ends(self) -> BisectOutcome | None:
        """Round 0: measure both ends until they clearly differ (or clearly do not)."""
        last = len(self.candidates) - 1
        self.reporter.round_started(0, [self.candidates[0], self.candidates[last]])
        before = self.log.count
        ends = [0, last]
        while True:
            if self.mode is Mode.PASS_FAIL:
                order = [i for i in ends if judge_pass_fail(self.log.runs.get(i, []), self.policy).verdict
                         is Verdict.UNSURE]
            else:  # interleaved: A B B A A B ...
                order = ends if len(self.log.samples.get(0, ())) % 2 == 0 else ends[::-1]
            self._measure(order)
            bad_end = [i for i in ends if i in self.log.skipped]
            if bad_end:
                self._finish_round(0, ends, before, {})
                which = " and ".join("the good end" if i == 0 else "the bad end" for i in bad_end)
                reasons = "; ".join(dict.fromkeys(self.log.skipped[i] for i in bad_end))
                return self._early(Status.UNTESTABLE, f"cannot measure {which}: {reasons}")
            verdict = self._ends_verdict()
            if verdict is not None:
                self._finish_round(0, ends, before, {last: verdict} if verdict.verdict is Verdict.BAD else {})
                return self._after_ends(verdict)

    def _ends_verdict(self) -> Judgement | None:
        last = len(self.candidates) - 1
        if self.mode is Mode.PASS_FAIL:
            good = judge_pass_fail(self.log.runs.get(0, []), self.policy)
            bad = judge_pass_fail(self.log.runs.get(last, []), self.policy)
            if good.verdict is Verdict.UNSURE or bad.verdict is Verdict.UNSURE:
                return None
            if good.verdict is Verdict.BAD:
                return Judgement(Verdict.SKIP, 0.0, note="the test fails at the good end too")
            if bad.note.startswith("flaky"):
                return Judgement(Verdict.UNSURE, 0.0, note="flaky")
            return Judgement(bad.verdict, 1.0)
        j = ends_differ(self.log.samples.get(0, []), self.log.samples.get(last, []), self.policy)
        return None if j.verdict is Verdict.UNSURE else j

    def _after_ends(self, j: Judgement) -> BisectOutcome | None:
        self.judgements[len(self.candidates) - 1] = j
        if j.note == "flaky":
            return self._early(Status.FLAKY, "the failure at the bad end does not reproduce on rerun (flaky); "
                                             "nothing to bisect")
        if j.verdict is Verdict.SKIP:
            return self._early(Status.NO_DIFFERENCE, "the test fails at the good end too; pick an older --good")
        if j.verdict is Verdict.GOOD:
            what = ("the test passes at the bad end" if self.mode is Mode.PASS_FAIL else
                    f"the two ends do not differ (p = {j.p_good:.3g} after {j.samples} samples each)")
            return self._early(Status.NO_DIFFERENCE, f"{what}; nobody to blame")
        last = len(self.candidates) - 1
        good, bad = self.log.samples.get(0, []), self.log.samples.get(last, [])
        if self.mode is Mode.PERF and self.log.better is not None and not is_worse(good, bad, self.log.better):
            return self._early(Status.NOT_A_REGRESSION,
                               f"the metric is better at the bad end than at the good end ({self.log.better.value} "
                               "is better); nothing regressed (are --good and --bad swapped?)")
        return None

    def _round(self, number: int, probes: list[int]) -> dict[int, Judgement]:
        self.reporter.round_started(number, [self.candidates[i] for i in probes])
        before = self.log.count
        decided: dict[int, Judgement] = {}
        pending = list(probes)
        repeat = 0
        while pending:
            if self.mode is Mode.PERF:
                end = 0 if repeat % 2 == 0 else len(self.candidates) - 1
                jobs = [end, *pending] if repeat % 2 == 0 else [*pending, end]
            else:
                jobs = pending
            self._measure(jobs)
            repeat += 1
            for i in list(pending):
                j = self._judge(i)
                if j is not None:
                    decided[i] = j
                    pending.remove(i)
        self.judgements.update(decided)
        self._finish_round(number, probes, before, decided)
        return decided

    def _judge(self, i: int) -> Judgement | None:
        if i in self.log.skipped:
            return Judgement(Verdict.SKIP, 0.0, note=self.log.skipped[i])
        if self.mode is Mode.PASS_FAIL:
            j = judge_pass_fail(self.log.runs.get(i, []), self.policy)
        else:
            n = len(self.log.samples.get(i, ()))
            p = self.policy
            if n < p.min_repeats or (n < p.max_repeats and (n - p.min_repeats) % p.step):
                return None
            last = len(self.candidates) - 1
            j = judge_samples(self.log.samples[i], self.log.samples[0], self.log.samples[last], p)
        return None if j.verdict is Verdict.UNSURE else j

    # -- results ---------------------------------------------------------------
    def _early(self, status: Status, message: str) -> BisectOutcome:
        return self._result(status, None, (), 0.0, message)

    def _outcome(self, state: BisectState) -> BisectOutcome:
        suspects = tuple(state.suspects)
        conf = 1.0
        for j in self.judgements.values():
            if j.verdict in (Verdict.GOOD, Verdict.BAD):
                conf *= j.confidence
        notes = []
        if state.inconsistent:
            notes.append(f"{len(state.inconsistent)} later commit(s) measured good again (noisy or "
                         "the change came and went)")
        if state.culprit is not None:
            c = self.candidates[state.culprit]
            msg = f"first bad commit: {c.sha[:12]} {c.subject}".rstrip()
            return self._result(Status.FOUND, state.culprit, suspects, conf, "; ".join([msg, *notes]))
        untested = len(suspects) - 1
        msg = (f"{untested} untestable commit(s) hide the culprit: it is one of "
               + ", ".join(self.candidates[i].sha[:12] for i in suspects))
        return self._result(Status.SUSPECTS, None, suspects, conf / len(suspects), "; ".join([msg, *notes]))

    def _result(self, status: Status, culprit: int | None, suspects: tuple[int, ...], conf: float,
                message: str) -> BisectOutcome:
        return BisectOutcome(
            status=status, culprit=culprit, suspects=suspects, confidence=round(conf, 4),
            rounds=tuple(self.rounds),
            samples={i: tuple(v) for i, v in self.log.samples.items()},
            runs={i: tuple(v) for i, v in self.log.runs.items()},
            skipped=dict(self.log.skipped), judgements=dict(self.judgements), message=message,
            unit=self.log.unit, better=self.log.better)
