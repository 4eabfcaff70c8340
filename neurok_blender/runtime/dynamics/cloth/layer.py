"""The full-resolution cloth layer: per-vertex positions and velocities that persist between frames, advanced each
frame by substeps of position-based dynamics (XPBD with hard edges, Macklin et al. 2016/2019: one Gauss–Seidel sweep
over independent edge sets per substep), quadratic dihedral bending (Bergou et al. 2006), contact and friction at every
vertex, pins, gravity, wind and force fields. Optionally guided by the reduced motion (``advance``'s guide). No bpy
use."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ... import sparse
from . import topology as topo
from .contact import lengths

CONTACT_REFRESH = 5  # substeps between new contact planes (a vertex sliding over a collider's edge needs the next face)
CONTACT_REACH = 2.0  # a vertex is tested against a surface it could reach in this many frames' travel (or edges)


@dataclass(frozen=True)
class LayerMaterial:
    """The layer's material in the simulation frame's units: bending (k / m, length² per second², the quadratic
    bending energy's stiffness per vertex mass), damping (1/s, still air), drag (1/s, wind through the surface per
    unit of mass-per-area), shear (a quad diagonal's give in compression, which lets cloth shear into folds)."""

    bending: float
    damping: float
    drag: float
    shear: float = 0.2  # how much of a quad diagonal's compression a sweep undoes (1: as hard as an edge)


@dataclass
class Loads:
    """What acts on the layer through one frame (the simulation frame's units): gravity (3,); wind (V, 3) or (3,) of
    air velocity and fields' acceleration (V, 3), or None; pin targets at the frame's start and end (P, 3) for the
    pinned vertices (None: they stay where they are); the contact surfaces (objects with ``planes``: contact.py) and
    the frame's span in frame numbers (f0, f1) they are placed at."""

    gravity: torch.Tensor
    wind: torch.Tensor | None = None
    acceleration: torch.Tensor | None = None
    pins_start: torch.Tensor | None = None
    pins_end: torch.Tensor | None = None
    surfaces: tuple = ()
    span: tuple[float, float] = (0.0, 1.0)


class ClothLayer:
    """One open surface's layer. ``advance`` moves it through one frame of ``dt`` seconds in ``substeps`` substeps;
    ``x`` and ``v`` (V, 3) are its state. Inside, positions and velocities are kept by coordinate, (3, V): a sum over
    a trailing axis of three costs ten times a sum over a leading one at 10k vertices."""

    def __init__(self, vertices: np.ndarray, triangles: np.ndarray, pin_weights: np.ndarray, material: LayerMaterial,
                 substeps: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> None:
        self.topology = t = topo.build(vertices, triangles)
        self.material, self.substeps = material, substeps
        self.dtype, self.device = dtype, device
        tensor = lambda a, kind=dtype: torch.as_tensor(a, dtype=kind, device=device)  # noqa: E731
        self.xs = tensor(np.ascontiguousarray(np.asarray(vertices).T))  # (3, V)
        self.vs = torch.zeros_like(self.xs)
        self.rest_positions = self.xs.clone()
        self.pinned = tensor(np.flatnonzero(pin_weights >= 1.0 - 1e-6), torch.long)
        self.goal = tensor(np.flatnonzero((pin_weights > 0) & (pin_weights < 1.0 - 1e-6)), torch.long)
        self.goal_weight = tensor(pin_weights[(pin_weights > 0) & (pin_weights < 1.0 - 1e-6)])
        self.pin_index = tensor(np.flatnonzero(pin_weights > 0), torch.long)  # the order of the pin targets
        free = np.ones(len(vertices))
        free[pin_weights >= 1.0 - 1e-6] = 0.0
        none = np.zeros(0, np.int64)  # what the operators hold, the topology need not keep (a large mesh's peak)
        self._bending_operator(vertices)
        self.topology = t = dataclasses.replace(t, bends=none, bend_weights=none, bend_scale=none)
        self._edge_sets(free)
        self._tethers(free)
        self.triangles = tensor(t.triangles, torch.long)
        self.topology = dataclasses.replace(t, colours=[], diagonal=none, triangles=none)

    @property
    def x(self) -> torch.Tensor:
        """Positions (V, 3) (a view of the (3, V) state)."""
        return self.xs.T

    @x.setter
    def x(self, value: torch.Tensor) -> None:
        self.xs = value.T.contiguous()

    @property
    def v(self) -> torch.Tensor:
        """Velocities (V, 3) (a view of the (3, V) state)."""
        return self.vs.T

    @v.setter
    def v(self, value: torch.Tensor) -> None:
        self.vs = value.T.contiguous()

    # -- set-up ----------------------------------------------------------------------------------------------------
    def _edge_sets(self, free: np.ndarray) -> None:
        """Per colour, for a sweep over the positions as one flat (3V,) array (by coordinate): the flat indices of both
        ends' three coordinates (2, 3, E), rest lengths (E,), each end's share of a correction (2, 1, E), and the share
        of a compression undone (E,): 1 for edges, ``shear`` for quad diagonals."""
        t, self.colours = self.topology, []
        for c in t.colours:
            e = t.edges[c]
            w = free[e]
            total = w.sum(1, keepdims=True)
            moving = total[:, 0] > 0
            if not moving.any():
                continue
            e, w, total = e[moving], w[moving], total[moving]
            count = np.bincount(e.reshape(-1), minlength=t.vertex_count)  # a joined tail set may hold a vertex twice
            share = w / np.maximum(total, 1e-12) * np.array([1.0, -1.0]) / count[e]
            flat = e.T[:, None, :] + t.vertex_count * np.arange(3)[None, :, None]
            give = np.where(t.diagonal[c][moving], self.material.shear, 1.0)
            tensor = lambda a: torch.as_tensor(a, dtype=self.dtype, device=self.device)  # noqa: E731
            self.colours.append((torch.as_tensor(flat.reshape(-1), device=self.device), tensor(t.rest[c][moving]),
                                 tensor(np.ascontiguousarray(share.T[:, None, :])), None if (give == 1).all() else tensor(give), len(e)))

    def _tethers(self, free: np.ndarray) -> None:
        """Long-range attachments (Kim et al. 2012): no free vertex strays further from its nearest pin than the
        mesh's own path to it at rest, which holds a hanging sheet's length at once where sweeps would pass the
        tension down it an edge at a time. Flat indices (2, 3, T) of each tethered vertex and its pin; lengths (T,)."""
        t = self.topology
        self.tether = None
        if not (free == 0).any():
            return
        anchor, length = topo.tethers(t.edges, t.rest, t.vertex_count, np.flatnonzero(free == 0))
        held = np.flatnonzero((free > 0) & (anchor >= 0))
        if not len(held):
            return
        pair = np.stack([held, anchor[held]])
        flat = pair[:, None, :] + t.vertex_count * np.arange(3)[None, :, None]
        self.tether = (torch.as_tensor(flat.reshape(-1), device=self.device),
                       torch.as_tensor(length[held], dtype=self.dtype, device=self.device), len(held))

    def _bending_operator(self, vertices: np.ndarray) -> None:
        """Q = KᵀK (V × V, CSR) with K the hinges' rows (four entries each: the curvature vector Σ K_i x_i scaled by
        √(3 / (A0 + A1))), so the bending force is −k (Q x − Q x_rest): a flat rest shape's Q x_rest is 0, a curved one
        keeps its own (the small-rotation rest curvature)."""
        t = self.topology
        b = self.hinges = len(t.bends)
        if not b:
            return
        coefficients = t.bend_weights * np.sqrt(t.bend_scale)[:, None]
        self.bend_q = _gram(t.bends, coefficients, t.vertex_count, self.dtype, self.device)  # one product a substep
        rest = torch.as_tensor(vertices, dtype=self.dtype, device=self.device)
        self.bend_rest = (self.bend_q @ rest).T.contiguous()
        scale = float(self.bend_q.values().abs().max()) * float(np.abs(vertices).max())
        self.curved = bool(self.bend_rest.abs().max() > 1e-5 * scale)

    def _bend(self, xs: torch.Tensor) -> torch.Tensor:
        """Q (x − x_rest) by coordinate (3, V): the bending force per unit stiffness, with its sign flipped."""
        q = (self.bend_q @ xs.T).T
        return q - self.bend_rest if self.curved else q

    def stable_substeps(self, dt: float) -> int:
        """Substeps enough for the explicit bending force to stay stable beside the hard edges: h² k λ_max(Q) ≤ ½ (λ_max by power
        iteration)."""
        if self.material.bending <= 0 or not self.hinges:
            return 1
        v = torch.ones(self.topology.vertex_count, 1, dtype=self.dtype, device=self.device)
        v[::2] = -1.0  # an alternating start: the fastest modes are the most jagged
        for _ in range(30):
            v = self.bend_q @ v
            v = v / v.norm().clamp_min(1e-30)
        top = float((v * (self.bend_q @ v)).sum())
        return int(np.ceil(dt * np.sqrt(2.0 * self.material.bending * max(top, 0.0)))) + 1

    # -- stepping --------------------------------------------------------------------------------------------------
    def advance(self, dt: float, loads: Loads) -> torch.Tensor:
        """One frame of ``dt`` seconds; returns the new positions (V, 3)."""
        h, n = dt / self.substeps, self.substeps
        normals = self.vertex_normals() if (loads.wind is not None or self.material.drag > 0) else None
        wind = None if loads.wind is None else (loads.wind.T if loads.wind.dim() == 2 else loads.wind[:, None])
        extra = None if loads.acceleration is None else loads.acceleration.T
        reach = CONTACT_REACH * dt * lengths(self.vs) + CONTACT_REACH * self.topology.mean_edge
        self.planes = planes = [surface.planes(self.xs, reach, *loads.span) for surface in loads.surfaces]
        for s in range(1, n + 1):
            if s > 1 and (s - 1) % CONTACT_REFRESH == 0:
                for plane in planes:
                    plane.refresh(self.xs, (s - 1) / n)
            accel = loads.gravity[:, None] if extra is None else loads.gravity[:, None] + extra
            if normals is not None:
                air = -self.vs if wind is None else wind - self.vs
                accel = accel + self.material.drag * (air * normals).sum(0) * normals
            self._substep(h, loads, accel, planes, (s - 1) / n, s / n)
        return self.x

    def _substep(self, h: float, loads: Loads, accel: torch.Tensor, planes: list, s0: float, s1: float) -> None:
        x, v, m = self.xs, self.vs, self.material
        v = v / (1.0 + h * m.damping)
        if m.bending > 0 and self.hinges:  # a stiff, position-dependent force: a whole kick before the drift
            v = v - (h * m.bending) * self._bend(x)
        half = 0.5 * h * accel  # positions take ½ h² a and velocities the other half after: free fall is exact
        p = (x + h * (v + half)).contiguous()
        self._pin(p, loads, s1)
        self._sweep(p)
        self._tether(p)
        for plane in planes:
            p = plane.resolve(p, x, s1, s0)
        self.vs = (p - x) / h + half
        self.xs = p

    def _sweep(self, p: torch.Tensor) -> None:
        """One Gauss–Seidel sweep over the edges, a colour at a time, in place on p (3, V), contiguous."""
        flat = p.view(-1)
        for index, rest, share, give, count in self.colours:
            ends = flat.index_select(0, index).view(2, 3, count)
            d = ends[1] - ends[0]  # (3, E)
            length = (d * d).sum(0).sqrt_()
            stretch = length - rest
            if give is not None:
                stretch = torch.maximum(stretch, stretch * give)
            flat.scatter_add_(0, index, (share * (d * stretch.div_(length.clamp_min_(1e-12)))).reshape(-1))

    def _tether(self, p: torch.Tensor) -> None:
        if self.tether is None:
            return
        index, length, count = self.tether
        flat = p.view(-1)
        both = flat.index_select(0, index).view(2, 3, count)
        d = both[0] - both[1]  # (3, T): from the pin to the vertex
        now = (d * d).sum(0).sqrt_()
        pull = (now - length).clamp_min_(0.0).div_(now.clamp_min(1e-12))
        flat.index_copy_(0, index[: 3 * count], (both[0] - d * pull).reshape(-1))

    def _pin(self, p: torch.Tensor, loads: Loads, s: float) -> None:
        """Pinned vertices (3, V columns) on their targets, partly pinned ones pulled their share of the way."""
        full = self.rest_positions
        if loads.pins_start is not None:
            target = (1 - s) * loads.pins_start + s * loads.pins_end  # (P, 3) in pin_index order
            full = full.index_copy(1, self.pin_index, target.T)
        if len(self.pinned):
            p.index_copy_(1, self.pinned, full.index_select(1, self.pinned))
        if len(self.goal):
            now = p.index_select(1, self.goal)
            p.index_copy_(1, self.goal, now + self.goal_weight * (full.index_select(1, self.goal) - now))

    def shift(self, offset: torch.Tensor, dt: float) -> None:
        """Move the layer by ``offset`` (V, 3) as a motion over the last frame of ``dt`` seconds (its velocity too),
        then out of the surfaces it touched in that frame."""
        before = self.xs
        p = (before + offset.T).contiguous()
        p.index_copy_(1, self.pinned, before.index_select(1, self.pinned))
        for plane in getattr(self, "planes", ()):
            p = plane.resolve(p, before, 1.0, 1.0)
        self.vs = self.vs + (p - before) / dt
        self.xs = p

    def vertex_normals(self) -> torch.Tensor:
        """Area-weighted unit vertex normals (3, V) of the current positions."""
        x, tri = self.xs, self.triangles
        a, b, c = (x.index_select(1, tri[:, k]) for k in range(3))
        e, f = b - a, c - a
        n = torch.stack([e[1] * f[2] - e[2] * f[1], e[2] * f[0] - e[0] * f[2], e[0] * f[1] - e[1] * f[0]])
        out = torch.zeros_like(x)
        for k in range(3):
            out.index_add_(1, tri[:, k], n)
        return out / lengths(out).clamp_min(1e-12)

    def energy(self, gravity: torch.Tensor) -> tuple[float, float]:
        """(kinetic, potential) energy of the layer's state, with the triangles' lumped masses (density 1 per unit
        area, as the reduced motion's shells): ½ Σ m v², −Σ m g·x."""
        m = torch.as_tensor(self.topology.masses, dtype=self.dtype, device=self.device)
        return float(0.5 * (m * self.vs.square().sum(0)).sum()), float(-(m * (gravity @ self.xs)).sum())

    def edge_ratios(self) -> torch.Tensor:
        """Each edge's length over its rest length (E,)."""
        e = torch.as_tensor(self.topology.edges, device=self.device)
        rest = torch.as_tensor(self.topology.rest, dtype=self.dtype, device=self.device)
        return lengths(self.xs[:, e[:, 1]] - self.xs[:, e[:, 0]]) / rest


def _gram(stencils: np.ndarray, coefficients: np.ndarray, vertex_count: int, dtype: torch.dtype, device: str,
          chunk: int = 1 << 16) -> torch.Tensor:
    """Q = KᵀK (V × V, CSR, 32-bit indices) for K's rows given as stencils (B, 4) of vertices with their coefficients
    (B, 4): Q_ij sums c_i c_j over the stencils holding both. Assembled a block of rows at a time in numpy, so a
    million-vertex mesh never holds all of its 16 B entries (or a sparse product's 64-bit copies) at once."""
    flat = stencils.reshape(-1)
    order = np.argsort(flat, kind="stable")
    by_vertex = flat[order]
    crows, cols, vals, offset = [np.zeros(1, np.int64)], [], [], 0
    for start in range(0, vertex_count, chunk):
        stop = min(start + chunk, vertex_count)
        lo, hi = np.searchsorted(by_vertex, [start, stop])
        entry = order[lo:hi]
        stencil = entry // 4
        rows = np.repeat(by_vertex[lo:hi].astype(np.int64) - start, 4)
        key = rows * vertex_count + stencils[stencil].reshape(-1)
        value = (coefficients.reshape(-1)[entry][:, None] * coefficients[stencil]).reshape(-1)
        unique, inverse = np.unique(key, return_inverse=True)
        crows.append(np.cumsum(np.bincount(unique // vertex_count, minlength=stop - start)) + offset)
        cols.append((unique % vertex_count).astype(np.int32))
        vals.append(torch.as_tensor(np.bincount(inverse, value, len(unique)), dtype=dtype))
        offset += len(unique)
    return sparse.csr(torch.as_tensor(np.concatenate(crows).astype(np.int32), device=device),
                      torch.as_tensor(np.concatenate(cols), device=device),
                      torch.cat(vals).to(device), (vertex_count, vertex_count))
