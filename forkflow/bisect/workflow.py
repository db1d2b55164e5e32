"""Two-stage bisection on a fork: over landing units, then inside a guilty bundle."""
from __future__ import annotations

import fnmatch
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from forkflow.bisect.bisector import BisectOutcome, Bisector, Candidate, Mode, Reporter, Status
from forkflow.bisect.probes import Measurement, MeasureStatus, Probe
from forkflow.bisect.units import (
    CONFLICT_PREFIX,
    LandingUnit,
    landing_units,
    replay_prefixes,
    resolve_range,
    upstream_pr,
)
from forkflow.bisect.verdict import VerdictPolicy
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.ledger.evidence import pr_number
from forkflow.models import PAIRED_SAMPLES, Better, Sha
from forkflow.tiers.tiers import ReportFormat, Suite


@dataclass(frozen=True, slots=True)
class Culprit:
    """Who is to blame: the fork commit, its landing unit, the upstream commit and its PR."""

    fork_sha: Sha
    unit_sha: Sha
    subject: str
    upstream_sha: Sha | None = None
    pr: int | None = None


@dataclass(frozen=True, slots=True)
class Stage:
    name: str                       # "landing units" | "bundle <sha>"
    candidates: tuple[Candidate, ...]
    outcome: BisectOutcome


@dataclass(frozen=True, slots=True)
class BisectReport:
    metric: str
    mode: Mode
    good: Sha
    bad: Sha
    status: Status
    culprit: Culprit | None
    confidence: float
    message: str
    stages: tuple[Stage, ...]

    @property
    def rounds(self) -> int:
        return sum(len(s.outcome.rounds) for s in self.stages)

    @property
    def measurements(self) -> int:
        return sum(s.outcome.measurements for s in self.stages)

    def to_dict(self) -> dict[str, Any]:
        c = self.culprit
        return {
            "metric": self.metric, "mode": self.mode.value, "good": self.good, "bad": self.bad,
            "status": self.status.value, "confidence": self.confidence, "message": self.message,
            "culprit": None if c is None else {
                "fork_commit": c.fork_sha, "landing_unit": c.unit_sha, "subject": c.subject,
                "upstream_commit": c.upstream_sha, "pr": c.pr},
            "rounds": self.rounds, "measurements": self.measurements,
            "stages": [_stage_dict(s) for s in self.stages],
        }


def _stage_dict(s: Stage) -> dict[str, Any]:
    o = s.outcome
    return {
        "name": s.name, "status": o.status.value, "message": o.message, "confidence": o.confidence,
        "unit": o.unit, "better": o.better.value if o.better else None,
        "suspects": [s.candidates[i].sha for i in o.suspects],
        "skipped": {s.candidates[i].sha: why for i, why in o.skipped.items()},
        "rounds": [{"round": r.number, "probes": [s.candidates[i].sha for i in r.probes],
                    "measurements": r.measurements,
                    "verdicts": {s.candidates[i].sha: v.value for i, v, _ in r.verdicts}}
                   for r in o.rounds],
        "measurements": {s.candidates[i].sha: list(v) for i, v in o.samples.items()},
        "runs": {s.candidates[i].sha: list(v) for i, v in o.runs.items()},
    }


# Per-run verdicts count processes, not samples: fewer, heavier measurements.
PER_RUN_POLICY = VerdictPolicy(min_repeats=5, step=2, max_repeats=21)


class RunMedians:
    """A probe whose every run counts once: its samples become their median.

    The samples of one run share that process's state (GPU clocks, memory placement, the
    autotuner's choice where one runs), so on a GPU they differ less from each other than from
    another run's; tested as independent values they make a 2% change look certain or absent
    by the luck of one process.  With the run as the unit the two-sample tests see the noise
    that really separates two commits.  Simulated at an H200's between-process noise (0.62%),
    a 2% step was named in 100% of 60 trials this way and 97% with samples as the unit.
    """

    def __init__(self, inner: Probe) -> None:
        self.inner = inner

    def measure(self, rev: Sha) -> Measurement:
        m = self.inner.measure(rev)
        if m.status is MeasureStatus.OK and len(m.samples) > 1:
            return replace(m, samples=(float(statistics.median(m.samples)),))
        return m

    def close(self) -> None:
        self.inner.close()


def runs_are_the_unit(context: Sequence[tuple[str, str]]) -> bool:
    """Whether a metric measured with this context should be bisected run by run (`RunMedians`):
    when it was measured on a GPU (its context names a device other than the CPU)."""
    device = dict(context).get("device", "")
    return bool(device) and device != "CPU"


@dataclass(frozen=True, slots=True)
class VerdictUnit:
    """What a metric bisection judges, runs (each its median, `RunMedians`) or samples, and why."""

    per_run: bool
    reason: str

    @property
    def name(self) -> str:
        return "run" if self.per_run else "sample"


def verdict_unit(metric: str, flag: bool | None, context: Sequence[tuple[str, str]] | None,
                 suite: Suite | None) -> VerdictUnit:
    """The unit a bisection of `metric` judges by default (#16).

    In order: the flag (`--per-run` True, `--per-sample` False); the measuring suite's
    `per_sample` globs; the newest stored point's context: paired samples (`samples = paired`,
    a ratio to a baseline timed alongside each sample, so what moves a process cancels) are
    judged one by one, samples measured on a GPU run by run; else samples.
    """
    if flag is not None:
        return VerdictUnit(flag, f"{'--per-run' if flag else '--per-sample'} given")
    declared = [g for g in (suite.per_sample if suite else ()) if fnmatch.fnmatchcase(metric, g)]
    if suite is not None and declared:
        return VerdictUnit(False, f"suite {suite.name!r} declares it per_sample ({declared[0]!r})")
    if context is None:
        return VerdictUnit(False, "no stored point says how it was measured")
    if PAIRED_SAMPLES in context:
        return VerdictUnit(False, "its stored points say its samples are paired (context samples = paired)")
    if runs_are_the_unit(context):
        return VerdictUnit(True, f"its stored points ran on a GPU ({dict(context)['device']}), where the "
                                 "samples of one run share that process's clocks")
    return VerdictUnit(False, "its stored points name no GPU")


class _ConflictAware:
    """A probe that answers UNTESTABLE for bundle prefixes that could not be replayed."""

    def __init__(self, inner: Probe) -> None:
        self.inner = inner

    def measure(self, rev: Sha) -> Measurement:
        if rev.startswith(CONFLICT_PREFIX):
            return Measurement(MeasureStatus.UNTESTABLE, detail=rev[len(CONFLICT_PREFIX):])
        return self.inner.measure(rev)

    def close(self) -> None:
        self.inner.close()


class _Replay:
    """Answers a commit's first runs from an earlier stage's pass/fail results, then measures.

    Both ends of the search inside a bundle (its base and the bundle itself) were judged in the
    landing-unit stage; replaying those runs saves running the test on them again.
    """

    def __init__(self, inner: Probe, known: dict[Sha, list[bool]]) -> None:
        self.inner = inner
        self.known = known

    def measure(self, rev: Sha) -> Measurement:
        runs = self.known.get(rev)
        if runs:
            return Measurement(MeasureStatus.OK, passed=runs.pop(0), detail="replayed from the landing-unit stage")
        return self.inner.measure(rev)

    def close(self) -> None:
        self.inner.close()


def _known_runs(outcome: BisectOutcome, cands: Sequence[Candidate]) -> dict[Sha, list[bool]]:
    return {cands[i].sha: list(runs) for i, runs in outcome.runs.items()}


def bisect_fork(repo: Repo, metric: str, good: str, bad: str, probe: Probe, reporter: Reporter | None = None,
                *, mode: Mode = Mode.PERF, policy: VerdictPolicy = VerdictPolicy(), parallel: int = 1,
                better: Better | None = None) -> BisectReport:
    """Find the landing unit, then the upstream commit inside a bundle, that changed `metric`."""
    g, b = resolve_range(repo, good, bad)
    units = landing_units(repo, g, b)
    if not units:
        raise UserError(f"no commits between --good {good} and --bad {bad} on the first-parent line")
    cands = (Candidate(g, "(good end)"), *(Candidate(u.sha, u.subject) for u in units))
    first = Bisector(cands, probe, reporter, mode=mode, policy=policy, parallel=parallel, better=better).run()
    stages = [Stage("landing units", cands, first)]
    if first.status is not Status.FOUND or first.culprit is None:
        return BisectReport(metric, mode, g, b, first.status, None, first.confidence, first.message,
                            tuple(stages))
    unit = units[first.culprit - 1]
    culprit = _unit_culprit(repo, unit)
    conf, message = first.confidence, first.message
    if unit.is_bundle and unit.parent is not None:
        inner = _Replay(probe, _known_runs(first, cands)) if mode is Mode.PASS_FAIL else probe
        second, cands2 = _inside_bundle(repo, unit, inner, reporter, mode, policy, parallel,
                                        better or first.better)
        stages.append(Stage(f"bundle {unit.sha[:12]}", cands2, second))
        if second.status is Status.FOUND and second.culprit is not None:
            up = unit.upstream[second.culprit - 1]
            subject, pr = upstream_pr(repo, up)
            culprit = Culprit(unit.sha, unit.sha, subject or unit.subject, up, pr)
            conf = round(conf * second.confidence, 4)
            message = f"{message}; inside the bundle: upstream {up[:12]} {subject}".rstrip()
        else:
            message = f"{message}; inside the bundle: {second.message}"
    return BisectReport(metric, mode, g, b, Status.FOUND, culprit, conf, message, tuple(stages))


def _unit_culprit(repo: Repo, unit: LandingUnit) -> Culprit:
    if len(unit.upstream) == 1:
        subject, pr = upstream_pr(repo, unit.upstream[0])
        return Culprit(unit.sha, unit.sha, unit.subject, unit.upstream[0], pr or pr_number(unit.subject))
    return Culprit(unit.sha, unit.sha, unit.subject, None, None if unit.is_bundle else pr_number(unit.subject))


def _inside_bundle(repo: Repo, unit: LandingUnit, probe: Probe, reporter: Reporter | None, mode: Mode,
                   policy: VerdictPolicy, parallel: int,
                   better: Better | None) -> tuple[BisectOutcome, tuple[Candidate, ...]]:
    assert unit.parent is not None
    prefixes = replay_prefixes(repo, unit)
    cands = (Candidate(unit.parent, "(bundle base)"),
             *(Candidate(p.sha, f"+ {p.upstream[:12]} (prefix {p.k})") for p in prefixes),
             Candidate(unit.sha, unit.subject))
    outcome = Bisector(cands, _ConflictAware(probe), reporter, mode=mode, policy=policy,
                       parallel=parallel, better=better).run()
    return outcome, cands


def measurement_suite(suites: Sequence[Suite], metric: str, stored_suite: str | None) -> Suite:
    """The suite whose command measures `metric` in a bisection.

    In order: the suite that stored the metric's newest point; the metrics suite that declares it
    (`metrics = ["matmul.*"]`, globs); the only metrics suite.  Otherwise a UserError that names
    the suites it considered and what each declares.
    """
    by_name = {s.name: s for s in suites}
    if stored_suite and stored_suite in by_name:
        return by_name[stored_suite]
    pool = [s for s in suites if s.report is ReportFormat.METRICS]
    declaring = [s for s in pool if any(fnmatch.fnmatchcase(metric, g) for g in s.metrics)]
    if len(declaring) == 1:
        return declaring[0]
    if not declaring and len(pool) == 1 and not pool[0].metrics:
        return pool[0]
    fix = ("pass --command CMD, set `command` under [bisect] in forkflow.toml, or declare the metric "
           "on its suite: metrics = [\"name-or-glob\"]")
    if len(declaring) > 1:
        raise UserError(f"no single measurement command for {metric!r}: suites "
                        f"{', '.join(repr(s.name) for s in declaring)} all declare it; {fix} on one of them")
    if not pool:
        raise UserError(f"no measurement command for {metric!r}: forkflow.toml has no metrics suite "
                        f"(report = \"metrics\"); {fix}")
    seen = "; ".join(f"{s.name!r} ({s.tier.value}, metrics = {list(s.metrics)})" for s in pool)
    raise UserError(f"no measurement command for {metric!r}: no metrics suite declares it; considered "
                    f"{seen}; {fix}")


def suite_command(suite: Suite) -> tuple[str, dict[str, str]]:
    """A suite's command as a bisection runs it: its `{report}` is $FORKFLOW_METRICS_OUT."""
    return (suite.command.replace("{report}", '"$FORKFLOW_METRICS_OUT"').replace("{tests}", "")
            .replace("{artifacts}", '"${TMPDIR:-/tmp}"'), dict(suite.env))
