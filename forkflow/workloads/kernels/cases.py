"""Build inputs for each Spec, run its Triton kernel and its PyTorch reference.

Import this module only after `device.use_interpreter_without_gpu()`: @triton.jit reads
TRITON_INTERPRET when the kernels are defined.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from forkflow.workloads.device import DeviceInfo, torch_dtype
from forkflow.workloads.kernels import Spec, attention, matmul, norms, rope, softmax

Pair = tuple[torch.Tensor, torch.Tensor]  # (kernel output, float64 reference)


def _randn(gen: torch.Generator, shape: tuple[int, ...], dtype: str, dev: DeviceInfo,
           scale: float = 1.0) -> torch.Tensor:
    device = torch.device(dev.torch_device)
    if device.type == "cpu":
        t = torch.randn(shape, generator=gen, dtype=torch.float32) * scale
        return t.to(torch_dtype(dtype))
    # on a GPU, draw on the GPU: a shape too large for it is then a CUDA out-of-memory error,
    # never a host allocation of the same size (which the host's OOM killer answers)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    on_dev = torch.Generator(device=device).manual_seed(seed)
    t = torch.randn(shape, generator=on_dev, dtype=torch.float32, device=device) * scale
    return t.to(torch_dtype(dtype))


def _matmul(spec: Spec, dev: DeviceInfo, gen: torch.Generator) -> Pair:
    M, N, K = spec.shape
    if spec.dtype == "fp8":
        # fp8 operands, bf16 output; B is K-major as Hopper's fp8 tensor-core path wants.
        a = _randn(gen, (M, K), "fp8", dev, 0.5)
        b = _randn(gen, (N, K), "fp8", dev, 0.5).T
        out = matmul.matmul(a, b, out_dtype=torch.bfloat16)
        ref = a.cpu().double() @ b.cpu().double()
        return out, ref
    a = _randn(gen, (M, K), spec.dtype, dev)
    b = _randn(gen, (K, N), spec.dtype, dev)
    return matmul.matmul(a, b), a.cpu().double() @ b.cpu().double()


def _softmax(spec: Spec, dev: DeviceInfo, gen: torch.Generator) -> Pair:
    x = _randn(gen, spec.shape, spec.dtype, dev, 3.0)
    return softmax.softmax(x), softmax.softmax_ref(x.cpu())


def _layer_norm(spec: Spec, dev: DeviceInfo, gen: torch.Generator) -> Pair:
    n = spec.shape[-1]
    x = _randn(gen, spec.shape, spec.dtype, dev, 2.0)
    w = _randn(gen, (n,), spec.dtype, dev)
    b = _randn(gen, (n,), spec.dtype, dev)
    return norms.layer_norm(x, w, b), norms.layer_norm_ref(x.cpu(), w.cpu(), b.cpu())


def _rms_norm(spec: Spec, dev: DeviceInfo, gen: torch.Generator) -> Pair:
    x = _randn(gen, spec.shape, spec.dtype, dev, 2.0)
    w = _randn(gen, (spec.shape[-1],), spec.dtype, dev)
    return norms.rms_norm(x, w), norms.rms_norm_ref(x.cpu(), w.cpu())


def _rope(spec: Spec, dev: DeviceInfo, gen: torch.Generator) -> Pair:
    _, S, _, D = spec.shape
    x = _randn(gen, spec.shape, spec.dtype, dev)
    cos, sin = rope.rope_tables(S, D, dev.torch_device)
    return rope.rope(x, cos, sin), rope.rope_ref(x.cpu(), cos.cpu(), sin.cpu())


def _attention(spec: Spec, dev: DeviceInfo, gen: torch.Generator) -> Pair:
    q, k, v = (_randn(gen, spec.shape, spec.dtype, dev) for _ in range(3))
    causal = spec.variant == "causal"
    out = attention.flash_attention(q, k, v, causal=causal)
    return out, attention.attention_ref(q.cpu(), k.cpu(), v.cpu(), causal=causal)


BUILDERS: dict[str, Callable[[Spec, DeviceInfo, torch.Generator], Pair]] = {
    "matmul": _matmul,
    "softmax": _softmax,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "rope": _rope,
    "flash_attention": _attention,
}
