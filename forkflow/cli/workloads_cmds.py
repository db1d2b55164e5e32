"""`forkflow workloads list | add NAME | run NAME`: the reference workload pack."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from forkflow.cli.common import JsonOpt, RepoOpt, console, print_json
from forkflow.errors import UserError
from forkflow.workloads import all_workloads, get_workload
from forkflow.workloads.device import require_packages
from forkflow.workloads.suite_toml import add_suite, render_suite

workloads_app = typer.Typer(help="The reference workload pack for Triton/PyTorch forks.",
                            no_args_is_help=True)


@workloads_app.command("list")
def list_(json_out: JsonOpt = False) -> int:
    """Every workload: tier, report, whether it needs a GPU, and what is missing to run it here."""
    rows = []
    for w in all_workloads().values():
        missing = w.missing_here()
        rows.append({"name": w.name, "tier": w.tier.value, "report": w.report.value,
                     "needs_gpu": w.needs_gpu, "expect_tests": w.expect_tests,
                     "command": w.command, "missing": list(missing), "ready": not missing,
                     "summary": w.summary, "description": w.description})
    if json_out:
        print_json(rows)
        return 0
    t = Table("name", "tier", "report", "GPU", "tests", "ready here", "what it measures")
    for r in rows:
        ready = "yes" if not r["missing"] else "needs " + ", ".join(r["missing"])  # type: ignore[arg-type]
        t.add_row(str(r["name"]), str(r["tier"]), str(r["report"]),
                  "needs" if r["needs_gpu"] else "optional", str(r["expect_tests"] or "-"),
                  ready, escape(str(r["summary"])))
    console.print(t)
    console.print("add one to forkflow.toml: forkflow workloads add NAME")
    return 0


@workloads_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The workload (see: forkflow workloads list).")],
    suite: Annotated[str | None, typer.Option("--suite", help="Suite name (default: the workload's).")] = None,
    paths: Annotated[list[str] | None, typer.Option("--path", help="What the suite covers, for "
                                                   "test selection (repeatable).")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", min=0, help="GPUs the suite asks the runner for.")] = None,
    timeout: Annotated[str | None, typer.Option("--timeout", help='e.g. "20m".')] = None,
    repo: RepoOpt = Path("."),
) -> int:
    """Append a \\[\\[suite]] that runs workload NAME to forkflow.toml."""
    w = get_workload(name)
    _check_options(suite, timeout)
    entry = w.suite_entry(suite, tuple(paths) if paths else None, gpus, timeout)
    path = add_suite(repo, entry)
    console.print(f"added suite '{entry['name']}' ({w.tier.value}, {w.report.value}) to {path}")
    if w.missing_packages():
        console.print(f"note: it needs {', '.join(w.missing_packages())} where it runs: "
                      "pip install 'forkflow[gpu]'")
    return 0


def _check_options(suite: str | None, timeout: str | None) -> None:
    """The options `add` writes as given, checked as the suite loader checks them, each error naming
    its option: the loader's own error names a line of forkflow.toml that was never written."""
    from forkflow.config import parse_config
    from forkflow.tiers.tiers import load_suites, parse_duration

    if timeout is not None and parse_duration(timeout) is None:
        raise UserError(f"--timeout {timeout!r} is not a duration; write it like 90s, 20m or 2h")
    if suite is not None:
        try:
            load_suites(parse_config(render_suite({"name": suite, "command": "true"}), None))
        except UserError:
            raise UserError(f"--suite {suite!r} is not a suite name; use up to 100 letters, digits, '.', "
                            "'_' or '-', starting with a letter or digit") from None


@workloads_app.command("run", context_settings={"allow_extra_args": True,
                                                "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The workload (see: forkflow workloads list).")],
    report: Annotated[Path | None, typer.Option("--report", help="Where the report goes "
                                                "(default: NAME-report.xml or .json here).")] = None,
) -> int:
    """Run workload NAME alone; options after NAME go to the workload (e.g. --only, --shapes)."""
    w = get_workload(name)
    require_packages(w.requires, f"workload '{w.name}'")
    out = report or Path(f"{w.name}-report{w.report_suffix}")
    cmd = [sys.executable, "-m", f"forkflow.workloads.{w.module}", "--report", str(out), *ctx.args]
    return subprocess.run(cmd, env=dict(os.environ), check=False).returncode


def register(app: typer.Typer) -> None:
    app.add_typer(workloads_app, name="workloads")
