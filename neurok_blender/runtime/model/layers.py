"""Shared transformer blocks: Fourier point embedding, attention, MLP. No bpy use."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import nn
from torch.nn import functional as F


class FourierEmbed(nn.Module):
    """Positions → [x, sin(2^k π x), cos(2^k π x)] → a linear map to ``width`` (3DShape2VecSet style)."""

    def __init__(self, freqs: int, extra: int, width: int) -> None:
        super().__init__()
        self.register_buffer("scales", (2.0 ** torch.arange(freqs)) * math.pi, persistent=False)
        self.proj = nn.Linear(3 + 6 * freqs + extra, width)

    def forward(self, xyz: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        angles = xyz[..., None] * self.scales  # (B, N, 3, F)
        parts = [xyz, angles.sin().flatten(-2), angles.cos().flatten(-2)]
        if extra is not None:
            parts.append(extra)
        return self.proj(torch.cat(parts, dim=-1))  # (B, N, W)


_EXPLICIT_ATTENTION = False


@contextlib.contextmanager
def explicit_attention() -> Iterator[None]:
    """Within this block attention is written out (softmax(q kᵀ / √d) v) instead of the fused kernel,
    which has no forward-mode derivative on the CPU; the dynamics need forward mode (jvp, jacfwd)."""
    global _EXPLICIT_ATTENTION
    previous, _EXPLICIT_ATTENTION = _EXPLICIT_ATTENTION, True
    try:
        yield
    finally:
        _EXPLICIT_ATTENTION = previous


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    if not _EXPLICIT_ATTENTION:
        return F.scaled_dot_product_attention(q, k, v)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v


def is_transformed(t: torch.Tensor) -> bool:
    """Whether ``t`` is wrapped by a torch.func transform (jacfwd, jvp, vmap): a derivative is being taken."""
    return torch._C._functorch.is_functorch_wrapped_tensor(t)


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm whose forward-mode derivatives are right to second order. The fused kernel's JVP rule is
    wrong when it is itself differentiated (pytorch/pytorch#196700), and the dynamics' Coriolis term is a nested
    JVP through the decoder (docs/decisions.md#layernorm-jvp). Inside ``explicit_attention`` a tensor that
    a torch.func transform wraps takes the same normalization written out in elementary operations; everything
    else (training, plain evaluations, traces) keeps the fused kernel. Same parameters, same checkpoints."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (_EXPLICIT_ATTENTION and is_transformed(x)):
            return super().forward(x)
        dims = tuple(range(-len(self.normalized_shape), 0))
        centred = x - x.mean(dims, keepdim=True)
        y = centred * torch.rsqrt((centred * centred).mean(dims, keepdim=True) + self.eps)
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y


class Attention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.kv, self.out = nn.Linear(width, width), nn.Linear(width, 2 * width), nn.Linear(width, width)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        return self.attend(self.q(x), context)

    def attend(self, projected: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """Attention from queries already through ``self.q`` (1 or B, N, W; one set broadcasts over the batch)."""
        b, n, w = context.shape[0], projected.shape[1], projected.shape[2]
        q = projected.reshape(-1, n, self.heads, w // self.heads).transpose(1, 2)  # (1 or B, H, N, W/H)
        q = q.expand(b, -1, -1, -1)  # a broadcast view: one query set is not copied B times
        k, v = self.kv(context).view(b, context.shape[1], 2, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = attention(q, k, v)  # (B, H, N, W/H)
        return self.out(y.transpose(1, 2).reshape(b, n, w))


class MLP(nn.Sequential):
    def __init__(self, width: int, hidden: int | None = None, out: int | None = None) -> None:
        super().__init__(nn.Linear(width, hidden or 4 * width), nn.GELU(), nn.Linear(hidden or 4 * width, out or width))


class Block(nn.Module):
    """Pre-norm attention (self- or cross-) plus MLP, with residuals."""

    def __init__(self, width: int, heads: int, cross: bool = False) -> None:
        super().__init__()
        self.norm_x, self.norm_c = LayerNorm(width), LayerNorm(width) if cross else None
        self.attn, self.norm_mlp, self.mlp = Attention(width, heads), LayerNorm(width), MLP(width)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        if self.norm_c is not None:
            return self.forward_prepared(self.prepare(x), context)
        h = self.norm_x(x)
        x = x + self.attn(h, h)
        return x + self.mlp(self.norm_mlp(x))

    def prepare(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A cross block's work on its queries ``x`` alone (1 or B, N, W): x and its normalized, projected queries."""
        return x, self.attn.q(self.norm_x(x))

    def forward_prepared(self, prepared: tuple[torch.Tensor, torch.Tensor], context: torch.Tensor) -> torch.Tensor:
        """A cross block's ``forward(x, context)`` with ``prepared = prepare(x)``, which fixed queries reuse."""
        x, projected = prepared
        x = x + self.attn.attend(projected, self.norm_c(context))
        return x + self.mlp(self.norm_mlp(x))


class PerceiverEncoder(nn.Module):
    """Learnable latent tokens cross-attend to any number of input points, then self-attend."""

    def __init__(self, width: int, heads: int, tokens: int, layers: int) -> None:
        super().__init__()
        self.tokens = nn.Parameter(torch.randn(tokens, width) * 0.02)
        self.cross = Block(width, heads, cross=True)
        self.layers = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = LayerNorm(width)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        x = self.cross(self.tokens.expand(points.shape[0], -1, -1), points)  # (B, L, W)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)
