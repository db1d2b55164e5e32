"""The L1 gate lands nothing on a guess, and keeps its processes, trees and output in hand.

Real pytest suites in real repositories: a failure whose text reads like a runner fault, a test
skipped on its reruns, a truly flaky test; work trees pruned only from forkflow's own registry;
L1 output capped; a test process that leaves L1's process group by `setsid`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.context import open_context
from forkflow.git.repo import Repo
from forkflow.landing.gate import CommandGate, prune_stale_worktrees
from forkflow.landing.l1trees import registry_dir
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers.runners.base import Job, JobState, run_process
from tests.test_replay import Sample, sample  # noqa: F401 - the replay's generated fork
from tests.test_tiers_support import commit, make_repo, suite_toml

PYTEST = "python -m pytest -q -p no:cacheprovider --junitxml={report} tests"
LIB = {"lib.py": "def value():\n    return 2\n", "README": "docs\n",
       "tests/test_a.py": "def test_a():\n    pass\n"}


def _counting_test(counter: Path, body: str) -> str:
    """A test that knows how many times it ran before (`n`), kept in a file outside the repository."""
    return ("import pytest\nfrom pathlib import Path\n\ndef test_c():\n"
            f"    p = Path({str(counter)!r})\n    n = int(p.read_text()) if p.exists() else 0\n"
            "    p.write_text(str(n + 1))\n" + body)


def _fork(tmp_path: Path, test_c: str) -> tuple[Path, str]:
    suite = suite_toml("unit", PYTEST, expect_tests=2)
    return make_repo(tmp_path / "fork", suite, dict(LIB, **{"tests/test_c.py": test_c}))


@pytest.mark.security
def test_gate_does_not_land_a_real_failure_that_reads_like_infra(tmp_path: Path) -> None:
    test_c = ("from lib import value\n\ndef test_c():\n    if value() != 2:\n"
              "        raise OSError(98, 'Address already in use')\n")
    repo, base = _fork(tmp_path, test_c)
    unit = commit(repo, {"lib.py": "def value():\n    return 3\n"}, "Cherry-pick 1 upstream (#5)")
    result = wiring.tier_gate(open_context(repo)).check(Sha(unit), Sha(base))
    assert not result.passed, result.summary
    assert not result.infra  # the runner ran it twice; the test failed twice: the unit's failure
    assert "not confirmed by rerun" in result.summary and "test_c (INFRA" in result.summary
    assert "failed again" in result.summary


@pytest.mark.security
def test_gate_does_not_land_a_failure_whose_reruns_were_skipped(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    # the base's run passes (n == 0), the unit's fails (n == 1), every later run skips
    test_c = _counting_test(counter, "    if n >= 2:\n        pytest.skip('not on a rerun')\n"
                                     "    assert n == 0, 'fails once'\n")
    repo, base = _fork(tmp_path, test_c)
    ctx = open_context(repo)
    assert wiring.tier_gate(ctx).check(Sha(base), Sha(base)).passed
    unit = commit(repo, {"README": "x\n"}, "Cherry-pick 1 upstream (#6)")
    result = wiring.tier_gate(ctx).check(Sha(unit), Sha(base))
    assert not result.passed, result.summary
    # triage does not call it FLAKY (a skipped rerun is no pass), so it is the unit's failure; were
    # it labelled FLAKY, the gate's confirming rerun would refuse it for the skip
    assert "NEW failures: tests.test_c::test_c" in result.summary or "was skipped on the rerun" in result.summary
    assert int(counter.read_text()) >= 3  # it did run again: skipping is what blocks it


def test_gate_lands_a_flaky_failure_that_passes_its_confirming_rerun(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    test_c = _counting_test(counter, "    assert n != 1, 'timing-dependent failure'\n")
    repo, base = _fork(tmp_path, test_c)
    ctx = open_context(repo)
    assert wiring.tier_gate(ctx).check(Sha(base), Sha(base)).passed
    unit = commit(repo, {"README": "x\n"}, "Cherry-pick 1 upstream (#7)")
    result = wiring.tier_gate(ctx).check(Sha(unit), Sha(base))
    assert result.passed, result.summary
    assert "passed again on rerun" in result.summary


# -- work trees, processes and output of the command gate -------------------------------------

def _alive(pid: int) -> bool:
    """The process exists and is neither a zombie nor dead (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _wait_for(path: Path, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return int(path.read_text().split()[0])


def _kill_later(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.security
def test_prune_touches_only_registered_trees_of_dead_owners(tmp_path: Path) -> None:
    # a checkout whose path holds the L1 trees' prefix, a file beside it, and a process working in it
    outer = tmp_path / "forkflow-l1-x"
    repo_path, base = make_repo(outer / "fork", "", LIB)
    (outer / "keep.txt").write_text("mine\n")
    repo = Repo(repo_path)
    worker = subprocess.Popen(["sleep", "300"], cwd=repo_path)
    # a gate of this (live) process, as a `replay --gate` beside an ingest has
    live = CommandGate(repo, "true")
    # a gate whose process was SIGKILLed while its command ran: its tree and command are stale
    pidfile = tmp_path / "stale.pid"
    code = ("import sys\nfrom forkflow.git.repo import Repo\nfrom forkflow.landing.gate import CommandGate\n"
            f"CommandGate(Repo(sys.argv[1]), 'echo $$ > {pidfile}; exec sleep 300').check(sys.argv[2], sys.argv[2])\n")
    owner = subprocess.Popen([sys.executable, "-c", code, str(repo_path), base])
    try:
        assert live.check(Sha(base), Sha(base)).passed
        stale_pid = _wait_for(pidfile)
        owner.kill()
        owner.wait(30)
        assert _alive(stale_pid)
        trees = [p for p, _ in repo.worktrees()]
        assert len(trees) == 3 and live._tree in trees
        prune_stale_worktrees(repo)
        assert (outer / "keep.txt").read_text() == "mine\n" and (repo_path / "lib.py").exists()
        assert worker.poll() is None, "a process working in the checkout was killed"
        assert live._tree is not None and (live._tree / "lib.py").exists(), "a live gate's tree was removed"
        time.sleep(0.1)
        assert not _alive(stale_pid), "the dead gate's command still runs"
        left = [p.resolve() for p, _ in repo.worktrees()]
        assert left == [repo_path.resolve(), live._tree.resolve()], "the dead gate's tree was kept"
    finally:
        live.close()
        worker.kill()
        worker.wait()
        owner.kill()
        owner.wait()
    assert not registry_dir(repo).exists() or not any(registry_dir(repo).iterdir())


@pytest.mark.security
def test_ingest_in_a_checkout_under_an_l1_like_folder_removes_and_kills_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    b = ForkBuilder(tmp_path / "forkflow-l1-x")  # upstream and fork side by side in it
    b.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    fork = b.branch_fork().path
    b.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    b.upstream_commit({"u.py": "U = 1\n"}, "Upstream (#10)")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "test -f u.py"\n')
    worker = subprocess.Popen(["sleep", "300"], cwd=fork)  # someone's shell in the checkout
    try:
        r = cli("ingest", "--land", "--json", repo=fork)  # --repo, from outside the checkout
        assert r.rc == 0, r.err
        assert [u["status"] for u in r.json()["units"]] == ["landed"]
        assert worker.poll() is None, "a process working in the checkout was killed"
    finally:
        worker.kill()
        worker.wait()
    assert (b.upstream.path / "a.py").is_file() and (fork / "u.py").is_file()


@pytest.mark.security
def test_l1_output_is_capped_head_and_tail(tmp_path: Path) -> None:
    repo_path, base = make_repo(tmp_path / "fork", "", LIB)
    logs = tmp_path / "logs"
    size = 256 << 20
    gate = CommandGate(Repo(repo_path), f"echo first-line; head -c {size} /dev/zero | tr '\\0' x; "
                                        "echo; echo last-line; exit 1", log_dir=logs)
    tracemalloc.start()
    try:
        result = gate.check(Sha(base), Sha(base))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        gate.close()
    assert not result.passed and "last-line" in result.summary
    assert peak < 64 << 20, f"L1 output held {peak} bytes in memory"
    log = (logs / f"l1-{base[:12]}.log").read_bytes()
    assert log.startswith(b"first-line\n") and log.endswith(b"last-line\n")
    assert len(log) < 5 << 20 and b"bytes of output cut here" in log


@pytest.mark.security
def test_l1_test_that_escapes_the_group_with_setsid_is_killed(tmp_path: Path) -> None:
    repo_path, base = make_repo(tmp_path / "fork", "", LIB)
    quiet, loud = tmp_path / "quiet.pid", tmp_path / "loud.pid"
    # one leaves its output open (it would hold the gate until its timeout), one does not
    command = (f"setsid sh -c 'echo $$ > {quiet}; exec sleep 1000' >/dev/null 2>&1 </dev/null & "
               f"setsid sh -c 'echo $$ > {loud}; exec sleep 1001' & "
               f"while [ ! -s {quiet} ] || [ ! -s {loud} ]; do sleep 0.05; done; exit 0")
    gate = CommandGate(Repo(repo_path), command, timeout=60)
    start = time.monotonic()
    try:
        result = gate.check(Sha(base), Sha(base))
        took = time.monotonic() - start
        pids = [_wait_for(quiet), _wait_for(loud)]
        time.sleep(0.1)
        alive = [p for p in pids if _alive(p)]
        _kill_later(alive)
    finally:
        gate.close()
    assert result.passed, result.summary
    assert not alive, "a test process that left L1's process group outlived the run"
    assert took < 30


@pytest.mark.security
def test_tier_job_that_escapes_the_group_with_setsid_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped.pid"
    job = Job(1, "unit", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 1000' & "
                         f"while [ ! -s {pidfile} ]; do sleep 0.05; done; exit 0",
              str(tmp_path), str(tmp_path / "log.txt"), 60.0)
    result = run_process(job)
    pid = _wait_for(pidfile)
    time.sleep(0.1)
    alive = _alive(pid)
    _kill_later([pid] if alive else [])
    assert result.state is JobState.FINISHED and result.returncode == 0
    assert not alive, "a suite's process that left its group outlived the job"


@pytest.mark.security
def test_replay_gate_tree_survives_a_concurrent_prune(cli, sample: Sample, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # the gate itself runs another process's prune (an ingest beside the replay), then needs its tree
    script = tmp_path / "gate.py"
    script.write_text("from pathlib import Path\nfrom forkflow.git.repo import Repo\n"
                      "from forkflow.landing.gate import prune_stale_worktrees\n"
                      "prune_stale_worktrees(Repo(Path.cwd()))\nassert Path('k.py').is_file()\n")
    r = cli("replay", "--since", sample.since, "--until", sample.since, "--every", "3d",
            "--gate", f"{sys.executable} {script}", "--json", repo=sample.fork)
    assert r.rc == 0, r.err
    step = r.json()["steps"][0]
    assert step["landed"] != [], step
