"""The cloth layer's mesh topology: edges (stretch constraints) with the quad diagonals marked, their colouring into
independent sets for Gauss–Seidel sweeps, and the bending stencils of the quadratic dihedral model. Built once per
mesh. No bpy use; numpy only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....errors import InputError

DIAGONAL_ANGLE = 80.0  # degrees: an edge opposite two angles this wide splits a quad (a shear diagonal)
DEGENERATE_AREA = 1e-12  # relative to the mean triangle area: a sliver with no area carries no cloth


@dataclass(frozen=True)
class Topology:
    """edges (E, 2) with rest lengths (E,) and the tension-only flags of quad diagonals; colours: index arrays into
    edges, each a set sharing no vertex; bends: (B, 4) stencils (edge ends, then the two opposite corners) with
    their cotangent weights (B, 4) and stiffness scale (B,); masses (V,) lumped from triangle areas; triangles
    (F, 3) with the degenerate ones dropped."""

    vertex_count: int
    triangles: np.ndarray
    edges: np.ndarray
    rest: np.ndarray
    diagonal: np.ndarray
    colours: list[np.ndarray]
    bends: np.ndarray
    bend_weights: np.ndarray
    bend_scale: np.ndarray
    masses: np.ndarray
    mean_edge: float


def build(vertices: np.ndarray, triangles: np.ndarray) -> Topology:
    """The topology of a triangle mesh; degenerate triangles are dropped, and a mesh with no triangle left or with
    an edge shared by more than two triangles (non-manifold) is refused with the reason."""
    v = np.asarray(vertices, np.float64)
    tri = _usable_triangles(v, np.asarray(triangles, np.int64))
    edges, faces_of = _edges(tri)
    bends, weights, scale = _bending(v, tri, edges, faces_of)
    rest = np.linalg.norm(v[edges[:, 1]] - v[edges[:, 0]], axis=1)
    diagonal = _diagonals(v, tri, edges, faces_of)
    area = 0.5 * np.linalg.norm(np.cross(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]]), axis=1)
    masses = np.bincount(tri.reshape(-1), np.repeat(area / 3, 3), len(v))
    return Topology(len(v), tri, edges, rest, diagonal, colour_edges(edges, len(v)), bends, weights, scale, masses,
                    float(rest.mean()))


def _usable_triangles(v: np.ndarray, tri: np.ndarray) -> np.ndarray:
    if tri.ndim != 2 or tri.shape[1] != 3 or not len(tri):
        raise InputError("the cloth layer needs a triangle mesh; this one has no faces")
    area = 0.5 * np.linalg.norm(np.cross(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]]), axis=1)
    repeated = (tri[:, 0] == tri[:, 1]) | (tri[:, 1] == tri[:, 2]) | (tri[:, 0] == tri[:, 2])
    keep = ~repeated & (area > DEGENERATE_AREA * max(float(area.mean()), 1e-300))
    if not keep.any():
        raise InputError("every triangle of the mesh is degenerate (no area), so it has no cloth to simulate")
    return tri[keep]


def _edges(tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique edges (E, 2), i < j, and the (E, 2) triangles on each side (-1 on a boundary)."""
    half = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
    face = np.tile(np.arange(len(tri)), 3)
    width = int(tri.max()) + 1
    keys, inverse, counts = np.unique(half[:, 0] * width + half[:, 1], return_inverse=True, return_counts=True)
    edges = np.stack([keys // width, keys % width], 1)
    if counts.max() > 2:
        bad = edges[int(np.argmax(counts))]
        raise InputError(f"the mesh is non-manifold: the edge between vertices {bad[0]} and {bad[1]} is shared by "
                         f"{int(counts.max())} faces; a cloth needs each edge on at most two (Mesh > Clean Up, or "
                         "split the extra faces off)")
    order = np.argsort(inverse, kind="stable")
    faces_of = np.full((len(edges), 2), -1, np.int64)
    first = np.searchsorted(inverse[order], np.arange(len(edges)))
    faces_of[:, 0] = face[order[first]]
    second = first + 1
    has_two = counts == 2
    faces_of[has_two, 1] = face[order[second[has_two]]]
    return edges, faces_of


def _opposite(tri: np.ndarray, faces: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The corner of each face (given per edge) that is not on the edge."""
    t = tri[faces]
    on = (t == edges[:, :1]) | (t == edges[:, 1:])
    return t[np.arange(len(t)), np.argmin(on, axis=1)]


def _angle_at(v: np.ndarray, corner: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    e1, e2 = v[a] - v[corner], v[b] - v[corner]
    cos = (e1 * e2).sum(1) / np.maximum(np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1), 1e-300)
    return np.degrees(np.arccos(np.clip(cos, -1, 1)))


def _diagonals(v: np.ndarray, tri: np.ndarray, edges: np.ndarray, faces_of: np.ndarray) -> np.ndarray:
    """Interior edges that split a quad (both opposite angles near right): they resist stretch but not
    compression, as a quad mesh's shear springs let cloth shear into folds."""
    inner = faces_of[:, 1] >= 0
    out = np.zeros(len(edges), bool)
    if not inner.any():
        return out
    e, f = edges[inner], faces_of[inner]
    c0, c1 = _opposite(tri, f[:, 0], e), _opposite(tri, f[:, 1], e)
    wide = (_angle_at(v, c0, e[:, 0], e[:, 1]) > DIAGONAL_ANGLE) & (_angle_at(v, c1, e[:, 0], e[:, 1]) > DIAGONAL_ANGLE)
    out[inner] = wide
    return out


def _cot(v: np.ndarray, corner: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    e1, e2 = v[a] - v[corner], v[b] - v[corner]
    return (e1 * e2).sum(1) / np.maximum(np.linalg.norm(np.cross(e1, e2), axis=1), 1e-300)


def _bending(v: np.ndarray, tri: np.ndarray, edges: np.ndarray, faces_of: np.ndarray):
    """Bergou et al.'s quadratic bending stencils on interior edges: the curvature vector Σ K_i x_i of corners
    (x0, x1 on the edge; x2, x3 opposite), weights from the cotangents, scale 3 / (A0 + A1)."""
    inner = faces_of[:, 1] >= 0
    e, f = edges[inner], faces_of[inner]
    x0, x1 = e[:, 0], e[:, 1]
    x2, x3 = _opposite(tri, f[:, 0], e), _opposite(tri, f[:, 1], e)
    c01, c02 = _cot(v, x0, x1, x2), _cot(v, x0, x1, x3)  # the angles at the edge's ends, in each face
    c03, c04 = _cot(v, x1, x0, x2), _cot(v, x1, x0, x3)
    weights = np.stack([c03 + c04, c01 + c02, -(c01 + c03), -(c02 + c04)], 1)
    area = lambda a, b, c: 0.5 * np.linalg.norm(np.cross(v[b] - v[a], v[c] - v[a]), axis=1)  # noqa: E731
    scale = 3.0 / np.maximum(area(x0, x1, x2) + area(x0, x1, x3), 1e-300)
    return np.stack([x0, x1, x2, x3], 1), weights, scale


def colour_edges(edges: np.ndarray, vertex_count: int) -> list[np.ndarray]:
    """Edges split into sets that share no vertex (each set projected at once), by rounds of a parallel matching:
    every vertex proposes its remaining edge of highest (seeded random) priority, and an edge both its ends proposed
    joins the set; random priorities finish a set in a few rounds where index order would crawl along a grid."""
    priority = np.random.default_rng(0).permutation(len(edges))
    remaining = np.argsort(priority)  # kept in ascending priority: the last write per vertex is its highest
    colours = []
    while len(remaining):
        chosen = []
        free = np.ones(vertex_count, bool)
        candidates = remaining
        while len(candidates):
            a, b, p = edges[candidates, 0], edges[candidates, 1], priority[candidates]
            best, best_b = np.full(vertex_count, -1), np.full(vertex_count, -1)
            best[a], best_b[b] = p, p
            best = np.maximum(best, best_b)
            take = candidates[(best[a] == p) & (best[b] == p)]
            chosen.append(take)
            free[edges[take].reshape(-1)] = False
            candidates = candidates[free[edges[candidates, 0]] & free[edges[candidates, 1]]]
        chosen = np.concatenate(chosen)
        colours.append(np.sort(chosen))
        keep = np.ones(len(edges), bool)
        keep[chosen] = False
        remaining = remaining[keep[remaining]]
    return _merge_tail(colours)


def _merge_tail(colours: list[np.ndarray]) -> list[np.ndarray]:
    """The last, small sets (under half the largest) joined into one: each set costs a sweep step whatever its size;
    a vertex that the joined set holds twice takes half of each correction (``Topology.multiplicity``)."""
    largest = max(len(c) for c in colours)
    head = [c for c in colours if len(c) >= largest / 2]
    tail = [c for c in colours if len(c) < largest / 2]
    return head + ([np.sort(np.concatenate(tail))] if tail else [])


def tethers(edges: np.ndarray, rest: np.ndarray, vertex_count: int, pinned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each vertex's nearest pinned vertex along the mesh and the rest distance to it there (multi-source Dijkstra over
    the edges; -1 and inf where no pin is reachable). A path along edges is never shorter than the surface's own
    geodesic, so a tether of this length never holds the cloth tighter than its rest shape."""
    import heapq

    order = np.argsort(np.concatenate([edges[:, 0], edges[:, 1]]), kind="stable")
    ends = np.concatenate([edges[:, 1], edges[:, 0]])[order]
    lengths = np.concatenate([rest, rest])[order]
    start = np.searchsorted(np.concatenate([edges[:, 0], edges[:, 1]])[order], np.arange(vertex_count + 1))
    distance = np.full(vertex_count, np.inf)
    anchor = np.full(vertex_count, -1, np.int64)
    distance[pinned], anchor[pinned] = 0.0, pinned
    heap = [(0.0, int(v)) for v in pinned]
    ends_list, lengths_list, start_list = ends.tolist(), lengths.tolist(), start.tolist()
    dist, anch = distance.tolist(), anchor.tolist()
    while heap:
        d, v = heapq.heappop(heap)
        if d > dist[v]:
            continue
        for k in range(start_list[v], start_list[v + 1]):
            u, nd = ends_list[k], d + lengths_list[k]
            if nd < dist[u]:
                dist[u], anch[u] = nd, anch[v]
                heapq.heappush(heap, (nd, u))
    return np.asarray(anch, np.int64), np.asarray(dist)
