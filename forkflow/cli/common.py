"""Options and output helpers shared by every command module."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

RepoOpt = Annotated[Path, typer.Option("--repo", help="The fork's checkout (default: current folder).")]
StoreOpt = Annotated[str | None, typer.Option(
    "--store", help="Store URL (sqlite:///path or postgresql+psycopg://...); default from "
    "FORKFLOW_STORE or forkflow.toml, else .forkflow/forkflow.db.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
MAX_ID = 2**63 - 1  # ids are the store's 64-bit row ids: a larger number is a usage error, not a crash


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def short(sha: str | None) -> str:
    return (sha or "-")[:12]
