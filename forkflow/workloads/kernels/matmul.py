"""Triton matmul (tutorial-style, grouped tile order, fp32 accumulation) in fp32/fp16/bf16/fp8."""
# mypy: disable-error-code="untyped-decorator,no-untyped-def"
# (the bodies of @triton.jit / @helion.kernel functions take untyped kernel arguments)
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl


@dataclass(frozen=True, slots=True)
class TileConfig:
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3

    def triton_config(self) -> Any:
        return triton.Config({"BLOCK_M": self.block_m, "BLOCK_N": self.block_n,
                              "BLOCK_K": self.block_k, "GROUP_M": self.group_m},
                             num_warps=self.num_warps, num_stages=self.num_stages)


# Small tiles keep the interpreter quick; the GPU sweep autotunes over TUNE_CONFIGS instead.
SMALL = TileConfig(32, 32, 32, group_m=4)

# Hopper-sized tiles for large problems and narrow ones for decode shapes (M <= 64).
TUNE_CONFIGS: tuple[TileConfig, ...] = (
    TileConfig(128, 256, 64, 8, num_warps=8, num_stages=3),
    TileConfig(256, 128, 64, 8, num_warps=8, num_stages=3),
    TileConfig(128, 128, 64, 8, num_warps=8, num_stages=4),
    TileConfig(128, 128, 64, 8, num_warps=4, num_stages=4),
    TileConfig(128, 256, 128, 8, num_warps=8, num_stages=2),
    TileConfig(64, 128, 64, 8, num_warps=4, num_stages=4),
)
DECODE_CONFIGS: tuple[TileConfig, ...] = (
    TileConfig(16, 64, 256, 1, num_warps=4, num_stages=4),
    TileConfig(16, 128, 128, 1, num_warps=4, num_stages=4),
    TileConfig(32, 64, 128, 1, num_warps=4, num_stages=5),
    TileConfig(64, 64, 128, 1, num_warps=4, num_stages=4),
    TileConfig(16, 32, 512, 1, num_warps=4, num_stages=3),
)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    # Rows/columns past the edge wrap around (their results are masked at the store).
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def _prune(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
    # Decode shapes (few rows) get narrow tiles, large shapes Hopper-sized ones.
    small = named_args["M"] <= 64
    keep = [c for c in configs if (c.kwargs["BLOCK_M"] <= 64) == small]
    return keep or configs


matmul_tuned = triton.autotune(
    configs=[c.triton_config() for c in TUNE_CONFIGS + DECODE_CONFIGS],
    key=["M", "N", "K"], prune_configs_by={"early_config_prune": _prune},
)(matmul_kernel)


def matmul(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None,
           config: TileConfig | None = SMALL, c: torch.Tensor | None = None) -> torch.Tensor:
    """a @ b with the Triton kernel; `config=None` autotunes (GPU only)."""
    assert a.shape[1] == b.shape[0], (tuple(a.shape), tuple(b.shape))
    M, K = a.shape
    N = b.shape[1]
    if c is None:
        c = torch.empty((M, N), device=a.device, dtype=out_dtype or a.dtype)
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            c.stride(0), c.stride(1))
    if config is None:
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
        matmul_tuned[grid](*args)
    else:
        grid1 = (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n),)
        matmul_kernel[grid1](*args, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                             BLOCK_K=config.block_k, GROUP_M=config.group_m,
                             num_warps=config.num_warps, num_stages=config.num_stages)
    return c
