"""The landing queue (landing/queue.py, `Ingestor._land_queue`) on real git repositories: few gate
runs, a red batch split until its failing commits are found, speculative stacks on several runners,
and the bad inputs: a gate that hangs, a runner that dies, a branch a person moves meanwhile."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.context import open_context
from forkflow.git.run import run_git
from forkflow.landing.ingest import IngestOptions, Mode, UnitStatus
from forkflow.landing.queue import Batch, Item, RISK_WEIGHT, Staged, add_to, halves, opens_batch
from forkflow.models import GateResult, MemberOutcome, Sha
from forkflow.planning.model import Unit, UnitKind
from forkflow.testing.gitrepo import ForkBuilder


def _git(repo: Path, *args: str) -> str:
    return run_git(*args, cwd=repo).strip()


def behind_upstream(cli, builder: ForkBuilder, initial: dict[str, str],  # type: ignore[no-untyped-def]
                    commits: dict[int, dict[str, str]], toml: str) -> Path:
    """A fork (checkout detached) of upstream `initial` with one commit of its own, behind upstream
    commits #n (files each), with `toml` added to its forkflow.toml."""
    builder.upstream_commit(initial, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    for n, files in commits.items():
        builder.upstream_commit(files, f"Change {n} (#{n})")
    fork = builder.f.path
    builder.f.git("checkout", "-q", "--detach")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write(toml)
    return fork


def _backlog(cli, builder: ForkBuilder, commits: dict[int, dict[str, str]], l1: str,  # type: ignore[no-untyped-def]
             extra: str = "") -> Path:
    """A fork behind upstream commits #n (files each), its forkflow.toml gating with `l1`."""
    return behind_upstream(cli, builder, {"a.py": "A = 1\n"}, commits,
                           f"\n[ingest]\nl1_command = {json.dumps(l1)}\n{extra}")


def _plain(n: int, first: int = 10) -> dict[int, dict[str, str]]:
    return {first + i: {f"m{first + i}.py": f"M = {i}\n"} for i in range(n)}


def _logging_gate(log: Path, check: str = "true") -> str:
    """An L1 command that logs each run's revision and verdict: `check` decides."""
    return f'if {check}; then echo "$FORKFLOW_REV ok" >> {log}; else echo "$FORKFLOW_REV red" >> {log}; exit 1; fi'


def _runs(log: Path) -> list[tuple[str, str]]:
    return [(a, b) for a, b in (line.split() for line in log.read_text().splitlines())] if log.exists() else []


def _dispositions(cli, fork: Path) -> dict[str, dict]:  # type: ignore[no-untyped-def,type-arg]
    doc = cli("status", "--json", "--commits", repo=fork).json()
    return {c["subject"].rsplit("(#", 1)[-1].rstrip(")"): c for c in doc["commits"]}


def _assert_landed_only_what_passed(fork: Path, start: str, log: Path) -> None:
    """Every commit the fork branch pointed at since `start` passed L1 (its reflog against the gate's log)."""
    passed = {rev for rev, verdict in _runs(log) if verdict == "ok"}
    pointed = _git(fork, "reflog", "show", "--format=%H", "refs/heads/main").split()
    pointed = pointed[:pointed.index(start)] if start in pointed else pointed
    assert set(pointed) <= passed, "the fork branch pointed at a commit no L1 run passed"


def test_the_backlog_lands_in_one_gate_run_each_commit_its_own_fork_commit(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                            tmp_path: Path) -> None:
    log = tmp_path / "runs"
    commits = _plain(12) | {30: {"ops/a.py": "A = 1\n"}, 31: {"ops/b.py": "B = 1\n"}}
    fork = _backlog(cli, builder, commits, _logging_gate(log),
                    'max_bundle = 4\n\n[[ingest.chain]]\nname = "ops"\npaths = ["ops/**"]\n')
    start = _git(fork, "rev-parse", "main")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert {u["status"] for u in doc["units"]} == {"landed"} and len(doc["units"]) == 5  # 3 bundles, 2 links
    assert len(_runs(log)) == 1  # before the queue: one run a unit, five
    _assert_landed_only_what_passed(fork, start, log)
    assert all(r["disposition"] == "PICKED" for r in _dispositions(cli, fork).values() if r["disposition"] != "BASE")
    assert _git(fork, "rev-list", "--count", f"{start}..main") == "5"  # each unit still its own fork commit
    assert all("validated together in batch 1" in u["summary"] for u in doc["units"])


def test_max_batch_weighs_risky_commits(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "runs"
    commits = _plain(8) | {30: {"ops/a.py": "A = 1\n"}, 31: {"ops/b.py": "B = 1\n"}}
    fork = _backlog(cli, builder, commits, _logging_gate(log),
                    f'max_bundle = 4\nmax_batch = {2 * RISK_WEIGHT}\n\n[[ingest.chain]]\nname = "ops"\npaths = ["ops/**"]\n')
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert {u["status"] for u in doc["units"]} == {"landed"}
    assert len(_runs(log)) == 2  # two bundles of 4 (weight 8), then the two chain links (weight 4 each)


def test_a_red_batch_is_bisected_its_failing_commits_held_the_rest_landed(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                          tmp_path: Path) -> None:
    log = tmp_path / "runs"
    commits = _plain(16)
    commits[14]["bad14.flag"] = "breaks L1\n"
    commits[21]["bad21.flag"] = "breaks L1\n"
    fork = _backlog(cli, builder, commits, _logging_gate(log, "! ls bad*.flag >/dev/null 2>&1"), "max_bundle = 4\n")
    start = _git(fork, "rev-parse", "main")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    rows = _dispositions(cli, fork)
    assert rows["14"]["disposition"] == rows["21"]["disposition"] == "DEFERRED"
    assert "L1 failed" in rows["14"]["evidence"][0] and "L1 failed" in rows["21"]["evidence"][0]
    assert [n for n in map(str, range(10, 26)) if rows[n]["disposition"] == "PICKED"] == \
        [n for n in map(str, range(10, 26)) if n not in ("14", "21")]
    # log(n) a failing commit, not n: each one found in halves, then the rest batched again
    assert len(_runs(log)) <= 1 + 2 * (math.ceil(math.log2(16)) + 1)
    assert "bad" not in _git(fork, "ls-tree", "--name-only", "main")
    _assert_landed_only_what_passed(fork, start, log)
    assert {u["status"] for u in doc["units"]} <= {"landed", "failed"}


@pytest.mark.security
def test_a_commit_that_passes_alone_and_fails_only_with_another_is_held_naming_the_failure(  # type: ignore[no-untyped-def]
        cli, builder: ForkBuilder, tmp_path: Path) -> None:
    log = tmp_path / "runs"
    commits = _plain(6)
    commits[11]["left.flag"] = "x\n"
    commits[14]["right.flag"] = "y\n"
    check = "! { [ -e left.flag ] && [ -e right.flag ] && echo 'left.flag and right.flag clash'; }"
    fork = _backlog(cli, builder, commits, _logging_gate(log, check))
    start = _git(fork, "rev-parse", "main")
    cli("ingest", "--land", "--json", repo=fork)
    rows = _dispositions(cli, fork)
    assert rows["11"]["disposition"] == "PICKED"  # it passed on its own, first in upstream order
    assert rows["14"]["disposition"] == "DEFERRED"  # fails only on top of #11: held, with the cause
    assert "left.flag and right.flag clash" in rows["14"]["evidence"][0]
    assert all(rows[n]["disposition"] == "PICKED" for n in ("10", "12", "13", "15"))
    _assert_landed_only_what_passed(fork, start, log)
    # alone, on the fork as it was, #14 passes: the gate's own verdict, not a guess
    tree = fork.parent / "alone"
    _git(fork, "worktree", "add", "-q", "--detach", str(tree), start)
    _git(tree, "cherry-pick", "-n", rows["14"]["sha"])
    assert not (tree / "left.flag").exists() and (tree / "right.flag").exists()


@pytest.mark.security
def test_a_gate_that_hangs_times_out_and_only_the_hanging_commit_is_held(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                         tmp_path: Path) -> None:
    log = tmp_path / "runs"
    commits = _plain(4)
    commits[12]["hang.flag"] = "the tests of this commit never end\n"
    gate = f'if [ -e hang.flag ]; then sleep 120; fi; echo "$FORKFLOW_REV ok" >> {log}'
    fork = _backlog(cli, builder, commits, gate, "l1_timeout = 1.5\n")
    start = _git(fork, "rev-parse", "main")
    cli("ingest", "--land", "--json", repo=fork)
    rows = _dispositions(cli, fork)
    assert rows["12"]["disposition"] == "DEFERRED" and "timed out after 1.5s" in rows["12"]["evidence"][0]
    assert [rows[n]["disposition"] for n in ("10", "11", "13")] == ["PICKED"] * 3
    _assert_landed_only_what_passed(fork, start, log)


class DyingGate:
    """A runner that dies (its host went away) on the runs `dies_on` names, else passes."""

    def __init__(self, dies_on: set[int]) -> None:
        self.dies_on, self.checks = dies_on, 0
        self.revs: list[Sha] = []

    def check(self, rev: Sha, base: Sha) -> GateResult:
        self.checks += 1
        if self.checks in self.dies_on:
            raise RuntimeError("connection to the runner lost")
        self.revs.append(rev)
        return GateResult(True, "passed")


def _fork_for_ingestor(builder: ForkBuilder) -> Path:
    from forkflow.config import render_config

    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    for n in range(10, 16):
        builder.upstream_commit({f"m{n}.py": f"M = {n}\n"}, f"Change {n} (#{n})")
    builder.fetch()
    fork = builder.f.path
    (fork / "forkflow.toml").write_text(render_config("upstream", "main", "main") + "\n[ingest]\nmax_bundle = 2\n")
    return fork


def test_a_runner_that_dies_mid_batch_is_replaced_and_its_stack_validated_again(builder: ForkBuilder) -> None:
    fork = _fork_for_ingestor(builder)
    start = _git(fork, "rev-parse", "main")
    gate = DyingGate({1})
    report = wiring.ingestor(open_context(fork), IngestOptions(mode=Mode.LAND), gate).run()
    assert {r.status for r in report.results} == {UnitStatus.LANDED}
    assert gate.checks == 2 and gate.revs == [_git(fork, "rev-parse", "main")]  # the very top, validated again
    assert any("the runner died while validating" in n and "connection to the runner lost" in n for n in report.notes)
    assert _git(fork, "rev-list", "--count", f"{start}..main") == "3"


def test_a_runner_that_dies_twice_lands_nothing_and_decides_nothing(builder: ForkBuilder) -> None:
    fork = _fork_for_ingestor(builder)
    start = _git(fork, "rev-parse", "main")
    gate = DyingGate({1, 2})
    ctx = open_context(fork)
    report = wiring.ingestor(ctx, IngestOptions(mode=Mode.LAND), gate).run()
    assert _git(fork, "rev-parse", "main") == start and gate.revs == []
    assert any("L1 could not run" in n and "nothing was decided" in n for n in report.notes)
    from forkflow.ledger.build import build_ledger

    ledger = build_ledger(ctx.repo, ctx.config, ctx.store, ctx.fork_id)
    assert {e.disposition.value for e in ledger.entries} == {"PENDING"}  # not deferred on a runner's fault


class RedThenDyingGate:
    """Red on every candidate; the runner dies on the fork tip alone (rev == base)."""

    def __init__(self) -> None:
        self.tip_checks = 0

    def check(self, rev: Sha, base: Sha) -> GateResult:
        if rev == base:
            self.tip_checks += 1
            raise RuntimeError("connection to the runner lost")
        return GateResult(False, "l1_command failed (exit 1)")


def test_a_runner_that_dies_on_the_fork_tip_check_stops_the_run_as_l1_could_not_run(builder: ForkBuilder) -> None:
    fork = _fork_for_ingestor(builder)
    start = _git(fork, "rev-parse", "main")
    gate = RedThenDyingGate()
    ctx = open_context(fork)
    report = wiring.ingestor(ctx, IngestOptions(mode=Mode.LAND), gate).run()
    assert gate.tip_checks == 2 and report.stopped.startswith("L1 could not run (")  # not "fails on the tip"
    assert f"the runner died while validating {start[:12]}" in report.stopped
    assert _git(fork, "rev-parse", "main") == start
    assert not any(r.status in (UnitStatus.FAILED, UnitStatus.LANDED) for r in report.results)
    from forkflow.ledger.build import build_ledger

    ledger = build_ledger(ctx.repo, ctx.config, ctx.store, ctx.fork_id)
    assert {e.disposition.value for e in ledger.entries} == {"PENDING"}  # not held on a runner's fault


def test_runners_validate_speculative_stacks_at_once(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "runs"
    gate = (f'a=$(date +%s.%N); sleep 1; b=$(date +%s.%N); echo "$FORKFLOW_REV ok $a $b" >> {log}')
    fork = _backlog(cli, builder, _plain(8), gate, "max_bundle = 2\nmax_batch = 2\nrunners = 4\n")
    start = _git(fork, "rev-parse", "main")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert {u["status"] for u in doc["units"]} == {"landed"}
    rows = [line.split() for line in log.read_text().splitlines()]
    assert len(rows) == 4  # batch 1, 1+2, 1+2+3, 1+2+3+4: one window
    spans = sorted((float(r[2]), float(r[3])) for r in rows)
    assert spans[-1][0] < spans[0][1]  # all four ran at once
    assert _git(fork, "rev-parse", "main") in {r[0] for r in rows}
    assert _git(fork, "rev-list", "--count", f"{start}..main") == "4"
    assert "forkflow-l1-" not in _git(fork, "worktree", "list")  # every runner's work tree removed


@pytest.mark.security
def test_the_fork_branch_moved_by_a_person_while_a_stack_validates_is_validated_again(  # type: ignore[no-untyped-def]
        cli, builder: ForkBuilder, tmp_path: Path) -> None:
    log, flag = tmp_path / "runs", tmp_path / "moved"
    racer = tmp_path / "person.sh"  # during the first L1 run, a person pushes a commit of their own
    racer.write_text(f'''#!/bin/sh
echo "$FORKFLOW_REV ok" >> {log}
if [ ! -e {flag} ]; then
  touch {flag}
  blob=$(echo "P = 1" | git hash-object -w --stdin)
  export GIT_INDEX_FILE={tmp_path}/person.index
  git read-tree "$FORKFLOW_BASE"
  git update-index --add --cacheinfo "100644,$blob,person.py"
  new=$(git commit-tree -p "$FORKFLOW_BASE" -m "[fork] a person's fix" "$(git write-tree)")
  git update-ref refs/heads/main "$new" "$FORKFLOW_BASE"
fi
''')
    fork = _backlog(cli, builder, _plain(5), f"sh {racer}", "max_bundle = 2\n")
    start = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 0, r.err
    assert _git(fork, "log", "--format=%s", f"{start}..main").splitlines()[-1] == "[fork] a person's fix"
    assert _git(fork, "show", "main:person.py") == "P = 1"
    runs = _runs(log)
    assert len(runs) == 2 and _git(fork, "rev-parse", "main") == runs[1][0]  # validated again on the new tip
    trailers = _git(fork, "log", "--format=%B", f"{start}..main").count("Upstream-Commit: ")
    assert trailers == 5  # each once
    pointed = _git(fork, "reflog", "show", "--format=%H", "refs/heads/main").split()
    pointed = pointed[:pointed.index(start)]
    assert set(pointed) - {_git(fork, "rev-parse", "main~3")} <= {rev for rev, _ in runs}  # but the person's


def _staged(name: str, applied: int, risky: bool, group: int = 0) -> Staged:
    shas = tuple(Sha(f"{name}{i}".ljust(40, "0")) for i in range(applied))
    unit = Unit(UnitKind.BUNDLE, name, shas, {})
    return Staged(Item(name, unit, shas, group), Sha("b" * 40), Sha("c" * 40), "t", 1,
                  tuple((s, MemberOutcome.APPLIED) for s in shas), shas, (), None, risky)


@pytest.mark.parametrize("max_batch, cuts", [(8, [2, 1]), (100, [3]), (1, [1, 1, 1])])
def test_batches_are_cut_by_weight(max_batch: int, cuts: list[int]) -> None:
    batches: list[Batch] = []
    for s in (_staged("a", 4, False), _staged("b", 4, False), _staged("c", 1, True)):
        add_to(batches, s, max_batch)
    assert [len(b.units) for b in batches] == cuts


def test_a_red_batchs_halves_are_batches_of_their_own() -> None:
    batches: list[Batch] = []
    add_to(batches, _staged("a", 1, False, group=1), 100)
    assert opens_batch(batches, Item("b", _staged("b", 1, False).unit, (), group=2), 100)
    assert not opens_batch(batches, Item("c", _staged("c", 1, False).unit, (), group=1), 100)
    assert halves([1, 2, 3]) == ((1,), (2, 3))


def test_per_commit_landing_gives_each_upstream_commit_its_own_fork_commit(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                            tmp_path: Path) -> None:
    log = tmp_path / "runs"
    fork = _backlog(cli, builder, _plain(6), _logging_gate(log), 'max_bundle = 3\nlanding = "per-commit"\n')
    start = _git(fork, "rev-parse", "main")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert {u["status"] for u in doc["units"]} == {"landed"} and len(_runs(log)) == 1
    bodies = _git(fork, "log", "--reverse", "--format=%B%x1e", f"{start}..main").split("\x1e")
    trailers = [[line for line in b.splitlines() if line.startswith("Upstream-Commit: ")] for b in bodies if b.strip()]
    assert [len(t) for t in trailers] == [1] * 6  # six fork commits, one upstream commit each, in order
    assert [_git(fork, "show", f"main~{5 - i}:m{10 + i}.py") for i in range(6)] == [f"M = {i}" for i in range(6)]
    rows = _dispositions(cli, fork)
    assert all(rows[str(n)]["disposition"] == "PICKED" for n in range(10, 16))


@pytest.mark.parametrize("line, says", [
    ('landing = "squash"', 'ingest.landing'), ("runners = 0", "ingest.runners"), ("max_batch = 0", "ingest.max_batch")])
def test_queue_settings_are_checked(cli, builder: ForkBuilder, tmp_path: Path, line: str, says: str) -> None:  # type: ignore[no-untyped-def]
    fork = _backlog(cli, builder, _plain(2), "true", line + "\n")
    before = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--land", repo=fork)
    assert r.rc != 0 and says in r.err and len(r.err.strip().splitlines()) == 1
    assert _git(fork, "rev-parse", "main") == before


@pytest.mark.security
@pytest.mark.parametrize("gate, says", [("sleep 120", "timed out after 1.5s"), ("exit 1", "l1_command failed")])
def test_a_gate_that_fails_on_the_fork_tip_itself_stops_the_run_holding_nothing(  # type: ignore[no-untyped-def]
        cli, builder: ForkBuilder, tmp_path: Path, gate: str, says: str) -> None:
    log = tmp_path / "runs"
    fork = _backlog(cli, builder, _plain(12), f'echo "$FORKFLOW_REV red" >> {log}; {gate}',
                    "l1_timeout = 1.5\nmax_bundle = 3\n")
    start, refs = _git(fork, "rev-parse", "main"), _git(fork, "for-each-ref", "refs/heads", "refs/tags")
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 5, r.err
    # halves down to the first unit (4 units of 3 commits), then the fork tip alone: not a
    # bisection down to every commit, nor anything held as failing
    assert [rev for rev, _ in _runs(log)][-1] == start and len(_runs(log)) <= 2 + math.ceil(math.log2(4)) + 1
    doc = r.json()
    stop = f"L1 fails on the fork tip {start[:12]} itself"
    assert [n for n in doc["notes"] if stop in n and says in n] == [n for n in doc["notes"] if "fork tip" in n]
    assert len([n for n in doc["notes"] if stop in n]) == 1
    assert doc["held_back"] == [] and not any(u["status"] in ("failed", "landed") for u in doc["units"])
    assert _git(fork, "rev-parse", "main") == start
    assert _git(fork, "for-each-ref", "refs/heads", "refs/tags") == refs
    rows = _dispositions(cli, fork)
    assert {c["disposition"] for c in rows.values()} == {"PENDING"}  # nothing held, nothing landed
    assert not any("L1 failed" in " ".join(c["evidence"]) for c in rows.values())
    human = cli("ingest", "--land", repo=fork)  # the next run stops the same way, saying it in one line
    assert human.rc == 5
    assert len([line for line in human.out.splitlines() if stop in line]) == 1, human.out
