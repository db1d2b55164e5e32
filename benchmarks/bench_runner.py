"""Runner overhead per job: forkflow's runners against running the bare command.

    python benchmarks/bench_runner.py [--jobs 40] [--ray-address 127.0.0.1:6380]

The same N trivial jobs (`true`) run three ways, one at a time: bare (`subprocess.run` of
`/bin/sh -c true`), the local runner (pool of one slot), the Ray runner on a warm head (each job
asks for every CPU of the head, so they also run one at a time).  Overhead per job = (runner
wall time - bare wall time) / N.  Ray's connect (driver start + `ray.init`), paid once per
validation run, is reported on its own line.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forkflow.tiers.runners.base import Job, RunnerOptions, make_runner  # noqa: E402


def _jobs(n: int, d: str, cpus: float) -> list[Job]:
    return [Job(i, f"j{i}", "true", d, f"{d}/j{i}.log", 60, resources=(("cpus", cpus),)) for i in range(n)]


def bare(n: int, d: str) -> float:
    start = time.perf_counter()
    for i in range(n):
        with open(f"{d}/bare{i}.log", "ab") as log:
            subprocess.run(["/bin/sh", "-c", "true"], cwd=d, stdout=log, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - start


def local(n: int, d: str) -> float:
    runner = make_runner("local", RunnerOptions(jobs=1))
    start = time.perf_counter()
    res = runner.run(_jobs(n, d, 1.0))
    assert all(r.returncode == 0 for r in res)
    return time.perf_counter() - start


def ray(n: int, d: str, address: str) -> tuple[float, float]:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    runner = make_runner("ray", RunnerOptions(address=address))
    start = time.perf_counter()
    runner.check([])  # connect: driver process + ray.init, once per validation run
    connect = time.perf_counter() - start
    cpus = max(n.get("CPU", 1.0) for n in runner.nodes)  # type: ignore[attr-defined]
    warm = _jobs(2, d, cpus)
    runner.run(warm)  # warm the workers
    runner.check([])
    start = time.perf_counter()
    res = runner.run(_jobs(n, d, cpus))
    wall = time.perf_counter() - start
    runner.close()
    assert all(r.returncode == 0 for r in res), res
    return connect, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--ray-address", default=os.environ.get("FORKFLOW_TEST_RAY", ""))
    args = ap.parse_args()
    n = args.jobs
    with tempfile.TemporaryDirectory() as d:
        bare(5, d)
        b = bare(n, d)
        lo = local(n, d)
        print(f"jobs: {n} x `true`, one at a time; machine: {os.cpu_count()} CPUs")
        print(f"bare            {b / n * 1000:7.1f} ms/job")
        print(f"local runner    {lo / n * 1000:7.1f} ms/job   overhead {(lo - b) / n * 1000:6.1f} ms/job "
              f"(goal <= 50)   ratio {lo / b:.2f}x")
        if args.ray_address:
            connect, wall = ray(n, d, args.ray_address)
            print(f"ray runner      {wall / n * 1000:7.1f} ms/job   overhead {(wall - b) / n * 1000:6.1f} ms/job "
                  f"(goal <= 200, warm head)   ratio {wall / b:.2f}x")
            print(f"ray connect     {connect * 1000:7.1f} ms once per validation run (driver + ray.init)")
        else:
            print("ray runner      skipped (pass --ray-address or set FORKFLOW_TEST_RAY)")


if __name__ == "__main__":
    main()
