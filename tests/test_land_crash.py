"""Crash safety: `forkflow ingest --land` killed with SIGKILL at many points, then run again.

After every kill the fork branch points only at commits that passed L1; after the final run
no upstream commit was picked twice, and the store agrees with git.  The command runs in a
real process; to keep start-up short it mounts only the ingest commands (the same functions
`forkflow ingest` runs).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forkflow.git.run import run_git
from forkflow.models import OPEN_STATES, UnitState
from forkflow.testing.gitrepo import ForkBuilder

RUNNER = """
import sys, typer
from forkflow.cli import ingest_cmds
app = typer.Typer()
ingest_cmds.register(app)
@app.callback()
def _root() -> None: pass
app(args=sys.argv[1:], prog_name="forkflow")
"""


def _git(repo: Path, *args: str) -> str:
    return run_git(*args, cwd=repo).strip()


@pytest.fixture
def crashy(builder: ForkBuilder, tmp_path: Path, cli) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    b = builder
    b.upstream_commit({"core/base.py": "X = 0\n", "misc/readme.txt": "hi\n"}, "Initial")
    b.branch_fork()
    b.fork_commit({"fork.py": "F = 1\n"}, "[fork] our feature")
    for i in range(14):  # a declared chain: 14 links, each its own unit and L1 run
        b.upstream_commit({f"core/c{i}.py": f"C{i} = {i}\n"}, f"[core] step {i} (#{100 + i})")
    for i in range(12):  # low-risk commits: 3 bundles of 4
        b.upstream_commit({f"misc/m{i}.txt": f"{i}\n"}, f"[misc] note {i} (#{200 + i})")
    fork = b.f.path
    b.f.git("checkout", "-q", "--detach")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    passed = tmp_path / "passed.log"
    l1 = (f'if [ -e {tmp_path}/kill-next ]; then rm {tmp_path}/kill-next; kill -9 $PPID; sleep 5; fi; '
          f'sleep 0.05; echo "$FORKFLOW_REV" >> {passed}')
    with (fork / "forkflow.toml").open("a") as f:  # a TOML literal string: the command has no ' in it
        # max_batch = 4: the landing queue gates each chain link (weight 4) and bundle alone, 17 runs
        f.write(f"\n[ingest]\nl1_command = '{l1}'\nmax_bundle = 4\nmax_batch = 4\n\n"
                '[[ingest.chain]]\nname = "core"\npaths = ["core/**"]\n')
    return fork, passed


def _start(fork: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    return subprocess.Popen([sys.executable, str(runner), "ingest", "--land", "--repo", str(fork)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _assert_only_l1_passed_on_branch(fork: Path, start: str, passed: Path) -> None:
    """Every commit the fork branch ever pointed at passed L1 (its reflog).  The commits under a
    landed batch's top were validated together with it (the landing queue), not one by one."""
    ok = set(passed.read_text().split()) if passed.exists() else set()
    log = _git(fork, "reflog", "show", "--format=%H", "refs/heads/main").split()  # newest first
    pointed = set(log[:log.index(start)]) if start in log else set(log)
    assert pointed <= ok, "the fork branch pointed at a commit that did not pass L1"
    main = _git(fork, "rev-parse", "main")
    assert main == start or main in pointed  # so each commit under it lies under a tree that passed


def _lines(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


def _kill_after_progress(p: subprocess.Popen[bytes], passed: Path, jitter: float) -> None:
    """SIGKILL the run `jitter` seconds after its next L1 pass: between L1 and the ref update,
    during the pick of the next unit, in its store writes.  Tied to progress, not to the wall
    clock, so a faster machine meets the same moments."""
    base = _lines(passed)
    while p.poll() is None and _lines(passed) <= base:
        time.sleep(0.002)
    time.sleep(jitter)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)


@pytest.mark.slow
def test_land_crash_sigkill_anywhere_then_rerun(crashy: tuple[Path, Path], tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    fork, passed = crashy
    start = _git(fork, "rev-parse", "main")
    kills = 0
    # kills inside L1 (the gate's process kills forkflow), then at moments after an L1 pass;
    # 17 units to land, each timed kill lets at most a few land, so every run below is cut short
    schedule: list[float | None] = [None, None, None] + [0.0, 0.002, 0.005, 0.01, 0.02, 0.04] * 2
    for jitter in schedule:
        if jitter is None:
            (tmp_path / "kill-next").touch()
        p = _start(fork, tmp_path)
        if jitter is not None:
            _kill_after_progress(p, passed, jitter)
        rc = p.wait(timeout=60)
        kills += rc == -signal.SIGKILL
        _assert_only_l1_passed_on_branch(fork, start, passed)
    assert kills >= 12, f"only {kills} runs were killed mid-way"
    final = _start(fork, tmp_path)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    _assert_only_l1_passed_on_branch(fork, start, passed)
    _assert_store_agrees_with_git(cli, fork, start)


def _assert_store_agrees_with_git(cli, fork: Path, start: str) -> None:  # type: ignore[no-untyped-def]
    from forkflow.context import open_context
    from forkflow.landing import records
    from forkflow.ledger import records as ledger_records

    main = _git(fork, "rev-parse", "main")
    new = _git(fork, "rev-list", f"{start}..main").split()
    trailers = [line.split()[1] for line in _git(fork, "log", "--format=%B", f"{start}..main").splitlines()
                if line.startswith("Upstream-Commit: ")]
    assert len(trailers) == len(set(trailers)) == 26, "an upstream commit was picked twice (or not at all)"
    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        units = records.units(s, ctx.fork_id)
        decisions = ledger_records.recorded_decisions(s, ctx.fork_id)
    landed = [str(u.candidate_sha) for u in units if u.status is UnitState.LANDED]
    assert sorted(landed) == sorted(new), "landed units in the store differ from the commits on the branch"
    assert not [u for u in units if u.status in OPEN_STATES]
    picked = {d.sha: d.fork_shas for d in decisions if d.disposition.value == "PICKED"}
    assert set(picked) == set(trailers)
    for sha, forks in picked.items():
        assert all(ctx.repo.is_ancestor(f, main) for f in forks), sha
    doc = cli("status", "--json", repo=fork).json()
    assert doc["counts"]["pending"] == 0 and doc["counts"]["picked"] == 26
    assert doc["ingestion_point"]["sha"] == doc["upstream_tip"]["sha"]
