"""Change points on literal series, and alerts grouped by commit range."""
from __future__ import annotations

import math

import numpy as np

from forkflow.models import Better, MetricPoint, Sha
from forkflow.regress.alerts import Direction, SeriesChange, collapse, group_changes, series_changes
from forkflow.regress.detect import DetectConfig, detect_change_points, permutation_pvalue, split_statistics

# 20 points with one 5 % step at index 10 (2 % noise, drawn once and written down)
STEP = [100.4, 98.9, 101.2, 99.7, 100.8, 98.6, 100.1, 101.5, 99.2, 100.3,
        105.6, 104.1, 106.3, 105.0, 104.6, 106.9, 105.2, 103.9, 105.8, 104.7]


def test_detect_finds_one_step_in_literal_series() -> None:
    cps = detect_change_points(STEP)
    assert [c.index for c in cps] == [10]
    c = cps[0]
    assert c.pvalue <= 0.01
    assert 0.04 < c.magnitude < 0.06
    assert c.before < 101 < 104 < c.after


def test_detect_flat_and_constant_series_have_no_change() -> None:
    assert detect_change_points([5.0] * 40) == []
    assert detect_change_points(STEP[:10] * 3) == []
    assert detect_change_points([1.0, 2.0]) == []  # too short to split


def test_detect_two_steps_in_a_long_series() -> None:
    rng = np.random.default_rng(7)
    x = 100 * (1 + 0.02 * rng.standard_normal(300))
    x[100:] *= 1.08
    x[220:] *= 0.9
    idx = [c.index for c in detect_change_points(x.tolist())]
    assert len(idx) == 2
    assert abs(idx[0] - 100) <= 2 and abs(idx[1] - 220) <= 2


def test_detect_ignores_nan_points_but_keeps_indices() -> None:
    x = list(STEP)
    x[3] = math.nan
    assert [c.index for c in detect_change_points(x)] == [10]


def test_detect_min_magnitude_drops_small_changes() -> None:
    assert detect_change_points(STEP, DetectConfig(min_magnitude=0.10)) == []


def test_split_statistic_peaks_at_the_step() -> None:
    q = split_statistics(np.asarray([STEP]), 3)[0]
    assert int(np.argmax(q)) + 3 == 10


def test_permutation_test_stops_early_on_noise() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(64)
    q = float(split_statistics(x[None, :], 3).max())
    p = permutation_pvalue(x, q, DetectConfig(), np.random.default_rng(0))
    assert p > 0.01  # far from significant, and decided from a few shuffles


def _points(name: str, values: list[float], better: Better = Better.LOWER, offset: int = 0) -> list[MetricPoint]:
    return [MetricPoint(name=name, rev=Sha(f"{i + offset:040x}"), value=v, unit="ms", better=better,
                        commit_date=1000 + i) for i, v in enumerate(values)]


def test_series_changes_name_the_commit_range_and_direction() -> None:
    (ch,) = series_changes(_points("lat", STEP))
    assert ch.good_rev == Sha(f"{9:040x}") and ch.bad_rev == Sha(f"{10:040x}")
    assert ch.direction is Direction.REGRESSION  # lower is better and it went up
    (ch2,) = series_changes(_points("tput", STEP, Better.HIGHER))
    assert ch2.direction is Direction.IMPROVEMENT


def test_collapse_takes_the_median_of_remeasured_commits() -> None:
    pts = _points("m", [1.0, 2.0]) + _points("m", [5.0], offset=1) + _points("m", [3.0], offset=1)
    assert [(p.value, p.count) for p in collapse(pts)] == [(1.0, 1), (3.0, 3)]


def _change(metric: str, lo: int, hi: int) -> SeriesChange:
    return SeriesChange(metric, "ms", Better.LOWER, Sha(str(lo)), Sha(str(hi)), 1.0, 1.1, 0.1, 0.001)


def test_group_changes_merges_overlapping_ranges_only() -> None:
    order = {Sha(str(i)): i for i in range(20)}
    changes = [_change(f"shape{i}", 4, 5) for i in range(12)] + [_change("other", 3, 6),
                                                                 _change("later", 10, 11)]
    alerts = group_changes(changes, order)
    assert len(alerts) == 2
    first, second = alerts
    assert len(first.members) == 13 and (first.good_rev, first.bad_rev) == ("4", "5")
    assert [m.metric for m in second.members] == ["later"]
    # adjacent but distinct transitions stay apart
    assert len(group_changes([_change("a", 3, 4), _change("b", 4, 5)], order)) == 2


def test_alert_worst_prefers_the_largest_regression() -> None:
    order = {Sha(str(i)): i for i in range(5)}
    up = SeriesChange("tput", "x", Better.HIGHER, Sha("1"), Sha("2"), 1.0, 1.5, 0.5, 0.001)
    down = SeriesChange("lat", "ms", Better.LOWER, Sha("1"), Sha("2"), 1.0, 1.1, 0.1, 0.001)
    (alert,) = group_changes([up, down], order)
    assert alert.direction is Direction.REGRESSION
    assert alert.worst.metric == "lat"
