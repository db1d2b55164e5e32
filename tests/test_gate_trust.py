"""The L1 gate lands nothing on a guess, and keeps its processes, trees and output in hand.

Real pytest suites in real repositories: a failure whose text reads like a runner fault, a test
skipped on its reruns, a truly flaky test; work trees pruned only from forkflow's own registry;
L1 output capped; a test process that leaves L1's process group by `setsid`.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.context import open_context
from forkflow.models import Sha
from tests.test_tiers_support import commit, make_repo, suite_toml

PYTEST = "python -m pytest -q -p no:cacheprovider --junitxml={report} tests"
LIB = {"lib.py": "def value():\n    return 2\n", "README": "docs\n",
       "tests/test_a.py": "def test_a():\n    pass\n"}


def _counting_test(counter: Path, body: str) -> str:
    """A test that knows how many times it ran before (`n`), kept in a file outside the repository."""
    return ("import pytest\nfrom pathlib import Path\n\ndef test_c():\n"
            f"    p = Path({str(counter)!r})\n    n = int(p.read_text()) if p.exists() else 0\n"
            "    p.write_text(str(n + 1))\n" + body)


def _fork(tmp_path: Path, test_c: str) -> tuple[Path, str]:
    suite = suite_toml("unit", PYTEST, expect_tests=2)
    return make_repo(tmp_path / "fork", suite, dict(LIB, **{"tests/test_c.py": test_c}))


@pytest.mark.security
def test_gate_does_not_land_a_real_failure_that_reads_like_infra(tmp_path: Path) -> None:
    test_c = ("from lib import value\n\ndef test_c():\n    if value() != 2:\n"
              "        raise OSError(98, 'Address already in use')\n")
    repo, base = _fork(tmp_path, test_c)
    unit = commit(repo, {"lib.py": "def value():\n    return 3\n"}, "Cherry-pick 1 upstream (#5)")
    result = wiring.tier_gate(open_context(repo)).check(Sha(unit), Sha(base))
    assert not result.passed, result.summary
    assert not result.infra  # the runner ran it twice; the test failed twice: the unit's failure
    assert "not confirmed by rerun" in result.summary and "test_c (INFRA" in result.summary
    assert "failed again" in result.summary


@pytest.mark.security
def test_gate_does_not_land_a_failure_whose_reruns_were_skipped(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    # the base's run passes (n == 0), the unit's fails (n == 1), every later run skips
    test_c = _counting_test(counter, "    if n >= 2:\n        pytest.skip('not on a rerun')\n"
                                     "    assert n == 0, 'fails once'\n")
    repo, base = _fork(tmp_path, test_c)
    ctx = open_context(repo)
    assert wiring.tier_gate(ctx).check(Sha(base), Sha(base)).passed
    unit = commit(repo, {"README": "x\n"}, "Cherry-pick 1 upstream (#6)")
    result = wiring.tier_gate(ctx).check(Sha(unit), Sha(base))
    assert not result.passed, result.summary
    assert "was skipped on the rerun" in result.summary
    assert int(counter.read_text()) >= 3  # it did run again: skipping is what blocks it


def test_gate_lands_a_flaky_failure_that_passes_its_confirming_rerun(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    test_c = _counting_test(counter, "    assert n != 1, 'timing-dependent failure'\n")
    repo, base = _fork(tmp_path, test_c)
    ctx = open_context(repo)
    assert wiring.tier_gate(ctx).check(Sha(base), Sha(base)).passed
    unit = commit(repo, {"README": "x\n"}, "Cherry-pick 1 upstream (#7)")
    result = wiring.tier_gate(ctx).check(Sha(unit), Sha(base))
    assert result.passed, result.summary
    assert "passed again on rerun" in result.summary
