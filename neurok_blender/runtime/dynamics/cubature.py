"""Cubature points: a few hundred samples of the object that carry the mechanics, with lumped masses,
normals, pin weights and a spring graph, independent of the mesh's vertex count. No bpy use."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from ..geometry import face_normals, interpolate, sample_surface

GRAPH_K = 8  # neighbours per cubature point in the spring graph


@dataclass(frozen=True)
class Cubature:
    """Everything in the object's local units. Masses sum to the object's mass (density 1 per m² for
    shells, SOLID_DENSITY per m³ spread over the samples for closed meshes)."""

    points: np.ndarray  # (N, 3) rest positions
    normals: np.ndarray  # (N, 3) unit rest normals
    masses: np.ndarray  # (N,)
    areas: np.ndarray  # (N,) surface area each point stands for (wind drag)
    pins: np.ndarray  # (N,) pin weight in [0, 1]
    edges: np.ndarray  # (E, 2) stretch springs
    bends: np.ndarray  # (B, 2) two-hop springs: resistance to folding
    solid: bool  # a closed mesh: masses from volume
    parts: int = 1  # the mesh's separate pieces (vertices welded first): a lamp modelled as base, arms, head is 4
    labels: np.ndarray | None = None  # (N,) the piece each point lies on (``part_labels``), for meshes
    vertex_labels: np.ndarray | None = None  # (V,) the piece of each mesh vertex, for meshes (set-up reuses it)

    @property
    def drag_areas(self) -> np.ndarray:
        """The areas the wind pushes on, relative to the masses: a solid's scaled to its physical weight
        (PHYSICAL_SOLID_DENSITY), a shell's as they are."""
        return self.areas * (SOLID_DENSITY / PHYSICAL_SOLID_DENSITY) if self.solid else self.areas

    @property
    def total_mass(self) -> float:
        return float(self.masses.sum())

    @property
    def diagonal(self) -> float:
        return float(np.linalg.norm(self.points.max(0) - self.points.min(0)))


SOLID_DENSITY = 50.0  # per m³, relative to 1 per m² for shells: a 2 cm sheet and a solid weigh alike per volume
# what the wind sees of a solid: per unit of the shells' mass (cloth about 0.2 kg/m², solids about 1000 kg/m³) a
# solid weighs this per m³; drag acts per area, so a lighter solid is blown over (docs/decisions.md#solid-density)
PHYSICAL_SOLID_DENSITY = 5000.0


def is_closed(triangles: np.ndarray) -> bool:
    """Every edge shared by exactly two triangles (a watertight surface)."""
    if len(triangles) == 0:
        return False
    e = np.sort(np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]), axis=1)
    keys = e[:, 0].astype(np.int64) * (int(e.max()) + 1) + e[:, 1]  # one integer per edge: a 1-D sort, not rows
    _, counts = np.unique(keys, return_counts=True)
    return bool((counts == 2).all())


def count_parts(vertices: np.ndarray, triangles: np.ndarray) -> int:
    """The mesh's loose parts, as Blender counts them: pieces that share no vertex. A triangle soup (an STL, or
    every face split) is welded first, so coincident corners join and it counts as the pieces it shows."""
    return int(part_labels(vertices, triangles).max()) + 1 if len(triangles) else 1


def part_labels(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """(V,) each vertex's loose part, numbered 0, 1, … in the order of their lowest vertex (``count_parts``);
    a vertex in no triangle joins part 0."""
    if len(triangles) == 0:
        return np.zeros(len(vertices), np.int64)
    label = _components(triangles, len(vertices))
    used = np.unique(triangles.reshape(-1))
    if len(np.unique(label[used])) > len(triangles) // 2:  # hardly any vertex shared: a soup, not an assembly
        step = 1e-6 * float(np.linalg.norm(vertices.max(0) - vertices.min(0))) + 1e-12
        _, weld = np.unique(np.round(vertices / step).astype(np.int64), axis=0, return_inverse=True)
        weld = weld.reshape(-1)
        label = _components(weld[triangles], int(weld.max()) + 1)[weld]
    roots = np.unique(label[triangles.reshape(-1)])  # roots are lowest members: sorted roots keep that order
    out = np.zeros(len(vertices), np.int64)
    mapped = np.searchsorted(roots, label)
    inside = (mapped < len(roots)) & (roots[np.minimum(mapped, len(roots) - 1)] == label)
    out[inside] = mapped[inside]
    return out


def _components(triangles: np.ndarray, count: int) -> np.ndarray:
    """(count,) each vertex's component root (its lowest vertex) over the triangles' edges: union–find in rounds —
    every edge joining two trees hooks the larger root under the smaller, then the labels are compressed."""
    edges = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]]]).astype(np.int64)
    label = np.arange(count)
    while True:
        ru, rv = label[edges[:, 0]], label[edges[:, 1]]
        apart = ru != rv
        if not apart.any():
            break
        edges, ru, rv = edges[apart], ru[apart], rv[apart]  # joined edges stay joined
        np.minimum.at(label, np.maximum(ru, rv), np.minimum(ru, rv))
        while True:  # pointer jumping: every label to its root
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
    return label


def signed_volumes(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """The signed volume a closed surface encloses, for vertices (…, V, 3) with any leading frame axes (…,): positive
    for outward-facing triangles, negative for a surface turned inside out."""
    a, b, c = (vertices[..., triangles[:, k], :] for k in range(3))
    return np.einsum("...fk,...fk->...", a, np.cross(b, c)) / 6.0


def enclosed_volume(vertices: np.ndarray, triangles: np.ndarray) -> float:
    return float(abs(signed_volumes(vertices, triangles)))


def knn_graph(points: np.ndarray, k: int) -> np.ndarray:
    """Undirected k-nearest-neighbour edges (E, 2), i < j, without duplicates."""
    k = min(k, len(points) - 1)
    if k < 1:
        return np.zeros((0, 2), np.int64)
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    nbr = np.argsort(d, axis=1)[:, :k]
    e = np.sort(np.stack([np.repeat(np.arange(len(points)), k), nbr.ravel()], 1), axis=1)
    return np.unique(e, axis=0)


def two_hop(edges: np.ndarray, n: int) -> np.ndarray:
    """Pairs two graph steps apart that are not direct neighbours (the bending springs)."""
    adj = np.zeros((n, n), bool)
    adj[edges[:, 0], edges[:, 1]] = adj[edges[:, 1], edges[:, 0]] = True
    reach = (adj.astype(np.int32) @ adj.astype(np.int32)) > 0
    reach &= ~adj
    np.fill_diagonal(reach, False)
    i, j = np.nonzero(np.triu(reach))
    return np.stack([i, j], 1).astype(np.int64)


def point_normals(points: np.ndarray, k: int = 12) -> np.ndarray:
    """Unit normals of a point cloud from the smallest principal direction of each neighbourhood,
    oriented away from the centroid."""
    k = min(k, len(points))
    d = np.linalg.norm(points[:, None] - points[None], axis=-1) if len(points) <= 4096 else None
    normals = np.zeros_like(points)
    centre = points.mean(0)
    for i in range(len(points)):
        dist = d[i] if d is not None else np.linalg.norm(points - points[i], axis=1)
        nb = points[np.argsort(dist)[:k]]
        _, _, vt = np.linalg.svd(nb - nb.mean(0), full_matrices=False)
        n = vt[-1]
        normals[i] = -n if np.dot(n, points[i] - centre) < 0 else n
    return normals


def from_mesh(vertices: np.ndarray, triangles: np.ndarray, pin_weights: np.ndarray, count: int,
              rng: np.random.Generator) -> Cubature:
    """Area-weighted surface samples of a triangle mesh."""
    unit, area = face_normals(vertices, triangles)
    total_area = float(area.sum())
    if not total_area > 0:
        raise InputError("the mesh has no surface area (all faces are degenerate)")
    pinned = pinned_vertices(vertices, pin_weights, max(4, count // 8))
    count_surface = count - len(pinned)
    tri, bary = sample_surface(vertices, triangles, count_surface, rng)
    weighted = unit * area[:, None]
    vertex_normals = np.stack([sum(np.bincount(triangles[:, c], weighted[:, d], len(vertices)) for c in range(3))
                               for d in range(3)], 1)  # area-weighted, summed per vertex (np.add.at is slow)
    vertex_normals /= np.maximum(np.linalg.norm(vertex_normals, axis=1, keepdims=True), 1e-12)
    points = np.concatenate([interpolate(vertices, triangles, tri, bary), vertices[pinned]])
    normals = np.concatenate([unit[tri], vertex_normals[pinned]])
    # a sample is held only as far as its triangle's least-held corner, as a cloth simulator pins vertices:
    # the strip of triangles along a pinned edge turns about it, it is not clamped (interpolated weights
    # made that strip a clamp, and a sheet pinned along an edge a cantilever that hardly swung)
    pins = np.clip(np.concatenate([pin_weights[triangles[tri]].min(1), pin_weights[pinned]]), 0.0, 1.0)
    volume = enclosed_volume(vertices, triangles)
    solid = is_closed(triangles) and volume > 0
    areas = np.full(count, total_area / count)
    masses = np.full(count, SOLID_DENSITY * volume / count) if solid else areas.copy()
    edges = knn_graph(points, GRAPH_K)
    vertex_parts = part_labels(vertices, triangles)
    labels = np.concatenate([vertex_parts[triangles[tri, 0]], vertex_parts[pinned]])
    return Cubature(points, normals, masses, areas, pins, edges, two_hop(edges, count), solid,
                    int(vertex_parts.max()) + 1, labels, vertex_parts)


def pinned_vertices(vertices: np.ndarray, pin_weights: np.ndarray, limit: int) -> np.ndarray:
    """Up to ``limit`` pinned vertices spread over the pinned region (farthest-point order), so pins
    act on the cubature even where area sampling would miss a thin pinned strip."""
    candidates = np.flatnonzero(pin_weights > 0)
    if len(candidates) <= limit:
        return candidates
    chosen = [candidates[0]]
    dist = np.linalg.norm(vertices[candidates] - vertices[chosen[0]], axis=1)
    while len(chosen) < limit:
        nxt = int(np.argmax(dist))
        chosen.append(candidates[nxt])
        dist = np.minimum(dist, np.linalg.norm(vertices[candidates] - vertices[candidates[nxt]], axis=1))
    return np.asarray(chosen)


def from_points(vertices: np.ndarray, pin_weights: np.ndarray, count: int, rng: np.random.Generator) -> Cubature:
    """A point cloud (no faces): a subset of the points, normals from local PCA, and a kNN graph.
    Each point stands for an equal share of the cloud's bounding-box footprint."""
    pick = rng.choice(len(vertices), size=min(count, len(vertices)), replace=False)
    points = vertices[pick]
    if len(points) < 4:
        raise InputError(f"a point cloud needs at least 4 points to simulate, got {len(points)}")
    extent = np.sort(points.max(0) - points.min(0))[::-1]
    area = max(float(extent[0] * extent[1]), 1e-12)
    areas = np.full(len(points), area / len(points))
    edges = knn_graph(points, GRAPH_K)
    return Cubature(points, point_normals(points), areas.copy(), areas, np.clip(pin_weights[pick], 0.0, 1.0),
                    edges, two_hop(edges, len(points)), False)
