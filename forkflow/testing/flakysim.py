"""A simulation of landing units with known flaky tests and known real failures.  [pure]

Trunk history: every test ran on `history_runs` trunk commits, flaky tests failing with their
own probability (and, as triage does, rerun at the same commit when they failed).  Each unit's
run: flaky tests fail by chance; with probability `p_real` the unit breaks one test for real,
deterministically or (share `intermittent`) with a failure rate drawn from [0.3, 1.0].
Every failure of the unit's run is rerun `reruns` times and classified.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from forkflow.triage.classify import Evidence, FlakyPolicy, HistoryPoint, classify_failure
from forkflow.triage.models import Classification, Failure, FailureKind, Signature


@dataclass(frozen=True, slots=True)
class SimResult:
    real: int
    real_flaky: int    # real failures labelled FLAKY (must stay <= 1%)
    flaky: int
    flaky_flaky: int   # flaky failures labelled FLAKY (recall)

    @property
    def real_as_flaky(self) -> float:
        return self.real_flaky / self.real if self.real else 0.0

    @property
    def flaky_recall(self) -> float:
        return self.flaky_flaky / self.flaky if self.flaky else 0.0


def _sig(text: str) -> Signature:
    return Signature(FailureKind.EXCEPTION, f"EXCEPTION: {text}", text)


Labeller = Callable[[Failure, Evidence], Classification]


def triage_labeller(policy: FlakyPolicy) -> Labeller:
    return lambda f, ev: classify_failure(f, ev, policy).classification


def naive_labeller(f: Failure, ev: Evidence) -> Classification:
    """The baseline: FLAKY as soon as one rerun passes."""
    return Classification.FLAKY if any(ev.reruns.get(f.test, ())) else Classification.NEW


def simulate(labeller: Labeller, *, seed: int = 0, units: int = 3000, tests: int = 400,
             flaky_tests: int = 40, p_real: float = 0.3, intermittent: float = 0.08,
             reruns: int = 3, history_runs: int = 30) -> SimResult:
    r = random.Random(seed)
    names = [f"t{i}" for i in range(tests)]
    flake_p = {n: r.uniform(0.02, 0.4) for n in r.sample(names, flaky_tests)}
    history: dict[str, list[HistoryPoint]] = {n: [] for n in names}
    for run in range(history_runs):
        for n, p in flake_p.items():
            if r.random() < p:
                history[n].append(HistoryPoint(f"trunk{run}", False, _sig(f"flake {n}").key))
                history[n].append(HistoryPoint(f"trunk{run}", r.random() >= p,
                                               _sig(f"flake {n}").key))
            else:
                history[n].append(HistoryPoint(f"trunk{run}", True))
    real = real_flaky = flaky = flaky_flaky = 0
    for _unit in range(units):
        failing: dict[str, tuple[float, str, bool]] = {}  # test -> (fail rate, message, is_real)
        for n, p in flake_p.items():
            if r.random() < p:
                failing[n] = (p, f"flake {n}", False)
        if r.random() < p_real:
            n = r.choice(names)
            q = r.uniform(0.3, 1.0) if r.random() < intermittent else 1.0
            if r.random() < q:  # the unit's own run shows the failure
                failing[n] = (q, f"regression {n} {_unit}", True)
        for n, (rate, msg, is_real) in failing.items():
            f = Failure(n, _sig(msg))
            ev = Evidence(reruns={n: tuple(r.random() >= rate for _ in range(reruns))},
                          history={n: history[n]})
            label = labeller(f, ev)
            if is_real:
                real += 1
                real_flaky += label is Classification.FLAKY
            else:
                flaky += 1
                flaky_flaky += label is Classification.FLAKY
    return SimResult(real, real_flaky, flaky, flaky_flaky)
