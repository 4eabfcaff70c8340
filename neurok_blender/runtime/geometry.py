"""Geometry shared by training and inference: the bounding-box normalization the model is trained under,
surface sampling and per-point features. No bpy use; numpy (and torch tensors where noted) only."""

from __future__ import annotations

from typing import Any

import numpy as np


def bbox_normalizer(points: Any, eps: float = 1e-9) -> tuple[Any, Any]:
    """(centre, scale) that map ``points`` (…, N, 3) into [-1, 1]^3: the bounding-box centre and half the
    largest extent, with keepdims (…, 1, 3) and (…, 1, 1). The one normalization the model sees, in training
    (batched torch tensors) and at inference (numpy arrays): ``(p - centre) / scale``."""
    if isinstance(points, np.ndarray):
        lo, hi = points.min(-2, keepdims=True), points.max(-2, keepdims=True)
        scale = np.maximum((hi - lo).max(-1, keepdims=True) / 2, eps)
    else:  # a torch tensor
        lo, hi = points.amin(-2, keepdim=True), points.amax(-2, keepdim=True)
        scale = ((hi - lo).amax(-1, keepdim=True) / 2).clamp_min(eps)
    return (lo + hi) / 2, scale


def unique_edges(triangles: np.ndarray) -> np.ndarray:
    """(E, 2) the mesh's edges, each once as (low, high), sorted; degenerate ones (a repeated corner) left out.
    One integer key per edge, so the de-duplication is a 1-D sort rather than a sort of rows."""
    tri = np.asarray(triangles, np.int64)
    if not len(tri):
        return np.zeros((0, 2), np.int64)
    e = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
    e = e[e[:, 0] != e[:, 1]]
    base = int(tri.max()) + 1
    keys = np.unique(e[:, 0] * base + e[:, 1])
    return np.stack([keys // base, keys % base], 1)


def face_normals(vertices: np.ndarray, triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unit normals, areas) of the triangles."""
    cross = np.cross(vertices[triangles[:, 1]] - vertices[triangles[:, 0]], vertices[triangles[:, 2]] - vertices[triangles[:, 0]])
    norm = np.linalg.norm(cross, axis=1)
    return cross / np.maximum(norm, 1e-12)[:, None], 0.5 * norm


def sample_surface(vertices: np.ndarray, triangles: np.ndarray, count: int, rng: np.random.Generator):
    """Area-weighted surface samples: (triangle index (N,), barycentric weights (N, 3))."""
    _, area = face_normals(vertices, triangles)
    prob = area / area.sum() if area.sum() > 0 else np.full(len(area), 1 / len(area))
    tri = rng.choice(len(triangles), size=count, p=prob)
    r1, r2 = rng.random(count), rng.random(count)
    s = np.sqrt(r1)
    bary = np.stack([1 - s, s * (1 - r2), s * r2], 1)
    return tri, bary


def interpolate(field: np.ndarray, triangles: np.ndarray, tri: np.ndarray, bary: np.ndarray) -> np.ndarray:
    """A per-vertex field at surface samples; ``field`` may carry leading frame axes (…, V, C)."""
    corners = field[..., triangles[tri], :]  # (..., N, 3, C)
    return np.einsum("...nkc,nk->...nc", corners, bary)


def features(rest: np.ndarray, triangles: np.ndarray, pins: np.ndarray, tri: np.ndarray, bary: np.ndarray) -> np.ndarray:
    """Per-point features of the static shape: position (3), normal (3), pinned flag (1)."""
    normals, _ = face_normals(rest, triangles)
    pinned = interpolate(pins[:, None], triangles, tri, bary)
    return np.concatenate([interpolate(rest, triangles, tri, bary), normals[tri], pinned], axis=1)
