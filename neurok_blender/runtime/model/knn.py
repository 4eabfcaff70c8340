"""Driving mesh vertices from the query points: each vertex follows a blend of the deformations of its K nearest
query points (equal, or weighted smoothly by distance), so a dense mesh costs little more than the query set.
The model is trained at query points; this interpolation to the mesh happens only at inference. No bpy use."""

from __future__ import annotations

import torch

from .heads import HEADS, DisplacementHead, DualQuaternionHead


def nearest(vertices: torch.Tensor, queries: torch.Tensor, k: int, chunk: int = 65536) -> torch.Tensor:
    """Indices (V, k) of each vertex's k nearest query points, in chunks to bound memory."""
    k = min(k, len(queries))
    out = [torch.cdist(vertices[s : s + chunk], queries).topk(k, largest=False).indices
           for s in range(0, len(vertices), chunk)]
    return torch.cat(out)


def smooth_neighbours(vertices: torch.Tensor, queries: torch.Tensor, k: int,
                      chunk: int = 65536) -> tuple[torch.Tensor, torch.Tensor]:
    """(indices (V, k), weights (V, k)) of each vertex's k nearest query points, the weights a Gaussian of the
    distance that reaches 0 at the (k+1)-th nearest point's distance R: w_j ∝ exp(−(d_j/R)²) − exp(−1), summing
    to 1. A point enters or leaves a vertex's set only at weight 0, so the weights, unlike an equal average of
    the k nearest, change continuously as the vertex moves across the surface: neighbouring vertices that pick
    different query points get no visibly different deformations (docs/decisions.md#drive-neighbours)."""
    k = min(k, len(queries) - 1)
    if k < 1:  # a single query point: everything follows it
        return torch.zeros(len(vertices), 1, dtype=torch.long, device=vertices.device), vertices.new_ones(len(vertices), 1)
    index, weights = [], []
    for s in range(0, len(vertices), chunk):
        d, i = torch.cdist(vertices[s : s + chunk], queries).topk(k + 1, largest=False)
        reach = d[:, k:].clamp_min(1e-12)
        w = (torch.exp(-((d[:, :k] / reach) ** 2)) - torch.exp(d.new_tensor(-1.0))).clamp_min(0.0)
        w[:, 0] += 1e-12  # a vertex equidistant from all k + 1 keeps its nearest
        index.append(i[:, :k])
        weights.append(w / w.sum(1, keepdim=True))
    return torch.cat(index), torch.cat(weights)


def drive(vertices: torch.Tensor, deformation: torch.Tensor, index: torch.Tensor,
          head: DualQuaternionHead | DisplacementHead = HEADS["dualquat"],
          weights: torch.Tensor | None = None) -> torch.Tensor:
    """Deformed vertex positions (V, 3) from per-query deformations (M, 8|3) and K-nearest indices (V, K), blended
    equally or by ``weights`` (V, K) (``smooth_neighbours``; one sparse product)."""
    if weights is not None:
        return head.apply(head.blend_rows(deformation, index, weights.to(deformation.dtype)), vertices)
    neighbours = deformation.index_select(0, index.reshape(-1)).view(*index.shape, deformation.shape[-1])  # (V, K, 8|3)
    return head.apply(head.blend(neighbours), vertices)
