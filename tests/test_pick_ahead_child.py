"""Picks (and resolutions) made ahead by a child process while the landing runs (forkflow.landing.ahead;
issue 11), and the learning child the program's entry starts."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.cli import entry
from forkflow.config import render_config
from forkflow import children
from forkflow.conflicts import learn
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import ConflictKind
from forkflow.conflicts.engine import CaseResolution, pure_run, resolve_case
from forkflow.conflicts.resolvers import Proposal
from forkflow.conflicts.resolvers.trivial import TrivialResolver
from forkflow.context import open_context
from forkflow.git.pick import MemoryPicker, PickStep
from forkflow.landing import ahead, ingest
from forkflow.landing.ingest import IngestOptions, Ingestor, Mode, UnitStatus
from forkflow.models import GateResult, Sha
from forkflow.testing.gitrepo import ForkBuilder

from tests.test_ingest_journal import FakeJournal, lib_chain


class ChildGate:
    """Waits (up to 10 s) until the landing's child has sent its pick onto the candidate, then fails
    the first candidate when asked to; counts the picks the landing made itself."""

    def __init__(self, fail_first: bool, kill_child: bool = False) -> None:
        self.fail_first = fail_first
        self.kill_child = kill_child
        self.checks = 0
        self.ingestor: Ingestor | None = None
        self.own_picks: list[Sha] = []
        self.made: object = None  # the child's process, as the first check saw it

    def watch(self, ingestor: Ingestor) -> None:
        self.ingestor = ingestor
        picker = ingestor.picker
        made = picker._pick

        def counted(onto_tree: str, sha: Sha) -> PickStep:
            if threading.current_thread() is threading.main_thread():
                self.own_picks.append(sha)
            return made(onto_tree, sha)
        picker._pick = counted  # type: ignore[method-assign]

    def check(self, rev: Sha, base: Sha) -> GateResult:
        self.checks += 1
        assert self.ingestor is not None and self.ingestor._child is not None  # the child, not the thread
        child = self.ingestor._child
        self.made = self.made or child.proc
        if self.kill_child:
            child.proc.kill()
            child.proc.wait()
        elif self.ingestor._next < len(self.ingestor._coming):  # wait for the child's pick onto this candidate
            picker = self.ingestor.picker
            tree = picker.commit_tree(rev)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                child._take()
                if any(onto == tree for onto, _ in picker._ahead):
                    break
                time.sleep(0.01)
        passed = not (self.fail_first and self.checks == 1)
        return GateResult(passed, "passed" if passed else "failed")


def _run(fork: Path, gate: ChildGate, monkeypatch: pytest.MonkeyPatch) -> list[ingest.UnitResult]:
    monkeypatch.setattr(ingest, "AHEAD_MIN", 1)  # a child for three commits, as for 800
    ingestor = wiring.ingestor(open_context(fork), IngestOptions(mode=Mode.LAND), gate, journal=FakeJournal())
    gate.watch(ingestor)
    report = ingestor.run()
    assert ingestor._child is None  # stopped when the landing ends
    return list(report.results)


@pytest.mark.parametrize("made_by", ["fork", "a fresh interpreter"])
def test_the_landing_takes_the_childs_picks(builder: ForkBuilder, monkeypatch: pytest.MonkeyPatch,
                                           made_by: str) -> None:
    fork, tip = lib_chain(builder, 3)
    gate = ChildGate(fail_first=False)
    if made_by != "fork":  # where there is no fork() (or another thread runs): the child's own interpreter
        monkeypatch.setattr(ahead, "_fork", lambda *args: None)
    results = _run(fork, gate, monkeypatch)
    assert isinstance(gate.made, ahead._Forked) == (made_by == "fork")
    assert [r.status for r in results] == [UnitStatus.LANDED] * 3
    assert len(gate.own_picks) < 3  # links 2 and 3 came from the child (link 1 maybe, before it had any)
    head = results[2].fork_sha
    assert head is not None
    assert [builder.f.git("show", f"{head}:lib/{n}.py") for n in "abc"] == ["a = 2\n", "b = 2\n", "c = 2\n"]
    assert builder.f.git("rev-list", "--count", f"{tip}..{head}").strip() == "3"
    assert builder.f.git("fsck", "--connectivity-only", "--no-dangling").strip() == ""  # every object written


def test_a_guess_of_the_child_never_lands(builder: ForkBuilder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Link 1 fails L1: the child had picked link 2 onto link 1's candidate; link 2 lands on the
    branch as it was, picked again."""
    fork, tip = lib_chain(builder, 3)
    results = _run(fork, ChildGate(fail_first=True), monkeypatch)
    assert [r.status for r in results] == [UnitStatus.FAILED, UnitStatus.LANDED, UnitStatus.LANDED]
    landed = results[1].fork_sha
    assert landed is not None
    assert builder.f.git("rev-parse", f"{landed}^").strip() == tip
    assert builder.f.git("show", f"{landed}:lib/a.py") == "a = 1\n"
    assert builder.f.git("show", f"{landed}:lib/b.py") == "b = 2\n"


def test_the_landing_goes_on_when_the_child_dies(builder: ForkBuilder, monkeypatch: pytest.MonkeyPatch) -> None:
    fork, _ = lib_chain(builder, 3)
    gate = ChildGate(fail_first=False, kill_child=True)
    results = _run(fork, gate, monkeypatch)
    assert [r.status for r in results] == [UnitStatus.LANDED] * 3
    head = results[2].fork_sha
    assert head is not None
    assert builder.f.git("show", f"{head}:lib/c.py") == "c = 2\n"


def test_a_picker_that_learns_another_picks_as_it_does(builder: ForkBuilder) -> None:
    fork, tip = lib_chain(builder, 3)
    first = MemoryPicker(fork, batch_writes=True)
    tree = first.commit_tree(tip)
    second = MemoryPicker(fork, batch_writes=True)
    second.learn(first.knowledge(tree))
    assert second.knowledge(tree) == first.knowledge(tree)
    assert first._basenames and first._basenames == second._basenames


def test_a_picker_told_the_names_another_read_waits_as_it_does_without_reading(builder: ForkBuilder) -> None:
    """Whether a blob holds a name is a function of the blob: the names the child read in blobs
    (`names_read`) spare the landing the reads, and give the same waits."""
    from forkflow.planning.lines import Dependency, DepKind

    builder.upstream_commit({"lib/a.py": "a = 0\n"}, "Initial (#1)")
    builder.branch_fork()
    fork = builder.f.path
    tip = builder.f.head()
    defines = builder.upstream_commit({"lib/a.py": "a = 0\n\ndef brand_new():\n    return 1\n"}, "Add (#2)")
    uses = builder.upstream_commit({"lib/b.py": "from lib.a import brand_new\n"}, "Use (#3)")
    builder.fetch()
    on_name = Dependency(defines, DepKind.SYMBOL, "brand_new (lib/a.py)")
    first, second = (MemoryPicker(fork, batch_writes=True) for _ in range(2))
    first.names_read = []
    tree = first.commit_tree(tip)
    assert first.waits_for([on_name], tree, uses) == on_name  # the fork has no brand_new yet
    assert first.names_read and not any(has for _, has in first.names_read)
    second.know_names(first.names_read)
    asked: list[str] = []
    read = second.repo.get

    def get(oid: str) -> object:
        asked.append(str(oid))
        return read(oid)
    second.repo.get = get  # type: ignore[method-assign,assignment]
    assert second.waits_for([on_name], tree, uses) == on_name
    assert not {blob for (blob, _), _ in first.names_read} & set(asked)  # no blob read again
    applied = first.pick(tree, defines)
    assert applied.status.value == "applied"
    assert first.waits_for([on_name], applied.tree, uses) is None  # the name is there once picked


def _far_behind(builder: ForkBuilder) -> Path:
    builder.upstream_commit({"a.py": "a = 0\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"d.py": "d = 1\n"}, "[fork] ours")
    for i in range(3):
        builder.upstream_commit({"a.py": f"a = {i + 1}\n"}, f"Change a (#{i + 2})")
    builder.fetch()
    fork = builder.f.path
    (fork / "forkflow.toml").write_text(render_config("upstream", "main", "main"))
    return fork


def test_the_entry_starts_learning_before_the_imports(builder: ForkBuilder, monkeypatch: pytest.MonkeyPatch) -> None:
    """`forkflow ingest` on a fork at least AHEAD_MIN upstream commits behind: the learning child
    starts in the program's entry, and the ingest takes it instead of starting one."""
    fork = _far_behind(builder)
    monkeypatch.setattr(children, "AHEAD_MIN", 3)
    entry._learn_early(["ingest", "--dry-run", "--repo", str(fork)])  # writes nothing: no child
    entry._learn_early(["ingest", "--land", "--repo", str(fork / "nowhere")])  # no such folder
    entry._learn_early(["status", "--repo", str(fork)])
    assert not children._early
    monkeypatch.setattr(children, "AHEAD_MIN", 4)
    entry._learn_early(["ingest", "--land", "--repo", str(fork)])  # 3 behind
    assert not children._early
    monkeypatch.setattr(children, "AHEAD_MIN", 3)
    entry._learn_early(["ingest", f"--repo={fork}", "--land"])
    assert children.early_started("learn", fork) and not children.early_started("learn", fork / "lib")
    assert list(children._early) == ["learn"]  # the picking child starts with the landing
    learn._HISTORIES.clear()
    repo = open_context(fork).repo
    assert learn.learn_ahead(repo) is True
    assert not children.early_started("learn", fork)  # taken
    assert len(learn.fork_history(repo)) == 0  # the child's answer: this fork picked nothing by hand
    learn._HISTORIES.clear()


def test_the_entry_says_nothing_about_a_folder_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "forkflow.toml").write_text("[fork\n")  # not TOML, and no repository
    entry._learn_early(["ingest", "--land", "--repo", str(tmp_path)])
    entry._learn_early(["ingest", "--land", "--repo"])  # the option's value missing
    assert not children._early


class ResolvedGate(ChildGate):
    """Waits (up to 10 s) until the child has answered for a conflict, at the first L1."""

    def check(self, rev: Sha, base: Sha) -> GateResult:
        self.checks += 1
        assert self.ingestor is not None and self.ingestor._child is not None
        child = self.ingestor._child
        deadline = time.monotonic() + 10
        while self.checks == 1 and not child._outcomes and time.monotonic() < deadline:
            child._take()
            time.sleep(0.01)
        return GateResult(True, "passed")


def test_the_landing_takes_the_childs_resolutions(builder: ForkBuilder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork re-spaced a line that upstream commit U then changes: the child picking ahead meets
    U's conflict and the trivial resolver settles it there; the landing uses that answer (its own
    trivial resolver is never asked) and U lands resolved by it."""
    builder.upstream_commit({"k.py": "A = 1\nx = 1\nB = 2\n", "lib/a.py": "a = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"k.py": "A = 1\nx  =  1\nB = 2\n"}, "[fork] spacing")
    builder.upstream_commit({"lib/a.py": "a = 2\n"}, "Change a (#2)")
    u = builder.upstream_commit({"k.py": "A = 1\nx = 100\nB = 2\n"}, "Tune x (#3)")
    builder.fetch()
    fork = builder.f.path
    (fork / "forkflow.toml").write_text(render_config("upstream", "main", "main")
                                        + '\n[[ingest.chain]]\nname = "all"\npaths = ["**"]\n'
                                        + '\n[trust]\nmin_cases = 0\n')  # no past picks: trust trivial here
    asked: list[str] = []
    parent, real = os.getpid(), TrivialResolver.propose

    def propose(self: TrivialResolver, case: ConflictCase) -> Proposal | None:
        if os.getpid() != parent:  # the child (a fork of this process) asks the real one
            return real(self, case)
        asked.append(case.path)  # this process's
        return None
    monkeypatch.setattr(TrivialResolver, "propose", propose)
    monkeypatch.setattr(ingest, "AHEAD_MIN", 1)
    gate = ResolvedGate(fail_first=False)
    ingestor = wiring.ingestor(open_context(fork), IngestOptions(mode=Mode.LAND), gate, journal=FakeJournal())
    gate.watch(ingestor)
    results = ingestor.run().results
    assert [r.status for r in results] == [UnitStatus.LANDED, UnitStatus.LANDED]
    assert results[1].picked == (u,) and list(results[1].resolved_by.values()) == ["trivial"]
    assert asked == []  # the child's answer, not this process's resolver
    head = results[1].fork_sha
    assert head is not None
    assert builder.f.git("show", f"{head}:k.py") == "A = 1\nx = 100\nB = 2\n"  # the fork only re-spaced it


class Named:
    def __init__(self, name: str, content: bytes | None) -> None:
        self.name, self.content, self.asked = name, content, 0

    def propose(self, case: ConflictCase) -> Proposal | None:
        self.asked += 1
        return None if self.content is None else Proposal(self.content, "by " + self.name)


def test_an_answer_from_elsewhere_stands_for_the_resolvers_it_names() -> None:
    case = ConflictCase(Sha("u" * 40), "s", "s", "k.txt", ConflictKind.CONTENT, b"a\n", b"b\n", b"c\n")
    chain = [Named("recorded", None), Named("trivial", None), Named("structural", None), Named("agent", None)]
    assert pure_run(chain) == ("trivial", "structural")
    assert pure_run([Named("recorded", None), Named("agent", None)]) == ()
    settled = CaseResolution(True, b"b\n", "structural", (), ("trivial: no proposal", "structural: merged"))
    out = resolve_case(case, chain, (("trivial", "structural"), settled))
    assert out.resolved and out.content == b"b\n" and out.resolver == "structural"
    assert out.tried == ("recorded: no proposal", "trivial: no proposal", "structural: merged")
    assert [r.asked for r in chain] == [1, 0, 0, 0]  # asked: recorded only
    declined = CaseResolution(False, tried=("trivial: no proposal", "structural: no proposal"))
    out = resolve_case(case, chain, (("trivial", "structural"), declined))
    assert not out.resolved and out.tried[-1] == "agent: no proposal" and [r.asked for r in chain] == [2, 0, 0, 1]
    out = resolve_case(case, chain, (("structural", "lag"), settled))  # names not in the chain: asked here
    assert [r.asked for r in chain] == [3, 1, 1, 2]


_SLOW_CHILD = """
import pickle, sys, time
from forkflow.git.pick import PickStatus, PickStep
out = sys.stdout.buffer
tree, sha, kept = sys.argv[1], sys.argv[2], sys.argv[3] == "kept"
pickle.dump(("picking", tree, sha), out); out.flush()
time.sleep(0.5)
if kept:
    pickle.dump(("pick", tree, sha, PickStep(sha, PickStatus.EMPTY, tree), None, []), out)
else:  # a blob missing, say: nothing kept
    pickle.dump(("picking", None, None), out)
out.flush()
sys.stdin.buffer.read()
"""


def test_the_landing_waits_for_the_pick_the_child_is_making(builder: ForkBuilder) -> None:
    """A pick the child said it is making is waited for (the landing making it too was the same work
    twice); another pick is not."""
    import subprocess

    from forkflow.landing.ahead import WAIT_PICK_S, AheadPicks

    fork = _far_behind(builder)
    picker = MemoryPicker(fork, batch_writes=True)
    tree = picker.commit_tree(builder.f.head())
    sha = Sha("1" * 40)
    for kept in (True, False):
        proc = children.python_child(_SLOW_CHILD, tree, sha, "kept" if kept else "none", stdin=subprocess.PIPE)
        assert proc is not None
        ahead = AheadPicks(picker, proc)
        try:
            deadline = time.monotonic() + 10
            while ahead._picking is None and time.monotonic() < deadline:  # the child has begun
                ahead._take()
                time.sleep(0.01)
            assert ahead._picking == (tree, sha)
            started = time.monotonic()
            ahead._take(tree, Sha("2" * 40))  # not the one it is making: no wait
            assert time.monotonic() - started < 0.3
            ahead._take(tree, sha)
            assert ahead._picking is None
            assert time.monotonic() - started < WAIT_PICK_S  # the answer ended the wait, not the clock
            if kept:
                assert picker.pick(tree, sha).status.value == "empty"  # the child's, taken: none made here
                assert not picker.missed_ahead
            else:
                assert (tree, sha) not in picker._ahead  # nothing kept: the landing picks it itself
        finally:
            ahead.close()


def test_a_forked_child_holds_none_of_the_landings_locks(builder: ForkBuilder) -> None:
    """The ingest lock is a flock, held while any copy of its descriptor is open: the forked child
    closes its copy, so the lock goes with the landing (SIGKILL included), not with the child."""
    from forkflow.landing.ahead import _fork
    from forkflow.landing.lock import ingest_lock, is_ingest_running

    fork = _far_behind(builder)
    repo = open_context(fork).repo
    picker = MemoryPicker(fork, batch_writes=True)
    with ingest_lock(repo):
        child = _fork(picker, fork, [], {}, (), None)
        assert child is not None
        assert is_ingest_running(repo)
    try:
        assert not is_ingest_running(repo)  # the landing let go: the lock is free, the child alive
        assert child.poll() is None
        held = [os.readlink(f"/proc/{child.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{child.pid}/fd")]
        assert not [t for t in held if t.endswith(".lock")]
    finally:
        child.kill()
        child.wait()
