"""The Typer app, the command modules it mounts, and the one place errors become exit codes."""
from __future__ import annotations

import importlib
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import click
import typer
from rich.markup import escape

from forkflow import __version__
from forkflow.cli.common import err_console
from forkflow.errors import ForkflowError, GitError, StoreError, UserError

app = typer.Typer(
    name="forkflow",
    help="Keep a downstream fork close to its upstream, and prove every step safe.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module has `register(app)`; a subsystem adds its line here.
COMMAND_MODULES: tuple[str, ...] = (
    "forkflow.cli.ledger_cmds",
    "forkflow.cli.tiers_cmds",
    "forkflow.cli.ingest_cmds",
    "forkflow.cli.regress_cmds",
    "forkflow.cli.triage_cmds",
    "forkflow.cli.web_cmds",
    "forkflow.cli.workloads_cmds",
)


def _registered(typer_app: typer.Typer) -> set[str]:
    names = set()
    for c in typer_app.registered_commands:
        if c.name:
            names.add(c.name)
        elif c.callback is not None:
            names.add(c.callback.__name__.replace("_", "-"))
    for g in typer_app.registered_groups:
        name = g.name or (g.typer_instance.info.name if g.typer_instance else None)
        if isinstance(name, str):
            names.add(name)
    return names


def _mount(argv: list[str] | None = None) -> None:
    """Import command modules until the one that defines the invoked command is mounted.

    `forkflow status` then never pays for the dashboard's or the Ray runner's imports;
    `--help` and unknown commands mount everything.
    """
    wanted = next((a for a in (argv or []) if not a.startswith("-")), None)
    for name in COMMAND_MODULES:
        if name in _MOUNTED:
            continue
        importlib.import_module(name).register(app)
        _MOUNTED.add(name)
        if wanted is not None and wanted in _registered(app):
            return


_MOUNTED: set[str] = set()


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"forkflow {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """forkflow: upstream ingestion with tiered validation."""


def _crash_log(exc: BaseException) -> Path:
    from forkflow.git.run import git_version

    fd, name = tempfile.mkstemp(prefix="forkflow-crash-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        f.write(f"forkflow {__version__}\n{git_version()}\nPython {platform.python_version()} "
                f"on {platform.platform()}\nargv: {sys.argv}\ntime: {time.ctime()}\n\n")
        f.write("".join(traceback.format_exception(exc)))
    return Path(name)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; UserError -> 1, interrupted -> 130, a bug -> 3 with a crash log."""
    _mount(sys.argv[1:] if argv is None else argv)
    try:
        rv = app(args=argv, prog_name="forkflow", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except (UserError, StoreError) as e:
        err_console.print(f"[bold red]error:[/] {escape(one_line(str(e)))}", soft_wrap=True,
                          highlight=False, emoji=False)
        return 1
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except (GitError, ForkflowError, Exception) as e:  # noqa: BLE001  (the last resort)
        log = _crash_log(e)
        err_console.print(f"[bold red]error:[/] forkflow failed unexpectedly ({type(e).__name__}: "
                          f"{escape(one_line(str(e))[:300])}); details in {log}", soft_wrap=True)
        return 3


def run() -> None:
    sys.exit(main())
