"""An L1 gate that ran no suite fails, unless the change only touches `[ingest] untested_paths` (issue 12)."""
from __future__ import annotations

from pathlib import Path

from forkflow import wiring
from forkflow.context import open_context
from forkflow.models import Sha
from forkflow.triage.gate import ran_nothing_verdict
from tests.test_tiers_support import commit, make_repo, suite_toml


def _repo(tmp_path: Path) -> tuple[Path, str]:
    suite = suite_toml("unit", "python -m pytest -q -p no:cacheprovider --junitxml={report} tests",
                       expect_tests=1, paths=["lib/**", "tests/**"])
    files = {"tests/test_a.py": "def test_a():\n    pass\n", "lib/x.py": "X = 1\n", "README": "docs\n"}
    return make_repo(tmp_path / "fork", suite, files, head='[ingest]\nuntested_paths = ["docs/**", "README"]\n')


def test_gate_that_ran_nothing_fails_for_uncovered_paths(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    unit = commit(repo, {"third_party/ops.cpp": "int f() { return 1; }\n"}, "Cherry-pick 1 upstream (#8)")
    result = wiring.tier_gate(open_context(repo)).check(Sha(unit), Sha(base))
    assert not result.passed
    assert "ran nothing" in result.summary and "third_party/ops.cpp" in result.summary


def test_gate_that_ran_nothing_passes_for_untested_paths_only(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    unit = commit(repo, {"README": "more docs\n", "docs/a.md": "x\n"}, "Cherry-pick 1 upstream (#9)")
    result = wiring.tier_gate(open_context(repo)).check(Sha(unit), Sha(base))
    assert result.passed, result.summary


def test_ran_nothing_verdict_lists_uncovered() -> None:
    ok, why = ran_nothing_verdict(["a.cpp", "b.cpp", "c.cpp", "d.cpp", "docs/x.md"], ("docs/**",))
    assert not ok and "a.cpp, b.cpp, c.cpp and 1 more" in why
    assert ran_nothing_verdict([], ())[0]
