"""Classify a landing unit's failures: NEW, BROKEN_TRUNK, FLAKY or INFRA.  [pure]

Order of the rules, each with the evidence it needs:

1. INFRA: the signature is a runner fault (no space, lost runner, no GPU...), or the job the
   test ran in was judged INFRA by validation.
2. BROKEN_TRUNK: the same test failed with the same signature on the fork base or on the
   latest trunk run.  Such a failure cannot block a unit that did not cause it.
3. With automatic reruns: a failure that fails again on every rerun is NEW, even in a test
   known to be flaky (a real regression in a flaky test must not hide behind its history).
   One that passes on rerun is FLAKY when the test has flipped with this signature before,
   or when it passed on every one of at least `min_clean_reruns` reruns; otherwise it is NEW
   (an intermittent failure that this unit may have introduced).
4. Without reruns: FLAKY when history shows the test flipping with this signature, else NEW.

The last clause of 3 is what keeps real failures out of FLAKY: a failure the unit causes fails
on most reruns, a flaky test passes on nearly all (see benchmarks/bench_triage.py).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from forkflow.triage.models import Classification, Diagnosis, Failure, FailureKind

C = Classification


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One earlier outcome of a test, in a run that is not the one being triaged."""

    rev: str
    passed: bool
    signature_key: str | None = None  # of the failure, when it failed


@dataclass(frozen=True, slots=True)
class Evidence:
    """What is known beyond the failure itself."""

    trunk_failures: frozenset[tuple[str, str]] = frozenset()  # (test, signature key) red on trunk
    infra_tests: frozenset[str] = frozenset()                 # tests of jobs judged INFRA
    reruns: Mapping[str, tuple[bool, ...]] = field(default_factory=dict)  # test -> passed?
    history: Mapping[str, Sequence[HistoryPoint]] = field(default_factory=dict)  # oldest first


@dataclass(frozen=True, slots=True)
class FlakyPolicy:
    min_clean_reruns: int = 2   # all of at least this many reruns passed: FLAKY without history
    min_sandwiches: int = 2     # pass, fail-with-this-signature, pass on different revs


def has_flipped(history: Sequence[HistoryPoint], key: str, policy: FlakyPolicy = FlakyPolicy()) -> bool:
    """Has the test both failed with signature `key` and passed, in a way a fix cannot explain?

    Either at one revision (same code, both outcomes), or as a failure between two passes at
    least `policy.min_sandwiches` times (a regression that got fixed does that only once).
    """
    at_rev: dict[str, set[bool]] = {}
    for p in history:
        if p.passed or p.signature_key == key:
            at_rev.setdefault(p.rev, set()).add(p.passed)
    if any(len(v) == 2 for v in at_rev.values()):
        return True
    sandwiches = 0
    for a, b, c in zip(history, history[1:], history[2:]):
        if a.passed and c.passed and not b.passed and b.signature_key == key:
            sandwiches += 1
    return sandwiches >= policy.min_sandwiches


def classify_failure(f: Failure, ev: Evidence, policy: FlakyPolicy = FlakyPolicy()) -> Diagnosis:
    """The classification of one failure, with the reason in words."""
    key = f.signature.key
    if f.signature.kind is FailureKind.INFRA:
        return Diagnosis(f, C.INFRA, "runner or machine fault: " + f.signature.text[:120])
    if f.test in ev.infra_tests:
        return Diagnosis(f, C.INFRA, "validation judged the job an infrastructure failure")
    if (f.test, key) in ev.trunk_failures:
        return Diagnosis(f, C.BROKEN_TRUNK, "fails the same way on the fork base or latest trunk run")
    flipped = has_flipped(ev.history.get(f.test, ()), key, policy)
    reruns = ev.reruns.get(f.test, ())
    if reruns:
        passed = sum(reruns)
        if passed == 0:
            return Diagnosis(f, C.NEW, f"failed again on all {len(reruns)} reruns", reruns)
        if flipped:
            return Diagnosis(f, C.FLAKY, f"passed {passed} of {len(reruns)} reruns; flipped before "
                           "with this signature", reruns)
        if passed == len(reruns) and passed >= policy.min_clean_reruns:
            return Diagnosis(f, C.FLAKY, f"passed all {passed} reruns", reruns)
        return Diagnosis(f, C.NEW, f"intermittent: passed {passed} of {len(reruns)} reruns and never "
                       "flipped before; this unit may have introduced it", reruns)
    if flipped:
        return Diagnosis(f, C.FLAKY, "flipped before with this signature (no rerun)")
    return Diagnosis(f, C.NEW, "not red on trunk, not known flaky")


def classify(failures: Sequence[Failure], ev: Evidence,
             policy: FlakyPolicy = FlakyPolicy()) -> list[Diagnosis]:
    """Verdicts for every failure, NEW first (then by test)."""
    out = [classify_failure(f, ev, policy) for f in failures]
    return sorted(out, key=lambda v: (v.classification.order, v.failure.test))
