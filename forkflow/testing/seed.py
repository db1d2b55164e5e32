"""A store filled with a fork's year: the dashboard's tests, its benchmark and `forkflow demo --serve`.

    info = seed_store(store, "triton:main", SeedSize(days=365, metrics=50, upstream_commits=5000))

Everything is written through each area's own write functions (snapshots, metric points, landing
units, conflicts, validation runs, L3, alerts, bisections, triage), so what the pages read is what
those areas store.  SHAs are made up (sha1 of a label); `hostile=True` puts HTML and script in
commit subjects, unit names, logs and signatures, for the escaping tests.
"""
from __future__ import annotations

import hashlib
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from forkflow.ledger.build import ledger_to_json
from forkflow.models import (
    Better,
    Commit,
    Disposition,
    Evidence,
    EvidenceKind,
    Ledger,
    LedgerEntry,
    MemberOutcome,
    MetricPoint,
    PointInTime,
    RecordedDecision,
    Sha,
    UnitState,
)
from forkflow.ledger import records as ledger_records
from forkflow.regress import records as regress_records
from forkflow.store import forks
from forkflow.store.session import Store

if TYPE_CHECKING:
    from forkflow.regress.alerts import SeriesChange

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
DAY = 86400
START = int(datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp())


@dataclass(frozen=True, slots=True)
class SeedSize:
    days: int = 365
    metrics: int = 50
    upstream_commits: int = 5000
    tests_per_run: int = 12


@dataclass
class SeedInfo:
    fork_id: int
    fork_revs: list[Sha]
    upstream: list[Sha]
    metric_names: list[str]
    alert_ids: list[int] = field(default_factory=list)
    bisection_ids: list[int] = field(default_factory=list)
    culprit_upstream: Sha | None = None
    culprit_subject: str = ""
    unit_ids: list[int] = field(default_factory=list)
    candidates: list[Sha] = field(default_factory=list)
    conflict_ids: list[int] = field(default_factory=list)
    nightly_run_ids: list[int] = field(default_factory=list)
    l3_request_ids: list[int] = field(default_factory=list)
    group_keys: list[str] = field(default_factory=list)


def sha_of(label: str) -> Sha:
    return Sha(hashlib.sha1(label.encode()).hexdigest())


# (name pattern, unit, better, typical value) of the seeded metrics, by kind
KINDS: tuple[tuple[str, str, Better, float], ...] = (
    ("matmul/fp16/{s}:tflops", "TFLOP/s", Better.HIGHER, 310.0),
    ("matmul/fp8/{s}:tflops", "TFLOP/s", Better.HIGHER, 580.0),
    ("softmax/{s}:latency", "us", Better.LOWER, 42.0),
    ("layernorm/{s}:latency", "us", Better.LOWER, 35.0),
    ("rope/{s}:latency", "us", Better.LOWER, 18.0),
    ("torch_compile/{s}:compile_time", "s", Better.LOWER, 61.0),
    ("fsdp2/{s}:tokens_per_s", "tok/s", Better.HIGHER, 15800.0),
    ("fsdp2/{s}:loss_drift", "", Better.LOWER, 0.002),
)


def _metric_names(n: int) -> list[str]:
    shapes = ["M1024-N1024-K1024", "M2048-N2048-K2048", "M4096-N4096-K4096", "M8192-N1024-K8192",
              "M512-N4096-K4096", "M16384-N2048-K1024"]
    out = []
    for i in range(n):
        pattern = KINDS[i % len(KINDS)][0]
        out.append(pattern.format(s=shapes[(i // len(KINDS)) % len(shapes)]) +
                   ("" if i < len(KINDS) * len(shapes) else f"#{i}"))
    return out


def _metric_meta(i: int) -> tuple[str, Better, float]:
    """(unit, better, typical value) of metric `i`."""
    _, unit, better, base = KINDS[i % len(KINDS)]
    return unit, better, base


# The two steps seeded into the series, (fraction of the days, metrics it moves, factor when
# higher is better, factor when lower is better); the seeded alerts are read off the series.
STEPS: tuple[tuple[float, Callable[[int], bool], float, float], ...] = (
    (0.5, lambda i: i % 7 == 1, 1.06, 0.94),   # an improvement mid-year
    (0.8, lambda i: i % 5 == 0, 0.9, 1.12),    # a regression late in the year
)


def seed_store(store: Store, fork: str = "triton:main", size: SeedSize = SeedSize(), *,
               hostile: bool = False, ingestion: bool = True, culprit: tuple[Sha, str] | None = None,
               seed: int = 7, start: int = START) -> SeedInfo:
    """Write a fork's simulated year into `store`; returns the ids and shas the tests look for.

    Args:
        ingestion: also write a ledger, landing units and a conflict (False when the store
            already has real ones, as after `forkflow demo`).  The daily snapshots of days
            behind and backlog are written either way, older than any real one.
        culprit: a real upstream commit (sha, subject) for the seeded bisection to blame.
        start: the first seeded day (Unix time); `demo --serve` ends the year at today.
    """
    rnd = random.Random(seed)
    with store.session_scope() as s:
        fid = forks.fork_id(s, fork)
    revs = [sha_of(f"fork-nightly-{d}") for d in range(size.days)]
    upstream = [sha_of(f"upstream-{i}") for i in range(size.upstream_commits)]
    info = SeedInfo(fid, revs, upstream, _metric_names(size.metrics))
    subjects = [_subject(i, hostile and i % 97 == 3) for i in range(len(upstream))]
    with store.session_scope() as s:
        if ingestion:
            _ledger(s, fid, upstream, subjects, size.days, start)
        _snapshots(s, fid, size.days, len(upstream), rnd, start)
    if ingestion:
        with store.session_scope() as s:
            _ingestion(s, fid, info, subjects, hostile)
    with store.session_scope() as s:
        values = _metrics(s, fid, info, size, rnd, start)
    with store.session_scope() as s:
        _alerts(s, fid, info, values, subjects, culprit)
    with store.session_scope() as s:
        _validation(s, fid, info, size, rnd, hostile, start)
    with store.session_scope() as s:
        _l3(s, fid, info)
    with store.session_scope() as s:
        _triage(s, fid, info, hostile)
    return info


def _subject(i: int, hostile: bool) -> str:
    areas = ["[AMD]", "[NVIDIA]", "[FRONTEND]", "[BACKEND]", "[INTERPRETER]", "[BUILD]", "[TESTS]"]
    text = f"{areas[i % len(areas)]} change {i}: tune the pipeline for case {i % 37} (#{4000 + i})"
    return f"{text} {HOSTILE}" if hostile else text


def _ledger(s: Session, fid: int, upstream: list[Sha], subjects: list[str], days: int, start: int) -> None:
    n = len(upstream)
    step = max(1, (days + 30) * DAY // max(n, 1))
    point = max(0, int(n * 0.96) - 1)
    entries = []
    ev: tuple[Evidence, ...]
    forks: tuple[Sha, ...]
    for i, sha in enumerate(upstream):
        c = Commit(sha, (upstream[i - 1],) if i else (), start - 30 * DAY + i * step, subjects[i],
                   author="Upstream Dev")
        if i <= point and i % 50 == 7:
            disp, ev, forks = Disposition.SKIPPED, (), ()
        elif i <= point and i % 61 == 5:
            disp, ev, forks = Disposition.DEFERRED, (), ()
        elif i <= point or i % 40 == 0:
            f = sha_of(f"fork-pick-{i}")
            disp, forks = Disposition.PICKED, (f,)
            ev = (Evidence(EvidenceKind.TRAILER, f, f"Upstream-Commit: {sha}"),)
        else:
            disp, ev, forks = Disposition.PENDING, (), ()
        entries.append(LedgerEntry(c, 4000 + i, disp, forks, ev))
    ledger = Ledger(fork_point=sha_of("fork-point"), fork_tip=sha_of(f"fork-nightly-{days - 1}"),
                    upstream_tip=PointInTime(upstream[-1], entries[-1].commit.date),
                    ingestion_point=PointInTime(upstream[point], entries[point].commit.date),
                    ingestion_point_inferred=False, entries=tuple(entries), computed_at=start + days * DAY)
    ledger_records.save_ledger(s, fid, sha_of(f"ledger-{fid}"), ledger_to_json(ledger))
    for e in entries:
        if e.disposition in (Disposition.SKIPPED, Disposition.DEFERRED):
            reason = "reverted upstream" if e.disposition is Disposition.SKIPPED else \
                f"chain warp-spec: waits for {upstream[max(0, upstream.index(e.commit.sha) - 1)][:12]}"
            ledger_records.record_decision(s, fid, RecordedDecision(
                e.commit.sha, e.disposition, reason, (),
                chain="warp-spec" if e.disposition is Disposition.DEFERRED else ""))


def _snapshots(s: Session, fid: int, days: int, commits: int, rnd: random.Random, start: int) -> None:
    for d in range(days):
        behind = round(2 + (d % 14) * 0.9 + rnd.random(), 2)  # saw-tooth: a weekly-ish ingestion
        backlog = int(behind * 9 + rnd.randint(0, 10))
        ledger_records.save_snapshot(s, fid, ledger_records.Snapshot(
            datetime.fromtimestamp(start + d * DAY, tz=timezone.utc), "backfill",
            sha_of(f"fork-nightly-{d}"), sha_of(f"upstream-tip-{d}"), sha_of(f"point-{d}"), False,
            behind, backlog, {"PICKED": int(commits * d / days), "PENDING": backlog}))


def _ingestion(s: Session, fid: int, info: SeedInfo, subjects: list[str], hostile: bool) -> None:
    from forkflow.conflicts import records as conflicts
    from forkflow.landing import records

    upstream, base = info.upstream, info.fork_revs[-1]
    run_id = records.start_run(s, fid, "land", base)
    plan = [("bundle", "bundle-1", UnitState.LANDED, 40), ("chain", "warp-spec#1", UnitState.LANDED, 1),
            ("chain", "llvm-pin", UnitState.FAILED, 1), ("bundle", "bundle-2", UnitState.LANDED, 30),
            ("chain", "warp-spec#2", UnitState.CONFLICT, 1), ("bundle", "bundle-3", UnitState.PASSED, 25)]
    pos = max(0, len(upstream) - sum(p[3] for p in plan) - 5)
    for kind, name, status, count in plan:
        members = [(upstream[i], MemberOutcome.APPLIED) for i in range(pos, min(pos + count, len(upstream)))]
        pos += count
        if not members:
            break
        cand = sha_of(f"candidate-{name}") if status != "conflict" else None
        summary = {"landed": "L1 passed (3 suites, 214 tests)", "failed": "L1 failed: 2 tests in lit",
                   "conflict": "conflict in lib/Dialect/TritonGPU/Transforms/WarpSpec.cpp",
                   "passed": "L1 passed; waiting to land"}[status]
        if hostile and name == "bundle-2":
            name, summary = f"bundle-2 {HOSTILE}", f"{summary} {HOSTILE}"
        if cand is not None:
            info.candidates.append(cand)
        reasons = {sha: _routing_reason(name, j, hostile) for j, (sha, _) in enumerate(members)}
        info.unit_ids.append(records.add_unit(s, run_id, fid, kind, name, base, cand, status, members, summary,
                                              reasons=reasons))
        if status == "conflict":
            sha = members[0][0]
            info.conflict_ids.append(conflicts.upsert_conflict(
                s, fid, upstream_sha=sha, subject=subjects[upstream.index(sha)],
                path="lib/Dialect/TritonGPU/Transforms/WarpSpec.cpp", kind="content", chain="warp-spec",
                base_sha=base, key=sha_of(f"key-{sha}"),
                marked="<<<<<<< fork\nauto x = warpSpec(a);\n=======\nauto x = warpSpec(a, b);\n>>>>>>> upstream\n",
                tried=["recorded: no recorded resolution", "trivial: both sides changed the same line"]))
    records.finish_run(s, run_id)


def _routing_reason(unit: str, j: int, hostile: bool) -> str:
    """What `forkflow plan` would have said about the j-th commit of a seeded unit."""
    if unit.startswith("warp-spec"):
        return ("touches lib/Dialect/TritonGPU/Transforms/WarpSpec.cpp, declared in chain warp-spec "
                "(lib/Dialect/TritonGPU/Transforms/WarpSpec*)")
    if unit == "llvm-pin":
        return "updates pin file cmake/llvm-hash.txt"
    if hostile and unit.startswith("bundle-2") and j == 0:
        return f"low risk: touches no chain, pin file or fork change {HOSTILE}"
    return "low risk: touches no chain, pin file or fork change"


def _value(i: int, d: int, base: float, better: Better, rnd: random.Random, days: int) -> float:
    noise = 1 + rnd.gauss(0, 0.006)
    trend = 1 + 0.02 * math.sin(d / 45)
    step = 1.0
    for at, moves, higher, lower in STEPS:
        if moves(i) and d >= int(days * at):
            step *= higher if better is Better.HIGHER else lower
    return base * noise * trend * step


def _metrics(s: Session, fid: int, info: SeedInfo, size: SeedSize, rnd: random.Random,
             start: int) -> list[list[float]]:
    """Write every metric's series; returns the values, by metric then day."""
    points, values = [], []
    for i, name in enumerate(info.metric_names):
        unit, better, base = _metric_meta(i)
        series = [_value(i, d, base, better, rnd, size.days) for d in range(len(info.fork_revs))]
        values.append(series)
        points += [MetricPoint(name, rev, v, unit, better, (v,), suite="nightly-bench",
                               measured_at=start + d * DAY + 3600, commit_date=start + d * DAY)
                   for d, (rev, v) in enumerate(zip(info.fork_revs, series))]
    regress_records.add_metric_points(s, fid, points)
    return values


def _change(name: str, i: int, series: list[float], at: int, good: Sha, bad: Sha) -> SeriesChange:
    """The change at day `at` of a seeded series: medians of the two weeks (at most) either side."""
    from forkflow.regress.alerts import SeriesChange

    unit, better, _ = _metric_meta(i)
    w = max(1, min(14, len(series) // 10))
    before, after = statistics.median(series[max(0, at - w):at]), statistics.median(series[at:at + w])
    return SeriesChange(name, unit, better, good, bad, before, after, (after - before) / before, 0.0004)


def _alerts(s: Session, fid: int, info: SeedInfo, values: list[list[float]], subjects: list[str],
            real: tuple[Sha, str] | None) -> None:
    from forkflow.regress import records
    from forkflow.regress.alerts import AlertDraft

    days = len(info.fork_revs)
    for fraction, moves, _, _ in STEPS:
        at = int(days * fraction)
        if at < 1:
            continue
        good, bad = info.fork_revs[at - 1], info.fork_revs[at]
        members = [_change(name, i, values[i], at, good, bad)
                   for i, name in enumerate(info.metric_names) if moves(i)]
        if members:
            info.alert_ids += [a.id for a in records.save_alerts(s, fid, [AlertDraft(good, bad, tuple(members))])]
    if len(info.alert_ids) < 2 or (not info.upstream and real is None):
        return
    idx = min(len(info.upstream) - 1, int(len(info.upstream) * 0.5))
    culprit, subject = real if real is not None else (info.upstream[idx], subjects[idx])
    pr = 4000 + idx if real is None else None
    at = int(days * STEPS[1][0])
    good, bad = info.fork_revs[at - 1], info.fork_revs[at]
    moved = _change(info.metric_names[0], 0, values[0], at, good, bad)
    result = {"metric": moved.metric, "mode": "perf", "good": good,
              "bad": bad, "status": "found", "confidence": 0.97, "rounds": 5, "measurements": 60,
              "message": f"landing unit {bad[:12]} changed {moved.metric} by {moved.magnitude * 100:+.1f}% "
                         f"(p={moved.pvalue})",
              "culprit": {"fork_commit": bad, "landing_unit": bad, "subject": subject,
                          "upstream_commit": culprit, "pr": pr},
              "stages": [{"name": "landing units", "status": "found", "message": "one unit", "confidence": 0.99,
                          "suspects": [bad], "skipped": {}, "rounds": [{}] * 3},
                         {"name": f"bundle {bad[:12]}", "status": "found", "message": "one commit",
                          "confidence": 0.98, "suspects": [culprit], "skipped": {}, "rounds": [{}] * 2}]}
    info.bisection_ids.append(records.save_bisection(s, fid, info.alert_ids[1], result))
    info.culprit_upstream, info.culprit_subject = culprit, subject


def _validation(s: Session, fid: int, info: SeedInfo, size: SeedSize, rnd: random.Random,
                hostile: bool, start: int) -> None:
    from forkflow.tiers import records as tq
    from forkflow.tiers.reports import TestOutcome, TestResult
    from forkflow.tiers.tiers import RunStatus, Tier

    suites = ("lit", "unit", "kernels")
    for d, rev in enumerate(info.fork_revs):
        red = d % 29 == 11 or d == len(info.fork_revs) - 2
        run_id, jobs = tq.create_run(s, fid, tq.NewRun(
            Tier.L2, rev, None, "local", "nightly", start + d * DAY, (), suites, {}),
            [tq.NewJob(x, f"run {x}", f"/logs/{d}/{x}.log", "", "", False, None, size.tests_per_run)
             for x in suites])
        for j, (suite, job_id) in enumerate(zip(suites, jobs)):
            results = [TestResult(f"{suite}/test_{k}.py::case", TestOutcome.PASS, 0.4)
                       for k in range(size.tests_per_run)]
            results[-1] = TestResult(results[-1].test_id, TestOutcome.SKIP, 0.0)
            findings: tuple[str, ...] = ()
            status = RunStatus.PASS
            if red and suite == "kernels":
                msg = "RuntimeError: CUDA error: an illegal memory access" + (f" {HOSTILE}" if hostile else "")
                results[0] = TestResult(results[0].test_id, TestOutcome.FAIL, 1.2, msg)
                status = RunStatus.FAIL
            short = d % 53 == 17 or d == len(info.fork_revs) - 5
            if short and suite == "lit":
                results = results[:-2]
                findings = (f"suite lit ran {len(results)} tests, expected {size.tests_per_run}",)
                status = RunStatus.FAIL
            tq.finish_job(s, job_id, tq.JobFinish(status, 0 if status == RunStatus.PASS else 1, 30.0 + j,
                                                  "", len(results), len(results), len(results), findings,
                                                  (), 1), results)
        bad = red or d % 53 == 17 or d == len(info.fork_revs) - 5
        tq.finish_run(s, run_id, RunStatus.FAIL if bad else RunStatus.PASS, "nightly L2", ())
        info.nightly_run_ids.append(run_id)
    for cand in info.candidates:
        run_id, jobs = tq.create_run(s, fid, tq.NewRun(Tier.L1, cand, info.fork_revs[-1], "local", "gate",
                                                       start + size.days * DAY, ("python/foo.py",), suites, {}),
                                     [tq.NewJob(x, f"run {x}", "", "", "", True, None, None) for x in suites])
        for suite, job_id in zip(suites, jobs):
            tq.finish_job(s, job_id, tq.JobFinish(RunStatus.PASS, 0, 12.0, "", 5, 5, 5, (), (), 1),
                          [TestResult(f"{suite}/t{k}", TestOutcome.PASS) for k in range(5)])
        tq.finish_run(s, run_id, RunStatus.PASS, "L1 gate", ())


def _l3(s: Session, fid: int, info: SeedInfo) -> None:
    from forkflow.tiers import records as tq
    from forkflow.tiers.tiers import RunStatus, Tier

    rev = info.fork_revs[-1]
    for k, note in enumerate(("llama-70b training before the branch cut", "serving latency check")):
        rid = tq.add_l3_request(s, fid, "fsdp-training" if k == 0 else "serving", rev, "alice", note)
        run_id, jobs = tq.create_run(s, fid, tq.NewRun(Tier.L3, rev, None, "local", "l3", 0, (),
                                                       ("fsdp-training",), {}, l3_request_id=rid),
                                     [tq.NewJob("fsdp-training", "train", "", "", "", False, None, None)])
        tq.finish_run(s, run_id, RunStatus.PASS, "L3 run", ())
        if k == 1:
            tq.add_signoff(s, rid, run_id, "serving-oncall", "accept", "p99 within budget")
        info.l3_request_ids.append(rid)


def _triage(s: Session, fid: int, info: SeedInfo, hostile: bool) -> None:
    from forkflow.triage import records as ts
    from forkflow.triage.models import Classification, Diagnosis, Failure, FailureKind, Signature

    extra = f" {HOSTILE}" if hostile else ""
    sigs = [Signature(FailureKind.CUDA_ERROR, "CUDA_ERROR: illegal memory access @ matmul.py:launch" + extra,
                      "Traceback (most recent call last):\n  File \"matmul.py\", line 88, in launch\n"
                      "RuntimeError: CUDA error: an illegal memory access was encountered" + extra, 3),
            Signature(FailureKind.FILECHECK, "FILECHECK: expected string not found: ttg.warp_specialize",
                      "error: CHECK: expected string not found in input\n// CHECK: ttg.warp_specialize", 12),
            Signature(FailureKind.INFRA, "INFRA: runner lost connection to the Ray head", "ray: lost head", 1)]
    classes = [Classification.NEW, Classification.BROKEN_TRUNK, Classification.INFRA]
    runs = info.nightly_run_ids[-6:]
    for n, run_id in enumerate(runs):
        failures = [Failure(f"kernels/test_{k}.py::case", sigs[k % 3], run_id, "kernels")
                    for k in range(3) if (k + n) % 2 == 0 or k == 0]
        ts.save_failures(s, fid, run_id, failures)
        s.flush()
        ts.save_verdicts(s, run_id, [Diagnosis(f, classes[sigs.index(f.signature)] if n % 3 else
                                             Classification.FLAKY, "seeded", (n % 2 == 0,))
                                     for f in failures])
    info.group_keys = [sg.key for sg in sigs]
    ts.save_tracking(s, fid, ts.Tracking(sigs[0].key, "markdown", "issue-1", "https://example.invalid/issues/1",
                                         True, 0, runs[-1] if runs else 0))
