"""The small pre-norm transformer block the L2 workloads train and compile (torch imported on call)."""
from __future__ import annotations

from typing import Any


def build_block(d: int, heads: int) -> Any:
    """LayerNorm -> QKV -> causal attention -> projection, then LayerNorm -> MLP (4d, GELU), each residual.

    Submodules are created in the order ln1, ln2, qkv, proj, mlp: under one seed the same weights.
    """
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, heads, d // heads).unbind(2)
            att = nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
            return x + self.mlp(self.ln2(x))  # type: ignore[no-any-return, unused-ignore]

    return Block()
