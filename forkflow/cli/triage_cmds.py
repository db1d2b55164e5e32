"""`forkflow triage RUN_ID`, `forkflow trunk`, `forkflow issues sync`."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from forkflow.cli.common import MAX_ID, JsonOpt, RepoOpt, StoreOpt, console, err_console, print_json, short
from forkflow import wiring
from forkflow.context import Context, open_context
from forkflow.errors import UserError
from forkflow.triage.models import Classification
from forkflow.triage.triage import Triager, triage_run

if TYPE_CHECKING:
    from forkflow.triage.culprits import RedBisection
    from forkflow.triage.trunk import RedItem

COLOUR = {Classification.NEW: "bold red", Classification.BROKEN_TRUNK: "yellow",
          Classification.FLAKY: "cyan", Classification.INFRA: "magenta"}


def triage(
    run_id: Annotated[int | None, typer.Argument(min=1, max=MAX_ID, help="The validation run to triage "
                                                 "(default: the newest failing run).")] = None,
    json_out: JsonOpt = False,
    reruns: Annotated[int | None, typer.Option(help="Automatic reruns per failure (default: \\[triage] reruns).")] = None,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Classify every failure of a run: NEW first, then BROKEN_TRUNK, FLAKY, INFRA."""
    if reruns is not None and reruns < 0:
        raise UserError(f"--reruns must be 0 or more, not {reruns}")
    triager = wiring.triager(open_context(repo, store))
    settings = triager.settings if reruns is None else replace(triager.settings, reruns=reruns)
    if run_id is None:
        run_id = newest_failing_run(triager)
        if not json_out:
            err_console.print(f"triaging run {run_id}, the newest failing run")
    report = triage_run(triager, run_id, settings=settings)
    if json_out:
        print_json(report.to_dict())
        return 0
    counts = "  ".join(f"{c.value}={len(report.of(c))}" for c in Classification)
    console.print(f"run {run_id} ({report.run.tier.value} at {short(report.run.rev)}): {counts}")
    for v in report.verdicts:
        sig = v.failure.signature
        console.print(f"[{COLOUR[v.classification]}]{v.classification.value:12}[/] "
                      f"{escape(v.failure.job)} :: {escape(v.failure.test)}  group {sig.key[:8]}")
        console.print(f"    {escape(sig.text[:160])}\n    why: {escape(v.reason)}")
        if v.action:  # INFRA: what to do about the machine or the environment
            console.print(f"    do: {escape(v.action)}")
        if v.classification is Classification.NEW and sig.excerpt:
            tail = "\n".join(sig.excerpt.splitlines()[-8:])
            console.print("    " + escape(tail).replace("\n", "\n    "), style="dim")
    if not report.verdicts:
        console.print("no failures")
    return 0


def newest_failing_run(triager: Triager) -> int:
    """The newest failed run that is not a rerun (its reruns are part of its triage)."""
    from forkflow.tiers.tiers import RunStatus

    for r in triager.journal.latest_runs(None, 500):
        if r.status == RunStatus.FAIL and r.parent_run_id is None:
            return r.id
    raise UserError("no failed validation run is stored; `forkflow triage RUN_ID` takes any run's id "
                    "(every `validate`, `nightly` and `ingest` prints it)")


def trunk(
    bisect: Annotated[bool, typer.Option("--bisect", help="Bisect each red test without a culprit (pass/fail, "
                                         "its suite's command, last green run .. first red run).")] = False,
    test: Annotated[list[str] | None, typer.Option("--test", help="With --bisect: only this red test "
                                                   "(repeatable).")] = None,
    again: Annotated[bool, typer.Option("--again", help="With --bisect: bisect tests already bisected.")] = False,
    reruns: Annotated[int, typer.Option(help="With --bisect: reruns of a failure before it counts.")] = 2,
    parallel: Annotated[int, typer.Option("--parallel", help="With --bisect: commits tested per round.")] = 1,
    json_out: JsonOpt = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """What is red on fork main now, since when, and the culprit where a bisection found one."""
    if (test or again) and not bisect:
        raise UserError("--test and --again go with --bisect: forkflow trunk --bisect --test ID")
    if reruns < 1 or parallel < 1:
        raise UserError("--reruns and --parallel must be at least 1")
    ctx = open_context(repo, store)
    done = _bisect_red(ctx, test or (), again, reruns, parallel, json_out) if bisect else []
    from forkflow.triage.trunk import trunk_health  # lazy: `forkflow triage` start-up stays light

    items = trunk_health(wiring.triager(ctx))
    if json_out:
        print_json({"red": [i.to_dict() for i in items], **({"bisected": [d.to_dict() for d in done]}
                                                            if bisect else {})})
        return 0
    _render_trunk(items, ctx)
    return 0


def _bisect_red(ctx: Context, tests: Sequence[str], again: bool, reruns: int, parallel: int,
                quiet: bool) -> list[RedBisection]:
    from forkflow.cli.regress_cmds import RoundReporter
    from forkflow.triage.culprits import bisect_red

    def start(item: RedItem) -> None:
        if not quiet:
            err_console.print(f"bisecting {escape(item.failure.test)}: {short(item.last_green_rev)} (green) .. "
                              f"{short(item.since_rev)} (first red)", soft_wrap=True)

    from forkflow.bisect.verdict import VerdictPolicy  # lazy: numpy is not needed to triage a run

    done = bisect_red(wiring.triager(ctx), tests, again=again, policy=VerdictPolicy(reruns=reruns), parallel=parallel,
                      reporter=RoundReporter(quiet), on_start=start)
    for d in done:
        what = f"bisection {d.bisection_id}: {d.status.value}" if d.status else "not bisected"
        err_console.print(f"{escape(d.item.failure.test)}: {what}: {escape(d.reason)}", soft_wrap=True)
    return done


def _render_trunk(items: Sequence[RedItem], ctx: Context) -> None:
    if not items:
        from forkflow.tiers import records as tq
        from forkflow.tiers.tiers import Tier

        with ctx.store.session_scope() as s:
            ran = any(tq.latest_runs(s, ctx.fork_id, tier, limit=1) for tier in (Tier.L1, Tier.L2))
        console.print("trunk is green (in the newest L1 and L2 runs of fork main)" if ran else
                      "no L1 or L2 run of fork main is stored yet: run `forkflow validate --tier L1` "
                      "or `forkflow nightly`, then look again")
        return
    t = Table(title="red on fork main")
    for col in ("tier", "test", "since", "runs red", "culprit", "signature"):
        t.add_column(col, overflow="fold")
    t.add_column("red in", overflow="fold")
    for i in items:
        culprit = i.culprit or (f"known flaky: {i.flaky}" if i.flaky else None) or (
            f"nobody ({i.bisection.status}, bisection {i.bisection.id})" if i.bisection else "-")
        t.add_row(i.tier, escape(f"{i.failure.job} :: {i.failure.test}"),
                  f"run {i.since_run_id} {short(i.since_rev)}", str(i.runs_red),
                  escape(culprit), escape(i.failure.signature.text[:100]),
                  f"run {i.red_run_id} {short(i.red_rev)}")
    console.print(t)
    if any(i.culprit is None and i.bisection is None and i.bisectable for i in items):
        console.print("next: forkflow trunk --bisect (finds the culprits)")


issues_app = typer.Typer(help="Tracking issues for nightly failures.", no_args_is_help=True)


@issues_app.command("sync")
def issues_sync(json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None) -> int:
    """Open, update or close one tracking issue per failure group of the newest nightly."""
    ctx = open_context(repo, store)
    from forkflow.regress.service import StoreAlertFeed
    from forkflow.triage.tracking import make_agent, make_sink, sync_tracking  # lazy, as above

    result = sync_tracking(wiring.triager(ctx), make_sink(ctx.config), make_agent(ctx.config),
                           alerts=StoreAlertFeed(ctx.store, ctx.fork_id))
    if json_out:
        print_json(result.to_dict())
        return 0
    if result.run_id is None:
        console.print("no nightly run yet: run `forkflow nightly` first")
        return 0
    for step, ref in result.steps:
        where = f" -> {ref.url}" if ref else ""
        what = step.key if step.key.startswith("alert-") else f"group {step.key[:8]}"
        if step.items and step.items[0].flaky:
            where = f": {', '.join(i.failure.test for i in step.items[:3])} known flaky, not filed"
        console.print(f"{step.action.value:7} {what}{escape(where)}")
    if not result.steps:
        console.print(f"tracking issues already match nightly run {result.run_id}")
    return 0


def register(app: typer.Typer) -> None:
    app.command()(triage)
    app.command()(trunk)
    app.add_typer(issues_app, name="issues")
