"""The L1 gate with triage, end to end on a real pytest suite: a red trunk blocks nobody else."""
from __future__ import annotations

from pathlib import Path

from forkflow import wiring
from forkflow.context import open_context
from forkflow.models import Sha
from tests.test_tiers_support import commit, make_repo, suite_toml

TESTS = {
    "tests/test_a.py": "def test_a():\n    assert 1 + 1 == 3, 'arith is broken on trunk'\n",
    "tests/test_b.py": "from lib import value\n\ndef test_b():\n    assert value() == 2\n",
    "lib.py": "def value():\n    return 2\n",
    "README": "docs\n",
}


def _repo(tmp_path: Path) -> tuple[Path, str]:
    suite = suite_toml("unit", "python -m pytest -q -p no:cacheprovider --junitxml={report} tests",
                       expect_tests=2)
    return make_repo(tmp_path / "fork", suite, TESTS)


def test_gate_passes_unit_when_only_trunk_failures(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    unit = commit(repo, {"README": "more docs\n"}, "Cherry-pick 1 upstream (#5)")
    ctx = open_context(repo)
    result = wiring.tier_gate(ctx).check(Sha(unit), Sha(base))
    assert result.passed, result.summary
    assert "not caused by it" in result.summary


def test_gate_blocks_unit_that_breaks_a_test(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    unit = commit(repo, {"lib.py": "def value():\n    return 3\n"}, "Cherry-pick 1 upstream (#6)")
    ctx = open_context(repo)
    result = wiring.tier_gate(ctx).check(Sha(unit), Sha(base))
    assert not result.passed
    assert "NEW failures" in result.summary and "test_b" in result.summary
    assert "test_a" not in result.summary.split("NEW failures")[1]


def test_gate_passes_unit_whose_only_failure_is_flaky(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    flaky = (f"from pathlib import Path\n\ndef test_c():\n    p = Path({str(counter)!r})\n"
             "    n = int(p.read_text()) if p.exists() else 0\n    p.write_text(str(n + 1))\n"
             "    assert n != 1, 'timing-dependent failure'\n")
    files = dict(TESTS, **{"tests/test_a.py": "def test_a():\n    pass\n", "tests/test_c.py": flaky})
    suite = suite_toml("unit", "python -m pytest -q -p no:cacheprovider --junitxml={report} tests",
                       expect_tests=3)
    repo, base = make_repo(tmp_path / "fork", suite, files)
    ctx = open_context(repo)
    first = wiring.tier_gate(ctx).check(Sha(base), Sha(base))  # run 1 of test_c passes (n == 0)
    assert first.passed
    unit = commit(repo, {"README": "x\n"}, "Cherry-pick 1 upstream (#7)")
    result = wiring.tier_gate(ctx).check(Sha(unit), Sha(base))  # run 2 fails, the rerun passes
    assert result.passed, result.summary
    assert int(counter.read_text()) >= 3
