"""MeshInput: the base mesh of one simulation, checked once, on the receiving side (worker or SDK). No bpy use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError

MAX_COORDINATE = 1e9  # Blender clamps an infinite coordinate to ±3.4e38; anything this far out is corrupt


@dataclass(frozen=True)
class MeshInput:
    """Vertices (V, 3) float64 in the object's local space, triangles (F, 3) int64 (empty for a point cloud),
    pin weights (V,) in [0, 1]. Build it with ``from_arrays``, which converts and validates. ``scene`` carries
    the arrays of the scene around it (a ``dynamics.scene.SceneInput``: colliders, the scene track), or None."""

    vertices: np.ndarray
    triangles: np.ndarray
    pin_weights: np.ndarray
    name: str = ""
    scene: Any = None

    @classmethod
    def from_arrays(cls, vertices, triangles=None, pin_weights=None, name: str = "", scene: Any = None) -> MeshInput:
        v = np.asarray(vertices, dtype=np.float64)
        t = np.zeros((0, 3), np.int64) if triangles is None else np.asarray(triangles)
        w = np.zeros(len(v) if v.ndim else 0) if pin_weights is None else np.asarray(pin_weights, dtype=np.float64)
        if t.size and not np.issubdtype(t.dtype, np.integer):
            raise InputError(f"triangles must be integer vertex indices, got {t.dtype}")
        return cls(v, t.astype(np.int64).reshape(-1, 3) if t.size else np.zeros((0, 3), np.int64), w, name, scene)

    def __post_init__(self) -> None:
        v, t, w = self.vertices, self.triangles, self.pin_weights
        who = f"'{self.name}'" if self.name else "the mesh"
        if v.ndim != 2 or v.shape[1] != 3 or len(v) == 0:
            raise InputError(f"{who} has no vertices (expected a non-empty (V, 3) array, got shape {v.shape})")
        if not np.isfinite(v).all() or np.abs(v).max() > MAX_COORDINATE:
            raise InputError(f"{who} has NaN or infinite vertex coordinates (or ones beyond ±{MAX_COORDINATE:.0e})")
        if t.size and (t.ndim != 2 or t.shape[1] != 3 or t.min() < 0 or t.max() >= len(v)):
            raise InputError(f"{who}: triangles must be a (F, 3) array of valid vertex indices")
        if w.shape != (len(v),):
            raise InputError(f"{who}: pin weights must have one value per vertex ({len(v)}), got shape {w.shape}")
        if not np.isfinite(w).all() or w.min() < 0 or w.max() > 1:
            raise InputError(f"{who}: pin weights must be finite and between 0 and 1")
        if not float(np.ptp(v, axis=0).max()) > 1e-9:
            raise InputError(f"{who} has zero size (all vertices in one point); nothing to simulate")

    @property
    def has_surface(self) -> bool:
        """True when the triangles span some area (otherwise the mesh is treated as a point cloud)."""
        if not len(self.triangles):
            return False
        v, t = self.vertices, self.triangles
        return float(np.linalg.norm(np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]), axis=1).sum()) > 0
