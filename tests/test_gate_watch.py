"""The gate's work tree moves without a scan for changes after a command that changed nothing, and
still undoes whatever a command did change (the watch of `forkflow.git.watch`)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pygit2
import pytest

from forkflow.git.repo import Repo
from forkflow.git.watch import TreeWatch
from forkflow.landing.gate import CommandGate
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")

# the tree a run finds is the commit's, exactly: nothing changed, nothing left behind
CLEAN = ('test -z "$(git status --porcelain --ignored --untracked-files=all)" '
         '&& test "$(cat which)" = "$FORKFLOW_BASE"')

# (the commit a run gets: 0 or 1, what the run does to the tree after checking it is clean)
STEPS = [
    (0, ""),
    (1, ""),  # the first move (the tree's watch starts after it)
    (0, ""),  # nothing: the next move needs no scan
    (1, "rm -f keep.txt"),
    (0, "echo more >> deep/er/file.txt"),
    (0, "chmod +x keep.txt"),
    (1, "mkdir -p build/a/b && touch build/a/b/out.o run.log"),
    (1, "mv keep.txt kept.txt"),
    (0, "python3 -c \"import mmap; f=open('deep/er/file.txt','r+b'); m=mmap.mmap(f.fileno(),0); "
        "f.close(); m[0:1]=b'Z'; m.flush(); m.close()\""),
    (1, "rm -rf deep && mkdir -p deep/er && echo other > deep/er/file.txt"),
    (1, "echo x > sub/new.txt"),  # a folder made by a move after the watch started
    (1, "touch sub/untracked"),
    (0, ""),
    (1, ""),
    (0, ""),
]


@pytest.fixture
def two_commits(builder: ForkBuilder) -> tuple[ForkBuilder, Sha, Sha]:
    builder.upstream_commit({"which": "one\n", "keep.txt": "k\n", "deep/er/file.txt": "f\n",
                             ".gitignore": "*.log\nbuild/\n"}, "One")
    one = Sha(builder.upstream.head())
    two = Sha(builder.upstream_commit({"which": "two\n", "sub/new.txt": "y\n"}, "Two"))
    return builder, one, two


@linux_only
def test_a_quiet_command_needs_no_scan_and_each_change_is_undone(
        two_commits: tuple[ForkBuilder, Sha, Sha], monkeypatch: pytest.MonkeyPatch) -> None:
    builder, one, two = two_commits
    scans: list[int] = []
    status = pygit2.Repository.status

    def counted(self: pygit2.Repository, *args: Any, **kwargs: Any) -> Any:
        scans.append(1)
        return status(self, *args, **kwargs)

    monkeypatch.setattr(pygit2.Repository, "status", counted)
    revs = [(one, "one"), (two, "two")]
    gate = CommandGate(Repo(builder.upstream.path), "")
    try:
        for i, (which, mischief) in enumerate(STEPS):
            gate.command = f"{CLEAN} && {{ {mischief or 'true'}; }}"
            before = len(scans)
            verdict = gate.check(revs[which][0], Sha(revs[which][1]))
            assert verdict.passed, (i, mischief, verdict.summary)
            if i >= 3:  # the first move scans: no watch yet
                assert len(scans) == before + (STEPS[i - 1][1] != ""), (i, STEPS[i - 1][1])
        assert gate._mover.opened
        gate.command = CLEAN
        assert gate.check(one, Sha("one")).passed
    finally:
        gate.close()


@linux_only
def test_the_watch_sees_writes_in_folders_made_after_it_started(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    watch = TreeWatch.start(tmp_path)
    assert watch is not None
    try:
        assert not watch.changed()
        (tmp_path / "a" / "b" / "c").mkdir(parents=True)
        assert watch.changed()
        assert watch.add_parents(["a/b/c/file"])
        watch.settle()
        assert not watch.changed()
        (tmp_path / "a" / "b" / "c" / "file").write_text("x")
        assert watch.changed()
        watch.settle()
        with open(tmp_path / "a" / "b" / "c" / "file", "r+b"):
            pass  # opened for writing (as a writer through mmap does), though nothing was written
        assert watch.changed()
    finally:
        watch.close()
