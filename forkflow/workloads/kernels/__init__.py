"""L1 kernel correctness: Triton kernels checked against PyTorch references (TRITON_INTERPRET=1 on CPU).

The checks are data (SPECS): the same list on every machine, so the JUnit inventory never
shrinks silently; a check the hardware cannot run is reported as skipped, with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass

from forkflow.workloads import ReportFormat, Tier, Workload


@dataclass(frozen=True, slots=True)
class Spec:
    """One correctness check: a kernel, a dtype and a problem shape."""

    kernel: str
    dtype: str
    shape: tuple[int, ...]
    variant: str = ""

    @property
    def tolerance(self) -> str:
        """The tolerance to use: fp32 operands of tl.dot are tf32 on GPUs."""
        return "tf32" if self.dtype == "fp32" and self.kernel in DOT_KERNELS else self.dtype

    @property
    def id(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        extra = f"-{self.variant}" if self.variant else ""
        return f"{self.kernel}[{self.dtype}-{dims}{extra}]"


DOT_KERNELS = frozenset({"matmul", "flash_attention"})

# Shapes stay small: the whole pack runs in Triton's interpreter on 2 CPU cores in CI.
SPECS: tuple[Spec, ...] = (
    Spec("matmul", "fp32", (128, 96, 64)),
    Spec("matmul", "fp16", (128, 96, 64)),
    Spec("matmul", "fp16", (100, 72, 90), "ragged"),
    Spec("matmul", "bf16", (64, 64, 128)),
    Spec("matmul", "fp8", (64, 64, 64)),
    Spec("softmax", "fp32", (64, 200)),
    Spec("softmax", "fp16", (32, 1000)),
    Spec("softmax", "bf16", (32, 512)),
    Spec("layer_norm", "fp32", (48, 384)),
    Spec("layer_norm", "fp16", (48, 300)),
    Spec("layer_norm", "bf16", (48, 256)),
    Spec("rms_norm", "fp32", (48, 384)),
    Spec("rms_norm", "fp16", (48, 300)),
    Spec("rms_norm", "bf16", (48, 256)),
    Spec("rope", "fp32", (2, 16, 4, 64)),
    Spec("rope", "fp16", (2, 16, 3, 32)),
    Spec("rope", "bf16", (2, 16, 4, 64)),
    Spec("flash_attention", "fp32", (1, 2, 64, 32)),
    Spec("flash_attention", "fp16", (1, 2, 80, 32)),
    Spec("flash_attention", "fp16", (1, 2, 64, 32), "causal"),
    Spec("flash_attention", "bf16", (2, 1, 64, 64), "causal"),
)

WORKLOAD = Workload(
    name="kernels",
    tier=Tier.L1,
    module="kernels",
    report=ReportFormat.JUNIT,
    description="Triton matmul (fp32/fp16/bf16/fp8), softmax, layer norm, RMSNorm, RoPE and "
                "flash-attention forward against PyTorch references; CPU via TRITON_INTERPRET=1",
    summary="Triton kernels vs PyTorch",
    needs_gpu=False,
    resources=(("cpus", 2), ("gpus", 0)),
    expect_tests=len(SPECS),
    timeout="10m",
    paths=("python/**", "lib/**", "include/**", "third_party/**"),
)
