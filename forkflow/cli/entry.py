"""The `forkflow` program's entry: what can start before the command line's imports.

Importing the command line (Typer, SQLAlchemy, libgit2, the resolvers) takes about a second on one
core while the other idles.  A writing `forkflow ingest` on a fork far behind its upstream hands
work to child processes (`forkflow.children`); started here, the learning child learns during
those imports instead of competing with the plan's `git diff-tree`.

Only the standard library, the configuration's reader and git's runner are imported first; any
doubt (no repository, no forkflow.toml, a bad one, an unknown option) starts nothing, and the
command itself then says what is wrong.
"""
from __future__ import annotations

import sys
from pathlib import Path


def run() -> None:
    try:
        _learn_early(sys.argv[1:])
    except Exception:  # noqa: BLE001 - a head start at most; the command reports what is wrong
        pass
    from forkflow.cli.main import run as run_command

    run_command()


def _learn_early(args: list[str]) -> None:
    """Start the learning child of a writing ingest whose fork lacks at least AHEAD_MIN upstream
    commits (what `Ingestor.run` checks)."""
    if not args or args[0] != "ingest" or any(a in ("--dry-run", "--help", "-h") for a in args):
        return
    folder = "."
    for i, a in enumerate(args):
        if a == "--repo" and i + 1 < len(args):
            folder = args[i + 1]
        elif a.startswith("--repo="):
            folder = a.split("=", 1)[1]
    from forkflow.children import AHEAD_MIN, LEARN_CHILD, start_early
    from forkflow.config import find_config, load_config
    from forkflow.git.run import run_git

    if not Path(folder).is_dir():
        return
    top = run_git("rev-parse", "--show-toplevel", cwd=folder, check=False).strip()
    found = find_config(Path(top)) if top else None
    if found is None:
        return
    config = load_config(found)
    behind = run_git("rev-list", "--count", f"{config.fork_ref}..{config.upstream_ref}", cwd=top, check=False).strip()
    if not behind.isdigit() or int(behind) < AHEAD_MIN:
        return
    start_early("learn", top, LEARN_CHILD, top)
