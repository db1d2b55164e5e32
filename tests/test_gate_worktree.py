"""The command gate's one work tree moves from unit to unit like `git checkout --force` + `git clean -ffdx`."""
from __future__ import annotations

from forkflow.git.repo import Repo
from forkflow.landing.gate import CommandGate
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder


def test_gate_work_tree_follows_each_unit_and_drops_what_a_run_left(builder: ForkBuilder) -> None:
    builder.upstream_commit({"which": "one\n", "gone.txt": "x\n", ".gitignore": "*.log\n"}, "One")
    one = Sha(builder.upstream.head())
    builder.upstream.git("rm", "-q", "gone.txt")
    two = Sha(builder.upstream_commit({"which": "two\n", "sub/new.txt": "y\n"}, "Two"))
    # each run finds a clean tree of its commit, then leaves an untracked and an ignored file
    check = ('test ! -e stray && test ! -e run.log && test "$(cat which)" = "$FORKFLOW_BASE" '
             '&& touch stray run.log && echo edit >> which')
    gate = CommandGate(Repo(builder.upstream.path), check)
    try:
        assert gate.check(one, Sha("one")).passed
        second = gate.check(two, Sha("two"))
        assert second.passed, second.summary
        assert gate._mover.opened  # moved in process
        assert gate._tree is not None and not (gate._tree / "gone.txt").exists()
        assert (gate._tree / "sub/new.txt").read_text() == "y\n"
        assert gate.check(one, Sha("one")).passed
        assert not (gate._tree / "sub").exists()
    finally:
        gate.close()
