"""Contact for the cloth layer, at every vertex and every substep: a rigid collider's signed distance sampled once on
a grid in its own frame and carried with it (a few gathers per lookup), a deforming collider's by closest points on
triangles picked once per frame, and the ground plane; positional friction against each surface's own motion. No bpy
use."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..scene import MeshSDF

GRID_CELLS = 48  # along the collider's longest side: the grid's spacing, against its surface's detail
GRID_NODES = 160_000
COARSE = 4  # the narrow band's first pass takes every 4th node
BAND_CANDIDATES = 24  # nearest triangles (by centroid) a grid node is tested against
RIGID_TOLERANCE = 1e-5  # of the collider's size: frames that differ from a rigid motion by more deform it
NEAR_TRIANGLES = 8  # a deforming collider: the nearest triangles each vertex is tested against through a frame


def lengths(a: torch.Tensor) -> torch.Tensor:
    """The length of each column of a (3, P): summed squares (torch's norm over a leading axis is many times slower)."""
    return (a * a).sum(0).sqrt_()


def rigid_motion(frames: np.ndarray) -> np.ndarray | None:
    """(T, 4, 4) transforms carrying the first frame's vertices onto each frame's (Kabsch), or None when some frame is
    not a rigid motion of the first (a deforming collider). ``frames``: (T, V, 3)."""
    rest = frames[0]
    centre = rest.mean(0)
    size = float(np.linalg.norm(np.ptp(rest, axis=0))) + 1e-12
    out = np.tile(np.eye(4), (len(frames), 1, 1))
    for t in range(1, len(frames)):
        now = frames[t]
        c = now.mean(0)
        u, _, vt = np.linalg.svd((now - c).T @ (rest - centre))
        r = u @ np.diag([1.0, 1.0, np.sign(np.linalg.det(u @ vt))]) @ vt
        moved = (rest - centre) @ r.T + c
        if np.abs(moved - now).max() > RIGID_TOLERANCE * size:
            return None
        out[t, :3, :3], out[t, :3, 3] = r, c - r @ centre
    return out


class GridSDF:
    """Signed distance (negative inside) of a triangle mesh at rest, on a regular grid of nodes, trilinearly
    interpolated; exact at the nodes (closest points with pseudonormals), within a cell's curvature error between
    them."""

    def __init__(self, vertices: np.ndarray, triangles: np.ndarray, margin: float, dtype: torch.dtype,
                 device: str) -> None:
        lo, hi = vertices.min(0) - margin, vertices.max(0) + margin
        cell = max(float((hi - lo).max()) / GRID_CELLS, float(np.prod(hi - lo) / GRID_NODES) ** (1 / 3))
        shape = np.maximum(np.ceil((hi - lo) / cell).astype(int) + 1, 2)
        axes = [lo[k] + cell * np.arange(shape[k]) for k in range(3)]
        mesh = MeshSDF(triangles, len(vertices), "cpu")
        mesh.update(torch.as_tensor(vertices, dtype=torch.float64))
        values = _narrow_band(mesh, axes, (COARSE + 2) * cell)  # the coarse estimate errs by under a coarse cell
        self.values = values.to(dtype=dtype, device=device)
        self.lo = torch.as_tensor(lo, dtype=dtype, device=device)[:, None]
        self.cell = cell
        self.flat = self.values.reshape(-1)
        self.top = torch.as_tensor(shape - 1, dtype=dtype, device=device)[:, None]
        self.strides = torch.as_tensor([shape[1] * shape[2], shape[2], 1], dtype=dtype, device=device)[:, None]
        corner = np.array([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)])  # (8, 3)
        self.bits = torch.as_tensor(corner.T[:, :, None], device=device)  # (3, 8, 1): each corner's side per axis
        self.offsets = torch.as_tensor(corner @ np.array([shape[1] * shape[2], shape[2], 1]), device=device)
        self.signs = torch.as_tensor(2.0 * corner.T[:, :, None] - 1.0, dtype=dtype, device=device)

    def query(self, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(distance (P,), unit gradient (3, P)) at points p (3, P) in the collider's rest frame: the eight corners
        of each point's cell in one gather, their trilinear weights and the weights' derivatives in one product. A
        point outside the grid reads its nearest grid point's distance plus how far it is from there."""
        u = (p - self.lo) / self.cell
        inside = torch.minimum(u.clamp_min(0.0), self.top)
        outside = lengths(u - inside) * self.cell
        base = torch.minimum(inside.floor(), self.top - 1)
        f = inside - base  # (3, P)
        cell = (base * self.strides).sum(0).long()  # (P,)
        corners = self.flat.index_select(0, (self.offsets[:, None] + cell).reshape(-1)).view(1, 8, -1)  # (1, 8, P)
        lerp = torch.stack([1 - f, f], 1)  # (3, 2, P): each axis's weights for its low and high corner
        w = lerp.gather(1, self.bits.expand(3, 8, f.shape[1]))  # (3, 8, P)
        sign = self.signs  # (3, 8, 1): d(weight)/d(fraction) of each corner along each axis, ±1
        rows = torch.stack([w[0] * w[1] * w[2], sign[0] * w[1] * w[2], w[0] * sign[1] * w[2],
                            w[0] * w[1] * sign[2]])  # (4, 8, P)
        out = (rows * corners).sum(1)  # (4, P): the value and its three derivatives
        g = out[1:]
        return out[0] + outside, g / lengths(g).clamp_min(1e-12)


def _exact(mesh: MeshSDF, points: np.ndarray) -> torch.Tensor:
    p = torch.as_tensor(points, dtype=torch.float64)
    return torch.cat([mesh.query(chunk, mesh.candidates(chunk)[:, :BAND_CANDIDATES])[0] for chunk in torch.split(p, 8192)]) \
        if len(p) else torch.zeros(0, dtype=torch.float64)


def _narrow_band(mesh: MeshSDF, axes: list[np.ndarray], band: float) -> torch.Tensor:
    """The signed distances at every node of the grid on ``axes``: exact on every COARSE-th node, then exact on the
    nodes whose coarse estimate lies within ``band`` of the surface, the coarse estimate elsewhere (far from the
    surface only its sign and rough size matter)."""
    coarse_axes = [a[::COARSE] if (len(a) - 1) % COARSE == 0 else np.append(a[::COARSE], a[-1]) for a in axes]
    coarse = _exact(mesh, np.stack(np.meshgrid(*coarse_axes, indexing="ij"), -1).reshape(-1, 3))
    coarse = coarse.reshape(1, 1, *[len(a) for a in coarse_axes]).permute(0, 1, 4, 3, 2)  # (1, 1, z, y, x)
    nodes = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    lo, hi = np.array([a[0] for a in axes]), np.array([a[-1] for a in axes])
    where = torch.as_tensor(2 * (nodes - lo) / np.maximum(hi - lo, 1e-300) - 1, dtype=torch.float64)
    estimate = torch.nn.functional.grid_sample(coarse, where.reshape(1, 1, 1, -1, 3), align_corners=True)
    estimate = estimate.reshape(-1)  # the coarse grid's nodes are not evenly spaced at its last one: close enough
    near = torch.nonzero(estimate.abs() < band).reshape(-1)
    estimate[near] = _exact(mesh, nodes[near.numpy()])
    return estimate.reshape(*[len(a) for a in axes])


class Planes:
    """The contacts of one surface through one frame, as half-spaces: for each vertex that may reach it (``index``),
    the surface point nearest it and the normal there (3, P), moving linearly with the surface to the frame's end. A
    plane stands in for the surface while a vertex travels little (on a ball of radius R it errs by about
    travel² / 2R); ``refresh`` places new ones where the vertices have got to (``locate``: points (3, P) and the frame
    fraction s ↦ the nearest surface points and normals at s, and at the frame's end or None for a still surface)."""

    def __init__(self, index: torch.Tensor, locate, distance: float, friction: float) -> None:
        self.index, self.locate, self.distance, self.friction = index, locate, distance, friction

    def refresh(self, p: torch.Tensor, s: float) -> None:
        if not len(self.index):
            return
        (self.c, self.n), end = self.locate(p.index_select(1, self.index), s)
        self.s = s
        self.moving = end is not None and s < 1.0
        if self.moving:
            self.dc, self.dn = (end[0] - self.c) / (1.0 - s), (end[1] - self.n) / (1.0 - s)

    def resolve(self, p: torch.Tensor, before: torch.Tensor, s: float, s_before: float) -> torch.Tensor:
        """Positions p (3, V) with those that reach past a plane pushed back out to ``distance``, their slide along it
        since ``before`` (relative to the surface's own motion) cut by friction: held while it is under friction × the
        push, else shortened by that much (Coulomb, positionally)."""
        if not len(self.index):
            return p
        c, n = (self.c + (s - self.s) * self.dc, self.n + (s - self.s) * self.dn) if self.moving else (self.c, self.n)
        q = p.index_select(1, self.index)
        depth = (self.distance - ((q - c) * n).sum(0)).clamp_min(0.0)
        q = q + depth * n
        if self.friction > 0:
            slide = q - before.index_select(1, self.index)
            if self.moving:
                slide = slide - (s - s_before) * self.dc
            slide = slide - (slide * n).sum(0) * n
            length = lengths(slide).clamp_min(1e-12)
            q = q - (self.friction * depth / length).clamp(max=1.0) * slide
        return p.index_copy(1, self.index, q)


def near(d: torch.Tensor, distance: float, reach: torch.Tensor, max_depth: float) -> torch.Tensor:
    """The vertices a surface at signed distance d may touch within a frame in which each travels up to ``reach``."""
    return torch.nonzero((d < distance + reach) & (d > -max_depth)).reshape(-1)


class RigidCollider:
    """A collider that moves as a whole: its grid, carried by the scene's per-frame transforms."""

    def __init__(self, grid: GridSDF, transforms: np.ndarray, distance: float, friction: float, max_depth: float,
                 dtype: torch.dtype, device: str) -> None:
        self.grid, self.transforms = grid, transforms
        self.distance, self.friction, self.max_depth = distance, friction, max_depth
        self.dtype, self.device = dtype, device
        self.still = bool(np.allclose(transforms, transforms[0]))

    def _matrix(self, f: float) -> torch.Tensor:
        i = min(int(math.floor(f)), len(self.transforms) - 1)
        j, a = min(i + 1, len(self.transforms) - 1), f - math.floor(f)
        m = (1 - a) * self.transforms[i] + a * self.transforms[j]
        u, _, vt = np.linalg.svd(m[:3, :3])  # a blend of rotations, made a rotation again
        m[:3, :3] = u @ vt
        return torch.as_tensor(m, dtype=self.dtype, device=self.device)

    def planes(self, x: torch.Tensor, reach: torch.Tensor, f0: float, f1: float) -> Planes:
        """The half-spaces for the frame from f0 to f1 (frame numbers, fractional) of the vertices at x (3, V) that
        may reach the collider (``reach`` (V,))."""
        m0 = self._matrix(f0)
        m1 = m0 if self.still else self._matrix(f1)
        d, _ = self.grid.query(m0[:3, :3].T @ (x - m0[:3, 3:]))
        index = near(d, self.distance, reach, self.max_depth)

        def locate(points: torch.Tensor, s: float):
            m = m0 if self.still else (1 - s) * m0 + s * m1  # a blend of nearby rotations: close to one
            r, t = m[:3, :3], m[:3, 3:]
            body = r.T @ (points - t)  # (3, P) in the collider's own frame
            dist, normal = self.grid.query(body)
            point = body - dist * normal  # the nearest surface point there
            now = (r @ point + t, r @ normal)
            return now, None if self.still else (m1[:3, :3] @ point + m1[:3, 3:], m1[:3, :3] @ normal)

        out = Planes(index, locate, self.distance, self.friction)
        out.refresh(x, 0.0)
        return out


class DeformingCollider:
    """A collider whose shape changes: closest points on its triangles, at each frame's start and end."""

    def __init__(self, triangles: np.ndarray, vertices_at, distance: float, friction: float, max_depth: float,
                 device: str) -> None:
        self.sdf = MeshSDF(triangles, 0, device)
        self.vertices_at = vertices_at  # frame number ↦ the collider's vertices (W, 3) in the simulation frame
        self.distance, self.friction, self.max_depth = distance, friction, max_depth

    def planes(self, x: torch.Tensor, reach: torch.Tensor, f0: float, f1: float) -> Planes:
        v0, v1 = self.vertices_at(f0), self.vertices_at(f1)
        self.sdf.update(v0)
        rows = x.T
        d, _ = self.sdf.query(rows, self.sdf.candidates(rows))
        index = near(d, self.distance, reach, self.max_depth)
        candidates = self.sdf.candidates(rows[index]) if len(index) else None

        def locate(points: torch.Tensor, s: float):
            self.sdf.update((1 - s) * v0 + s * v1)
            dist, normal = self.sdf.query(points.T, candidates)
            point = points - dist * normal.T
            nearest = candidates[:, 0]  # the triangle under each contact, carried with its corners
            shift = (1 - s) * (v1 - v0)[self.sdf.triangles[nearest]].mean(1).T
            return (point, normal.T), (point + shift, normal.T)

        out = Planes(index, locate, self.distance, self.friction)
        out.refresh(x, 0.0)
        return out


class Ground:
    """The plane n·x = offset."""

    def __init__(self, normal: torch.Tensor, offset: float, distance: float, friction: float) -> None:
        self.normal, self.offset, self.distance, self.friction = normal, offset, distance, friction

    def planes(self, x: torch.Tensor, reach: torch.Tensor, f0: float, f1: float) -> Planes:
        d = self.normal @ x - self.offset
        index = near(d, self.distance, reach, math.inf)
        normal = self.normal[:, None]

        def locate(points: torch.Tensor, s: float):
            point = points - (self.normal @ points - self.offset) * normal
            return (point, normal.expand_as(point)), None

        out = Planes(index, locate, self.distance, self.friction)
        out.refresh(x, 0.0)
        return out
