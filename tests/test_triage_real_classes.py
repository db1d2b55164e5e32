"""Classes on real runs: FLAKY from real reruns through the suite's `{tests}`, INFRA families,
and BROKEN_TRUNK only when the same signature is already red on trunk (issue 14)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.context import open_context
from forkflow.triage.classify import Evidence, classify_failure
from forkflow.triage.models import Classification, Failure, FailureKind
from forkflow.triage.signature import signature_of
from forkflow.triage.triage import TriageSettings, triage_run
from tests.test_validate import _sel_repo

C = Classification


def test_flaky_comes_from_real_reruns_through_the_suite_command(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo, fails = _sel_repo(tmp_path, "tests/test_gamma.py::test_2\ntests/test_alpha.py::test_0\n")
    r = cli("validate", "--tier", "L1", "--json", repo=repo)
    assert r.rc == 1
    fails.write_text("tests/test_alpha.py::test_0\n")  # gamma passes from now on: it was flaky
    report = triage_run(wiring.triager(open_context(repo)), r.json()["run_id"],
                        settings=TriageSettings(reruns=2, min_clean_reruns=2))
    got = {v.failure.test: (v.classification, v.reruns) for v in report.verdicts}
    assert got["tests/test_gamma.py::test_2"] == (C.FLAKY, (True, True))
    assert got["tests/test_alpha.py::test_0"] == (C.NEW, (False, False))


@pytest.mark.parametrize("log", [
    "[12345.6] Out of memory: Killed process 4242 (python) total-vm:9000kB\n",
    "collect2: fatal error: ld terminated with signal 9 [Killed]\ncompilation terminated.\n",
    "RuntimeError: The server socket has failed to listen on any local network address. "
    "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n",
    "[rank0]:[E1206 18:44:12.7 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600061 "
    "milliseconds before timing out.\n",
    "ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this task.\n",
    "OSError: [Errno 28] No space left on device: 'build'\n",
])
def test_infra_families_are_infra_whatever_the_test(log: str) -> None:
    a = signature_of("Traceback (most recent call last):\n  File \"t.py\", line 1, in t\n" + log)
    b = signature_of("noise from test_other.py\n" + log)
    assert a.kind is FailureKind.INFRA and a.key == b.key  # the family, never the test file
    assert classify_failure(Failure("t", a), Evidence()).classification is C.INFRA


def test_a_changed_signature_on_a_red_test_is_new() -> None:
    oom = signature_of("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    new = signature_of("triton.compiler.errors.CompilationError: at 4:8: unsupported tensor index\n")
    trunk = frozenset({("test_mm", oom.key)})
    assert classify_failure(Failure("test_mm", oom), Evidence(trunk_failures=trunk)).classification \
        is C.BROKEN_TRUNK
    assert classify_failure(Failure("test_mm", new), Evidence(trunk_failures=trunk)).classification \
        is C.NEW
