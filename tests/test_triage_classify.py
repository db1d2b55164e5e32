"""The pure classification rules, and the flaky simulation's figure."""
from __future__ import annotations

from forkflow.triage.classify import Evidence, FlakyPolicy, HistoryPoint, classify, has_flipped
from forkflow.testing.flakysim import naive_labeller, simulate, triage_labeller
from forkflow.triage.models import Classification as C
from forkflow.triage.models import Failure, FailureKind, Signature


def _f(test: str, text: str = "EXCEPTION: boom", kind: FailureKind = FailureKind.EXCEPTION) -> Failure:
    return Failure(test, Signature(kind, text, ""))


def test_rules_in_order() -> None:
    a, b, c, d = _f("a"), _f("b"), _f("c"), _f("d", "INFRA: runner lost", FailureKind.INFRA)
    ev = Evidence(trunk_failures=frozenset({("a", a.signature.key)}),
                  reruns={"b": (False, False, False), "c": (True, True, True)})
    got = {v.failure.test: v.classification for v in classify([a, b, c, d], ev)}
    assert got == {"a": C.BROKEN_TRUNK, "b": C.NEW, "c": C.FLAKY, "d": C.INFRA}
    assert [v.classification for v in classify([d, c, b, a], ev)][0] is C.NEW


def test_real_failure_in_flaky_test_is_new() -> None:
    f = _f("t")
    hist = [HistoryPoint("r1", False, f.signature.key), HistoryPoint("r1", True)]
    assert has_flipped(hist, f.signature.key)
    [v] = classify([f], Evidence(reruns={"t": (False, False, False)}, history={"t": hist}))
    assert v.classification is C.NEW
    [v] = classify([f], Evidence(reruns={"t": (False, True, False)}, history={"t": hist}))
    assert v.classification is C.FLAKY
    [v] = classify([f], Evidence(history={"t": hist}))
    assert v.classification is C.FLAKY and "no rerun" in v.reason


def test_a_fixed_regression_is_not_a_flip() -> None:
    key = _f("t").signature.key
    once = [HistoryPoint("r1", True), HistoryPoint("r2", False, key), HistoryPoint("r3", True)]
    assert not has_flipped(once, key)
    other = [HistoryPoint("r1", True), HistoryPoint("r1", False, "ffffffffffffffff")]
    assert not has_flipped(other, key)  # flipped, but with another signature
    twice = once + [HistoryPoint("r4", False, key), HistoryPoint("r5", True)]
    assert has_flipped(twice, key, FlakyPolicy(min_sandwiches=2))


def test_simulation_keeps_real_failures_out_of_flaky() -> None:
    ours = simulate(triage_labeller(FlakyPolicy()), units=1500, seed=3)
    naive = simulate(naive_labeller, units=1500, seed=3)
    assert ours.real > 300 and ours.flaky > 1000
    assert ours.real_as_flaky <= 0.01
    assert ours.flaky_recall >= 0.9
    assert naive.real_flaky >= ours.real_flaky
