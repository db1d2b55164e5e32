"""What every command works on: the fork's repository, its config and its store."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from forkflow.config import Config, find_config, load_config
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.state import migrate_state, state_dir
from forkflow.store import forks
from forkflow.store.session import Store


@dataclass(frozen=True, slots=True)
class Context:
    repo: Repo
    config: Config
    store: Store
    fork_id: int

    @property
    def fork_name(self) -> str:
        return fork_name(self.repo, self.config)


def fork_name(repo: Repo, config: Config) -> str:
    """A fork's name in a shared store: the `[fork] name` key (`forkflow init` writes it), else the
    shared remote's URL and the branch (`origin`, normalised: every clone of it comes to the same
    name, whatever its folder), else the checkout's folder and branch (docs/team.md)."""
    explicit = config.section("fork").get("name")
    if isinstance(explicit, str) and explicit:
        return explicit
    url = repo.remote_url("origin")  # None when there is no origin: one git call at start-up
    return forks.identity(url, config.fork_branch) if url else folder_name(repo, config)


def folder_name(repo: Repo, config: Config) -> str:
    """The name a fork had before it was named by its remote: checkout folder and branch."""
    return f"{repo.path.name}:{config.fork_branch}"


def open_context(repo_path: Path | str = ".", store_url: str | None = None) -> Context:
    """Open repo, config and store for a command; say how to fix anything missing."""
    repo = Repo.open(repo_path)
    cfg_path = find_config(repo.path)
    if cfg_path is None:
        raise UserError(
            f"no forkflow.toml in {repo.path}; run: forkflow init --upstream REMOTE_OR_URL"
        )
    config = load_config(cfg_path)
    moved = migrate_state(repo, config.root)  # once: the old <checkout>/.forkflow/ into the git directory
    if moved:
        print(moved, file=sys.stderr)
    url = store_url or config.resolved_store_url(state_dir(repo))
    # a URL someone typed (--store, FORKFLOW_STORE, [store] url) must name a store that exists:
    # a typo would otherwise start an empty one (issue 12); only `forkflow init` creates one there
    explicit = bool(store_url or os.environ.get("FORKFLOW_STORE") or config.store_url)
    store = Store.open(url, create=not explicit)
    with store.session_scope() as s:
        fid = forks.fork_id(s, fork_name(repo, config), legacy=(folder_name(repo, config),))  # its history follows
    return Context(repo=repo, config=config, store=store, fork_id=fid)
