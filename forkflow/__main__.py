from __future__ import annotations

from forkflow.cli.entry import run

run()
