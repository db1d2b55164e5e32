"""Triage of stored validation runs on a real repo and a real SQLite store, through the CLI."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.context import Context, open_context
from forkflow.models import Sha
from forkflow.store.session import Store
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers import records as tq
from forkflow.tiers.reports import TestOutcome, TestResult
from forkflow.tiers.tiers import RunStatus, Tier
from forkflow.triage.models import Classification
from forkflow.triage.triage import TriageSettings, blocking_failures, triage_run

KEYERROR = ('Traceback (most recent call last):\n  File "/w/autotuner.py", line 9, in run\n'
            "    k = cfg['BLOCK_K']\nKeyError: 'BLOCK_K'\n")
CUDA = ('Traceback (most recent call last):\n  File "/w/test_mm.py", line 3, in test_mm\n'
        "    torch.cuda.synchronize()\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
FLAKE = "+++ Timeout +++\n~~~ Stack of MainThread (1) ~~~\n  File \"/w/t.py\", line 3, in wait\n+++ Timeout +++\n"


def triage_fork(builder: ForkBuilder, cli, own: dict[str, str] | None = None,  # type: ignore[no-untyped-def]
                subject: str = "[fork] feature") -> Path:
    """A fork with one commit of its own (`own`, by default f.py), forkflow set up in it."""
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial")
    builder.branch_fork()
    builder.fork_commit(own or {"f.py": "F = 1\n"}, subject)
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    return builder.f.path


@pytest.fixture
def fork(builder: ForkBuilder, cli) -> Path:  # type: ignore[no-untyped-def]
    return triage_fork(builder, cli)


def add_run(ctx: Context, rev: str, results: Sequence[tuple[str, TestOutcome, str]], *,
            base: str | None = None, tier: Tier = Tier.L1, trigger: str = "validate",
            job_status: RunStatus | None = None, log: str = "") -> int:
    """Store a finished run with one job (suite "unit") and these per-test results."""
    log_path = ctx.repo.path.parent / f"log-{rev[:6]}-{len(log)}.txt"
    log_path.write_text(log)
    with ctx.store.session_scope() as s:
        run_id, [job] = tq.create_run(s, ctx.fork_id, tq.NewRun(
            tier, Sha(rev), Sha(base) if base else None, "local", trigger, 0, (), ("unit",), {}),
            [tq.NewJob("unit", "pytest", str(log_path), "", "", False, None, None)])
        bad = any(o in (TestOutcome.FAIL, TestOutcome.ERROR) for _t, o, _m in results)
        status = job_status or (RunStatus.FAIL if bad else RunStatus.PASS)
        tq.finish_job(s, job, tq.JobFinish(status, 1 if bad else 0, 1.0, "", len(results),
                                           len(results), None, (), (), 1),
                      [TestResult(t, o, 0.1, m) for t, o, m in results])
        tq.finish_run(s, run_id, RunStatus.FAIL if bad else RunStatus.PASS, "", ())
    return run_id


class ScriptedRerun:
    """Reruns answered from a script: test -> passes?  (The real one is tiers' rerun_tests.)"""

    def __init__(self, passes: dict[str, bool]) -> None:
        self.passes = passes
        self.calls: list[tuple[int, tuple[str, ...]]] = []

    def __call__(self, run_id: int, tests: Sequence[str]) -> dict[str, bool]:
        self.calls.append((run_id, tuple(tests)))
        return {t: self.passes.get(t, False) for t in tests}


def _revs(b: ForkBuilder) -> tuple[str, str]:
    base = b.f.git("rev-parse", "HEAD").strip()
    unit = b.fork_commit({"g.py": "G = 2\n"}, "[fork] unit under test")
    return base, unit


def test_new_broken_trunk_flaky_infra(fork: Path, builder: ForkBuilder) -> None:
    base, unit = _revs(builder)
    ctx = open_context(fork)
    add_run(ctx, base, [("test_tune", TestOutcome.FAIL, KEYERROR), ("test_mm", TestOutcome.PASS, "")])
    run = add_run(ctx, unit, [("test_tune", TestOutcome.FAIL, KEYERROR.replace("line 9", "line 12")),
                              ("test_mm", TestOutcome.FAIL, CUDA), ("test_wait", TestOutcome.FAIL, FLAKE)],
                  base=base)
    rerun = ScriptedRerun({"test_wait": True})
    report = triage_run(wiring.triager(ctx), run, settings=TriageSettings(reruns=3), rerunner=rerun)
    got = {v.failure.test: v.classification for v in report.verdicts}
    assert got == {"test_tune": Classification.BROKEN_TRUNK, "test_mm": Classification.NEW,
                   "test_wait": Classification.FLAKY}
    assert report.verdicts[0].classification is Classification.NEW  # authors see NEW first
    assert len(rerun.calls) == 3 and set(rerun.calls[0][1]) == {"test_mm", "test_wait"}
    # the gate asks again: stored verdicts, no more reruns
    blocking = blocking_failures(wiring.triager(ctx), run, rerunner=rerun)
    assert [v.failure.test for v in blocking] == ["test_mm"]
    assert len(rerun.calls) == 3


def test_infra_job_and_infra_signature(fork: Path, builder: ForkBuilder) -> None:
    base, unit = _revs(builder)
    ctx = open_context(fork)
    run = add_run(ctx, unit, [("[unit]", TestOutcome.ERROR, "")], base=base, job_status=RunStatus.INFRA,
                  log="collected 10 items\n##[error]The runner has received a shutdown signal.\n")
    run2 = add_run(ctx, unit, [("test_x", TestOutcome.FAIL, "OSError: [Errno 28] No space left on device")],
                   base=base)
    rerun = ScriptedRerun({})
    [v] = triage_run(wiring.triager(ctx), run, settings=TriageSettings(reruns=2), rerunner=rerun).verdicts
    assert v.classification is Classification.INFRA
    assert v.failure.signature.text == "INFRA: runner shut down"  # from the job log, keyed by its family
    [v2] = triage_run(wiring.triager(ctx), run2, settings=TriageSettings(reruns=2), rerunner=rerun).verdicts
    assert v2.classification is Classification.INFRA
    assert rerun.calls == []
    assert blocking_failures(wiring.triager(ctx), run) == []


def test_intermittent_new_failure_still_blocks(fork: Path, builder: ForkBuilder) -> None:
    base, unit = _revs(builder)
    ctx = open_context(fork)
    run = add_run(ctx, unit, [("test_race", TestOutcome.FAIL, CUDA)], base=base)
    flips = iter([True, False, False])

    def rerun(run_id: int, tests: Sequence[str]) -> dict[str, bool]:
        return {t: next(flips) for t in tests}
    [v] = triage_run(wiring.triager(ctx), run, settings=TriageSettings(reruns=3), rerunner=rerun).verdicts
    assert v.classification is Classification.NEW and "intermittent" in v.reason
    assert v.reruns == (True, False, False)


def test_cli_triage_json_and_errors(fork: Path, builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    base, unit = _revs(builder)
    ctx = open_context(fork)
    run = add_run(ctx, unit, [("test_mm", TestOutcome.FAIL, CUDA)], base=base)
    r = cli("triage", str(run), "--json", "--reruns", "0", repo=fork)
    assert r.rc == 0, r.err
    doc = r.json()
    assert doc["counts"]["NEW"] == 1 and doc["failures"][0]["kind"] == "CUDA_ERROR"
    assert "illegal memory access" in doc["failures"][0]["excerpt"]
    text = cli("triage", str(run), "--reruns", "0", repo=fork)
    assert text.rc == 0 and "NEW" in text.out
    missing = cli("triage", "999", repo=fork)
    assert missing.rc == 1 and "no validation run 999" in missing.err and "/validation page" in missing.err
    negative = cli("triage", str(run), "--reruns", "-1", repo=fork)
    assert negative.rc == 1 and "--reruns must be 0 or more, not -1" in negative.err


def test_bad_triage_config_names_key(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text() + "\n[triage]\nreruns = -2\n")
    r = cli("triage", "1", repo=fork)
    assert r.rc == 1 and "triage.reruns" in r.err and "forkflow.toml:" in r.err


def test_trunk_shows_red_since_and_culprit(fork: Path, builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    ctx = open_context(fork)
    green = builder.f.git("rev-parse", "HEAD").strip()
    add_run(ctx, green, [("test_mm", TestOutcome.PASS, ""), ("test_tune", TestOutcome.PASS, "")])
    bad = builder.fork_commit({"mm.py": "broken\n"}, "[fork] break matmul")
    add_run(ctx, bad, [("test_mm", TestOutcome.FAIL, CUDA), ("test_tune", TestOutcome.PASS, "")])
    later = builder.fork_commit({"x.py": "x\n"}, "[fork] unrelated")
    add_run(ctx, later, [("test_mm", TestOutcome.FAIL, CUDA.replace("line 3", "line 7")),
                         ("test_tune", TestOutcome.PASS, "")])
    r = cli("trunk", "--json", repo=fork)
    assert r.rc == 0, r.err
    [item] = r.json()["red"]
    assert item["test"] == "test_mm" and item["runs_red"] == 2 and item["since_rev"] == bad
    assert item["culprit"].startswith(bad[:12]) and "break matmul" in item["culprit"]
    assert "red on fork main" in cli("trunk", repo=fork).out


def test_trunk_culprit_from_stored_bisection_wins(fork: Path, builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.regress import records
    from forkflow.triage.trunk import red_test_metric

    ctx = open_context(fork)
    green = builder.f.git("rev-parse", "HEAD").strip()
    add_run(ctx, green, [("test_mm", TestOutcome.PASS, "")])
    bad = builder.fork_commit({"mm.py": "broken\n"}, "[fork] break matmul")
    add_run(ctx, bad, [("test_mm", TestOutcome.FAIL, CUDA)])

    def store(status: str, culprit: dict[str, object] | None) -> int:
        doc = {"metric": red_test_metric("unit", "test_mm"), "mode": "pass-fail", "good": green, "bad": bad,
               "status": status, "confidence": 1.0, "message": status, "culprit": culprit,
               "rounds": 1, "measurements": 3}
        with ctx.store.session_scope() as s:
            return records.save_bisection(s, ctx.fork_id, None, doc)

    [item] = cli("trunk", "--json", repo=fork).json()["red"]
    assert item["culprit_detail"]["source"] == "single-commit" and item["bisection"] is None
    flaky = store("flaky", None)  # the bisection found it flaky: the only commit is not blamed
    [item] = cli("trunk", "--json", repo=fork).json()["red"]
    assert item["culprit"] is None and item["bisection"] == {
        "id": flaky, "status": "flaky", "message": "flaky", "confidence": 1.0, "rounds": 1, "measurements": 3}
    up = "ab" * 20
    found = store("found", {"fork_commit": bad, "landing_unit": bad, "subject": "Fix mm (#77)",
                            "upstream_commit": up, "pr": 77})
    [item] = cli("trunk", "--json", repo=fork).json()["red"]
    assert item["culprit_detail"] == {
        "fork_commit": bad, "landing_unit": bad, "unit_subject": "[fork] break matmul", "upstream_commit": up,
        "upstream_subject": "Fix mm (#77)", "pr": 77, "source": "bisection", "bisection": found,
        "confidence": 1.0}
    assert item["culprit"] == f"{bad[:12]} [fork] break matmul -> upstream {up[:12]} Fix mm (#77)"


def test_trunk_without_any_run_says_how_to_fill_it(builder, cli) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial")
    builder.branch_fork()
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    r = cli("trunk", repo=builder.f.path)
    assert r.rc == 0
    assert "no L1 or L2 run of fork main is stored yet" in r.out and "green" not in r.out


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_triages_of_one_run_at_once_both_store_it(fork: Path, builder: ForkBuilder,
                                                       request: pytest.FixtureRequest, backend: str) -> None:
    """The ingest gate and `forkflow triage` store one run at the same moment: neither one fails."""
    from sqlalchemy import event, func, select

    from forkflow.store.schema_triage import ClassificationRow, FailureRow
    from forkflow.triage.triage import failures_of_run

    url = None if backend == "sqlite" else str(request.getfixturevalue("postgres_url"))
    if url is not None:
        Store.open(url, create=True)  # as `forkflow init --store URL`: a typed URL must name a store
    base, unit = _revs(builder)
    ctx = open_context(fork, url)
    run = add_run(ctx, unit, [("test_mm", TestOutcome.FAIL, CUDA), ("test_tune", TestOutcome.FAIL, KEYERROR)],
                  base=base)
    other = open_context(fork, url)  # the second process: its own engine and connections
    done: set[str] = set()

    def first_triage_commits(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        """Right before the second one's first write of a table, the first one stores it all."""
        table = statement.split()[2] if statement.startswith("INSERT INTO") else ""
        if table in ("triage_groups", "triage_classifications") and table not in done:
            done.add(table)
            if table == "triage_groups":
                failures_of_run(wiring.triager(ctx).journal, run)  # both found no failures stored, and computed them
            else:
                triage_run(wiring.triager(ctx), run, settings=TriageSettings(reruns=0))

    event.listen(other.store.engine, "before_cursor_execute", first_triage_commits)
    second = triage_run(wiring.triager(other), run, settings=TriageSettings(reruns=0))
    assert done == {"triage_groups", "triage_classifications"}
    assert [(v.failure.test, v.classification) for v in second.verdicts] == [
        ("test_mm", Classification.NEW), ("test_tune", Classification.NEW)]
    with ctx.store.session_scope() as s:
        assert s.scalar(select(func.count()).select_from(FailureRow).where(FailureRow.run_id == run)) == 2
        assert s.scalar(select(func.count()).select_from(ClassificationRow)) == 2
    assert blocking_failures(wiring.triager(ctx), run) == list(second.verdicts)
