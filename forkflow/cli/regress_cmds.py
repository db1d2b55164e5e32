"""`forkflow detect` (change points on L2 series -> alerts) and `forkflow bisect` (the culprit)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from forkflow.bisect.bisector import Candidate, Mode, RoundRecord, Status
from forkflow.bisect.probes import CommandProbe, Measurement, Probe
from forkflow.bisect.verdict import VerdictPolicy
from forkflow.bisect.workflow import (
    PER_RUN_POLICY,
    BisectReport,
    RunMedians,
    VerdictUnit,
    bisect_fork,
    measurement_suite,
    suite_command,
    verdict_unit,
)
from forkflow.cli.common import MAX_ID, JsonOpt, RepoOpt, StoreOpt, console, err_console, print_json, short
from forkflow import wiring
from forkflow.context import Context, open_context
from forkflow.errors import UserError
from forkflow.models import Better
from forkflow.regress import records
from forkflow.regress.alerts import Direction
from forkflow.regress.detect import DetectConfig
from forkflow.regress.records import Alert
from forkflow.regress.service import detect as detect_regressions


def detect(
    metric: Annotated[str, typer.Option("--metric", help="Shell glob of metric names.")] = "*",
    max_pvalue: Annotated[float, typer.Option(help="Significance a change must reach.")] = 0.01,
    min_magnitude: Annotated[float, typer.Option(help="Smallest relative change (0.02 = 2%).")] = 0.0,
    auto_bisect: Annotated[bool, typer.Option("--bisect", help="Bisect every new regression alert now "
                                              "(the \\[bisect] command, else the metric's L2 suite).")] = False,
    parallel: Annotated[int, typer.Option("--parallel", help="With --bisect: commits measured per round.")] = 1,
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Find change points on the stored L2 series and open alerts (one per commit range)."""
    if not 0 < max_pvalue < 1 or min_magnitude < 0:
        raise UserError("--max-pvalue must be in (0, 1) and --min-magnitude at least 0")
    ctx = open_context(repo, store)
    cfg = DetectConfig(max_pvalue=max_pvalue, min_magnitude=min_magnitude)
    detection = detect_regressions(wiring.metric_journal(ctx), metric, cfg)
    names, found, configs = list(detection.metrics), list(detection.alerts), detection.config_changes
    if not names and metric != "*":
        raise UserError(f"no stored L2 metric matches {metric!r}; run the L2 suites first, or pass "
                        "--metric with a glob of stored names")
    if not names:  # a fork whose L2 stores no metric yet: nothing to detect, nothing wrong (cron)
        print_json({"metrics": 0, "alerts": [], "bisections": [], "config_changes": []}) if json_out else \
            console.print("no L2 metric is stored yet: nothing to detect (an L2 suite with report = "
                          "\"metrics\" stores them)")
        return 0
    bisections = _bisect_new_alerts(ctx, found, parallel, json_out) if auto_bisect else []
    if auto_bisect:
        with ctx.store.session_scope() as s:
            found = [records.alert(s, ctx.fork_id, a.id) or a for a in found]
    if json_out:
        print_json({"metrics": len(names), "alerts": [_alert_dict(a) for a in found],
                    "bisections": bisections,
                    "config_changes": [{"metric": c.metric, "good": c.good_rev, "bad": c.bad_rev,
                                        "before_config": c.before_config, "after_config": c.after_config,
                                        "before": c.before, "after": c.after} for c in configs]})
        return 0
    console.print(f"{len(names)} metric(s) examined, {len(found)} alert(s)")
    for c in configs:
        console.print(f"config change on {escape(c.metric)} after {short(c.good_rev)} .. at {short(c.bad_rev)}: "
                      f"{escape(c.before_config or '(none recorded)')} -> {escape(c.after_config or '(none recorded)')} "
                      f"({c.before:.4g} -> {c.after:.4g}; not an alert: the series restarts)")
    for a in found:
        _render_alert(a)
    for b in bisections:
        console.print(f"alert {b['alert']}: bisection {b['id']} {b['status']}"
                      + (f", culprit {short(b['culprit'])}" if b.get("culprit") else "")
                      + f" (judged each {b['verdict_unit']}: {escape(b['verdict_unit_reason'])})")
    return 0


def _bisect_new_alerts(ctx: Context, found: Sequence[Alert], parallel: int,
                       quiet: bool) -> list[dict[str, Any]]:
    """Start a bisection for every regression alert that has none yet (`detect --bisect`)."""
    out: list[dict[str, Any]] = []
    for a in found:
        if a.direction is not Direction.REGRESSION or a.bisection_id is not None:
            continue
        metric = a.worst.metric
        cmd, env = _measurement_command(ctx, metric, None)
        unit = _unit_for(ctx, metric, None)
        report, doc = _bisect_metric(ctx, metric, a.good_rev, a.bad_rev, a.worst.better, a.id, cmd, env,
                                     pass_fail=False, policy=_policy(32, 2, unit.per_run), parallel=parallel,
                                     timeout=1800.0, quiet=quiet, unit=unit)
        culprit = report.culprit
        out.append({"alert": a.id, "id": doc["id"], "status": report.status.value,
                    "culprit": culprit.fork_sha if culprit is not None else None,
                    "verdict_unit": unit.name, "verdict_unit_reason": unit.reason})
    return out


def _unit_for(ctx: Context, metric: str, flag: bool | None) -> VerdictUnit:
    """--per-run / --per-sample, else what the metric's suite and newest stored point declare."""
    from forkflow.tiers.tiers import load_suites

    with ctx.store.session_scope() as s:
        newest = records.latest_metric_point(s, ctx.fork_id, metric)
    try:
        suite = measurement_suite(load_suites(ctx.config), metric, newest.suite if newest else None)
    except UserError:  # measured by --command or [bisect] command: no suite to ask
        suite = None
    return verdict_unit(metric, flag, newest.context if newest else None, suite)


def _policy(max_repeats: int, reruns: int, per_run: bool) -> VerdictPolicy:
    if per_run:
        return replace(PER_RUN_POLICY, max_repeats=min(max_repeats, PER_RUN_POLICY.max_repeats),
                       min_repeats=min(PER_RUN_POLICY.min_repeats, max_repeats), reruns=reruns)
    return VerdictPolicy(max_repeats=max_repeats, min_repeats=min(VerdictPolicy().min_repeats, max_repeats),
                         reruns=reruns)


def _measurement_command(ctx: Context, metric: str, command: str | None) -> tuple[str, dict[str, str]]:
    """--command, else [bisect] command, else the L2 suite that measured `metric` (its {report}
    becomes $FORKFLOW_METRICS_OUT)."""
    cmd = command or ctx.config.section("bisect").get("command")
    if isinstance(cmd, str) and cmd.strip():
        return cmd, {}
    from forkflow.tiers.tiers import load_suites

    with ctx.store.session_scope() as s:
        newest = records.latest_metric_point(s, ctx.fork_id, metric)
    return suite_command(measurement_suite(load_suites(ctx.config), metric, newest.suite if newest else None))


def _alert_dict(a: Alert) -> dict[str, Any]:
    return {
        "id": a.id, "good": a.good_rev, "bad": a.bad_rev, "direction": a.direction.value,
        "status": a.status, "bisection": a.bisection_id,
        "members": [{"metric": m.metric, "unit": m.unit, "better": m.better.value, "before": m.before,
                     "after": m.after, "magnitude": round(m.magnitude, 6), "pvalue": m.pvalue,
                     "direction": m.direction.value, "good": m.good_rev, "bad": m.bad_rev}
                    for m in a.members],
    }


def _render_alert(a: Alert) -> None:
    t = Table(title=f"alert {a.id}: {a.direction.value} after {short(a.good_rev)} .. at {short(a.bad_rev)}"
              f" ({a.status})")
    for col in ("metric", "before", "after", "change", "p-value", "direction"):
        t.add_column(col)
    for m in a.members:
        t.add_row(escape(m.metric), f"{m.before:.4g} {escape(m.unit)}", f"{m.after:.4g}",
                  f"{m.magnitude:+.2%}", f"{m.pvalue:.2g}", m.direction.value)
    console.print(t)
    if a.direction is Direction.REGRESSION and a.bisection_id is None:
        console.print(f"next: forkflow bisect --alert {a.id}")
    elif a.direction is Direction.REGRESSION:
        console.print(f"bisected: bisection {a.bisection_id}; to run it again: forkflow bisect --alert {a.id}")


class RoundReporter:
    """Bisection progress on stderr, one line per round start and end (quiet under --json)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def round_started(self, number: int, probes: Sequence[Candidate]) -> None:
        if not self.quiet:
            err_console.print(f"round {number}: measuring {', '.join(short(c.sha) for c in probes)}")

    def measured(self, candidate: Candidate, measurement: Measurement) -> None:
        pass

    def round_finished(self, record: RoundRecord) -> None:
        if not self.quiet:
            got = ", ".join(f"#{i} {v.value}" for i, v, _ in record.verdicts)
            err_console.print(f"  {record.measurements} measurements; {got or 'ends compared'}")


def bisect(
    metric: Annotated[str | None, typer.Option("--metric", help="The metric that changed.")] = None,
    good: Annotated[str | None, typer.Option("--good", help="A commit without the change.")] = None,
    bad: Annotated[str | None, typer.Option("--bad", help="A later commit with it.")] = None,
    alert_id: Annotated[int | None, typer.Option("--alert", min=1, max=MAX_ID, help="Bisect a stored alert.")] = None,
    test: Annotated[str | None, typer.Option("--test", help="Bisect where this test turned red (pass/fail, "
                                             "run by its suite's command).")] = None,
    suite: Annotated[str | None, typer.Option("--suite", help="With --test: its suite (default: the one "
                                              "whose stored runs have the test).")] = None,
    parallel: Annotated[int, typer.Option("--parallel", help="Commits measured per round (K).")] = 1,
    command: Annotated[str | None, typer.Option("--command", help="Measurement command "
                                                "(default: \\[bisect] command in forkflow.toml).")] = None,
    pass_fail: Annotated[bool, typer.Option("--pass-fail", help="Exit code 0 = pass, else fail.")] = False,
    max_repeats: Annotated[int, typer.Option(help="Most samples per commit.")] = 32,
    reruns: Annotated[int, typer.Option(help="Pass/fail: reruns of a failure before it counts.")] = 2,
    timeout: Annotated[float, typer.Option(help="Seconds per command run.")] = 1800.0,
    per_run: Annotated[bool | None, typer.Option("--per-run/--per-sample", help="Judge runs (each its "
                                                 "median) or samples; default: samples when the metric's "
                                                 "suite declares it per_sample or its stored points say "
                                                 "samples = paired, else runs when they ran on a GPU.")] = None,
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Name the landing unit and upstream commit that changed a metric or broke a test (exit 2: none)."""
    if parallel < 1 or max_repeats < 2 or reruns < 1:
        raise UserError("--parallel and --reruns must be at least 1 and --max-repeats at least 2")
    if not timeout > 0:
        raise UserError(f"--timeout must be more than 0 seconds, not {timeout:g}")
    policy = _policy(max_repeats, reruns, False)
    if test is not None:
        return _bisect_test(test, suite, good, bad, (metric, alert_id, command), policy, parallel,
                            json_out, repo, store)
    ctx = open_context(repo, store)
    metric, good, bad, better = _target(ctx, metric, good, bad, alert_id, pass_fail)
    if pass_fail:
        cmd = command or ctx.config.section("bisect").get("command")
        if not isinstance(cmd, str) or not cmd.strip():
            raise UserError("no test command; pass --command CMD or set `command` under [bisect] "
                            "in forkflow.toml")
        env: dict[str, str] = {}
    else:
        cmd, env = _measurement_command(ctx, metric, command)
    unit = None if pass_fail else _unit_for(ctx, metric, per_run)
    report, doc = _bisect_metric(ctx, metric, good, bad, better, alert_id, cmd, env, pass_fail=pass_fail,
                                 policy=_policy(max_repeats, reruns, unit is not None and unit.per_run),
                                 parallel=parallel, timeout=timeout, quiet=json_out, unit=unit)
    return _finish(report, doc, json_out)


def _bisect_metric(ctx: Context, metric: str, good: str, bad: str, better: Better | None,
                   alert_id: int | None, cmd: str, env: dict[str, str], *, pass_fail: bool,
                   policy: VerdictPolicy, parallel: int, timeout: float,
                   quiet: bool, unit: VerdictUnit | None = None) -> tuple[BisectReport, dict[str, Any]]:
    """Run one metric (or pass/fail) bisection with a measurement command and store it."""
    probe: Probe = CommandProbe(ctx.repo, cmd, None if pass_fail else metric, timeout=timeout, env=env)
    if unit is not None and unit.per_run and not pass_fail:
        probe = RunMedians(probe)
    if unit is not None and not pass_fail and not quiet:
        err_console.print(f"judging each {unit.name}: {escape(unit.reason)}", soft_wrap=True)
    try:
        report = bisect_fork(ctx.repo, metric, good, bad, probe, RoundReporter(quiet),
                             mode=Mode.PASS_FAIL if pass_fail else Mode.PERF, policy=policy,
                             parallel=parallel, better=better)
    finally:
        probe.close()
    doc = report.to_dict()
    doc["verdict_unit"] = "pass/fail" if pass_fail or unit is None else unit.name
    if unit is not None and not pass_fail:
        doc["verdict_unit_reason"] = unit.reason
    with ctx.store.session_scope() as s:
        doc["id"] = records.save_bisection(s, ctx.fork_id, alert_id, doc)
    return report, doc


def _bisect_test(test: str, suite: str | None, good: str | None, bad: str | None, other: tuple[object, ...],
                 policy: VerdictPolicy, parallel: int, json_out: bool, repo: Path, store: str | None) -> int:
    """`bisect --test ID --good A --bad B`: pass/fail with the test's own suite command."""
    from forkflow.triage.culprits import bisect_test, find_suite

    if any(o is not None for o in other):
        raise UserError("--test bisects with the test's suite command; drop --metric, --alert and --command")
    if not good or not bad:
        raise UserError("say where to look: --test ID --good A --bad B (A passes, B fails)")
    ctx = open_context(repo, store)
    t = wiring.triager(ctx)
    report, bisection_id = bisect_test(t, find_suite(t, test, suite), test, good, bad, policy=policy,
                                       parallel=parallel, reporter=RoundReporter(json_out))
    return _finish(report, report.to_dict() | {"id": bisection_id}, json_out)


def _finish(report: BisectReport, doc: dict[str, Any], json_out: bool) -> int:
    """Print the result; 0 when it names a culprit (or, for a metric, when nothing regressed), else 2."""
    if json_out:
        print_json(doc)
    else:
        _render_report(report, doc["id"])
    ok = (Status.FOUND,) if report.mode is Mode.PASS_FAIL else (
        Status.FOUND, Status.NO_DIFFERENCE, Status.NOT_A_REGRESSION)
    if report.status in ok:
        if not json_out:
            console.print(escape(report.message))
        return 0
    err_console.print(f"no culprit ({report.status.value}): {escape(report.message)}", soft_wrap=True)
    return 2


def _target(ctx: Context, metric: str | None, good: str | None, bad: str | None, alert_id: int | None,
            pass_fail: bool) -> tuple[str, str, str, Better | None]:
    """The metric and range to bisect, from the options or from a stored alert."""
    if alert_id is not None:
        with ctx.store.session_scope() as s:
            a = records.alert(s, ctx.fork_id, alert_id)
        if a is None:
            raise UserError(f"no alert {alert_id}; list alerts with: forkflow detect")
        metric = metric or a.worst.metric
        good, bad = good or a.good_rev, bad or a.bad_rev
    if pass_fail:
        metric = metric or "pass-fail"
    if not metric or not good or not bad:
        raise UserError("say what to bisect: --metric NAME --good A --bad B, or --alert ID")
    with ctx.store.session_scope() as s:
        newest = records.latest_metric_point(s, ctx.fork_id, metric)
    return metric, good, bad, newest.better if newest else None


def _render_report(r: BisectReport, bisection_id: int) -> None:
    console.print(f"bisection {bisection_id}: {r.status.value} ({r.rounds} rounds, {r.measurements} "
                  f"measurements, confidence {r.confidence:.1%})")
    for stage in r.stages:
        for rec in stage.outcome.rounds:
            console.print(f"  {stage.name} round {rec.number}: {len(rec.probes)} commit(s), "
                          f"{rec.measurements} measurements")
    c = r.culprit
    if c is not None and c.upstream_sha:  # the subject is the upstream commit's, not its landing unit's
        pr = f" (PR #{c.pr})" if c.pr else ""
        console.print(f"[bold]culprit:[/] upstream commit {short(c.upstream_sha)} {escape(c.subject)}{pr}")
        console.print(f"  landed in fork commit {short(c.fork_sha)}")
    elif c is not None:
        console.print(f"[bold]culprit:[/] fork commit {short(c.fork_sha)} {escape(c.subject)}")


def register(app: typer.Typer) -> None:
    app.command()(detect)
    app.command()(bisect)
