"""Start-up: `forkflow status` must not pay for heavy libraries of other commands."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "triton", "ray", "fastapi", "uvicorn", "scipy", "numpy", "pygit2", "tree_sitter",
         "playwright", "httpx", "alembic", "helion")


def test_cli_status_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from forkflow.cli import main\n"
        "main._mount(['status', '--json'])\n"
        "assert 'status' in main._registered(main.app)\n"
        f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported at start-up: {out.stdout.strip()}"


def test_cli_help_lists_every_command_module() -> None:
    from forkflow.cli import main

    main._mount(["--help"])
    assert len(main._MOUNTED) == len(main.COMMAND_MODULES)
    assert {"init", "status", "history"} <= main._registered(main.app)
