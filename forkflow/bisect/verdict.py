"""Verdicts on one commit from its measurements.  [pure]

Performance verdicts are statistical, as in Chromium Pinpoint: a commit's samples are compared
with the samples of both ends of the range by two two-sample tests (Mann-Whitney U and
Kolmogorov-Smirnov; the smaller p-value counts).  A commit is BAD when it clearly differs from
the good end and not from the bad end, GOOD in the mirror case, and UNSURE otherwise, which
asks the bisector for more (interleaved) repeats.  When the repeat budget is spent the commit
goes to the nearer end, with the lower confidence that this deserves.

Pass/fail verdicts rerun failures, so that a flaky test does not send the search astray.
"""
from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from forkflow.models import Better

# with ties scipy falls back from the exact KS distribution to the asymptotic one: that is fine
warnings.filterwarnings("ignore", message="ks_2samp: Exact calculation unsuccessful")


class Verdict(str, enum.Enum):
    """What a commit is, as far as the bisection is concerned."""

    GOOD = "good"      # behaves like the good end
    BAD = "bad"        # behaves like the bad end
    SKIP = "skip"      # cannot be tested (build break, metric missing, keeps crashing)
    UNSURE = "unsure"  # needs more repeats


@dataclass(frozen=True, slots=True)
class VerdictPolicy:
    """Thresholds and budgets of the statistical verdict."""

    alpha: float = 0.005       # p below this: the samples differ
    same: float = 0.1          # p at or above this: no evidence that they differ
    min_repeats: int = 8       # samples before the first verdict
    step: int = 4              # repeats added while unsure
    max_repeats: int = 32      # budget per commit; then the nearer end wins
    max_errors: int = 5        # crashes in a row before a commit is skipped
    reruns: int = 2            # pass/fail: reruns of a failure before it counts


@dataclass(frozen=True, slots=True)
class Judgement:
    """A verdict with the evidence behind it."""

    verdict: Verdict
    confidence: float
    p_good: float = 1.0   # p-value of "differs from the good end"
    p_bad: float = 1.0    # p-value of "differs from the bad end"
    samples: int = 0
    forced: bool = False  # decided by the budget rule, not by the tests
    note: str = ""


def two_sample_p(a: Sequence[float], b: Sequence[float]) -> float:
    """The smaller of the Mann-Whitney U and Kolmogorov-Smirnov p-values (Pinpoint's rule)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.size == 0 or y.size == 0:
        return 1.0
    if np.ptp(np.concatenate([x, y])) == 0:
        return 1.0
    from scipy import stats  # here, not at import: `forkflow detect` and triage never need SciPy

    p_u = float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)
    p_ks = float(stats.ks_2samp(x, y).pvalue)
    p = min(p_u, p_ks)
    return 1.0 if math.isnan(p) else p


def ends_differ(good: Sequence[float], bad: Sequence[float], policy: VerdictPolicy) -> Judgement:
    """Whether the two ends differ: BAD = they do, GOOD = they do not, UNSURE = more repeats."""
    n = min(len(good), len(bad))
    p = two_sample_p(good, bad)
    if n >= policy.min_repeats and p < policy.alpha:
        return Judgement(Verdict.BAD, 1 - p, p_good=p, samples=n)
    if n >= policy.max_repeats:
        return Judgement(Verdict.GOOD, 1 - policy.alpha, p_good=p, samples=n, forced=True)
    return Judgement(Verdict.UNSURE, 0.0, p_good=p, samples=n)


def judge_samples(samples: Sequence[float], good: Sequence[float], bad: Sequence[float],
                  policy: VerdictPolicy) -> Judgement:
    """Which end a commit's samples resemble (the ends are known to differ)."""
    n = len(samples)
    if n < policy.min_repeats:
        return Judgement(Verdict.UNSURE, 0.0, samples=n)
    p_g = two_sample_p(samples, good)
    p_b = two_sample_p(samples, bad)
    if p_g < policy.alpha and p_b >= policy.same:
        return Judgement(Verdict.BAD, 1 - p_g, p_g, p_b, n)
    if p_b < policy.alpha and p_g >= policy.same:
        return Judgement(Verdict.GOOD, 1 - p_b, p_g, p_b, n)
    if n < policy.max_repeats:
        return Judgement(Verdict.UNSURE, 0.0, p_g, p_b, n)
    # budget spent: the nearer end (by median) wins, with the confidence its tests allow
    med = float(np.median(samples))
    nearer_bad = abs(med - float(np.median(bad))) < abs(med - float(np.median(good)))
    if nearer_bad:
        return Judgement(Verdict.BAD, 1 - p_g, p_g, p_b, n, forced=True,
                         note="repeat budget spent; nearer the bad end")
    return Judgement(Verdict.GOOD, 1 - p_b, p_g, p_b, n, forced=True,
                     note="repeat budget spent; nearer the good end")


def is_worse(good: Sequence[float], bad: Sequence[float], better: Better) -> bool:
    """Whether the bad end's samples are worse than the good end's (medians)."""
    g, b = float(np.median(good)), float(np.median(bad))
    return b < g if better is Better.HIGHER else b > g


def judge_pass_fail(outcomes: Sequence[bool], policy: VerdictPolicy) -> Judgement:
    """A commit's verdict from its runs (True = passed): a failure counts once every rerun failed."""
    if not outcomes:
        return Judgement(Verdict.UNSURE, 0.0)
    if outcomes[0]:
        return Judgement(Verdict.GOOD, 1.0, samples=len(outcomes))
    if any(outcomes):  # failed, then passed on a rerun: flaky, not this regression
        return Judgement(Verdict.GOOD, 0.9, samples=len(outcomes), note="flaky: passed on rerun")
    if len(outcomes) > policy.reruns:
        return Judgement(Verdict.BAD, 1.0, samples=len(outcomes))
    return Judgement(Verdict.UNSURE, 0.0, samples=len(outcomes))
