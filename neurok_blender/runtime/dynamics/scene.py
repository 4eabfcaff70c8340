"""The scene around one simulated object at any time of the bake, in the simulation's frame (the object's
local frame at its first frame): pin targets that follow animation, colliders (signed distances by closest
points with angle-weighted pseudonormals), and Blender-style force fields. No bpy use.

Everything per frame comes from the scene track (``neurok_blender/track.py``), interpolated linearly
between frames for the integrator's substeps; static parts come from the request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ... import track as tracks
from ...bridge.request import Collider, ForceField, SimulationRequest
from ...errors import InputError

CANDIDATES = 24  # nearest triangles (by centroid) searched for each point's closest point
STICK_SPEED = 0.01  # diagonals per second: slower slips are held (the smoothed stick of Coulomb friction)
TURBULENCE_WAVES = 8
_TINY = 1e-20


@dataclass
class SceneInput:
    """The arrays of a scene that travel beside the request: each collider's triangles (F, 3), the scene
    track's rows (T, width) (a memory map in the worker), per-vertex initial velocities (V, 3) in world m/s."""

    collider_triangles: list[np.ndarray] = field(default_factory=list)
    track: np.ndarray | None = None
    initial_velocities: np.ndarray | None = None


# -- closest points -------------------------------------------------------------------------------------
def _cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.linalg.cross(a, b, dim=-1)


def _segment(p: torch.Tensor, s0: torch.Tensor, s1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = s1 - s0
    t = (((p - s0) * d).sum(-1) / (d * d).sum(-1).clamp_min(_TINY)).clamp(0.0, 1.0)
    return s0 + t[..., None] * d, t


def closest_on_triangles(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    """Closest points of triangles (a, b, c) to points p (all broadcast to (..., 3)) and the feature hit:
    0 the face, 1–3 the edges ab, bc, ca, 4–6 the corners a, b, c. Returns (closest (..., 3), feature (...))."""
    ab, ac, ap = b - a, c - a, p - a
    n = _cross(ab, ac)
    nn = (n * n).sum(-1)
    v = (_cross(ap, ac) * n).sum(-1) / nn.clamp_min(_TINY)
    w = (_cross(ab, ap) * n).sum(-1) / nn.clamp_min(_TINY)
    inside = (v >= 0) & (w >= 0) & (v + w <= 1) & (nn > _TINY)
    projected = p - ((ap * n).sum(-1) / nn.clamp_min(_TINY))[..., None] * n
    q0, t0 = _segment(p, a, b)
    q1, t1 = _segment(p, b, c)
    q2, t2 = _segment(p, c, a)
    qs, ts = torch.stack([q0, q1, q2], -2), torch.stack([t0, t1, t2], -1)
    edge = ((qs - p[..., None, :]) ** 2).sum(-1).argmin(-1)
    q = torch.gather(qs, -2, edge[..., None, None].expand(*edge.shape, 1, 3)).squeeze(-2)
    t = torch.gather(ts, -1, edge[..., None]).squeeze(-1)
    start, end = 4 + edge, 4 + (edge + 1) % 3  # corners a, b, c are 4, 5, 6
    feature = torch.where(t <= 1e-6, start, torch.where(t >= 1 - 1e-6, end, 1 + edge))
    closest = torch.where(inside[..., None], projected, q)
    return closest, torch.where(inside, torch.zeros_like(feature), feature)


class MeshSDF:
    """The signed distance to one triangle mesh whose vertices move from frame to frame (fixed triangles).
    The sign comes from the angle-weighted pseudonormal of the feature hit (face, edge or corner), which is
    exact for closed meshes; an open mesh (a table top, a floor) is 'inside' on its back side."""

    def __init__(self, triangles: np.ndarray, vertex_count: int, device: str) -> None:
        tri = np.asarray(triangles, np.int64)
        self.triangles = torch.as_tensor(tri, device=device)
        edges = np.sort(np.stack([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]], 1).reshape(-1, 2), axis=1)
        unique, inverse, counts = np.unique(edges, axis=0, return_inverse=True, return_counts=True)
        self.edge_slot = torch.as_tensor(inverse.reshape(-1), device=device)  # (F*3,) unique edge of each slot
        self.edge_count = len(unique)
        self.closed = bool((counts == 2).all())
        self.vertex_count = vertex_count
        self.vertices: torch.Tensor | None = None

    def update(self, vertices: torch.Tensor) -> None:
        """New vertex positions: recompute the face, edge and corner normals."""
        self.vertices = v = vertices
        tri = self.triangles
        a, b, c = v[tri[:, 0]], v[tri[:, 1]], v[tri[:, 2]]
        self.a, self.b, self.c = a, b, c
        cross = _cross(b - a, c - a)
        self.face_normal = cross / cross.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        edge_sum = torch.zeros(self.edge_count, 3, dtype=v.dtype, device=v.device)
        edge_sum.index_add_(0, self.edge_slot, self.face_normal.repeat_interleave(3, 0))
        edge_n = edge_sum[self.edge_slot].reshape(-1, 3, 3)  # (F, 3 edges, 3)
        corner = torch.zeros_like(v)
        for k in range(3):  # angle-weighted vertex normals
            e1 = v[tri[:, (k + 1) % 3]] - v[tri[:, k]]
            e2 = v[tri[:, (k + 2) % 3]] - v[tri[:, k]]
            cos = (e1 * e2).sum(-1) / (e1.norm(dim=-1) * e2.norm(dim=-1)).clamp_min(1e-20)
            corner.index_add_(0, tri[:, k], torch.arccos(cos.clamp(-1, 1))[:, None] * self.face_normal)
        corner_n = corner[tri]  # (F, 3 corners, 3)
        normals = torch.cat([self.face_normal[:, None], edge_n, corner_n], 1)  # (F, 7, 3): features 0–6
        self.feature_normals = normals / normals.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        self.centroids = (a + b + c) / 3
        self.lo, self.hi = v.min(0).values, v.max(0).values

    def candidates(self, points: torch.Tensor) -> torch.Tensor:
        """The nearest triangles by centroid for each point (P, K)."""
        k = min(CANDIDATES, len(self.centroids))
        out = []
        for chunk in torch.split(points, 4096):
            out.append(torch.cdist(chunk, self.centroids).topk(k, largest=False).indices)
        return torch.cat(out)

    def query(self, points: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(signed distance (P,), unit gradient (P, 3)) of ``points`` among the ``candidates`` triangles."""
        p = points[:, None, :]
        closest, feature = closest_on_triangles(p, self.a[candidates], self.b[candidates], self.c[candidates])
        dist2 = ((p - closest) ** 2).sum(-1)
        best = dist2.argmin(-1)
        pick = lambda t: torch.gather(t, 1, best[:, None, None].expand(-1, 1, t.shape[-1])).squeeze(1)  # noqa: E731
        c = pick(closest)
        tri = torch.gather(candidates, 1, best[:, None]).squeeze(1)
        feat = torch.gather(feature, 1, best[:, None]).squeeze(1)
        normal = self.feature_normals[tri, feat]
        offset = points - c
        length = offset.norm(dim=-1)
        sign = torch.where((offset * normal).sum(-1) < 0, -1.0, 1.0).to(points.dtype)
        direction = torch.where(length[:, None] > 1e-9, sign[:, None] * offset / length.clamp_min(1e-12)[:, None],
                                normal)
        return sign * length, direction


@dataclass
class ContactSet:
    """One collider at one time, with the triangles each cubature point is tested against."""

    sdf: MeshSDF
    thickness: float  # in the simulation frame's units
    friction: float
    max_depth: float  # an open mesh pushes out only points this close behind it
    velocity: torch.Tensor  # (V, 3) of its vertices, units per second
    candidates: torch.Tensor | None = None

    def distance(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.candidates is None or len(self.candidates) != len(x):
            self.candidates = self.sdf.candidates(x.detach())
        return self.sdf.query(x, self.candidates)

    def active(self, d: torch.Tensor) -> torch.Tensor:
        return (d < self.thickness) & (d > -self.max_depth)

    def residual(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        d, _ = self.distance(x)
        return weight * torch.where(self.active(d), d - self.thickness, torch.zeros_like(d))

    def residual_jvp(self, x: torch.Tensor, weight: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        d, g = self.distance(x)
        on = (weight * self.active(d).to(x.dtype))[:, None]
        return on * torch.einsum("nc,nck->nk", g, J)


# -- force fields ------------------------------------------------------------------------------------
def falloff(r: torch.Tensor, f: ForceField) -> torch.Tensor:
    """1 inside ``distance_min``, (1 + r − r_min)^−power beyond it, 0 past ``distance_max`` (when set)."""
    out = (1.0 + (r - f.distance_min).clamp_min(0.0)) ** (-f.falloff_power)
    if f.distance_max > 0:
        out = torch.where(r > f.distance_max, torch.zeros_like(out), out)
    return out


def _turbulence_waves(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = rng.normal(size=(TURBULENCE_WAVES, 3))
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    d = np.cross(k, rng.normal(size=(TURBULENCE_WAVES, 3)))  # across each wave: a divergence-free swirl
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return k * rng.uniform(0.6, 1.6, (TURBULENCE_WAVES, 1)), d, rng.uniform(0, 2 * math.pi, TURBULENCE_WAVES), \
        rng.uniform(0.2, 0.8, TURBULENCE_WAVES)


def field_effect(f: ForceField, matrix: np.ndarray, strength: float, points: torch.Tensor,
                 t: float) -> torch.Tensor:
    """World-space effect of one field at world points (N, 3): air velocity (m/s) for wind, acceleration
    (m/s²) for the others; the field's weight included."""
    m = torch.as_tensor(matrix, dtype=points.dtype, device=points.device)
    origin, axes = m[:3, 3], m[:3, :3]
    axes = axes / axes.norm(dim=0, keepdim=True).clamp_min(1e-12)  # columns: the field's X, Y, Z
    z = axes[:, 2]
    rel = points - origin
    local = rel @ axes
    radial = rel - local[:, 2:3] * z
    r = {"point": rel.norm(dim=-1), "line": radial.norm(dim=-1), "plane": local[:, 2].abs()}[f.shape]
    size = strength * f.weight * falloff(r, f)
    unit = lambda v: v / v.norm(dim=-1, keepdim=True).clamp_min(1e-9)  # noqa: E731
    if f.kind == "wind":
        gust = 1.0 + f.noise * 0.5 * (math.sin(2.1 * t + f.seed) + math.sin(5.3 * t + 0.7 * f.seed))
        return (size * max(gust, 0.0))[:, None] * z
    if f.kind == "force":
        direction = {"point": unit(rel), "line": unit(radial),
                     "plane": torch.sign(local[:, 2:3]) * z.expand_as(rel)}[f.shape]
        return size[:, None] * direction
    if f.kind == "vortex":
        return size[:, None] * unit(torch.linalg.cross(z.expand_as(rel), rel, dim=-1))
    k, d, phase, rate = (torch.as_tensor(a, dtype=points.dtype, device=points.device) for a in _turbulence_waves(f.seed))
    waves = torch.sin(rel @ k.T / f.size + phase + 2 * math.pi * rate * t)  # (N, W)
    return size[:, None] * (waves @ d) * math.sqrt(2.0 / TURBULENCE_WAVES)


# -- the driver ---------------------------------------------------------------------------------------
class SceneDriver:
    """What the scene does at time t (seconds since the first frame), in the simulation frame."""

    def __init__(self, request: SimulationRequest, vertices: np.ndarray, pin_weights: np.ndarray,
                 cubature_points: np.ndarray, cubature_pins: np.ndarray, scene: SceneInput | None,
                 dtype: torch.dtype, device: str) -> None:
        scene = scene or SceneInput()
        self.request, self.dtype, self.device = request, dtype, device
        self.fps, self.frames = request.fps, request.frame_count
        m0 = np.asarray(request.world_matrix, np.float64).reshape(4, 4)
        self.m0, self.m0_inv = m0, np.linalg.inv(m0)
        self.linear_inv = np.linalg.inv(m0[:3, :3])
        self.length_scale = abs(np.linalg.det(m0[:3, :3])) ** (1 / 3)  # world units per local unit
        self.layout = tracks.layout_for(request, pin_weights)
        needs_track = request.animated_pins or bool(request.colliders)
        self.rows = None
        if scene.track is not None:
            self.rows = np.asarray(scene.track) if not isinstance(scene.track, np.memmap) else scene.track
            _check_rows(self.rows, self.frames, self.layout)
        elif needs_track:
            raise InputError("colliders and animated pins need a scene track (per-frame positions); none was given")
        self.vertices = vertices
        self.pinned = np.flatnonzero(pin_weights > 0) if request.animated_pins else np.zeros(0, np.int64)
        if request.animated_pins and not len(self.pinned):
            raise InputError("animated pins were asked for, but no vertex has a pin weight")
        if len(self.pinned):  # each pinned cubature point follows its nearest pinned vertex
            near = np.linalg.norm(cubature_points[:, None] - vertices[self.pinned][None], axis=-1).argmin(1)
            self.cubature_pin_source = near
        self.cubature_points = cubature_points
        self.has_pins = bool((cubature_pins > 0).any())
        if len(scene.collider_triangles) != len(request.colliders):
            raise InputError(f"{len(request.colliders)} colliders but {len(scene.collider_triangles)} triangle arrays")
        self.sdfs = [_collider_sdf(c, tri, device) for c, tri in zip(request.colliders, scene.collider_triangles)]
        self.fields = request.fields
        self._cache: dict[str, tuple[float, object]] = {}
        self.initial_velocities = None
        if scene.initial_velocities is not None:
            v = np.asarray(scene.initial_velocities, np.float64)
            if v.shape != vertices.shape or not np.isfinite(v).all():
                raise InputError(f"initial velocities must be finite, one per vertex ({vertices.shape}); got {v.shape}")
            self.initial_velocities = v @ self.linear_inv.T  # world → local velocities

    # -- rows ----------------------------------------------------------------------------------------
    @property
    def animated(self) -> bool:
        return self.rows is not None

    def row(self, t: float) -> np.ndarray | None:
        if self.rows is None:
            return None
        f = min(max(t * self.fps, 0.0), self.frames - 1)
        i = min(int(math.floor(f)), self.frames - 1)
        j, a = min(i + 1, self.frames - 1), f - i
        r0 = np.asarray(self.rows[i], np.float64)
        return r0 if a < 1e-9 else (1 - a) * r0 + a * np.asarray(self.rows[j], np.float64)

    def _to_sim(self, world_points: np.ndarray) -> np.ndarray:
        return world_points @ self.m0_inv[:3, :3].T + self.m0_inv[:3, 3]

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=self.dtype, device=self.device)

    def object_matrix(self, frame: int) -> np.ndarray:
        if self.rows is None:
            return self.m0
        return np.asarray(self.rows[min(frame, self.frames - 1)], np.float64)[:16].reshape(4, 4)

    # -- pins ----------------------------------------------------------------------------------------
    def vertex_pin_targets(self, t: float) -> np.ndarray | None:
        """The pinned vertices' targets (P, 3) in the simulation frame, or None for static pins."""
        if not len(self.pinned):
            return None
        return self._to_sim(self.layout.get(self.row(t), "pins").reshape(-1, 3))

    def cubature_pin_targets(self, t: float, rest: torch.Tensor) -> torch.Tensor:
        targets = self.vertex_pin_targets(t)
        if targets is None:
            return rest
        moved = targets - self.vertices[self.pinned]
        return rest + self._tensor(moved[self.cubature_pin_source])

    # -- colliders -----------------------------------------------------------------------------------
    def collider_vertices(self, i: int, frame: float) -> np.ndarray:
        """Collider i's vertices (W, 3) in the simulation frame at a (fractional) frame of the bake."""
        return self._to_sim(self.layout.get(self.row(frame / self.fps), f"collider{i}").reshape(-1, 3))

    def contacts(self, t: float) -> list[ContactSet]:
        key = "contacts"
        if key in self._cache and self._cache[key][0] == t:
            return self._cache[key][1]  # type: ignore[return-value]
        out = []
        dt = 1.0 / self.fps
        row, before = self.row(t), self.row(max(t - dt, 0.0))
        for i, (c, sdf) in enumerate(zip(self.request.colliders, self.sdfs)):
            now = self._to_sim(self.layout.get(row, f"collider{i}").reshape(-1, 3))
            then = self._to_sim(self.layout.get(before, f"collider{i}").reshape(-1, 3))
            sdf.update(self._tensor(now))
            thickness = c.thickness / self.length_scale
            diag = float(np.linalg.norm(now.max(0) - now.min(0)))
            max_depth = float("inf") if sdf.closed else max(4 * thickness, 0.05 * diag)
            velocity = self._tensor((now - then) / dt) if t > 0 else torch.zeros_like(sdf.vertices)
            out.append(ContactSet(sdf, thickness, c.friction, max_depth, velocity))
        self._cache[key] = (t, out)
        return out

    def resolve_vertices(self, x: torch.Tensor, t: float) -> tuple[torch.Tensor, float]:
        """Decoded vertices (V, 3) pushed out of every collider onto its surface, so none shows through
        between the cubature points that carry the contact. Returns them and the deepest penetration found
        before (world units)."""
        deepest = 0.0
        for contact in self.contacts(t):
            sdf = contact.sdf
            margin = max(contact.thickness, 1e-6)
            near = ((x >= sdf.lo - margin) & (x <= sdf.hi + margin)).all(-1)
            idx = torch.nonzero(near).squeeze(-1)
            if not len(idx):
                continue
            d, g = sdf.query(x[idx], sdf.candidates(x[idx]))
            inside = (d < 0) & (d > -contact.max_depth)
            if bool(inside.any()):
                deepest = max(deepest, float(-d[inside].min()) * self.length_scale)
                x = x.clone()
                x[idx[inside]] = x[idx[inside]] - d[inside, None] * g[inside]
        return x, deepest

    # -- fields --------------------------------------------------------------------------------------
    def field_effects(self, x: torch.Tensor, t: float) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(air velocity (N, 3), acceleration (N, 3)) in the simulation frame from the scene's fields at the
        points x; None where no field of that kind acts."""
        if not self.fields:
            return None, None
        world = x @ self._tensor(self.m0[:3, :3]).T + self._tensor(self.m0[:3, 3])
        row = self.row(t)
        wind, accel = None, None
        to_local = self._tensor(self.linear_inv)
        for j, f in enumerate(self.fields):
            if row is not None:
                part = self.layout.get(row, f"field{j}")
                matrix, strength = part[:16].reshape(4, 4), float(part[16])
            else:
                matrix, strength = np.asarray(f.matrix).reshape(4, 4), f.strength
            effect = field_effect(f, matrix, strength, world, t) @ to_local.T
            if f.kind == "wind":
                wind = effect if wind is None else wind + effect
            else:
                accel = effect if accel is None else accel + effect
        return wind, accel


def _collider_sdf(collider: Collider, triangles: np.ndarray, device: str) -> MeshSDF:
    who = f"collider {collider.name!r}" if collider.name else "a collider"
    tri = np.asarray(triangles)
    if tri.size == 0:
        raise InputError(f"{who} has no faces; a collider needs a surface")
    if tri.ndim != 2 or tri.shape[1] != 3 or not np.issubdtype(tri.dtype, np.integer):
        raise InputError(f"{who}: triangles must be an (F, 3) array of vertex indices, got shape {tri.shape}")
    if tri.min() < 0 or tri.max() >= collider.vertex_count:
        raise InputError(f"{who}: triangles name vertices outside 0..{collider.vertex_count - 1}")
    return MeshSDF(tri, collider.vertex_count, device)


def _check_rows(rows: np.ndarray, frames: int, layout: tracks.Layout) -> None:
    if rows.ndim != 2 or rows.shape[1] != layout.width or rows.shape[0] < frames:
        raise InputError(f"the scene track has shape {rows.shape}; this bake needs ({frames}, {layout.width})")
    for start in range(0, frames, 512):  # chunked: a memory-mapped track is never read whole
        chunk = np.asarray(rows[start : min(start + 512, frames)])
        if not np.isfinite(chunk).all():
            bad = start + int(np.flatnonzero(~np.isfinite(chunk).all(1))[0])
            part = next((n for n, (a, b) in layout.parts.items() if not np.isfinite(chunk[bad - start, a:b]).all()), "?")
            what = {"pins": "a pin target", "object": "the object's transform"}.get(part, part)
            raise InputError(f"the scene track has NaN or infinite values in {what} at frame {bad} of the bake")
        obj = chunk[:, :16].reshape(-1, 4, 4)[:, :3, :3]
        if (np.abs(np.linalg.det(obj)) < 1e-12).any():
            raise InputError("the object's transform has zero scale on some frame of the scene track")


def friction_terms(contacts: list[ContactSet], x_start: torch.Tensor, xdot_start: torch.Tensor,
                   masses: torch.Tensor, stiffness: float, diagonal: float, h: float):
    """Lagged Coulomb friction for the implicit step (the IPC way, simplified): for each point in contact at
    the step's start, a tangential drag c = μ λ / max(|v_slip|, v_stick) with λ its contact (penalty) force
    and v_slip its slip speed then — so a sliding point feels μ λ, a slow one is held. Returns None without
    contact, else (residual(x), jacobian(J)) of ½ Σ c/h ‖P (x − x₀ − h v_c)‖², P the tangent projector."""
    weights, projectors, shifts = [], [], []
    for c in contacts:
        if c.friction <= 0:
            continue
        d, g = c.distance(x_start)
        touching = (d < 1.5 * c.thickness + 1e-9) & (d > -c.max_depth)
        if not bool(touching.any()):
            continue
        near = c.candidates[:, 0]  # the nearest triangle's corners carry the surface velocity
        v = c.velocity[c.sdf.triangles[near]].mean(1)
        eye = torch.eye(3, dtype=x_start.dtype, device=x_start.device)
        # the contact force at rest is about m g: never count less (a point just arriving still grips)
        normal_force = stiffness * masses * (1.5 * c.thickness - d).clamp_min(0.0)
        slip = xdot_start - v
        slip = (slip - (slip * g).sum(-1, keepdim=True) * g).norm(dim=-1)
        drag = c.friction * normal_force / slip.clamp_min(STICK_SPEED * diagonal)
        weights.append((drag / h) ** 0.5 * touching.to(x_start.dtype))
        projectors.append(eye - g[:, :, None] * g[:, None, :])
        shifts.append(h * v)
    if not weights:
        return None
    w, P, shift = torch.stack(weights), torch.stack(projectors), torch.stack(shifts)  # (C, N), (C, N, 3, 3), (C, N, 3)

    def residual(x: torch.Tensor) -> torch.Tensor:
        return (w[..., None] * torch.einsum("cnab,cnb->cna", P, x - x_start - shift)).reshape(-1)

    def jacobian(J: torch.Tensor) -> torch.Tensor:
        return (w[..., None, None] * torch.einsum("cnab,nbk->cnak", P, J)).reshape(-1, J.shape[-1])

    return residual, jacobian
