"""The fork's refs forkflow reads before anything else: its tips and the recorded ingestion point.

No store and no `Context`: the landing loop reads them with a repository and a config only.
"""
from __future__ import annotations

from forkflow.config import Config
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.models import Sha


def ingestion_ref(config: Config) -> str:
    """Where forkflow records the ingestion point, in the fork's own repository."""
    return f"refs/forkflow/ingestion-point/{config.fork_branch}"


def check_repo(repo: Repo, config: Config) -> tuple[Sha, Sha]:
    """Fork tip and upstream tip, or a UserError that says what to fix."""
    if repo.is_shallow():
        raise UserError("this is a shallow clone; the ledger needs the whole history: "
                        "run `git fetch --unshallow` and retry")
    fork_tip = repo.resolve(config.fork_ref)
    if fork_tip is None:
        raise UserError(f"fork branch '{config.fork_branch}' does not exist; set [fork] branch in "
                        "forkflow.toml or pass --fork-branch to forkflow init")
    if config.upstream_remote not in repo.remotes():
        raise UserError(f"no remote '{config.upstream_remote}'; run: forkflow init --upstream URL")
    upstream_tip = repo.resolve(config.upstream_ref)
    if upstream_tip is None:
        raise UserError(
            f"upstream branch '{config.upstream_branch}' is not fetched from remote "
            f"'{config.upstream_remote}'; run `forkflow status --fetch` (or `git fetch "
            f"{config.upstream_remote}`), or fix [upstream] branch in forkflow.toml")
    return fork_tip, upstream_tip
