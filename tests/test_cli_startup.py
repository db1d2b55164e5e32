"""Start-up: a command imports only its own module, so `forkflow status` stays light."""
from __future__ import annotations

import importlib
import subprocess
import sys

import typer

from forkflow.cli import main

def registered(typer_app: typer.Typer) -> set[str]:
    """The command and group names mounted on a Typer app."""
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


HEAVY = ("torch", "triton", "ray", "fastapi", "uvicorn", "scipy", "numpy", "pygit2", "tree_sitter",
         "playwright", "httpx", "alembic", "helion")


def test_cli_status_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from forkflow.cli import main\n"
        "main._mount(['status', '--json'])\n"
        "assert 'status' in {c.callback.__name__ for c in main.app.registered_commands if c.callback}\n"
        f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported at start-up: {out.stdout.strip()}"


def test_cli_command_map_matches_what_modules_register() -> None:
    for module, names in main.COMMAND_MODULES.items():
        app = typer.Typer()
        importlib.import_module(module).register(app)
        assert registered(app) == set(names), module


def test_cli_help_mounts_every_module() -> None:
    main._mount(["--help"])
    assert main._MOUNTED == set(main.COMMAND_MODULES)


def test_cli_usage_errors_exit_2_without_a_crash_log() -> None:
    from tests.conftest import run_forkflow
    from pathlib import Path

    big = str(2**63)  # past the store's 64-bit ids: a usage error, not an OverflowError crash
    for args in (["serve", "--port", "abc"], ["history", "--every"], ["nosuchcommand"], ["triage", big],
                 ["bisect", "--alert", big], ["l3", "run", big], ["l3", "signoff", big, "--owner", "x",
                                                                    "--verdict", "accept"]):
        r = run_forkflow(*args, cwd=Path.cwd())
        assert r.rc == 2, (args, r.rc, r.err)
        assert "crash" not in r.err and "Error:" in r.err and r.err.strip()


def test_every_help_text_reads_as_written() -> None:
    """Help is rendered as Rich markup: an unescaped `[validation]` would vanish from it."""
    from rich.text import Text

    main._mount(["--help"])
    seen: list[str] = []

    def walk(cmd: object, path: str) -> None:
        params = getattr(cmd, "params", [])
        for text in [getattr(cmd, "help", None) or "", *(getattr(p, "help", None) or "" for p in params)]:
            assert Text.from_markup(text).plain == text.replace("\\[", "["), f"{path}: {text!r}"
        seen.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(main.app), "forkflow")
    assert {"forkflow validate", "forkflow workloads add", "forkflow l3 run"} <= set(seen)
    assert len(seen) > 25
