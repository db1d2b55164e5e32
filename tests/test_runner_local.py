"""The local runner: process groups, timeouts, missing commands, resources, garbage output."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from forkflow.errors import UserError
from forkflow.tiers.runners.base import Job, JobState, make_runner
from tests.test_process import _alive


def _job(tmp_path: Path, command: str, i: int = 0, timeout: float = 30, **kw: object) -> Job:
    return Job(i, f"j{i}", command, str(tmp_path), str(tmp_path / f"j{i}.log"), timeout, **kw)  # type: ignore[arg-type]


def test_exit_codes_and_logs(tmp_path: Path) -> None:
    r = make_runner("local")
    res = r.run([_job(tmp_path, "echo out; echo err >&2; exit 3", 0, env=(("X", "1"),)),
                 _job(tmp_path, "printf 'x=%s' $X", 1, env=(("X", "42"),))])
    assert [x.state for x in res] == [JobState.FINISHED, JobState.FINISHED]
    assert res[0].returncode == 3 and res[1].returncode == 0
    assert (tmp_path / "j0.log").read_text() == "out\nerr\n"
    assert (tmp_path / "j1.log").read_text() == "x=42"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    cmd = f"sleep 300 & echo $! > {pidfile}; sh -c 'sleep 301' & echo $! >> {pidfile}; wait"
    start = time.monotonic()
    res = make_runner("local").run([_job(tmp_path, cmd, timeout=1.0)])[0]
    assert res.state is JobState.TIMEOUT and "timed out after 1s" in res.message
    assert time.monotonic() - start < 6
    pids = [int(p) for p in pidfile.read_text().split()]
    assert pids and not any(_alive(p) for p in pids)


def test_background_leftovers_are_killed_after_exit(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    res = make_runner("local").run([_job(tmp_path, f"sleep 300 & echo $! > {pidfile}; exit 0")])[0]
    assert res.returncode == 0
    assert not _alive(int(pidfile.read_text()))


def test_missing_and_non_executable_commands(tmp_path: Path) -> None:
    (tmp_path / "noexec.sh").write_text("#!/bin/sh\necho hi\n")
    res = make_runner("local").run([_job(tmp_path, "no-such-program-xyz --flag", 0),
                                    _job(tmp_path, "./noexec.sh", 1)])
    assert [x.returncode for x in res] == [127, 126]
    assert all("not found or is not executable" in x.message for x in res)


def test_cwd_missing_is_infra(tmp_path: Path) -> None:
    job = Job(0, "j", "true", str(tmp_path / "gone"), str(tmp_path / "j.log"), 10)
    res = make_runner("local").run([job])[0]
    assert res.state is JobState.INFRA and "cannot start the command" in res.message


def test_resource_no_machine_has_is_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKFLOW_LOCAL_RESOURCES", "h200=1")
    r = make_runner("local")
    with pytest.raises(UserError, match="asks for h200=2 but this machine has 1"):
        r.run([_job(tmp_path, "true", resources=(("cpus", 1.0), ("h200", 2.0)))])
    assert r.run([_job(tmp_path, "true", resources=(("cpus", 1.0), ("h200", 1.0)))])[0].returncode == 0
    monkeypatch.setenv("FORKFLOW_LOCAL_RESOURCES", "h200")
    with pytest.raises(UserError, match="FORKFLOW_LOCAL_RESOURCES has a bad item"):
        make_runner("local")


def test_more_cpus_than_the_machine_has_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORKFLOW_LOCAL_RESOURCES", raising=False)
    have = os.cpu_count() or 1
    big = _job(tmp_path, "true", resources=(("cpus", float(have + 62)),))
    with pytest.raises(UserError, match=f"asks for cpus={have + 62} but this machine has {have};"):
        make_runner("local").run([big])
    assert make_runner("local").run([_job(tmp_path, "true", resources=(("cpus", float(have)),))])[0].returncode == 0
    monkeypatch.setenv("FORKFLOW_LOCAL_RESOURCES", f"cpus={have + 62}")  # declared: the pool grows
    assert make_runner("local").run([big])[0].returncode == 0


def test_unknown_runner_name() -> None:
    with pytest.raises(UserError, match="unknown runner 'slurm'; use one of: local, ray"):
        make_runner("slurm")


def test_binary_garbage_output_goes_to_the_log_untouched(tmp_path: Path) -> None:
    res = make_runner("local").run([_job(tmp_path, "printf '\\033[31mred\\377\\376\\000end'")])[0]
    assert res.returncode == 0
    assert (tmp_path / "j0.log").read_bytes() == b"\x1b[31mred\xff\xfe\x00end"


def test_git_location_variables_do_not_reach_the_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # run from a git hook, GIT_DIR/GIT_INDEX_FILE would send the suite's git calls to the hook's repository
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere.git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "index"))
    res = make_runner("local").run([_job(tmp_path, 'printf "%s|%s" "${GIT_DIR-unset}" "${GIT_INDEX_FILE-unset}"')])[0]
    assert res.returncode == 0
    assert (tmp_path / "j0.log").read_text() == "unset|unset"
