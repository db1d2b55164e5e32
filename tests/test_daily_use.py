"""Validation in daily use: the documented cron line, one flaky memory across tiers, trunk health
that reads every run on the tip, tracked L2 alerts, runs that can be found by their id."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.context import Context, open_context
from forkflow.models import Better, MetricPoint, Sha
from forkflow.regress import records as rrecords
from forkflow.regress.service import StoreAlertFeed, StoreMetricJournal, detect
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers import records as tq
from forkflow.tiers.reports import TestOutcome, TestResult
from forkflow.tiers.tiers import RunStatus, Tier
from forkflow.triage.sinks.markdown import MarkdownSink
from forkflow.triage.tracking import Action, sync_tracking
from forkflow.triage.triage import TriageSettings, triage_run
from tests.conftest import CliResult
from tests.test_triage import CUDA, FLAKE, ScriptedRerun, triage_fork

DOCS = Path(__file__).resolve().parent.parent / "docs"
PYTEST = (f"{sys.executable} -m pytest -q -p no:cacheprovider -o junit_family=xunit1 "
          "--junitxml={report} {tests}")
SUITES = (f"\n[[suite]]\nname = \"nightly-tests\"\ntier = \"L2\"\ncommand = '{PYTEST}'\n"
          "all_tests = \"tests\"\nreport = \"junit\"\nenv = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = \"1\" }\n")


def cron_line() -> str:
    """The nightly cron line of docs/automation.md, the part `sh -c` runs."""
    text = (DOCS / "automation.md").read_text()
    [line] = [x for x in text.splitlines() if x.startswith("0 2 * * *")]
    m = re.search(r"chronic sh -c '(.*)'$", line)
    assert m, line
    return m.group(1)


def run_cron(fork: Path) -> CliResult:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               COLUMNS="300")
    p = subprocess.run(["sh", "-c", cron_line()], cwd=fork, capture_output=True, text=True, env=env,
                       timeout=300)
    return CliResult(p.returncode, p.stdout, p.stderr)


@pytest.fixture
def pyfork(builder: ForkBuilder, cli) -> Path:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli, {"lib.py": "def value():\n    return 2\n",
                                      "tests/test_lib.py": "from lib import value\n\ndef test_value():\n"
                                                           "    assert value() == 2, 'value changed'\n"})
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text() + SUITES)
    builder.f.git("add", "-A")
    builder.f.git("commit", "-q", "-m", "[fork] forkflow.toml", env=builder.f.env())
    return fork


def test_documented_cron_line_files_the_break_on_the_night_it_happens(pyfork: Path, builder: ForkBuilder) -> None:
    first = run_cron(pyfork)
    assert first.rc == 0, first.out + first.err
    breaker = builder.fork_commit({"lib.py": "def value():\n    return 3\n"}, "[fork] change value")
    night = run_cron(pyfork)
    # the red nightly still reaches `issues sync`, and the line exits with the nightly's code
    assert night.rc == 1, night.out + night.err
    issues = list((pyfork / ".git" / "forkflow" / "issues").glob("*.md"))
    assert len(issues) == 1, night.out
    body = issues[0].read_text()
    assert "tests/test_lib.py::test_value" in body and f"fork commit ` {breaker[:12]} `" in body
    again = run_cron(pyfork)   # the same tip: nothing measured again, the issue is not filed twice
    assert again.rc == 0 and len(list((pyfork / ".git" / "forkflow" / "issues").glob("*.md"))) == 1


def add_run(ctx: Context, rev: str, results: Sequence[tuple[str, TestOutcome, str]], *,
            base: str | None = None, tier: Tier = Tier.L1, trigger: str = "validate",
            parent: int | None = None) -> int:
    """A finished run with one job (suite "unit"), possibly a rerun of `parent`."""
    log_path = ctx.repo.path.parent / f"log-{rev[:6]}-{parent}.txt"
    log_path.write_text("")
    with ctx.store.session_scope() as s:
        run_id, [job] = tq.create_run(s, ctx.fork_id, tq.NewRun(
            tier, Sha(rev), Sha(base) if base else None, "local", trigger, 0, (), ("unit",), {},
            parent_run_id=parent), [tq.NewJob("unit", "pytest", str(log_path), "", "", False, None, None)])
        bad = any(o in (TestOutcome.FAIL, TestOutcome.ERROR) for _t, o, _m in results)
        status = RunStatus.FAIL if bad else RunStatus.PASS
        tq.finish_job(s, job, tq.JobFinish(status, 1 if bad else 0, 1.0, "", len(results), len(results),
                                           None, (), (), 1),
                      [TestResult(t, o, 0.1, m) for t, o, m in results])
        tq.finish_run(s, run_id, status, "", ())
    return run_id


P, F = TestOutcome.PASS, TestOutcome.FAIL


def test_flaky_in_l1_is_flaky_in_the_nightly_and_never_filed(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    base = builder.f.head()
    unit = builder.fork_commit({"g.py": "G = 2\n"}, "[fork] unit")
    add_run(ctx, base, [("test_wait", P, ""), ("test_ok", P, "")])
    gate = add_run(ctx, unit, [("test_wait", F, FLAKE), ("test_ok", P, "")], base=base, trigger="gate")
    add_run(ctx, unit, [("test_wait", P, "")], base=base, trigger="rerun", parent=gate)
    t = wiring.triager(ctx)
    [v] = triage_run(t, gate, settings=TriageSettings(reruns=3), rerunner=ScriptedRerun({"test_wait": True})).verdicts
    assert v.classification.value == "FLAKY"
    # the nightly at the same commit fails it the same way: one memory, not a new break
    night = add_run(ctx, unit, [("test_wait", F, FLAKE), ("test_ok", P, "")], tier=Tier.L2, trigger="nightly")
    [nv] = triage_run(t, night, settings=TriageSettings(reruns=0)).verdicts
    assert nv.classification.value == "FLAKY" and "classed FLAKY in run" in nv.reason
    r = cli("trunk", "--json", repo=fork)
    [item] = [i for i in r.json()["red"] if i["tier"] == "L2"]
    assert item["flaky"] and item["culprit"] is None
    assert "next: forkflow trunk --bisect" not in cli("trunk", repo=fork).out
    bis = cli("trunk", "--bisect", "--json", repo=fork).json()["bisected"]
    assert [b["bisected"] for b in bis] == [False] and "known flaky" in bis[0]["reason"]
    sync = cli("issues", "sync", "--json", repo=fork)
    assert sync.rc == 0, sync.err
    assert [s["action"] for s in sync.json()["steps"]] == ["flaky"]
    assert not list((fork / ".git" / "forkflow" / "issues").glob("*.md"))


def test_flaky_memory_yields_when_every_rerun_fails(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    base = builder.f.head()
    unit = builder.fork_commit({"g.py": "G = 2\n"}, "[fork] unit")
    t = wiring.triager(ctx)
    one = add_run(ctx, unit, [("test_wait", F, FLAKE)], base=base)
    triage_run(t, one, settings=TriageSettings(reruns=3), rerunner=ScriptedRerun({"test_wait": True}))
    later = builder.fork_commit({"g.py": "G = 3\n"}, "[fork] breaks it for real")
    two = add_run(ctx, later, [("test_wait", F, FLAKE)])
    [v] = triage_run(t, two, settings=TriageSettings(reruns=3), rerunner=ScriptedRerun({})).verdicts
    assert v.classification.value == "NEW"
    night = add_run(ctx, later, [("test_wait", F, FLAKE)], tier=Tier.L2, trigger="nightly")
    [nv] = triage_run(t, night, settings=TriageSettings(reruns=0)).verdicts
    assert nv.classification.value == "NEW"  # the newest evidence says it fails for real
    # ...until it passes again: four failures in a row happen to a flaky test too
    add_run(ctx, later, [("test_wait", P, "")], tier=Tier.L2, trigger="nightly")
    again = add_run(ctx, later, [("test_wait", F, FLAKE)], tier=Tier.L2, trigger="nightly")
    [av] = triage_run(t, again, settings=TriageSettings(reruns=0)).verdicts
    assert av.classification.value == "FLAKY"


def test_trunk_is_red_from_a_gate_run_and_its_reruns_and_names_the_run(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    base = builder.f.head()
    add_run(ctx, base, [("test_mm", P, ""), ("test_ok", P, "")])
    tip = builder.fork_commit({"g.py": "G = 2\n"}, "[fork] unit")
    gate = add_run(ctx, tip, [("test_mm", F, CUDA)], base=base, trigger="gate")
    add_run(ctx, tip, [("test_mm", F, CUDA)], base=base, trigger="rerun", parent=gate)
    # a candidate that never landed (not on the fork branch) says nothing about trunk
    builder.f.git("checkout", "-q", "-b", "side", base)
    side = builder.fork_commit({"h.py": "H = 1\n"}, "[fork] not landed")
    builder.f.git("checkout", "-q", "-")
    add_run(ctx, side, [("test_ok", F, CUDA)], base=base, trigger="gate")
    r = cli("trunk", "--json", repo=fork)
    [item] = r.json()["red"]
    assert item["test"] == "test_mm" and item["red_run"] == gate and item["red_rev"] == tip
    assert item["last_green_rev"] == base and item["culprit_detail"]["fork_commit"] == tip


def test_a_gate_failure_that_passes_its_rerun_leaves_trunk_green(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    base = builder.f.head()
    tip = builder.fork_commit({"g.py": "G = 2\n"}, "[fork] unit")
    gate = add_run(ctx, tip, [("test_wait", F, FLAKE), ("test_ok", P, "")], base=base, trigger="gate")
    add_run(ctx, tip, [("test_wait", P, "")], base=base, trigger="rerun", parent=gate)
    assert cli("trunk", "--json", repo=fork).json()["red"] == []


def _points(name: str, revs: Sequence[tuple[str, int]], values: Sequence[float], run: int) -> list[MetricPoint]:
    return [MetricPoint(name=name, rev=Sha(rev), value=v, unit="ms", better=Better.LOWER, samples=(v,),
                        suite="bench", run_id=run, measured_at=date, commit_date=date)
            for (rev, date), v in zip(revs, values)]


def test_an_l2_alert_becomes_one_tracking_issue_closed_on_recovery(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    revs = []
    for i in range(16):
        sha = builder.fork_commit({"k.py": f"K = {i}\n"}, f"[fork] step {i}")
        revs.append((sha, 1_700_000_000 + i * 60))
    values = [100.0 + (i % 3) * 0.1 for i in range(8)] + [120.0 + (i % 3) * 0.1 for i in range(8)]
    with ctx.store.session_scope() as s:
        rrecords.add_metric_points(s, ctx.fork_id, _points("matmul/latency", revs, values, 1))
    night = add_run(ctx, revs[-1][0], [("test_ok", P, "")], tier=Tier.L2, trigger="nightly")
    [alert] = detect(StoreMetricJournal(ctx.store, ctx.fork_id), "*").alerts
    with ctx.store.session_scope() as s:
        rrecords.save_bisection(s, ctx.fork_id, alert.id, {
            "metric": "matmul/latency", "mode": "samples", "good": alert.good_rev, "bad": alert.bad_rev,
            "status": "found", "confidence": 0.99, "message": "found", "rounds": 3, "measurements": 12,
            "culprit": {"fork_commit": revs[8][0], "subject": "[fork] step 8"}})
    sink = MarkdownSink(fork.parent / "issues")
    feed = StoreAlertFeed(ctx.store, ctx.fork_id)
    t = wiring.triager(ctx)
    steps = sync_tracking(t, sink, alerts=feed).steps
    assert [(st.action, st.key) for st, _ in steps] == [(Action.OPEN, f"alert-{alert.id}")]
    [issue] = list((fork.parent / "issues").glob("*.md"))
    body = issue.read_text()
    assert "matmul/latency" in body and "+20.0%" in body and "found by bisection" in body
    assert sync_tracking(t, sink, alerts=feed).steps == ()    # the same nightly: nothing again
    with ctx.store.session_scope() as s:  # the metric comes back
        sha = builder.fork_commit({"k.py": "K = 99\n"}, "[fork] fix")
        rrecords.add_metric_points(s, ctx.fork_id, _points("matmul/latency", [(sha, 1_800_000_000)], [100.1], 2))
    add_run(ctx, sha, [("test_ok", P, "")], tier=Tier.L2, trigger="nightly")
    assert night > 0
    steps = sync_tracking(t, sink, alerts=feed).steps
    assert [st.action for st, _ in steps] == [Action.CLOSE]
    assert "state: closed" in issue.read_text()


def test_triage_without_an_id_takes_the_newest_failing_run(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    assert cli("triage", repo=fork).rc == 1   # nothing failed yet: one line
    base = builder.f.head()
    red = add_run(ctx, base, [("test_mm", F, CUDA)])
    add_run(ctx, base, [("test_mm", F, CUDA)], parent=red, trigger="rerun")
    add_run(ctx, base, [("test_ok", P, "")])
    r = cli("triage", "--json", "--reruns", "0", repo=fork)
    assert r.rc == 0 and r.json()["run_id"] == red


def test_nightly_prints_each_metric_beside_its_series(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    out = fork.parent / "m.json"
    bench = (f"\n[[suite]]\nname = \"bench\"\ntier = \"L2\"\nreport = \"metrics\"\n"
             f"command = '{sys.executable} -c \"import json,sys; json.dump({{\\\"metrics\\\": [{{\\\"name\\\": "
             f"\\\"t\\\", \\\"value\\\": float(open(\\\"{out}\\\").read()), \\\"unit\\\": \\\"s\\\", "
             f"\\\"better\\\": \\\"lower\\\"}}]}}, open(sys.argv[1], \\\"w\\\"))\" {{report}}'\n")
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text() + bench)
    for i, v in enumerate(("1.0", "1.0", "1.2")):
        out.write_text(v)
        builder.fork_commit({"k.py": f"K = {i}\n"}, f"[fork] step {i}")
        r = cli("nightly", "--json", repo=fork)
        assert r.rc == 0, r.out + r.err
    [m] = r.json()["metrics"]
    assert m["metric"] == "t" and m["value"] == 1.2 and m["recent_median"] == 1.0
    assert m["recent_commits"] == 2 and abs(m["change"] - 0.2) < 1e-9


def test_validate_json_lists_the_findings_its_summary_counts(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text() + f"\n[[suite]]\nname = \"unit\"\ntier = \"L1\"\ncommand = '{PYTEST}'\n"
                   "all_tests = \"tests\"\nexpect_tests = 5\nenv = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = \"1\" }\n")
    builder.fork_commit({"tests/test_a.py": "def test_a():\n    pass\n"}, "[fork] one test")
    r = cli("validate", "--tier", "L1", "--json", repo=fork)
    doc = r.json()
    assert r.rc == 1 and "1 finding(s)" in doc["summary"]
    assert len(doc["findings"]) == 1 and "expect_tests" in doc["findings"][0]


def test_validation_page_shows_reruns_under_their_run(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from forkflow.web.app import create_app

    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    base = builder.f.head()
    gate = add_run(ctx, base, [("test_mm", F, CUDA), ("test_ok", P, "")], trigger="gate")
    reruns = [add_run(ctx, base, [("test_mm", F, CUDA)], parent=gate, trigger="rerun") for _ in range(3)]
    with TestClient(create_app(ctx, None)) as c:
        doc = c.get("/api/validation").json()
        run = c.get(f"/api/validation/runs/{gate}").json()
    l1 = doc["tiers"]["L1"]
    assert [r["id"] for r in l1] == [gate] and [x["id"] for x in l1[0]["reruns"]] == reruns
    assert [x["id"] for x in run["reruns"]] == reruns
    with TestClient(create_app(ctx, None)) as c:
        overview = c.get("/api/overview").json()
    assert overview["attention"]["trunk"]["red_by_run"] == gate


def test_a_suite_whose_selection_deselects_everything_says_so(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    cfg = fork / "forkflow.toml"
    command = PYTEST.replace("{tests}", "-k no_such_test {tests}")
    cfg.write_text(cfg.read_text() + f"\n[[suite]]\nname = \"unit\"\ntier = \"L1\"\ncommand = '{command}'\n"
                   "all_tests = \"tests\"\nenv = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = \"1\" }\n")
    builder.fork_commit({"tests/test_a.py": "def test_a():\n    pass\n\ndef test_b():\n    pass\n"},
                        "[fork] two tests")
    r = cli("validate", "--tier", "L1", "--json", repo=fork)
    [finding] = r.json()["findings"]
    assert r.rc == 1 and "2 deselected" in finding and "crashed" not in finding
    # the suite's failure is grouped by why it did not run, not by the count its log printed
    [f] = cli("triage", "--json", "--reruns", "0", repo=fork).json()["failures"]
    assert f["test"] == "[unit]" and "deselected in" not in f["signature"]
    assert f["signature"].startswith("GENERIC: suite 'unit'")


def test_a_printed_escape_after_a_number_is_kept_in_the_signature() -> None:
    from forkflow.triage.signature import signature_of

    assert signature_of("AssertionError: assert 12\\n == 13").text == "EXCEPTION: AssertionError: assert N\\n == N"
    assert signature_of("ValueError: bad file /a/b/c.py").text == "EXCEPTION: ValueError: bad file c.py"


def test_init_writes_a_suite_example_whose_test_ids_are_paths(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    example = [x for x in (fork / "forkflow.toml").read_text().splitlines() if "--junitxml" in x]
    assert example and all("-o junit_family=xunit1" in x for x in example)


def test_a_suite_whose_paths_drifted_from_its_tests_is_a_finding(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = triage_fork(builder, cli)
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text() + f"\n[[suite]]\nname = \"unit\"\ntier = \"L1\"\ncommand = '{PYTEST}'\n"
                   "all_tests = \"tests\"\npaths = [\"src/**\"]\n"
                   "env = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = \"1\" }\n")
    builder.fork_commit({"src/a.py": "A = 1\n", "tests/test_a.py": "def test_a():\n    pass\n"}, "[fork] a")
    assert cli("validate", "--tier", "L1", repo=fork).rc == 0   # a full run: its tests are known
    base = builder.f.head()
    builder.fork_commit({"tests/test_a.py": "def test_a():\n    assert 1 == 2\n"}, "[fork] breaks its test")
    r = cli("validate", "--tier", "L1", "--changed-from", base, "--json", repo=fork)
    doc = r.json()
    assert r.rc == 1 and doc["not_selected"][0]["suite"] == "unit"
    assert any("its own test file tests/test_a.py changed" in f for f in doc["findings"])
    base = builder.f.head()
    builder.fork_commit({"README": "words\n"}, "[fork] docs")
    doc = cli("validate", "--tier", "L1", "--changed-from", base, "--json", repo=fork).json()
    assert any("match none of its 1 test files" in f for f in doc["findings"])


def test_a_candidates_l1_is_its_gate_run_with_the_reruns_under_it(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.web import reads

    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    base = builder.f.head()
    cand = builder.fork_commit({"g.py": "G = 2\n"}, "[fork] unit")
    gate = add_run(ctx, cand, [("test_mm", F, CUDA)] + [(f"test_{i}", P, "") for i in range(9)],
                   base=base, trigger="gate")
    reruns = [add_run(ctx, cand, [("test_mm", F, CUDA)], base=base, parent=gate, trigger="rerun") for _ in range(9)]
    with ctx.store.session_scope() as s:
        [run] = reads.runs_at(s, ctx.fork_id, [cand])[Sha(cand)]
    assert run.id == gate and run.reruns == tuple(reruns)


def test_the_gate_names_a_new_test_once_whatever_its_suites(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.triage.gate import new_names

    fork = triage_fork(builder, cli)
    ctx = open_context(fork)
    base = builder.f.head()
    unit = builder.fork_commit({"g.py": "G = 2\n"}, "[fork] unit")
    with ctx.store.session_scope() as s:   # one run, the same test failing in two suites
        run_id, jobs = tq.create_run(s, ctx.fork_id, tq.NewRun(Tier.L1, Sha(unit), Sha(base), "local", "gate", 0,
                                                               (), ("unit", "gpu"), {}),
                                     [tq.NewJob(n, "pytest", "", "", "", False, None, None) for n in ("unit", "gpu")])
        for job in jobs:
            tq.finish_job(s, job, tq.JobFinish(RunStatus.FAIL, 1, 1.0, "", 1, 1, None, (), (), 1),
                          [TestResult("test_mm", F, 0.1, CUDA)])
        tq.finish_run(s, run_id, RunStatus.FAIL, "", ())
    verdicts = triage_run(wiring.triager(ctx), run_id, settings=TriageSettings(reruns=0)).verdicts
    assert sorted(v.failure.job for v in verdicts) == ["gpu", "unit"]
    assert new_names(verdicts) == "test_mm"


def test_the_l3_page_does_not_suggest_a_token_on_the_command_line(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from forkflow.web.app import create_app

    fork = triage_fork(builder, cli)
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text() + "\n[[suite]]\nname = \"soak\"\ntier = \"L3\"\ncommand = \"true\"\n"
                   "report = \"metrics\"\nowners = [\"alice\"]\n")
    rid = cli("l3", "request", "soak", "--json", repo=fork).json()["request_id"]
    with TestClient(create_app(open_context(fork), None)) as c:
        html = c.get(f"/validation/l3/{rid}").text
    assert "serve --token" not in html and "FORKFLOW_TOKEN=" in html and "--owner NAME" not in html


def test_the_documented_github_step_files_on_a_red_nightly_under_bash_e(pyfork: Path, builder: ForkBuilder) -> None:
    text = (DOCS / "automation.md").read_text()
    block = text.split("      - name: nightly, detect, bisect, issues\n", 1)[1].split("run: |\n", 1)[1]
    script = "\n".join(x[10:] for x in block.split("\n      - name:")[0].splitlines() if x.startswith(" " * 10))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    ok = subprocess.run(["bash", "-e", "-c", script], cwd=pyfork, capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    builder.fork_commit({"lib.py": "def value():\n    return 3\n"}, "[fork] change value")
    red = subprocess.run(["bash", "-e", "-c", script], cwd=pyfork, capture_output=True, text=True, env=env, timeout=300)
    assert red.returncode == 1 and "open" in red.stdout   # GitHub's bash -e still reaches issues sync
    assert len(list((pyfork / ".git" / "forkflow" / "issues").glob("*.md"))) == 1


def test_triage_says_what_to_do_about_an_infra_failure(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    """A suite whose log is a registry's rate limit: JSON and text name the family and the action."""
    fork = triage_fork(builder, cli)
    log = fork.parent / "limit.log"
    log.write_text("Error response from daemon: toomanyrequests: You have reached your pull rate limit. "
                   "https://www.docker.com/increase-rate-limit\n")
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text() + f"\n[[suite]]\nname = \"pull\"\ntier = \"L1\"\n"
                   f"command = \"cat {log}; exit 1\"\n")
    assert cli("validate", "--tier", "L1", repo=fork).rc == 1
    [f] = cli("triage", "--json", "--reruns", "0", repo=fork).json()["failures"]
    assert f["classification"] == "INFRA" and f["family"] == "machine" and "backoff" in f["action"]
    text = " ".join(cli("triage", "--reruns", "0", repo=fork).out.split())
    assert "do: retry later with backoff" in text
