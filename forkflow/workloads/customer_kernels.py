"""L1 customer kernels: a Helion kernel and a torch.compile (Inductor) generated kernel.

Fork teams carry kernels written in layers above Triton; these checks make sure the fork still
compiles and runs them right.  Helion is optional: without it (or with a torch it cannot use)
its checks are skipped with the reason.  On CPU both run through Triton's interpreter (Helion)
and Inductor's C++ backend; on a GPU Inductor emits Triton kernels.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forkflow.workloads import ReportFormat, Tier, Workload
from forkflow.workloads.junit import CaseResult


@dataclass(frozen=True, slots=True)
class CustomerSpec:
    layer: str   # helion | inductor
    kernel: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def id(self) -> str:
        return f"{self.layer}.{self.kernel}[{self.dtype}-{'x'.join(map(str, self.shape))}]"


SPECS: tuple[CustomerSpec, ...] = (
    CustomerSpec("helion", "matmul", "fp16", (64, 96, 128)),
    CustomerSpec("helion", "bias_relu", "fp32", (48, 200)),
    CustomerSpec("inductor", "mlp_gelu", "fp32", (64, 128, 96)),
    CustomerSpec("inductor", "residual_rms_norm", "fp32", (64, 256)),
)

WORKLOAD = Workload(
    name="customer-kernels",
    tier=Tier.L1,
    module="customer_kernels",
    report=ReportFormat.JUNIT,
    description="A Helion matmul and bias+ReLU, and torch.compile (Inductor) generated kernels, "
                "against PyTorch references",
    summary="Helion + Inductor kernels",
    needs_gpu=False,
    expect_tests=len(SPECS),
    timeout="15m",
    paths=("python/**", "lib/**", "include/**", "third_party/**"),
)


def helion_unavailable() -> str | None:
    """Why Helion kernels cannot run here, or None."""
    import importlib.util

    if importlib.util.find_spec("helion") is None:
        return "helion is not installed; pip install helion (or 'forkflow[gpu]') to run these checks"
    try:
        import helion
        import helion.language  # noqa: F401
    except Exception as e:  # noqa: BLE001  (an incompatible helion raises anything at import)
        import torch

        return (f"helion cannot be imported with torch {torch.__version__} "
                f"({type(e).__name__}: {str(e)[:200]}); pip install helion to run these checks")
    return None


def _mlp_gelu(x: Any, w: Any, b: Any) -> Any:
    import torch

    return torch.nn.functional.gelu(x @ w + b) * 0.5


def _residual_rms_norm(x: Any, r: Any, w: Any) -> Any:
    import torch

    h = x + r
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _compiled(fn: Callable[..., Any], *args: Any) -> tuple[Any, str]:
    """Run fn through torch.compile; return its output and which backend wrote the kernel."""
    import torch
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    out, codes = run_and_get_code(torch.compile(fn, backend="inductor", fullgraph=True), *args)
    text = "\n".join(codes)
    if "@triton.jit" in text:
        kind = "triton"
    elif "cpp_fused" in text or "extern \"C\"" in text:
        kind = "cpp"
    else:
        raise AssertionError("torch.compile generated no Inductor kernel for this function")
    return out, kind


def _case(spec: CustomerSpec, dev: Any, gen: Any) -> Any:
    import torch

    from forkflow.workloads.device import torch_dtype

    dt = torch_dtype(spec.dtype)
    where = dev.torch_device

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen).to(dt).to(where)

    if spec.layer == "helion":
        from forkflow.workloads.kernels import helion_kernels
    if spec.layer == "helion" and spec.kernel == "matmul":
        m, n, k = spec.shape
        x, y = randn(m, k), randn(k, n)
        return helion_kernels.matmul(x, y), x.cpu().double() @ y.cpu().double()
    if spec.layer == "helion":
        x, b = randn(*spec.shape), randn(spec.shape[-1])
        return helion_kernels.bias_relu(x, b), torch.relu(x.cpu().double() + b.cpu().double())
    if spec.kernel == "mlp_gelu":
        m, n, k = spec.shape
        x, w, b = randn(m, k), randn(k, n), randn(n)
        out, _ = _compiled(_mlp_gelu, x, w, b)
        return out, _mlp_gelu(x.cpu().double(), w.cpu().double(), b.cpu().double())
    x, r, w = randn(*spec.shape), randn(*spec.shape), randn(spec.shape[-1])
    out, _ = _compiled(_residual_rms_norm, x, r, w)
    return out, _residual_rms_norm(x.cpu().double(), r.cpu().double(), w.cpu().double())


def run_specs(specs: list[CustomerSpec], seed: int = 0) -> tuple[list[CaseResult], Any]:
    from forkflow.workloads.device import detect, use_interpreter_without_gpu

    use_interpreter_without_gpu()
    import torch

    from forkflow.workloads.l1 import run_check

    dev = detect()
    no_helion = helion_unavailable() if any(s.layer == "helion" for s in specs) else None
    results = []
    for i, spec in enumerate(specs):
        gen = torch.Generator().manual_seed(seed * 1000 + i)
        skip = no_helion if spec.layer == "helion" else None
        results.append(run_check(f"customer.{spec.layer}", spec.id, spec.dtype, dev,
                                 functools.partial(_case, spec, dev, gen), skip=skip))
    return results, dev


def main(argv: list[str] | None = None) -> int:
    from forkflow.workloads.l1 import pack_main

    return pack_main("customer-kernels", "customer_kernels", argv, [s.id for s in SPECS],
                     WORKLOAD.requires,
                     lambda ids, seed: run_specs([s for s in SPECS if s.id in ids], seed))


if __name__ == "__main__":
    sys.exit(main())
