"""Run L1 correctness checks: skip what the hardware lacks, report out-of-memory as such."""
from __future__ import annotations

import argparse
import fnmatch
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from forkflow.workloads.checks import TOLERANCES, compare, is_out_of_memory
from forkflow.workloads.device import DeviceInfo, unsupported_reason
from forkflow.workloads.junit import CaseOutcome, CaseResult, counts, write_junit

if TYPE_CHECKING:
    import torch


def run_check(classname: str, name: str, dtype: str, dev: DeviceInfo,
              fn: Callable[[], tuple[torch.Tensor, torch.Tensor]],
              skip: str | None = None, tolerance: str | None = None) -> CaseResult:
    """Run one check: `fn` returns (output, reference); never raises for the check's own faults."""
    reason = skip or unsupported_reason(dtype, dev)
    if reason:
        return CaseResult(classname, name, CaseOutcome.SKIPPED, message=reason)
    t0 = time.perf_counter()
    try:
        out, ref = fn()
        res = compare(out, ref, TOLERANCES[tolerance or dtype])
    except Exception as e:  # noqa: BLE001  (a broken kernel is this check's result, not a crash)
        dt = time.perf_counter() - t0
        tail = "".join(traceback.format_exception(e)[-6:])
        if is_out_of_memory(e):
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            return CaseResult(classname, name, CaseOutcome.ERROR, dt,
                              f"out of memory on {dev.describe()}: {first}", tail)
        return CaseResult(classname, name, CaseOutcome.ERROR, dt, f"{type(e).__name__}: {e}"[:500], tail)
    dt = time.perf_counter() - t0
    return CaseResult(classname, name, CaseOutcome.PASSED if res.ok else CaseOutcome.FAILED, dt,
                      "" if res.ok else res.message, res.message)


def parse_args(prog: str, argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=prog, description="Run the checks; write a JUnit report.")
    ap.add_argument("--report", type=Path, help="where the JUnit XML goes")
    ap.add_argument("-k", "--only", default="*", help="run only check ids matching this glob")
    ap.add_argument("--list", action="store_true", help="print the check ids and exit")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def selected(ids: list[str], pattern: str) -> list[str]:
    return [i for i in ids if fnmatch.fnmatchcase(i, pattern)]


def finish(suite: str, cases: list[CaseResult], report: Path | None, dev: DeviceInfo,
           started: float) -> int:
    """Print one line per check and a summary, write the report; exit 1 on any failure or error."""
    for c in cases:
        note = f"  {c.message}" if c.message else ""
        print(f"{c.outcome.value.upper():8} {c.name:44} {c.seconds:7.2f}s{note}")
    n = counts(cases)
    wall = time.perf_counter() - started
    # The closing line in pytest's form, so a runner's own count reads it (forkflow.tiers.reports).
    print(f"{suite} on {dev.describe()}")
    print(f"{n[CaseOutcome.PASSED]} passed, {n[CaseOutcome.FAILED]} failed, {n[CaseOutcome.ERROR]} errors, "
          f"{n[CaseOutcome.SKIPPED]} skipped in {wall:.1f}s")
    if report is not None:
        write_junit(report, suite, cases, {"device": dev.describe(), "wall_seconds": f"{wall:.2f}"})
        print(f"report: {report}")
    sys.stdout.flush()
    return 1 if n[CaseOutcome.FAILED] or n[CaseOutcome.ERROR] else 0


def pack_main(suite: str, module: str, argv: list[str] | None, ids: list[str],
              requires: tuple[str, ...],
              run: Callable[[list[str], int], tuple[list[CaseResult], DeviceInfo]]) -> int:
    """The command line of an L1 pack: `python -m forkflow.workloads.<module> --report PATH`.

    `run(ids, seed)` runs the selected checks; exit 2 on bad arguments or missing packages.
    """
    from forkflow.errors import UserError
    from forkflow.workloads.device import require_packages

    args = parse_args(f"python -m forkflow.workloads.{module}", argv)
    chosen = selected(ids, args.only)
    if args.list:
        print("\n".join(chosen))
        return 0
    try:
        require_packages(requires, f"the {suite} workload")
        if not chosen:
            raise UserError(f"no check matches {args.only!r}; see --list")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results, dev = run(chosen, args.seed)
    return finish(suite, results, args.report, dev, started)
