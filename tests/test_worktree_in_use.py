"""Cached work trees are pruned least recently used first, but never while another forkflow
process validates in one (tiers/worktree.py `using`)."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
import sys
import textwrap
from pathlib import Path

import pytest

from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers.worktree import WorktreeCache

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from forkflow.git.repo import Repo
    from forkflow.tiers.worktree import WorktreeCache
    with WorktreeCache(Repo(Path(sys.argv[1])), keep=1).using(sys.argv[2]) as tree:
        print(tree, flush=True)
        while not Path(sys.argv[3]).exists():
            time.sleep(0.05)
""")


@contextmanager
def _held(builder: ForkBuilder, tmp_path: Path, commits: int) -> Iterator[tuple[list[Sha], Path, Path]]:
    """Upstream commits, and the first one's tree held by another process (`using`) for the block."""
    shas = [builder.upstream_commit({"a.py": f"x = {i}\n"}, f"c{i} (#{i})") for i in range(commits)]
    path = builder.upstream.path
    release = tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), shas[0], str(release)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        yield shas, path, Path(proc.stdout.readline().strip())
    finally:
        release.touch()
        proc.wait(timeout=30)


def test_a_tree_another_process_works_in_is_not_pruned(builder: ForkBuilder, tmp_path: Path) -> None:
    with _held(builder, tmp_path, 3) as (shas, path, held):
        assert (held / "a.py").read_text() == "x = 0\n"
        cache = WorktreeCache(Repo(path), keep=1)
        cache.checkout(shas[1])  # keep=1: the least recently used trees go, the held one stays
        cache.checkout(shas[2])
        assert (held / "a.py").read_text() == "x = 0\n"
        assert not (cache.root / shas[1]).exists()  # nobody held this one: pruned
    cache.checkout(shas[1])  # once the holder is done, its tree is pruned like any other
    assert not held.exists()


def test_a_changed_tree_in_use_is_not_replaced_under_its_user(builder: ForkBuilder, tmp_path: Path) -> None:
    with _held(builder, tmp_path, 1) as (shas, path, held):
        (held / "a.py").write_text("edited by a test\n")  # the run in it changed a tracked file
        with pytest.raises(UserError) as e:
            WorktreeCache(Repo(path), keep=1).checkout(shas[0])
        assert "in use by another forkflow run" in str(e.value) and len(str(e.value).splitlines()) == 1
        assert (held / "a.py").read_text() == "edited by a test\n"
    tree = WorktreeCache(Repo(path), keep=1).checkout(shas[0])  # now replaced by a clean one
    assert (tree / "a.py").read_text() == "x = 0\n"
