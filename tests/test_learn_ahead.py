"""The fork's past resolutions learnt in a child process while ingest plans (conflicts/learn.py)."""
from __future__ import annotations

from pathlib import Path

from forkflow.conflicts import learn
from forkflow.git.repo import Repo
from forkflow.testing.gitrepo import ForkBuilder


def _fork_with_a_hand_resolved_pick(tmp_path: Path) -> Path:
    b = ForkBuilder(tmp_path)
    b.upstream_commit({"a.py": "x = f(1)\n"}, "Add (#1)")
    b.branch_fork()
    b.fork_commit({"a.py": "x = f(1, fork=True)\n"}, "Fork: flag")
    u2 = b.upstream_commit({"a.py": "x = g(1)\n"}, "Rename f to g (#2)")
    b.fetch()
    b.fork_commit({"a.py": "x = g(1, fork=True)\n"}, "[RESOLVED] Rename f to g (#2)",
                  f"(cherry picked from commit {u2})")
    return b.f.path


def test_learn_ahead_gives_what_learning_in_process_gives(tmp_path: Path) -> None:
    path = _fork_with_a_hand_resolved_pick(tmp_path)
    repo = Repo(path)
    learn._HISTORIES.clear()
    here = learn.fork_history(repo)  # in-process, as before
    assert len(here) == 1
    learn._HISTORIES.clear()
    assert learn.learn_ahead(repo) is True
    assert learn.learn_ahead(repo) is False  # one child per repository
    ahead = learn.fork_history(repo)  # the child's answer
    assert str(path) not in learn._AHEAD
    assert ahead.regions == here.regions and ahead.paths == here.paths
    assert {p: [e.resolved for e in es] for p, es in ahead.by_path.items()} == \
        {p: [e.resolved for e in es] for p, es in here.by_path.items()}
    assert learn.learn_ahead(repo) is False  # learnt already
    learn._HISTORIES.clear()


def test_learn_ahead_falls_back_to_learning_here_when_the_child_fails(tmp_path: Path) -> None:
    path = _fork_with_a_hand_resolved_pick(tmp_path)
    repo = Repo(path)
    learn._HISTORIES.clear()
    assert learn.learn_ahead(Repo(tmp_path / "not-a-repository"))  # its child fails: nothing learnt there
    learn._AHEAD[str(path)] = learn._AHEAD.pop(str(tmp_path / "not-a-repository"))
    assert len(learn.fork_history(repo)) == 1  # learnt in-process instead
    learn._HISTORIES.clear()
