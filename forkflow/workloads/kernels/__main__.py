"""python -m forkflow.workloads.kernels --report PATH: the Triton kernel checks, as JUnit."""
from __future__ import annotations

import functools
import sys

from forkflow.workloads.device import detect, use_interpreter_without_gpu
from forkflow.workloads.junit import CaseResult
from forkflow.workloads.kernels import SPECS, WORKLOAD, Spec
from forkflow.workloads.l1 import pack_main, run_check


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
    return pack_main("kernels", "kernels", argv, [s.id for s in SPECS], WORKLOAD.requires,
                     lambda ids, seed: run_specs([s for s in SPECS if s.id in ids], seed))  # type: ignore[arg-type, return-value]


if __name__ == "__main__":
    sys.exit(main())
