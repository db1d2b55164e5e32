"""python -m forkflow.workloads.kernels --report PATH: the Triton kernel checks, as JUnit."""
from __future__ import annotations

import functools
import sys
import time

from forkflow.errors import UserError
from forkflow.workloads.device import (
    detect,
    require_packages,
    use_interpreter_without_gpu,
)
from forkflow.workloads.junit import CaseResult
from forkflow.workloads.kernels import SPECS, WORKLOAD, Spec
from forkflow.workloads.l1 import finish, parse_args, run_check, selected


def run_specs(specs: list[Spec], seed: int = 0) -> tuple[list[CaseResult], object]:
    """Run `specs` on this machine's device (the interpreter when there is no GPU)."""
    use_interpreter_without_gpu()
    import torch

    from forkflow.workloads.kernels.cases import BUILDERS

    dev = detect()
    results = []
    for i, spec in enumerate(specs):
        gen = torch.Generator().manual_seed(seed * 1000 + i)
        results.append(run_check(f"kernels.{spec.kernel}", spec.id, spec.dtype, dev,
                                 functools.partial(BUILDERS[spec.kernel], spec, dev, gen),
                                 tolerance=spec.tolerance))
    return results, dev


def main(argv: list[str] | None = None) -> int:
    args = parse_args("python -m forkflow.workloads.kernels", argv)
    ids = selected([s.id for s in SPECS], args.only)
    if args.list:
        print("\n".join(ids))
        return 0
    try:
        require_packages(WORKLOAD.requires, "the kernels workload")
        if not ids:
            raise UserError(f"no check matches {args.only!r}; see --list")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results, dev = run_specs([s for s in SPECS if s.id in ids], args.seed)
    return finish("kernels", results, args.report, dev, started)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
