"""`RayRunner`: each job a Ray task with its resources, on a Ray cluster ("auto" or an address).

The only module that imports Ray.  Ray runs in a driver subprocess (`python -m
forkflow.tiers.runners.ray ADDRESS`) that speaks JSON lines with forkflow: a Ray driver whose
head goes away blocks or exits on its own, and forkflow must outlive that to keep what was
already measured.  So:

* `check(jobs)` connects (a TCP probe first, so a dead address is a clear error in seconds, not
  Ray's endless reconnect loop) and compares every job's resources with every alive node's: a
  resource no node has is a UserError at once, never a task that waits forever;
* each job runs as a task with `num_cpus`, `num_gpus` and custom `resources`, doing what the
  local runner does (`run_process`: one process group, killed whole on timeout, output to the
  job's log), so the work tree and logs must be on a filesystem the nodes share;
* results stream back as they finish; if the driver dies or falls silent (the head went
  down), finished results are kept, unfinished jobs are retried once on a new driver, and what
  still cannot run is reported INFRA with the reason.  Nothing is lost and nothing hangs.
"""
from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import IO, Any

from forkflow.errors import UserError
from forkflow.tiers.runners.base import Job, JobResult, JobState, Progress, run_process

CONNECT_TIMEOUT_S = 60.0
SILENCE_S = 30.0        # no heartbeat for this long: the driver is stuck (head gone)
HEARTBEAT_S = 1.0
CLOSE_GRACE_S = 5.0  # a finished driver's time to disconnect cleanly before it is killed
ATTEMPTS = 2
_NATIVE = {"cpus": "num_cpus", "gpus": "num_gpus"}
_RAY_NAMES = {"cpus": "CPU", "gpus": "GPU"}


def _host_port(address: str) -> tuple[str, int] | None:
    addr = address.removeprefix("ray://")
    host, _, port = addr.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def _is_loopback(address: str) -> bool:
    hp = _host_port(address)
    return hp is not None and hp[0] in ("127.0.0.1", "localhost", "::1")


def probe(address: str, timeout: float = 5.0) -> str:
    """'' when something listens at host:port (or the address is "auto"), else why not."""
    hp = _host_port(address)
    if hp is None:
        return ""
    try:
        with socket.create_connection(hp, timeout=timeout):
            return ""
    except OSError as e:
        return f"nothing answers at {hp[0]}:{hp[1]} ({e.strerror or e})"


# -- the driver subprocess -------------------------------------------------------------------------

def _emit(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def _ray_task(job: dict[str, Any]) -> dict[str, Any]:
    """Runs on a Ray worker: the job's command as a process group (see run_process)."""
    j = Job(**{**job, "resources": tuple(map(tuple, job["resources"])), "env": tuple(map(tuple, job["env"]))})
    if not os.path.isdir(j.cwd):
        return asdict(JobResult(j.job_id, JobState.INFRA, None, 0.0,
                                f"the work tree {j.cwd} is not on node {socket.gethostname()}; the Ray "
                                "runner needs the fork's checkout on a filesystem all nodes share"))
    out = asdict(run_process(j))
    out["node"] = socket.gethostname()
    return out


def _options(job: dict[str, Any]) -> dict[str, Any]:
    opts: dict[str, Any] = {"resources": {}, "max_retries": 2, "retry_exceptions": False}
    for name, amount in job["resources"]:
        if name in _NATIVE:
            opts[_NATIVE[name]] = amount
        else:
            opts["resources"][name] = amount
    return opts


def _driver(address: str) -> int:
    import ray

    why = probe(address)
    if why:
        _emit({"error": f"cannot reach the Ray head {address}: {why}"})
        return 2
    ray.init(address=address, log_to_driver=False, logging_level=40, configure_logging=False)
    try:
        return _drive()
    finally:
        ray.shutdown()  # a clean disconnect: a Ray Client server holds a dropped session a while


def _drive() -> int:
    import ray

    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    _emit({"ready": True, "nodes": nodes})
    line = sys.stdin.readline()
    if not line:
        return 0
    jobs = json.loads(line)["jobs"]
    task = ray.remote(_ray_task)
    pending = {task.options(**_options(j)).remote(j): j["job_id"] for j in jobs}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=HEARTBEAT_S)
        for ref in done:
            job_id = pending.pop(ref)
            try:
                _emit({"result": ray.get(ref)})
            except Exception as e:  # noqa: BLE001  (a worker or node died: the runner's fault)
                _emit({"result": asdict(JobResult(job_id, JobState.INFRA, None, 0.0,
                                                  f"Ray lost the task: {type(e).__name__}: {str(e)[:300]}"))})
        _emit({"alive": True})
    return 0


# -- the forkflow side -----------------------------------------------------------------------------

class _Driver:
    """One driver subprocess and its JSON-lines pipe."""

    def __init__(self, address: str) -> None:
        env = dict(os.environ)
        env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        env.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "10")
        if _is_loopback(address):  # else Ray swaps 127.0.0.1 for the machine's public address
            env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "forkflow.tiers.runners.ray", address],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=env, start_new_session=True, text=True)

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None when the driver ended or said nothing for `timeout`."""
        out: IO[str] | None = self.proc.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], timeout)
        if not ready:
            return None
        line = out.readline()
        if not line:
            return None
        try:
            doc: dict[str, Any] = json.loads(line)
            return doc
        except ValueError:
            return {"noise": line}

    def send(self, doc: dict[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(doc) + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def stderr_tail(self) -> str:
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(0, self.stderr.tell() - 600))
        text: str = self.stderr.read().decode("utf-8", "replace")
        return " ".join(text.split())[-300:]

    def close(self, grace: float = 0.0) -> None:
        """End the driver: one that finished its jobs (`grace` > 0) leaves on its own once its
        stdin ends and disconnects from the cluster cleanly (a Ray Client server keeps a killed
        client's session for its reconnect grace, and the next client waits that long); one
        still busy, or past `grace`, is killed."""
        if grace > 0 and self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait()
        self.stderr.close()


def _fits(job: Job, node: dict[str, float]) -> bool:
    return all(node.get(_RAY_NAMES.get(name, name), 0.0) >= amount
               for name, amount in job.resources if amount > 0)


class RayRunner:
    name = "ray"

    def __init__(self, address: str = "auto") -> None:
        self.address = address or "auto"
        self._driver: _Driver | None = None
        self.nodes: list[dict[str, float]] = []

    def _connect(self) -> _Driver:
        """A ready driver, or a UserError saying why the cluster cannot be used."""
        if self._driver is not None and self._driver.proc.poll() is None:
            return self._driver
        why = probe(self.address)
        if why:
            raise UserError(f"cannot reach the Ray head {self.address}: {why}; start one with "
                            "`ray start --head` or pass --ray-address HOST:PORT")
        # A Ray Client server (ray://) sometimes fails to start the session it spawns per client
        # (a gRPC fork race inside Ray); a fresh connection then works, so try a few times.
        attempts = 3 if self.address.startswith("ray://") else 1
        detail = "no answer"
        for attempt in range(attempts):
            if attempt:
                time.sleep(2.0 * attempt)
            d = _Driver(self.address)
            msg = d.read(CONNECT_TIMEOUT_S)
            if msg and msg.get("ready"):
                self.nodes = msg["nodes"]
                self._driver = d
                return d
            detail = (msg or {}).get("error") or d.stderr_tail() or "no answer"
            d.close()
        raise UserError(f"cannot connect to the Ray head {self.address} ({detail}); check "
                        "--ray-address and that the cluster runs the same Ray and Python")

    def check(self, jobs: Sequence[Job]) -> None:
        self._connect()
        for job in jobs:
            if not any(_fits(job, n) for n in self.nodes):
                want = ", ".join(f"{k}={v:g}" for k, v in job.resources)
                have = "; ".join(", ".join(f"{k}={v:g}" for k, v in sorted(n.items())
                                           if not k.startswith(("node:", "memory", "object_store")))
                                 for n in self.nodes) or "no alive node"
                raise UserError(f"job '{job.name}' asks for {want} but no node of the Ray cluster "
                                f"has that (nodes: {have}); fix the suite's resources or add such a node")

    def run(self, jobs: Sequence[Job], on_done: Progress | None = None) -> list[JobResult]:
        results: dict[int, JobResult] = {}
        attempts = {j.job_id: 0 for j in jobs}
        reason = ""
        for _attempt in range(ATTEMPTS):
            left = [j for j in jobs if j.job_id not in results]
            if not left:
                break
            for j in left:
                attempts[j.job_id] += 1
            try:
                reason = self._run_once(left, results, attempts, on_done)
            except UserError as e:
                reason = str(e)
                break
        for j in jobs:
            if j.job_id not in results:
                r = JobResult(j.job_id, JobState.INFRA, None, 0.0,
                              f"the Ray head went away before the job finished: {reason}",
                              attempts[j.job_id])
                results[j.job_id] = r
                if on_done is not None:
                    on_done(r)
        return [results[j.job_id] for j in jobs]

    def _run_once(self, jobs: Sequence[Job], results: dict[int, JobResult],
                  attempts: dict[int, int], on_done: Progress | None) -> str:
        """Submit `jobs` on one driver; '' when all reported, else why the driver was lost."""
        d = self._connect()
        wanted = {j.job_id for j in jobs}
        if not d.send({"jobs": [asdict(j) for j in jobs]}):
            self._drop()
            return "the Ray driver exited"
        while wanted - results.keys():
            msg = d.read(SILENCE_S)
            if msg is None:
                why = f"driver lost ({d.stderr_tail() or 'no heartbeat'})"
                self._drop()
                return why
            if "result" in msg:
                r = JobResult(**{**msg["result"], "state": JobState(msg["result"]["state"]),
                                 "attempts": attempts[msg["result"]["job_id"]]})
                results[r.job_id] = r
                if on_done is not None:
                    on_done(r)
        self._drop(CLOSE_GRACE_S)  # every job reported: the driver is leaving on its own
        return ""

    def _drop(self, grace: float = 0.0) -> None:
        if self._driver is not None:
            self._driver.close(grace)
            self._driver = None

    def close(self) -> None:
        self._drop(CLOSE_GRACE_S)  # a driver idle since `check` leaves as soon as its stdin ends


if __name__ == "__main__":
    sys.exit(_driver(sys.argv[1] if len(sys.argv) > 1 else "auto"))
