from __future__ import annotations

from forkflow.cli.main import run

run()
