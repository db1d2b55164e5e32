"""The Typer app, the command modules it mounts, and the one place errors become exit codes."""
from __future__ import annotations

import gc
import importlib
import os
import platform
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

import click
import typer

# Typer 0.2x ships its own copy of click; older ones raise click's own exceptions.  Its
# ClickException is found through the public typer.BadParameter, never a private module.
_TyperClickException: type[BaseException] = next(
    (c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"), click.ClickException)

_EXITS: tuple[type[BaseException], ...] = tuple({click.exceptions.Exit, getattr(typer, "Exit", click.exceptions.Exit)})
_ABORTS: tuple[type[BaseException], ...] = tuple({click.exceptions.Abort, getattr(typer, "Abort", click.exceptions.Abort)})
_USAGE: tuple[type[BaseException], ...] = tuple({click.ClickException, _TyperClickException})
from rich.markup import escape

from forkflow import __version__
from forkflow.cli.common import err_console
from forkflow.errors import ForkflowError, GitError, StoreError, UserError

app = typer.Typer(
    name="forkflow",
    help="Keep a downstream fork close to its upstream, and prove every step safe.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # forkflow --install-completion [bash|zsh|fish|powershell]
)

# Each module has `register(app)` and mounts the commands listed here; a subsystem adds its
# line.  Only the invoked command's module is imported (tests/test_cli_startup.py checks the list).
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "forkflow.cli.ledger_cmds": ("init", "status", "history"),
    "forkflow.cli.decide_cmds": ("decide", "decisions"),
    "forkflow.cli.ingest_cmds": ("plan", "ingest", "demo"),
    "forkflow.cli.conflict_cmds": ("conflicts",),
    "forkflow.cli.tiers_cmds": ("validate", "nightly", "l3"),
    "forkflow.cli.regress_cmds": ("detect", "bisect"),
    "forkflow.cli.triage_cmds": ("triage", "trunk", "issues"),
    "forkflow.cli.web_cmds": ("serve",),
    "forkflow.cli.workloads_cmds": ("workloads",),
    "forkflow.cli.replay_cmds": ("replay",),
}


def _mount(argv: list[str] | None = None) -> None:
    """Import the module of the invoked command only; `--help` and unknown commands mount all.

    `forkflow status` then never pays for the dashboard's, SciPy's or Ray's imports.
    """
    wanted = next((a for a in (argv or []) if not a.startswith("-")), None)
    owners = [m for m, names in COMMAND_MODULES.items() if wanted in names]
    for name in owners or list(COMMAND_MODULES):
        if name not in _MOUNTED:
            importlib.import_module(name).register(app)
            _MOUNTED.add(name)


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


_SECRET_OPTIONS = ("--token", "--api-key", "--password")
_URL_PASSWORD = re.compile(r"([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^\s]*@(?=[^\s@]*(?:[/\s'\"]|$))", re.I)
_SECRET_ENV = ("FORKFLOW_TOKEN", "FORKFLOW_STORE", "OPENAI_API_KEY", "GITHUB_TOKEN", "GITLAB_TOKEN")


def redact_secrets(text: str) -> str:
    """`text` without URL passwords, nor the values of the secret environment variables."""
    text = _URL_PASSWORD.sub(r"\1***@", text)
    for name in _SECRET_ENV:
        value = os.environ.get(name, "")
        if len(value) >= 6:
            text = text.replace(value, "***")
    return text


def redacted_argv(argv: list[str]) -> list[str]:
    """argv for the crash log: a secret option's value is `***`, URL passwords are cut out."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        name = arg.split("=", 1)[0]
        if name in _SECRET_OPTIONS and "=" in arg:
            out.append(f"{name}=***")
        elif i > 0 and argv[i - 1] in _SECRET_OPTIONS:
            out.append("***")
        else:
            out.append(redact_secrets(arg))
    return out


def _crash_log(exc: BaseException) -> Path:
    from forkflow.git.run import git_version

    fd, name = tempfile.mkstemp(prefix="forkflow-crash-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        # no secret reaches the log: argv may carry --token or a --store URL's password (issue 13)
        f.write(f"forkflow {__version__}\n{git_version()}\nPython {platform.python_version()} "
                f"on {platform.platform()}\nargv: {redacted_argv(sys.argv)}\ntime: {time.ctime()}\n\n")
        f.write(redact_secrets("".join(traceback.format_exception(exc))))
    return Path(name)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; UserError -> 1, interrupted -> 130, a bug -> 3 with a crash log."""
    _mount(sys.argv[1:] if argv is None else argv)
    try:
        rv = app(args=argv, prog_name="forkflow", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except _EXITS as e:
        return int(getattr(e, "exit_code", 0))
    except _ABORTS:
        return 130
    except _USAGE as e:
        usage: click.ClickException = e  # type: ignore[assignment]
        usage.show()  # a usage error: the command's usage line and what was wrong, exit 2
        return int(usage.exit_code)
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
                          f"{escape(redact_secrets(one_line(str(e)))[:300])}); details in {log}", soft_wrap=True)
        return 3


def run() -> None:
    """The `forkflow` program.  What the imports made lives as long as the process: the cycle
    collector stops walking it and runs a tenth as often (0.38 s of a real fork's ingest, 0.10 s
    so).  Not in `main`, which tests call many times in one process."""
    gc.freeze()
    gc.set_threshold(7000, 10, 10)
    sys.exit(main())
