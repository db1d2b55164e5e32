"""The Ray runner against a real Ray head (.ci/run starts one at FORKFLOW_TEST_RAY)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from forkflow.errors import UserError
from forkflow.tiers.runners.base import Job, JobState, RunnerOptions, make_runner
from tests.conftest import service
from tests.test_tiers_support import harness, make_repo, suite_toml

pytestmark = pytest.mark.ray


def _job(tmp_path: Path, command: str, i: int = 0, timeout: float = 30, **kw: object) -> Job:
    return Job(i, f"j{i}", command, str(tmp_path), str(tmp_path / f"j{i}.log"), timeout, **kw)  # type: ignore[arg-type]


def test_ray_runs_jobs_with_logs_exit_codes_and_timeouts(tmp_path: Path) -> None:
    r = make_runner("ray", RunnerOptions(address=service("FORKFLOW_TEST_RAY", "a Ray head")))
    try:
        jobs = [_job(tmp_path, "echo on ray $X; exit 5", 0, env=(("X", "yes"),)),
                _job(tmp_path, "sleep 300", 1, timeout=1.0)]
        r.check(jobs)
        res = r.run(jobs)
    finally:
        r.close()
    assert res[0].state is JobState.FINISHED and res[0].returncode == 5
    assert (tmp_path / "j0.log").read_text() == "on ray yes\n"
    assert res[1].state is JobState.TIMEOUT


def test_ray_resource_no_node_has_is_an_error_at_once(tmp_path: Path) -> None:
    r = make_runner("ray", RunnerOptions(address=service("FORKFLOW_TEST_RAY", "a Ray head")))
    start = time.monotonic()
    try:
        with pytest.raises(UserError, match=r"asks for cpus=1, h200=1 but no node of the Ray cluster has that"):
            r.check([_job(tmp_path, "true", resources=(("cpus", 1.0), ("h200", 1.0)))])
        with pytest.raises(UserError, match="asks for cpus=64"):
            r.check([_job(tmp_path, "true", resources=(("cpus", 64.0),))])
    finally:
        r.close()
    assert time.monotonic() - start < 30


def test_ray_unreachable_address_is_a_clear_error() -> None:
    r = make_runner("ray", RunnerOptions(address="127.0.0.1:1"))
    with pytest.raises(UserError, match="cannot reach the Ray head 127.0.0.1:1"):
        r.check([])


def test_validate_on_ray_end_to_end(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    address = service("FORKFLOW_TEST_RAY", "a Ray head")
    repo, _ = make_repo(tmp_path / "fork", suite_toml("unit", harness(3)) + suite_toml("b", harness(2, 1)))
    r = cli("validate", "--tier", "L1", "--runner", "ray", "--ray-address", address, "--json", repo=repo)
    assert r.rc == 1, r.out + r.err
    assert [(s["suite"], s["status"], s["tests_ran"]) for s in r.json()["suites"]] == \
        [("unit", "PASS", 3), ("b", "FAIL", 3)]


@pytest.fixture
def throwaway_head():  # type: ignore[no-untyped-def]
    """A Ray head of our own on another port, to kill mid-run."""
    service("FORKFLOW_TEST_RAY", "a Ray head")
    ray_bin = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    # directly under /tmp: Ray's socket paths live in it, and a Unix socket path has at most 107
    # bytes (pytest's own temp folder, which tests/conftest.py makes TMPDIR, is too deep)
    temp = tempfile.mkdtemp(prefix="ffray", dir="/tmp")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    subprocess.run([ray_bin, "start", "--head", "--node-ip-address=127.0.0.1", "--port=6391",
                    "--ray-client-server-port=6392",  # not the CI head's 10001
                    "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
                    f"--temp-dir={temp}"], env=env, check=True, capture_output=True, timeout=120)

    def pids(pattern: str) -> list[int]:
        out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        return [int(p) for p in out if int(p) != os.getpid()]

    def kill(pattern: str) -> None:
        for pid in pids(pattern):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def kill_head() -> None:
        kill(f"gcs_server.*{temp}")
        kill(f"raylet.*{temp}")

    yield "127.0.0.1:6391", kill_head
    kill(temp)  # everything that head started (monitor, log monitor, agents)
    shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_head_going_down_mid_run_loses_nothing(tmp_path: Path, throwaway_head) -> None:  # type: ignore[no-untyped-def]
    address, kill_head = throwaway_head
    pidfile = tmp_path / "pid"
    r = make_runner("ray", RunnerOptions(address=address))
    jobs = [_job(tmp_path, "echo quick", 0), _job(tmp_path, f"echo $$ > {pidfile}; sleep 300", 1, timeout=600)]
    r.check(jobs)
    seen: list[Any] = []


    def kill_when_both_ran() -> None:  # the quick job reported, the long one started: then the head goes
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and any(x.job_id == 0 for x in list(seen))) and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_head()

    threading.Thread(target=kill_when_both_ran, daemon=True).start()
    start = time.monotonic()
    res = r.run(jobs, on_done=seen.append)
    r.close()
    assert time.monotonic() - start < 90
    assert res[0].state is JobState.FINISHED and res[0].returncode == 0  # kept
    assert res[1].state is JobState.INFRA and res[1].attempts == 2  # retried, then INFRA
    assert "went away" in res[1].message
    assert sorted(x.job_id for x in seen) == [0, 1]  # every job reported exactly once
    time.sleep(1.5)
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]


def test_ray_client_address_runs_jobs(tmp_path: Path) -> None:
    """`ray://` addresses go through the head's Ray Client server (.ci/run starts it on 10001)."""
    address = service("FORKFLOW_TEST_RAY_CLIENT", "a Ray Client server")
    assert address.startswith("ray://")
    r = make_runner("ray", RunnerOptions(address=address))
    try:
        jobs = [_job(tmp_path, "echo via client $X; exit 3", 0, env=(("X", "ok"),))]
        r.check(jobs)
        res = r.run(jobs)
    finally:
        r.close()
    assert res[0].state is JobState.FINISHED and res[0].returncode == 3
    assert (tmp_path / "j0.log").read_text() == "via client ok\n"


def test_a_driver_that_finished_disconnects_instead_of_being_killed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed client leaves its session on a Ray Client server for the reconnect grace, and the
    next client waits for it (45 s); a driver whose jobs all reported, or that never got any,
    leaves on its own (exit 0) once its stdin ends."""
    from forkflow.tiers.runners import ray as ray_runner

    ended: list[int | None] = []
    close = ray_runner._Driver.close

    def watched(self: ray_runner._Driver, grace: float = 0.0) -> None:
        close(self, grace)
        ended.append(self.proc.returncode)

    monkeypatch.setattr(ray_runner._Driver, "close", watched)
    address = service("FORKFLOW_TEST_RAY", "a Ray head")
    for run in (True, False):  # jobs run and reported; connected for `check` only
        r = make_runner("ray", RunnerOptions(address=address))
        try:
            jobs = [_job(tmp_path, "exit 0", 0)]
            r.check(jobs)
            if run:
                assert r.run(jobs)[0].state is JobState.FINISHED
        finally:
            r.close()
    assert ended == [0, 0], ended
