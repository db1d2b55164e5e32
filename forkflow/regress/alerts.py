"""From stored series to alerts: per-metric change points grouped by commit range.  [pure]

A change point on a metric becomes a `SeriesChange` over the commit range (last commit
before it, first commit after it).  Changes of several metrics whose ranges overlap form one
`AlertDraft`: a matmul sweep that regressed on 12 shapes at the same landing is one alert.
"""
from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


from forkflow.models import Better, MetricPoint, Sha
from forkflow.regress.detect import DetectConfig, detect_change_points


class AlertStatus(enum.StrEnum):
    """An alert's state, as stored: open until a bisection names a culprit or finds none."""

    OPEN = "open"
    BISECTED = "bisected"
    NO_CULPRIT = "no-culprit"


class Direction(str, enum.Enum):
    """Whether a change is good or bad news, judged against the metric's `better`."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One commit of a series: the median of every value stored for it."""

    rev: Sha
    value: float
    count: int


@dataclass(frozen=True, slots=True)
class SeriesChange:
    """A change point on one metric, as a commit range."""

    metric: str
    unit: str
    better: Better
    good_rev: Sha      # last commit before the change
    bad_rev: Sha       # first commit after it
    before: float
    after: float
    magnitude: float   # relative, +0.05 = 5 % higher
    pvalue: float

    @property
    def direction(self) -> Direction:
        worse = self.after < self.before if self.better is Better.HIGHER else self.after > self.before
        return Direction.REGRESSION if worse else Direction.IMPROVEMENT


@dataclass(frozen=True, slots=True)
class AlertDraft:
    """Changes of one or more metrics over the same commit range."""

    good_rev: Sha
    bad_rev: Sha
    members: tuple[SeriesChange, ...]

    @property
    def direction(self) -> Direction:
        regress = any(m.direction is Direction.REGRESSION for m in self.members)
        return Direction.REGRESSION if regress else Direction.IMPROVEMENT

    @property
    def worst(self) -> SeriesChange:
        """The member to bisect: the largest regression, else the largest change."""
        pool = [m for m in self.members if m.direction is Direction.REGRESSION] or list(self.members)
        return max(pool, key=lambda m: abs(m.magnitude))


def collapse(points: Sequence[MetricPoint]) -> list[SeriesPoint]:
    """One point per commit, in series order; re-measured commits give their median."""
    revs, values, counts = collapse_values([p.rev for p in points], [p.value for p in points])
    return [SeriesPoint(r, v, n) for r, v, n in zip(revs, values, counts)]


def collapse_values(revs: Sequence[Sha], values: Sequence[float]
                    ) -> tuple[tuple[Sha, ...], tuple[float, ...], tuple[int, ...]]:
    """`collapse` as columns (revs, values, counts), without a point object per commit: the
    dashboard's L2 series is this too, on thousands of points per page."""
    if len(set(revs)) == len(revs):  # one measurement per commit: nothing to merge
        return tuple(revs), tuple(values), (1,) * len(revs)
    by_rev: dict[Sha, list[float]] = {}
    for rev, value in zip(revs, values):
        by_rev.setdefault(rev, []).append(value)
    return (tuple(by_rev), tuple(v[0] if len(v) == 1 else _median(v) for v in by_rev.values()),
            tuple(len(v) for v in by_rev.values()))


def _median(values: list[float]) -> float:
    """np.median's answer (NaN when any value is NaN) at a plain list's cost: np.median costs
    ~15 us a call, which adds up over every re-measured commit of 50 series."""
    if any(v != v for v in values):
        return math.nan
    return float(statistics.median(values))


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """The kernel config a metric is measured with changed (the autotuner chose again, after a
    release bump or a retune): an event of its own, never read as a regression or improvement."""

    metric: str
    good_rev: Sha         # last commit measured with the old config
    bad_rev: Sha          # first commit measured with the new one
    before_config: str
    after_config: str
    before: float         # median of the old config's segment
    after: float          # median of the new config's segment


def config_segments(points: Sequence[MetricPoint]) -> list[list[MetricPoint]]:
    """The series cut wherever the point's `config` differs from the point before."""
    out: list[list[MetricPoint]] = []
    for p in points:
        if out and out[-1][-1].config == p.config:
            out[-1].append(p)
        else:
            out.append([p])
    return out


def config_changes(points: Sequence[MetricPoint]) -> list[ConfigChange]:
    """Every change of config along one metric's series, oldest first."""
    segs = config_segments(points)
    return [ConfigChange(a[-1].name, a[-1].rev, b[0].rev, a[-1].config, b[0].config,
                         statistics.median(p.value for p in a), statistics.median(p.value for p in b))
            for a, b in zip(segs, segs[1:])]


def series_changes(points: Sequence[MetricPoint], cfg: DetectConfig = DetectConfig()) -> list[SeriesChange]:
    """Change points of one metric's stored series, looked for inside each stretch measured with
    one config (a change of config is a `ConfigChange`, not a change point)."""
    out: list[SeriesChange] = []
    for seg in config_segments(points):
        series = collapse(seg)
        last = seg[-1]
        found = detect_change_points([s.value for s in series], cfg)
        out += [SeriesChange(metric=last.name, unit=last.unit, better=last.better,
                             good_rev=series[c.span[0] - 1].rev, bad_rev=series[c.span[1]].rev,
                             before=c.before, after=c.after, magnitude=c.magnitude, pvalue=c.pvalue)
                for c in found]
    return out


def group_changes(changes: Iterable[SeriesChange], order: Mapping[Sha, int]) -> list[AlertDraft]:
    """Group changes whose commit ranges overlap into alerts, oldest range first.

    Args:
        changes: change points of any number of metrics.
        order: position of each commit on the fork branch (older is smaller).
    Returns:
        Alerts whose range is the intersection of their members' ranges.
    """
    spans = sorted(((order[c.good_rev], order[c.bad_rev], c) for c in changes
                    if c.good_rev in order and c.bad_rev in order), key=lambda t: (t[0], t[1]))
    groups: list[tuple[int, int, list[SeriesChange]]] = []
    for lo, hi, change in spans:
        if groups and lo < groups[-1][1]:  # overlaps the group's common range
            glo, ghi, members = groups[-1]
            groups[-1] = (max(glo, lo), min(ghi, hi), [*members, change])
        else:
            groups.append((lo, hi, [change]))
    by_pos = {pos: sha for sha, pos in order.items()}
    return [AlertDraft(by_pos[lo], by_pos[hi], tuple(sorted(ms, key=lambda m: m.metric)))
            for lo, hi, ms in groups]
