"""Driving mesh vertices from the query points: each vertex follows the average deformation of
its K nearest query points, so a dense mesh costs little more than the query set. No bpy use."""

from __future__ import annotations

import torch

from .heads import HEADS, DisplacementHead, DualQuaternionHead


def nearest(vertices: torch.Tensor, queries: torch.Tensor, k: int, chunk: int = 65536) -> torch.Tensor:
    """Indices (V, k) of each vertex's k nearest query points, in chunks to bound memory."""
    k = min(k, len(queries))
    out = [torch.cdist(vertices[s : s + chunk], queries).topk(k, largest=False).indices
           for s in range(0, len(vertices), chunk)]
    return torch.cat(out)


def drive(vertices: torch.Tensor, deformation: torch.Tensor, index: torch.Tensor,
          head: DualQuaternionHead | DisplacementHead = HEADS["dualquat"]) -> torch.Tensor:
    """Deformed vertex positions (V, 3) from per-query deformations (M, 8|3) and K-nearest indices (V, K)."""
    neighbours = deformation.index_select(0, index.reshape(-1)).view(*index.shape, deformation.shape[-1])  # (V, K, 8|3)
    return head.apply(head.blend(neighbours), vertices)
