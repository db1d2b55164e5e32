"""`forkflow triage RUN_ID`, `forkflow trunk`, `forkflow issues sync`."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from forkflow.cli.common import JsonOpt, RepoOpt, StoreOpt, console, print_json, short
from forkflow.context import open_context
from forkflow.triage.models import Classification
from forkflow.triage.tracking import sync_tracking
from forkflow.triage.triage import TriageSettings, load_settings, triage_run
from forkflow.triage.trunk import trunk_health

COLOUR = {Classification.NEW: "bold red", Classification.BROKEN_TRUNK: "yellow",
          Classification.FLAKY: "cyan", Classification.INFRA: "magenta"}


def triage(
    run_id: Annotated[int, typer.Argument(help="The validation run to triage.")],
    json_out: JsonOpt = False,
    reruns: Annotated[int | None, typer.Option(help="Automatic reruns per failure (default: [triage] reruns).")] = None,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Classify every failure of a run: NEW first, then BROKEN_TRUNK, FLAKY, INFRA."""
    ctx = open_context(repo, store)
    settings = load_settings(ctx.config)
    if reruns is not None:
        settings = TriageSettings(reruns, settings.min_clean_reruns, settings.history_runs,
                                  settings.close_after, settings.sink)
    report = triage_run(ctx, run_id, settings=settings)
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
        if v.classification is Classification.NEW and sig.excerpt:
            tail = "\n".join(sig.excerpt.splitlines()[-8:])
            console.print("    " + escape(tail).replace("\n", "\n    "), style="dim")
    if not report.verdicts:
        console.print("no failures")
    return 0


def trunk(json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None) -> int:
    """What is red on fork main now, since when, and the culprit where one is known."""
    ctx = open_context(repo, store)
    items = trunk_health(ctx)
    if json_out:
        print_json({"red": [i.to_dict() for i in items]})
        return 0
    if not items:
        console.print("trunk is green (in the newest L1 and L2 runs of fork main)")
        return 0
    t = Table(title="red on fork main")
    for col in ("tier", "test", "since", "runs red", "culprit", "signature"):
        t.add_column(col, overflow="fold")
    for i in items:
        t.add_row(i.tier, escape(f"{i.failure.job} :: {i.failure.test}"),
                  f"run {i.since_run_id} {short(i.since_rev)}", str(i.runs_red),
                  escape(i.culprit or "-"), escape(i.failure.signature.text[:100]))
    console.print(t)
    return 0


issues_app = typer.Typer(help="Tracking issues for nightly failures.", no_args_is_help=True)


@issues_app.command("sync")
def issues_sync(json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None) -> int:
    """Open, update or close one tracking issue per failure group of the newest nightly."""
    ctx = open_context(repo, store)
    result = sync_tracking(ctx)
    if json_out:
        print_json(result.to_dict())
        return 0
    if result.run_id is None:
        console.print("no nightly run yet: run `forkflow nightly` first")
        return 0
    for step, ref in result.steps:
        where = f" -> {ref.url}" if ref else ""
        console.print(f"{step.action.value:7} group {step.key[:8]}{escape(where)}")
    if not result.steps:
        console.print(f"tracking issues already match nightly run {result.run_id}")
    return 0


def register(app: typer.Typer) -> None:
    app.command()(triage)
    app.command()(trunk)
    app.add_typer(issues_app, name="issues")
