"""Compare a kernel's output with a PyTorch reference, with a tolerance that fits the dtype."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True, slots=True)
class Tolerance:
    """Elementwise |out - ref| <= atol + rtol * |ref|, and a bound on the relative norm error."""

    atol: float
    rtol: float
    rel_norm: float


# Output precision is what limits agreement with a float64 reference.  fp32 dots run as tf32 on
# GPUs (Triton's default), ~3e-4 relative; fp16 keeps 11 bits; bf16 8; fp8 e4m3 4.
TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(atol=1e-3, rtol=5e-3, rel_norm=2e-3),
    # fp32 operands of tl.dot run as tf32 on GPUs (10-bit mantissa): a length-K dot of O(1)
    # values is off by ~1e-3 * sqrt(K) absolute; seen 0.0096 at K=64 on an H200.
    "tf32": Tolerance(atol=3e-2, rtol=2e-2, rel_norm=3e-3),
    "fp16": Tolerance(atol=2e-3, rtol=1e-2, rel_norm=5e-3),
    "bf16": Tolerance(atol=1e-2, rtol=4e-2, rel_norm=2e-2),
    "fp8": Tolerance(atol=5e-2, rtol=1.5e-1, rel_norm=8e-2),
}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Whether an output matched, and where and by how much it did not."""

    ok: bool
    message: str


def _where(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for dim in reversed(shape):
        out.append(flat_index % dim if dim else 0)
        flat_index = flat_index // dim if dim else 0
    return tuple(reversed(out))


def nonfinite_report(out: torch.Tensor, limit: int = 3) -> str | None:
    """None when every element is finite; else how many are NaN or infinite, and where."""
    import torch

    bad = ~torch.isfinite(out.detach().float().cpu())
    n = int(bad.sum())
    if n == 0:
        return None
    flat = out.detach().float().cpu().reshape(-1)
    idx = torch.nonzero(bad.reshape(-1)).reshape(-1)[:limit].tolist()
    shape = tuple(out.shape)
    where = ", ".join(f"{flat[i].item()} at {list(_where(int(i), shape))}" for i in idx)
    more = f" (first {limit})" if n > limit else ""
    return f"{n} non-finite value(s) of {out.numel()} in the output: {where}{more}"


def compare(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> CheckResult:
    """Check `out` against a higher-precision `ref`: shapes, NaN/inf, elementwise and norm error."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(False, f"shape {tuple(out.shape)} but the reference has {tuple(ref.shape)}")
    bad = nonfinite_report(out)
    if bad:
        return CheckResult(False, bad)
    o = out.detach().cpu().double()
    r = ref.detach().cpu().double()
    err = (o - r).abs()
    limit = tol.atol + tol.rtol * r.abs()
    excess = err - limit
    worst = int(torch.argmax(excess).item()) if excess.numel() else 0
    max_err = float(err.max()) if err.numel() else 0.0
    rnorm = float(torch.linalg.vector_norm(r))
    rel = float(torch.linalg.vector_norm(o - r)) / rnorm if rnorm > 0 else max_err
    w = list(_where(worst, tuple(out.shape)))
    if excess.numel() and float(excess.reshape(-1)[worst]) > 0:
        n = int((excess > 0).sum())
        return CheckResult(False, (
            f"{n} element(s) outside atol={tol.atol:g} rtol={tol.rtol:g}; worst at {w}: "
            f"got {o.reshape(-1)[worst].item():.6g}, want {r.reshape(-1)[worst].item():.6g}; "
            f"relative norm error {rel:.3g}"))
    if not math.isfinite(rel) or rel > tol.rel_norm:
        return CheckResult(False, f"relative norm error {rel:.3g} > {tol.rel_norm:g}")
    return CheckResult(True, f"max abs error {max_err:.3g}, relative norm error {rel:.3g}")


def is_out_of_memory(exc: BaseException) -> bool:
    """True for CUDA and CPU allocator failures (torch raises both kinds)."""
    import torch

    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower()
                                              or "can't allocate memory" in text
                                              or "not enough memory" in text)
