"""Saturation validation: every silent-skip case, planted in real pytest suites, is caught."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.tiers.saturation import FindingKind, Severity, SuiteEvidence, check_suite, removed_suites
from tests.test_tiers_support import PY, commit, harness, make_repo, suite_toml

TESTS = "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(6))
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider -o junit_family=xunit1"
ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": '"1"'}
HALF_SKIP = '''import pytest
def pytest_collection_modifyitems(items):
    for item in items[::2]:
        item.add_marker(pytest.mark.skip(reason="quietly disabled"))
'''


def _ev(**kw: object) -> SuiteEvidence:
    base = dict(suite="s", finished=True, timed_out=False, returncode=0, report_exists=True,
                report_problem="", reported_total=10, reported_ran=10, reported_bad=0, own_count=10,
                expect_tests=10)
    base.update(kw)
    return SuiteEvidence(**base)  # type: ignore[arg-type]


def test_pure_checks_each_case() -> None:
    assert check_suite(_ev()) == []

    def kinds(**kw: object) -> list[FindingKind]:
        return [f.kind for f in check_suite(_ev(**kw))]

    assert kinds(report_exists=False, reported_total=0, returncode=2) == [FindingKind.NO_REPORT]
    assert kinds(report_problem="the report is empty (0 bytes)", reported_total=0) == [FindingKind.EMPTY_REPORT]
    assert kinds(reported_ran=5) == [FindingKind.BELOW_INVENTORY]
    assert kinds(expect_tests=None, reported_ran=8, last_green_ran=10) == [FindingKind.SHRANK]
    assert kinds(expect_tests=None, reported_ran=9, last_green_ran=10) == []  # within tolerance
    assert kinds(narrowed=True, reported_ran=3, expect_selected=3) == []  # selection: no inventory
    assert kinds(returncode=1) == [FindingKind.EXIT_CODE]
    assert kinds(returncode=1, reported_bad=2) == []  # failing tests explain the exit code
    disagree = check_suite(_ev(own_count=12))
    assert [(f.kind, f.severity) for f in disagree] == [(FindingKind.COUNTS_DISAGREE, Severity.INFRA)]
    assert [f.kind for f in check_suite(_ev(finished=False))] == [FindingKind.DID_NOT_RUN]
    gone = removed_suites(["unit"], ["unit", "lint", "old"], retired=["old"])
    assert [f.message.split("'")[1] for f in gone] == ["lint"]


@pytest.fixture
def green(tmp_path: Path, cli):  # type: ignore[no-untyped-def]
    """A repo whose real pytest suite (6 tests, inventory 6) passed once."""
    toml = suite_toml("unit", f"{PYTEST} --junitxml={{report}} tests", expect_tests=6, env=ENV)
    repo, _ = make_repo(tmp_path / "fork", toml, {"tests/test_m.py": TESTS})
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 0, r.out + r.err
    assert r.json()["suites"][0]["tests_ran"] == 6
    return repo


def _finding(cli, repo: Path) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    doc = r.json()
    text = " ".join(doc["findings"] + [f for s in doc["suites"] for f in s["findings"]])
    return r.rc, text


def test_report_missing_is_a_failure(green: Path, cli) -> None:  # type: ignore[no-untyped-def]
    toml = suite_toml("unit", f"{PYTEST} tests", expect_tests=6, env=ENV)  # forgot --junitxml
    commit(green, {"forkflow.toml": (green / "forkflow.toml").read_text().split("[[suite]]")[0] + toml})
    rc, text = _finding(cli, green)
    assert rc == 1 and "wrote no report" in text


def test_report_empty_is_a_failure(green: Path, cli) -> None:  # type: ignore[no-untyped-def]
    toml = suite_toml("unit", f"{PYTEST} --junitxml={{report}} tests; : > {{report}}", expect_tests=6, env=ENV)
    commit(green, {"forkflow.toml": (green / "forkflow.toml").read_text().split("[[suite]]")[0] + toml})
    rc, text = _finding(cli, green)
    assert rc == 1 and "the report is empty" in text


def test_crash_before_first_test_is_a_failure(green: Path, cli) -> None:  # type: ignore[no-untyped-def]
    commit(green, {"tests/conftest.py": "import os\nos._exit(0)  # dies quietly, exit code 0\n"})
    rc, text = _finding(cli, green)
    assert rc == 1 and "wrote no report" in text


def test_half_skipped_by_conftest_is_a_failure(green: Path, cli) -> None:  # type: ignore[no-untyped-def]
    commit(green, {"tests/conftest.py": HALF_SKIP})
    rc, text = _finding(cli, green)
    assert rc == 1 and "ran 3 tests, fewer than the 6 of its inventory" in text


def test_half_skipped_without_inventory_caught_by_last_green_run(green: Path, cli) -> None:  # type: ignore[no-untyped-def]
    toml = suite_toml("unit", f"{PYTEST} --junitxml={{report}} tests", env=ENV)  # no expect_tests
    commit(green, {"forkflow.toml": (green / "forkflow.toml").read_text().split("[[suite]]")[0] + toml,
                   "tests/conftest.py": HALF_SKIP})
    rc, text = _finding(cli, green)
    assert rc == 1 and "markedly fewer than the 6 of its last green run" in text


def test_suite_removed_from_config_is_a_failure(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    both = suite_toml("unit", harness(3)) + suite_toml("lint", harness(2))
    repo, _ = make_repo(tmp_path / "fork", both)
    assert cli("validate", "--tier", "L1", repo=repo).rc == 0
    head = (repo / "forkflow.toml").read_text().split("[[suite]]")[0]
    commit(repo, {"forkflow.toml": head + suite_toml("unit", harness(3))})
    rc, text = _finding(cli, repo)
    assert rc == 1 and "suite 'lint' ran in this tier's last green run" in text
    commit(repo, {"forkflow.toml": head + '[validation]\nretired = ["lint"]\n' + suite_toml("unit", harness(3))})
    assert cli("validate", "--tier", "L1", repo=repo).rc == 0


def test_counts_disagree_is_an_infra_alarm(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, _ = make_repo(tmp_path / "fork", suite_toml("unit", harness(4, summary=5)))
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 4, r.out
    suite = r.json()["suites"][0]
    assert suite["status"] == "INFRA"
    assert "the report lists 4 tests but the harness output counts 5" in suite["findings"][0]


def test_exit_code_without_failing_test_is_a_failure(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, _ = make_repo(tmp_path / "fork", suite_toml("unit", harness(3) + "; exit 7"))
    rc, text = _finding(cli, repo)
    assert rc == 1 and "exited with code 7" in text


def test_summary_tells_a_finding_from_a_failed_test(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, _ = make_repo(tmp_path / "fork", suite_toml("unit", harness(4), expect_tests=5))
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 1
    doc = r.json()
    assert doc["suites"][0]["tests_failed"] == 0  # all 4 passed: the suite failed on its inventory
    assert "4 tests ran, 0 failed; 1 finding(s): suite 'unit' ran 4 tests, fewer than the 5" in doc["summary"]
