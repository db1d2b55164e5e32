"""Rotary position embedding (the half-rotation form) on x of shape (batch, seq, heads, dim)."""
# mypy: disable-error-code="untyped-decorator,no-untyped-def"
# (the bodies of @triton.jit / @helion.kernel functions take untyped kernel arguments)
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, S, H,
                stride_b, stride_s, stride_h, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    pid = tl.program_id(0)  # one program per (batch, position)
    b = pid // S
    s = pid % S
    h = tl.arange(0, BLOCK_H)[:, None]
    d = tl.arange(0, HALF)[None, :]
    mask = h < H
    base = b * stride_b + s * stride_s + h * stride_h
    x1 = tl.load(x_ptr + base + d, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + HALF + d, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + s * HALF + d).to(tl.float32)
    sn = tl.load(sin_ptr + s * HALF + d).to(tl.float32)
    ty = out_ptr.dtype.element_ty
    tl.store(out_ptr + base + d, (x1 * c - x2 * sn).to(ty), mask=mask)
    tl.store(out_ptr + base + HALF + d, (x2 * c + x1 * sn).to(ty), mask=mask)


def rope_tables(seq: int, dim: int, device: str, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    ang = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    return ang.cos().float().to(device), ang.sin().float().to(device)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    B, S, H, D = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    rope_kernel[(B * S,)](x, cos, sin, out, S, H, x.stride(0), x.stride(1), x.stride(2),
                          HALF=D // 2, BLOCK_H=triton.next_power_of_2(H))
    return out


def rope_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    xd = x.double()
    half = x.shape[-1] // 2
    x1, x2 = xd[..., :half], xd[..., half:]
    c = cos.double()[None, :, None, :]
    s = sin.double()[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
