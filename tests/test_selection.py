"""Test selection on literal data: paths mapping, co-failure history, and the safe fallbacks."""
from __future__ import annotations

from forkflow.tiers.selection import HistoryEntry, SuiteSpec, file_of, matches, node_id, select

TESTS = tuple(f"tests/test_{m}.py::test_{i}" for m in ("alpha", "beta", "gamma") for i in range(3))


def _spec(**kw: object) -> SuiteSpec:
    base = dict(name="unit", paths=("lib/**", "tests/**"), can_select_tests=True, known_tests=TESTS)
    base.update(kw)
    return SuiteSpec(**base)  # type: ignore[arg-type]


def test_globs_and_test_files() -> None:
    assert matches("lib/a/b.py", ["lib/**"]) and not matches("docs/x.md", ["lib/**"])
    assert matches("a.py", ["*.py"]) and not matches("d/a.py", ["*.py"]) and matches("d/a.py", ["**/*.py"])
    assert matches("python/x.py", ["python/"])
    assert file_of("pkg.tests.test_m.TestC::t") == "pkg/tests/test_m.py"
    assert file_of("Triton :: conv/a.mlir") == "conv/a.mlir"
    assert node_id("tests.test_a.TestX::test_y[1]") == "tests/test_a.py::TestX::test_y[1]"


def test_suite_skipped_when_no_path_matches() -> None:
    plan = select(["docs/readme.md"], [_spec()])
    assert not plan.suites[0].run


def test_suite_without_paths_always_runs_whole() -> None:
    plan = select(["docs/readme.md"], [_spec(paths=(), can_select_tests=False)])
    assert plan.suites[0].run and plan.suites[0].files is None


def test_name_match_selects_the_tests_of_a_module() -> None:
    hist = [HistoryEntry(frozenset({"lib/alpha.py"}))]
    sel = select(["lib/alpha.py"], [_spec()], hist).suites[0]
    assert sel.files == ("tests/test_alpha.py",)
    assert sel.tests == TESTS[:3]


def test_cofailure_history_adds_tests_that_failed_with_the_file() -> None:
    hist = [HistoryEntry(frozenset({"lib/alpha.py"}), frozenset({("unit", "tests/test_gamma.py::test_2")}))] * 3
    sel = select(["lib/alpha.py"], [_spec()], hist).suites[0]
    assert sel.files == ("tests/test_alpha.py", "tests/test_gamma.py")


def test_unknown_file_borrows_its_folder_history() -> None:
    hist = [HistoryEntry(frozenset({"lib/core/x.py"}), frozenset({("unit", "tests/test_beta.py::test_0")}))]
    sel = select(["lib/core/new.py"], [_spec()], hist).suites[0]
    assert sel.files == ("tests/test_beta.py",)


def test_no_evidence_runs_the_whole_suite() -> None:
    sel = select(["lib/never_seen/z.py"], [_spec()], []).suites[0]
    assert sel.run and sel.files is None and "whole suite" in sel.reasons[0]


def test_changed_test_file_and_recent_failures_are_selected() -> None:
    hist = [HistoryEntry(frozenset({"tests/test_new.py"}))]
    sel = select(["tests/test_new.py"], [_spec()], hist,
                 {"unit": frozenset({"tests/test_beta.py::test_1"})}).suites[0]
    assert sel.files == ("tests/test_beta.py", "tests/test_new.py")


def test_cofailure_selects_a_suite_whose_paths_do_not_match() -> None:
    hist = [HistoryEntry(frozenset({"third_party/llvm.hash"}), frozenset({("unit", "tests/test_alpha.py::test_0")}))]
    sel = select(["third_party/llvm.hash"], [_spec()], hist).suites[0]
    assert sel.run and sel.files == ("tests/test_alpha.py",)
