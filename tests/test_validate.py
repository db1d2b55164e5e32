"""`forkflow validate` end to end on real repos: outcomes, selection, metrics, reruns, bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.context import open_context
from forkflow.errors import UserError
from forkflow.models import Sha
from forkflow.regress import records as regress_records
from forkflow.tiers import records as q
from forkflow.tiers.reports import TestOutcome
from forkflow.tiers.tiers import Tier
from forkflow.tiers.validate import rerun_tests
from tests.test_tiers_support import PY, commit, git, harness, make_repo, suite_toml

# Runs the test files (or file::test ids) it is given, all of FILES when given none; 3 tests a
# file; a test fails when its id is listed in the file $FAILS_FROM.
SELHARNESS = '''
import os, sys
FILES = ["tests/test_alpha.py", "tests/test_beta.py", "tests/test_gamma.py"]
report, picks = sys.argv[1], sys.argv[2:] or FILES
fails = set(open(os.environ["FAILS_FROM"]).read().split()) if os.environ.get("FAILS_FROM") else set()
ids = [f"{p}::test_{i}" for p in picks if "::" not in p for i in range(3)] + [p for p in picks if "::" in p]
cases = []
for t in ids:
    f, name = t.split("::")
    body = f'<failure message="boom in {name}">trace</failure>' if t in fails else ""
    cases.append(f'<testcase classname="{f[:-3].replace("/", ".")}" name="{name}" file="{f}">{body}</testcase>')
open(report, "w").write("<testsuite>" + "".join(cases) + "</testsuite>")
bad = sum(t in fails for t in ids)
print(f"{len(ids) - bad} passed, {bad} failed in 0.01s")
sys.exit(1 if bad else 0)
'''
METRICS = '''
import json, sys
json.dump({"metrics": [
  {"name": "matmul.tflops", "value": float(sys.argv[2]), "unit": "TFLOP/s", "better": "higher", "samples": [1.0, 2.0]},
  {"name": "compile.seconds", "value": 3.5, "unit": "s", "better": "lower"}]}, open(sys.argv[1], "w"))
'''


def _sel_repo(tmp_path: Path, fails: str = "") -> tuple[Path, Path]:
    fails_file = tmp_path / "fails.txt"
    fails_file.write_text(fails)
    toml = suite_toml("unit", f"{PY} selharness.py {{report}} {{tests}}", paths=["lib/**", "tests/**"],
                      env={"FAILS_FROM": json.dumps(str(fails_file))})
    files = {"selharness.py": SELHARNESS, "lib/alpha.py": "A = 1\n", "lib/beta.py": "B = 1\n",
             "docs/readme.md": "hi\n"}
    repo, _ = make_repo(tmp_path / "fork", toml, files)
    return repo, fails_file


def test_validate_pass_then_fail_stores_outcomes_and_logs(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, fails = _sel_repo(tmp_path)
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 0, r.out + r.err
    assert r.json()["suites"][0]["tests_ran"] == 9
    fails.write_text("tests/test_beta.py::test_1\n")
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 1
    doc = r.json()
    ctx = open_context(repo)
    with ctx.store.session_scope() as s:
        run = q.get_run(s, doc["run_id"])
        bad = q.test_outcomes(s, doc["run_id"], bad_only=True)
        jobs = q.jobs_of_run(s, doc["run_id"])
        rev_runs = q.runs_for_rev(s, ctx.fork_id, run.rev, Tier.L1) if run else []
        latest = q.latest_runs(s, ctx.fork_id, Tier.L1, limit=5)
    assert run is not None and run.status == "FAIL" and run.finished_at is not None
    assert [(t.test_id, t.outcome) for t in bad] == [("tests/test_beta.py::test_1", TestOutcome.FAIL)]
    assert "boom in test_1" in bad[0].message
    assert jobs[0].status == "FAIL" and Path(jobs[0].log_path).read_text() == "8 passed, 1 failed in 0.01s\n"
    assert "8 passed, 1 failed" in jobs[0].message  # the log tail travels with the failure
    assert [x.id for x in rev_runs] == [doc["run_id"], doc["run_id"] - 1] == [x.id for x in latest]


def test_changed_from_selects_tests_by_what_changed(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, _ = _sel_repo(tmp_path)
    assert cli("validate", "--tier", "L1", repo=repo).rc == 0  # full run: learns the 9 tests
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, {"lib/alpha.py": "A = 2\n"})
    r = cli("validate", "--tier", "L1", "--changed-from", base, "--json", repo=repo)
    assert r.rc == 0, r.out
    assert r.json()["suites"][0]["tests_ran"] == 3
    with open_context(repo).store.session_scope() as s:
        job = q.jobs_of_run(s, r.json()["run_id"])[0]
        run = q.get_run(s, r.json()["run_id"])
    assert job.narrowed and job.selected == ("tests/test_alpha.py",)
    assert run is not None and run.changed_files == ("lib/alpha.py",)
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, {"docs/readme.md": "more\n"})
    r = cli("validate", "--tier", "L1", "--changed-from", base, "--json", repo=repo)
    assert r.rc == 0 and r.json()["suites"] == []
    assert r.json()["not_selected"][0]["why"] == "no changed file matches its paths"


def test_rerun_tests_reruns_only_the_failures(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, fails = _sel_repo(tmp_path, "tests/test_gamma.py::test_2\n")
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 1
    fails.write_text("")  # flaky: passes on rerun
    ctx = open_context(repo)
    out = rerun_tests(wiring.validator(ctx), r.json()["run_id"], ["tests/test_gamma.py::test_2"])
    assert out.status == "PASS" and out.suites[0].tests_ran == 1
    with ctx.store.session_scope() as s:
        again = q.get_run(s, out.run_id)
        oc = q.test_outcomes(s, out.run_id)
    assert again is not None and again.parent_run_id == r.json()["run_id"] and again.trigger == "rerun"
    assert [(t.test_id, t.outcome) for t in oc] == [("tests/test_gamma.py::test_2", TestOutcome.PASS)]


def test_rerun_of_an_unknown_run_says_where_the_runs_are_listed(tmp_path: Path) -> None:
    repo, _ = _sel_repo(tmp_path)
    with pytest.raises(UserError) as got:
        rerun_tests(wiring.validator(open_context(repo)), 999, ["tests/test_gamma.py::test_2"])
    assert str(got.value) == ("no validation run 999 in this fork's store; `forkflow serve` lists the runs on "
                              "its /validation page (each `validate --json` prints its run_id), or check --store")


def test_l2_metrics_become_series_with_commit_dates(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    toml = suite_toml("perf", f"{PY} bench.py {{report}} 10.5", tier="L2", report="metrics")
    repo, sha = make_repo(tmp_path / "fork", toml, {"bench.py": METRICS})
    r = cli("nightly", "--json", repo=repo)
    assert r.rc == 0, r.out + r.err
    assert cli("nightly", "--json", repo=repo).json()["skipped"] is True
    assert cli("nightly", "--force", "--json", repo=repo).rc == 0
    ctx = open_context(repo)
    with ctx.store.session_scope() as s:
        series = regress_records.metric_series(s, ctx.fork_id, "matmul.tflops")
        names = regress_records.metric_names(s, ctx.fork_id)
    assert names == ["compile.seconds", "matmul.tflops"]
    assert len(series) == 2 and {p.rev for p in series} == {sha}
    p = series[0]
    assert p.value == 10.5 and p.samples == (1.0, 2.0) and p.unit == "TFLOP/s" and p.suite == "perf"
    assert p.commit_date == 1_700_000_000 and p.run_id == r.json()["run_id"]


def test_tier_gate_runs_l1_with_selection(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, fails = _sel_repo(tmp_path)
    base = Sha(git(repo, "rev-parse", "HEAD"))
    good = Sha(commit(repo, {"lib/beta.py": "B = 2\n"}))
    gate = wiring.tier_gate(open_context(repo))
    res = gate.check(good, base)
    assert res.passed and not res.infra and res.run_id is not None and res.summary.startswith(f"L1 run {res.run_id} PASS")
    assert cli("validate", "--tier", "L1", "--rev", base, repo=repo).rc == 0  # trunk is green
    fails.write_text("tests/test_beta.py::test_0\n")
    res = gate.check(good, base)
    assert not res.passed and not res.infra and "1 failed" in res.summary
    assert "NEW failures: tests/test_beta.py::test_0" in res.summary  # triage: this unit's failure


def test_hanging_test_times_out_as_failure(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, _ = make_repo(tmp_path / "fork", suite_toml("hang", "sleep 120", timeout="1s"))
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 1
    findings = r.json()["suites"][0]["findings"]
    assert any("timed out" in f for f in findings) and any("wrote no report" in f for f in findings)


@pytest.mark.parametrize("command,fragment", [
    ("no-such-harness-xyz --junitxml={report}", "command 'no-such-harness-xyz' is not on PATH"),
    ("./run_tests {report}", "command './run_tests' is not executable"),
    ("./missing.sh", "command './missing.sh' does not exist"),
    ('pytest "unclosed', "its command is not valid shell"),
])
def test_bad_commands_refused_before_anything_runs(tmp_path: Path, cli, command: str, fragment: str) -> None:  # type: ignore[no-untyped-def]
    repo, _ = make_repo(tmp_path / "fork", suite_toml("unit", command), {"run_tests": "#!/bin/sh\n"})
    r = cli("validate", "--tier", "L1", repo=repo)
    assert r.rc == 1 and fragment in r.err and len(r.err.strip().splitlines()) == 1
    ctx = open_context(repo)
    with ctx.store.session_scope() as s:
        assert q.latest_runs(s, ctx.fork_id) == []  # nothing half-written


def test_suite_asking_for_more_cpus_than_the_machine_has_is_refused(tmp_path: Path, cli,  # type: ignore[no-untyped-def]
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORKFLOW_LOCAL_RESOURCES", raising=False)
    repo, _ = make_repo(tmp_path / "fork", suite_toml("unit", harness(2), resources={"cpus": 4096}))
    r = cli("validate", "--tier", "L1", repo=repo)
    assert r.rc == 1 and "job 'unit' asks for cpus=4096 but this machine has" in r.err, r.out + r.err
    assert len(r.err.strip().splitlines()) == 1
    ctx = open_context(repo)
    with ctx.store.session_scope() as s:
        assert q.latest_runs(s, ctx.fork_id) == []  # refused before anything ran


def test_bad_arguments(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, _ = make_repo(tmp_path / "fork", suite_toml("unit", harness(2)))
    cases = [
        (["--tier", "L7"], "--tier 'L7' is not a tier"),
        (["--tier", "L1", "--rev", "nope"], "--rev 'nope' is not a commit"),
        (["--tier", "L1", "--changed-from", "nope"], "--changed-from 'nope' is not a commit"),
        (["--tier", "L1", "--suite", "lint"], "no suite named 'lint'"),
        (["--tier", "L2", "--suite", "unit"], "suite 'unit' is L1, not L2"),
        (["--tier", "L2"], "declares no L2 suite"),
        (["--tier", "L1", "--runner", "slurm"], "unknown runner 'slurm'"),
    ]
    for args, fragment in cases:
        r = cli("validate", *args, repo=repo)
        assert r.rc == 1 and fragment in r.err, (args, r.err)


def test_worktree_is_cached_per_rev(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, sha = make_repo(tmp_path / "fork", suite_toml("unit", harness(2) + "; touch built.o"))
    assert cli("validate", "--tier", "L1", repo=repo).rc == 0
    tree = repo / ".git" / "forkflow" / "worktrees" / sha
    assert (tree / "built.o").exists()  # build outputs survive for the next run of this rev
    (tree / "built.o").write_text("cached")
    assert cli("validate", "--tier", "L1", repo=repo).rc == 0
    assert (tree / "built.o").read_text() == "cached"  # the same tree was reused
    assert git(repo, "status", "--porcelain") == ""


def _two_module_repo(tmp_path: Path) -> Path:
    """src/p/m.py tested by tests/p/test_m1..3.py (6 tests), src/p/n.py by tests/p/test_n.py (1),
    run by real pytest; no test file is named after m.py."""
    pytest_cmd = f"{PY} -m pytest -q -p no:cacheprovider -o junit_family=xunit1 --junitxml={{report}} {{tests}}"
    toml = suite_toml("unit", pytest_cmd, paths=["src/**", "tests/**"], all_tests="tests",
                      env={"PYTHONPATH": '"src"', "PYTEST_DISABLE_PLUGIN_AUTOLOAD": '"1"'})
    files = {"src/p/m.py": "def add(a, b):\n    return a + b\n", "src/p/n.py": "def neg(a):\n    return -a\n",
             "tests/p/test_n.py": "from p.n import neg\n\ndef test_neg():\n    assert neg(2) == -2\n"}
    for i in (1, 2, 3):
        files[f"tests/p/test_m{i}.py"] = (f"from p.m import add\n\ndef test_add_{i}():\n    assert add({i}, 1) == {i + 1}\n\n"
                                          f"def test_add_zero_{i}():\n    assert add({i}, 0) == {i}\n")
    repo, _ = make_repo(tmp_path / "fork", toml, files)
    return repo


def test_gate_runs_the_whole_suite_for_a_file_with_too_little_evidence(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo = _two_module_repo(tmp_path)
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 0 and r.json()["suites"][0]["tests_ran"] == 7, r.out + r.err
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, {"src/p/n.py": "def neg(a):\n    return 0 - a\n"})
    r = cli("validate", "--tier", "L1", "--changed-from", base, "--json", repo=repo)
    assert r.rc == 0, r.out + r.err
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, {"src/p/m.py": "def add(a, b):\n    return a - b\n"})  # upstream breaks add
    r = cli("validate", "--tier", "L1", "--changed-from", base, "--json", repo=repo)
    assert r.rc == 1, r.out + r.err  # one passing run of its folder is no evidence m.py is safe
    suite = r.json()["suites"][0]
    assert suite["tests_ran"] == 7 and suite["tests_failed"] == 3


def test_changed_from_runs_the_changed_files_test_when_a_flaky_test_must_rerun(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    # 4 tests: a budget of 1.  test_flaky failed in the latest full run, so it must run; it used
    # to take the whole budget, and a change breaking lib/calc.py landed without test_calc running
    flag = tmp_path / "flaky-fails"
    flag.write_text("")
    pytest_cmd = f"{PY} -m pytest -q -p no:cacheprovider -o junit_family=xunit1 --junitxml={{report}} {{tests}}"
    toml = suite_toml("unit", pytest_cmd, paths=["lib/**", "tests/**"], all_tests="tests",
                      env={"FLAKY_FLAG": json.dumps(str(flag)), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": '"1"'})
    calc_tests = "".join(f"\n\ndef test_{n}():\n    assert calc.div({a}, 2) == {a / 2}\n"
                         for n, a in (("add", 4), ("mul", 6), ("div", 7)))
    flaky_test = "import os\n\n\ndef test_sometimes():\n    assert not os.path.exists(os.environ['FLAKY_FLAG'])\n"
    files = {"conftest.py": "", "lib/__init__.py": "", "lib/calc.py": "def div(a, b):\n    return a / b\n",
             "tests/test_calc.py": "from lib import calc\n" + calc_tests, "tests/test_flaky.py": flaky_test}
    repo, _ = make_repo(tmp_path / "fork", toml, files)
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 1 and r.json()["suites"][0]["tests_ran"] == 4, r.out + r.err  # test_flaky wobbled
    flag.unlink()
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, {"lib/calc.py": "def div(a, b):\n    return a // b\n"}, "[core] integer div (#14)")
    r = cli("validate", "--tier", "L1", "--changed-from", base, "--json", repo=repo)
    assert r.rc == 1, r.out + r.err
    suite = r.json()["suites"][0]
    assert suite["tests_ran"] == 4 and suite["tests_failed"] == 1
    with open_context(repo).store.session_scope() as s:
        job = q.jobs_of_run(s, r.json()["run_id"])[0]
        bad = q.test_outcomes(s, r.json()["run_id"], bad_only=True)
    assert job.narrowed and job.selected == ("tests/test_calc.py", "tests/test_flaky.py")
    assert [t.test_id for t in bad] == ["tests/test_calc.py::test_div"]
