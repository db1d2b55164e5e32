"""Test selection on literal data: paths mapping, the budget, co-failure history and the safe
fallbacks; and, end to end, that `--suite` and full runs are never narrowed."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.context import open_context
from forkflow.tiers import records as q
from forkflow.tiers.selection import (
    LONE_FAILURE,
    MIN_SEEN,
    CoFailure,
    HistoryEntry,
    SuiteSpec,
    file_of,
    matches,
    node_id,
    select,
)
from tests import test_validate as tv
from tests.test_tiers_support import commit, git

TESTS = tuple(f"tests/test_{m}.py::test_{i}" for m in ("alpha", "beta", "gamma") for i in range(3))
# 12 test files of 3 tests: a budget of a third is 12 tests, 4 files.
WIDE = tuple(f"tests/test_m{m}.py::test_{i}" for m in range(12) for i in range(3))


def _spec(**kw: object) -> SuiteSpec:
    base: dict[str, object] = {"name": "unit", "paths": ("lib/**", "tests/**"), "can_select_tests": True,
                               "known_tests": TESTS}
    base.update(kw)
    return SuiteSpec(**base)  # type: ignore[arg-type]


def _fail(files: set[str], *tests: str, suite: str = "unit") -> HistoryEntry:
    return HistoryEntry(frozenset(files), frozenset((suite, t) for t in tests))


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


def test_name_affinity_prefers_the_mirrored_folder() -> None:
    known = tuple(f"tests/{p}/test_{m}.py::t" for p in ("p0", "p1", "p2") for m in ("core", "io", "net"))
    hist = [HistoryEntry(frozenset({"src/p1/core.py"}))]
    sel = select(["src/p1/core.py"], [_spec(paths=("src/**",), known_tests=known)], hist, budget=1 / 9).suites[0]
    assert sel.files == ("tests/p1/test_core.py",)  # not tests/p0/test_core.py: same name, other folder
    assert CoFailure.learn([], {file_of(t) for t in known}).named("src/p1/core.py") == {"tests/p1/test_core.py"}


def test_cofailure_history_ranks_the_tests_that_failed_with_the_file() -> None:
    hist = [_fail({"lib/m0.py"}, "tests/test_m0.py::test_1", "tests/test_m7.py::test_2")] * 3 + \
        [_fail({"lib/m5.py"}, "tests/test_m5.py::test_0", "tests/test_m9.py::test_0")] * 3
    sel = select(["lib/m0.py"], [_spec(known_tests=WIDE)], hist, budget=1 / 6).suites[0]
    assert sel.files == ("tests/test_m0.py", "tests/test_m7.py")  # not m9: it failed with m5
    sel = select(["lib/m0.py"], [_spec(known_tests=WIDE)], hist).suites[0]
    assert sel.tests is not None and len(sel.tests) == 12  # the whole budget, no more
    assert sel.files is not None and {"tests/test_m0.py", "tests/test_m7.py"} <= set(sel.files)


def test_the_budget_is_spent_whole_and_never_exceeded() -> None:
    hist = [HistoryEntry(frozenset({"lib/m3.py"}))]
    for budget, want in ((1 / 3, 12), (0.5, 18), (0.1, 3)):
        sel = select(["lib/m3.py"], [_spec(known_tests=WIDE)], hist, budget=budget).suites[0]
        assert sel.narrowed and sel.tests is not None and len(sel.tests) == want
        assert sel.files is not None and "tests/test_m3.py" in sel.files
    with pytest.raises(ValueError, match="not in"):
        select(["lib/m3.py"], [_spec()], hist, budget=0)


def test_budget_to_spare_runs_every_test_mapped_by_paths() -> None:
    lit = SuiteSpec("lit", ("test/lit/**",), True, tuple(f"test/lit/t{i}.mlir" for i in range(60)))
    hist = [HistoryEntry(frozenset({"lib/alpha.py"}))]
    plan = select(["lib/alpha.py"], [_spec(), lit], hist)
    unit = plan.of("unit")
    assert unit is not None and unit.run and unit.files is None  # 9 tests fit in 69 / 3
    assert "fit in the budget" in unit.reasons[0]
    assert plan.of("lit") == plan.suites[1] and not plan.suites[1].run


def test_every_suite_in_play_gets_its_best_file() -> None:
    big = SuiteSpec("big", ("lib/**",), True, WIDE)
    hist = [_fail({"lib/alpha.py"}, *(f"tests/test_m{m}.py::test_0" for m in range(12)), suite="big")] * 3
    plan = select(["lib/alpha.py"], [_spec(), big], hist)
    unit = plan.of("unit")
    assert unit is not None and unit.files == ("tests/test_alpha.py",)
    total = sum(len(s.tests or ()) for s in plan.suites)
    assert total == (len(TESTS) + len(WIDE)) // 3


def test_unknown_file_borrows_its_folder_history() -> None:
    quiet = [HistoryEntry(frozenset({"lib/core/x.py"}))] * (MIN_SEEN - 1)
    hist = [HistoryEntry(frozenset({"lib/core/x.py"}), frozenset({("unit", "tests/test_beta.py::test_0")}))]
    sel = select(["lib/core/new.py"], [_spec()], hist + quiet).suites[0]
    assert sel.files == ("tests/test_beta.py",)
    sel = select(["lib/core/new.py"], [_spec()], hist + quiet[1:]).suites[0]
    assert sel.files is None and "too little history" in sel.reasons[0]  # one run short


def test_a_few_passing_runs_of_the_folder_are_no_evidence() -> None:
    # src/p/m.py is tested by test_m1..3 (6 tests), src/p/n.py by test_n (1); one full run and
    # one run changing n.py, both green: nothing says where a breakage of m.py would land
    known = tuple(f"tests/p/test_m{i}.py::test_{j}" for i in (1, 2, 3) for j in range(2)) + \
        ("tests/p/test_n.py::test_0",)
    spec = SuiteSpec("unit", ("src/**", "tests/**"), True, known)
    hist = [HistoryEntry(frozenset({"src/p/n.py"})), HistoryEntry(frozenset())]
    for changed in ("src/p/m.py", "src/q/new.py"):
        sel = select([changed], [spec], hist).suites[0]
        assert sel.run and sel.files is None and "too little history" in sel.reasons[0], changed
    assert select(["src/p/n.py"], [spec], hist).suites[0].files == ("tests/p/test_n.py",)  # its own test
    sel = select(["src/p/m.py"], [spec], [HistoryEntry(frozenset({"src/r/x.py"}))] * MIN_SEEN + hist).suites[0]
    assert sel.files is None  # src/ is known, but m.py borrows from src/p/: one run
    sel = select(["src/p/m.py"], [spec], [HistoryEntry(frozenset({"src/p/n.py"}))] * MIN_SEEN + hist).suites[0]
    assert sel.narrowed  # enough runs of its folder: ranked as usual


def test_no_evidence_runs_the_whole_suite() -> None:
    sel = select(["lib/never_seen/z.py"], [_spec()], []).suites[0]
    assert sel.run and sel.files is None and "whole suite" in sel.reasons[0]


def test_changed_test_file_and_recent_failures_are_selected_beyond_the_budget() -> None:
    hist = [HistoryEntry(frozenset({"tests/test_new.py", "tests/test_gamma.py"}))]
    sel = select(["tests/test_new.py", "tests/test_gamma.py"], [_spec()], hist,
                 {"unit": frozenset({"tests/test_beta.py::test_1"})}).suites[0]
    assert sel.files == ("tests/test_beta.py", "tests/test_gamma.py", "tests/test_new.py")
    assert sel.tests is not None and len(sel.tests) == 6  # over the budget of 3: never dropped


def test_tests_that_always_run_leave_the_change_its_own_tests() -> None:
    # a 4-test suite: a third is 1 test.  test_flaky failed in the latest full run (must run);
    # test_div failed 5 times with lib/calc.py.  The gate ran only test_flaky and landed the break.
    known = ("tests/test_calc.py::test_add", "tests/test_calc.py::test_mul", "tests/test_calc.py::test_div",
             "tests/test_flaky.py::test_sometimes")
    spec = _spec(known_tests=known)
    hist = [_fail({"lib/calc.py"}, "tests/test_calc.py::test_div")] * 5 + \
        [_fail(set(), "tests/test_flaky.py::test_sometimes")]
    flaky = {"unit": frozenset({"tests/test_flaky.py::test_sometimes"})}
    sel = select(["lib/calc.py"], [spec], hist, flaky).suites[0]
    assert sel.files == ("tests/test_calc.py", "tests/test_flaky.py")
    assert "budget of 1" in sel.reasons[0] and "plus 1 that always run" in sel.reasons[0]
    sel = select(["lib/calc.py"], [spec], hist).suites[0]
    assert sel.files == ("tests/test_calc.py",)  # its named test, though 3 tests exceed the budget of 1


def test_recent_failures_do_not_spend_the_budget() -> None:
    hist = [HistoryEntry(frozenset({"lib/m3.py"}))]
    red = {"unit": frozenset(f"tests/test_m{m}.py::test_0" for m in (0, 1, 2, 4))}  # 12 tests: a whole budget
    sel = select(["lib/m3.py"], [_spec(known_tests=WIDE)], hist, red).suites[0]
    assert sel.files is not None and {"tests/test_m3.py", "tests/test_m0.py", "tests/test_m4.py"} <= set(sel.files)
    assert sel.tests is not None and len(sel.tests) == 12 + 12  # the failing ones, plus the whole budget


def test_the_strongest_evidence_of_each_changed_file_runs_past_the_budget() -> None:
    # budget 1 test, files of 3: lib/m3.py (the suite's best-ranked) runs its named test, and
    # lib/arith.py, with no test named after it, the test file that failed most with it
    hist = [_fail({"lib/arith.py"}, "tests/test_m7.py::test_0", "tests/test_m9.py::test_1")] * 3 + \
        [_fail({"lib/arith.py"}, "tests/test_m7.py::test_2", "tests/test_m2.py::test_0")] * 2 + \
        [HistoryEntry(frozenset({"lib/arith.py"}))] * 5 + [_fail({"lib/m3.py"}, "tests/test_m3.py::test_0")] * 8
    sel = select(["lib/arith.py", "lib/m3.py"], [_spec(known_tests=WIDE)], hist, budget=1 / 36).suites[0]
    assert sel.run and sel.files is not None and {"tests/test_m3.py", "tests/test_m7.py"} <= set(sel.files)
    assert "tests/test_m9.py" not in sel.files  # only the strongest: test_m7 failed 5 times, test_m9 3


def test_cofailure_selects_a_suite_whose_paths_do_not_match() -> None:
    hist = [HistoryEntry(frozenset({"third_party/llvm.hash"}), frozenset({("unit", "tests/test_alpha.py::test_0")}))]
    sel = select(["third_party/llvm.hash"], [_spec()], hist).suites[0]
    assert sel.run and sel.files == ("tests/test_alpha.py",)


def test_blame_goes_to_the_file_a_failing_test_is_named_after() -> None:
    hist = [_fail({"lib/alpha.py", "lib/beta.py"}, "tests/test_alpha.py::test_0", "tests/test_gamma.py::test_0")]
    cf = CoFailure.learn(hist, {file_of(t) for t in TESTS})
    alpha = ("unit", "tests/test_alpha.py")
    assert cf.credit["lib/alpha.py"][alpha] > 2 * cf.credit["lib/beta.py"][alpha] > 0
    gamma = ("unit", "tests/test_gamma.py")
    assert 0.3 < cf.credit["lib/alpha.py"][gamma] < 0.7  # no name to go by: shared
    assert cf.credit["lib/"][alpha] == pytest.approx(1.0)  # the folder keeps the whole failure


def test_a_lone_failure_counts_less_it_may_be_a_flake() -> None:
    hist = [_fail({"lib/x.py"}, "tests/test_gamma.py::test_0"),
            _fail({"lib/y.py"}, "tests/test_gamma.py::test_0", "tests/test_beta.py::test_0"),
            _fail({"lib/gamma.py"}, "tests/test_gamma.py::test_0")]
    cf = CoFailure.learn(hist, {file_of(t) for t in TESTS})
    gamma = ("unit", "tests/test_gamma.py")
    assert cf.credit["lib/x.py"][gamma] == pytest.approx(LONE_FAILURE)
    assert cf.credit["lib/y.py"][gamma] == pytest.approx(1.0, rel=1e-3)
    assert cf.credit["lib/gamma.py"][gamma] == pytest.approx(1.0, rel=1e-3)  # its own test: no doubt


def test_older_runs_count_less() -> None:
    entry = _fail({"lib/x.py"}, "tests/test_gamma.py::test_0", "tests/test_beta.py::test_0")
    cf = CoFailure.learn([HistoryEntry(frozenset({"lib/z.py"})), entry], half_life=1)
    assert cf.credit["lib/x.py"][("unit", "tests/test_gamma.py")] == pytest.approx(0.5)
    assert cf.changes["lib/x.py"] == pytest.approx(0.5) and cf.changes["lib/z.py"] == pytest.approx(1.0)


def test_selection_on_a_long_history_keeps_the_tests_that_failed_with_those_files() -> None:
    known = tuple(f"tests/p{p}/test_m{m}.py::test_{i}" for p in range(6) for m in range(10) for i in range(5))
    hist = [_fail({f"src/p{k % 6}/m{k % 10}.py", f"src/p{k % 6}/m{(k * 7) % 10}.py"},
                  *([f"tests/p{(k * 5) % 6}/test_m{k % 10}.py::test_{k % 5}"] if k % 4 == 0 else []))
            for k in range(5000)]
    spec = SuiteSpec("unit", ("src/**", "tests/**"), True, known)
    sel = select(["src/p2/m3.py", "src/p2/new.py"], [spec], hist).suites[0]
    assert sel.tests is not None and len(sel.tests) == 100  # its speed: benchmarks/bench_selection.py


def test_explicit_suite_and_full_runs_are_never_narrowed(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, _ = tv._sel_repo(tmp_path)
    assert cli("validate", "--tier", "L1", repo=repo).rc == 0  # full run: learns the 9 tests
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, {"lib/alpha.py": "A = 2\n"})
    r = cli("validate", "--tier", "L1", "--changed-from", base, "--suite", "unit", "--json", repo=repo)
    assert r.rc == 0, r.out + r.err
    assert r.json()["suites"][0]["tests_ran"] == 9
    r2 = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r2.rc == 0 and r2.json()["suites"][0]["tests_ran"] == 9
    with open_context(repo).store.session_scope() as s:
        job = q.jobs_of_run(s, r.json()["run_id"])[0]
        run = q.get_run(s, r.json()["run_id"])
    assert not job.narrowed
    assert run is not None and run.changed_files == ("lib/alpha.py",)  # still teaches history
