"""Range narrowing, K-ary probing, skips, and the statistical verdicts, on literal data."""
from __future__ import annotations

import numpy as np

from forkflow.bisect.state import BisectState
from forkflow.bisect.verdict import (
    Verdict,
    VerdictPolicy,
    ends_differ,
    is_worse,
    judge_pass_fail,
    judge_samples,
    two_sample_p,
)
from forkflow.models import Better

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


def test_state_binary_search_narrows_to_the_first_bad() -> None:
    st = BisectState(9)  # 0 good, 8 bad, culprit 1..8
    assert st.bounds == (0, 8) and st.next_probes(1) == [4]
    st = st.with_verdicts({4: G})
    assert st.bounds == (4, 8) and st.next_probes(1) == [6]
    st = st.with_verdicts({6: B, 5: G})
    assert st.is_done and st.culprit == 6 and st.suspects == [6]


def test_state_k_ary_probes_cut_the_range_evenly() -> None:
    st = BisectState(129)
    assert st.next_probes(4) == [26, 51, 77, 102]
    st = st.with_verdicts({26: G, 51: B, 77: B, 102: B})
    assert st.bounds == (26, 51)
    assert len(st.next_probes(4)) == 4 and all(26 < i < 51 for i in st.next_probes(4))


def test_state_skipped_commits_widen_the_suspects() -> None:
    st = BisectState(6).with_verdicts({1: G, 2: S, 3: S, 4: B})
    assert st.is_done and st.culprit is None
    assert st.suspects == [2, 3, 4]
    assert st.skipped == [2, 3]


def test_state_probes_step_around_skipped_commits() -> None:
    st = BisectState(9).with_verdicts({4: S})
    assert st.next_probes(1) == [3]  # nearest untested to the middle
    st = st.with_verdicts({3: G})
    assert 4 not in st.next_probes(1)


def test_state_every_inner_commit_untestable() -> None:
    st = BisectState(5).with_verdicts({1: S, 2: S, 3: S})
    assert st.is_done and st.culprit is None and st.suspects == [1, 2, 3, 4]


def test_state_ignores_unsure_and_out_of_range_verdicts() -> None:
    st = BisectState(5).with_verdicts({2: Verdict.UNSURE, 0: B, 4: G})
    assert st.verdicts == {} and st.bounds == (0, 4)


def test_state_reports_inconsistent_good_after_bad() -> None:
    st = BisectState(9).with_verdicts({2: B, 6: G})
    assert st.bounds == (0, 2) and st.inconsistent == [6]


def _noise(mean: float, n: int, seed: int) -> list[float]:
    return list(mean * (1 + 0.03 * np.random.default_rng(seed).standard_normal(n)))


def test_verdict_two_sample_p() -> None:
    assert two_sample_p([1.0] * 5, [1.0] * 5) == 1.0
    assert two_sample_p([], [1.0]) == 1.0
    assert two_sample_p(_noise(100, 20, 1), _noise(110, 20, 2)) < 0.001


def test_verdict_judges_which_end_a_commit_resembles() -> None:
    good, bad = _noise(100, 30, 1), _noise(105, 30, 2)
    pol = VerdictPolicy()
    assert judge_samples(_noise(105, 16, 3), good, bad, pol).verdict is B
    assert judge_samples(_noise(100, 16, 4), good, bad, pol).verdict is G
    assert judge_samples(_noise(100, 3, 4), good, bad, pol).verdict is Verdict.UNSURE  # too few


def test_verdict_budget_spent_goes_to_the_nearer_end() -> None:
    good, bad = _noise(100, 30, 1), _noise(105, 30, 2)
    pol = VerdictPolicy(max_repeats=8, min_repeats=8)
    j = judge_samples(_noise(104.0, 8, 9), good, bad, pol)
    assert j.verdict is B and (j.forced or j.confidence > 0.99)


def test_verdict_ends_differ_or_not() -> None:
    pol = VerdictPolicy()
    assert ends_differ(_noise(100, 10, 1), _noise(106, 10, 2), pol).verdict is B
    same = ends_differ(_noise(100, 32, 1), _noise(100, 32, 2), pol)
    assert same.verdict is G and same.forced
    assert ends_differ(_noise(100, 10, 1), _noise(100, 10, 2), pol).verdict is Verdict.UNSURE


def test_verdict_direction_against_better() -> None:
    assert is_worse([10.0], [12.0], Better.LOWER)
    assert not is_worse([10.0], [12.0], Better.HIGHER)


def test_verdict_pass_fail_reruns_failures() -> None:
    pol = VerdictPolicy(reruns=2)
    assert judge_pass_fail([True], pol).verdict is G
    assert judge_pass_fail([False], pol).verdict is Verdict.UNSURE
    assert judge_pass_fail([False, False, False], pol).verdict is B
    flaky = judge_pass_fail([False, True], pol)
    assert flaky.verdict is G and "flaky" in flaky.note
