"""A config written before forks were named by their remote: every clone still finds one fork."""
from __future__ import annotations

import re
from pathlib import Path

from forkflow.context import open_context
from forkflow.git.run import run_git
from forkflow.store.session import Store
from forkflow.testing.gitrepo import ForkBuilder


def _clone(bare: Path, where: Path, store: str) -> Path:
    run_git("clone", "-q", str(bare), str(where), cwd=where.parent)
    cfg = where / "forkflow.toml"
    text = cfg.read_text()
    text = re.sub(r'(?m)^name = .*$', "", text)  # an old config: no [fork] name
    cfg.write_text(text.replace('url = ""', f'url = "{store}"', 1))
    return where


def test_clones_of_one_remote_in_different_folders_are_one_fork_without_a_name(  # type: ignore[no-untyped-def]
        cli, builder: ForkBuilder, tmp_path: Path) -> None:
    builder.upstream_commit({"a.py": "a = 1\n"}, "Initial (#1)")
    fork = builder.branch_fork().path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    run_git("add", "forkflow.toml", cwd=fork)
    run_git("commit", "-q", "-m", "[fork] forkflow config", cwd=fork)
    bare = tmp_path / "shared.git"
    run_git("clone", "-q", "--bare", str(fork), str(bare), cwd=tmp_path)
    store = f"sqlite:///{tmp_path / 'team.db'}"
    Store.open(store).dispose()  # the team's store, made once (forkflow init --store URL does it)
    first, second = (_clone(bare, tmp_path / n, store) for n in ("cron-checkout", "alice-triton"))
    a, b = open_context(first), open_context(second)
    assert a.fork_id == b.fork_id and a.fork_name == b.fork_name == f"{bare.with_suffix('')}:main"
    for c in (a, b):
        c.store.dispose()


def test_a_store_that_knew_an_unnamed_fork_by_its_folder_keeps_it(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "a = 1\n"}, "Initial (#1)")
    fork = builder.branch_fork().path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    cfg = fork / "forkflow.toml"
    cfg.write_text(re.sub(r'(?m)^name = .*$', "", cfg.read_text()))
    before = open_context(fork)  # no origin: named by its folder, as before
    assert before.fork_name == f"{fork.name}:main"
    before.store.dispose()
    run_git("remote", "add", "origin", "https://github.com/example/fork.git", cwd=fork)
    after = open_context(fork)
    assert after.fork_name == "github.com/example/fork:main" and after.fork_id == before.fork_id
    after.store.dispose()
