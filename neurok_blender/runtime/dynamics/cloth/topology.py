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
    """The topology of a triangle mesh. Degenerate triangles (no area) are dropped and a mesh with none left is
    refused; an edge where three or more faces meet (non-manifold) keeps its stretch but has no hinge, as in Blender
    Cloth."""
    v = np.asarray(vertices, np.float64)
    tri, double_area = _usable_triangles(v, np.asarray(triangles, np.int64))
    v = v.astype(np.float32)  # the hinges' cotangents: single precision is plenty, and halves a large mesh's peak
    edges, faces_of = _edges(tri)
    rest = np.linalg.norm(np.asarray(vertices, np.float64)[edges[:, 1]] - np.asarray(vertices, np.float64)[edges[:, 0]], axis=1)
    bends, weights, scale, diagonal = _hinges(v, tri, double_area, edges, faces_of)
    masses = np.bincount(tri.reshape(-1), np.repeat(double_area / 6, 3), len(v))
    return Topology(len(v), tri, edges, rest, diagonal, colour_edges(edges, len(v)), bends, weights, scale, masses,
                    float(rest.mean()))


def _usable_triangles(v: np.ndarray, tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The triangles with area, and twice their areas."""
    if tri.ndim != 2 or tri.shape[1] != 3 or not len(tri):
        raise InputError("the cloth layer needs a triangle mesh; this one has no faces")
    double_area = _cross_norm(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]])
    repeated = (tri[:, 0] == tri[:, 1]) | (tri[:, 1] == tri[:, 2]) | (tri[:, 0] == tri[:, 2])
    keep = ~repeated & (double_area > DEGENERATE_AREA * max(float(double_area.mean()), 1e-300))
    if not keep.any():
        raise InputError("every triangle of the mesh is degenerate (no area), so it has no cloth to simulate")
    return tri[keep], double_area[keep]


def _cross_norm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a × b| row by row (numpy's cross is slow on millions of rows)."""
    x = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    y = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    z = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return np.sqrt(x * x + y * y + z * z)


def _edges(tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique edges (E, 2), i < j, and the (E, 2) triangles on each side (-1 on a boundary, and on the second side of
    an edge where three or more faces meet)."""
    half = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    width = int(tri.max()) + 1
    keys = np.minimum(half[:, 0], half[:, 1]) * width + np.maximum(half[:, 0], half[:, 1])
    del half
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    first = np.concatenate([[True], sorted_keys[1:] != sorted_keys[:-1]])
    starts = np.flatnonzero(first)
    counts = np.diff(np.concatenate([starts, [len(keys)]]))
    unique = sorted_keys[starts]
    edges = np.stack([unique // width, unique % width], 1)
    face = order % len(tri)  # half-edge k belongs to triangle k mod F
    faces_of = np.full((len(edges), 2), -1, np.int64)
    faces_of[:, 0] = face[starts]
    two = counts == 2  # an edge where three or more faces meet keeps its stretch but bends freely, as in Cloth
    faces_of[two, 1] = face[starts[two] + 1]
    return edges, faces_of


def _opposite(tri: np.ndarray, faces: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The corner of each face (given per edge) that is not on the edge."""
    t = tri[faces]
    return t.sum(1) - edges[:, 0] - edges[:, 1]


def _hinges(v: np.ndarray, tri: np.ndarray, double_area: np.ndarray, edges: np.ndarray, faces_of: np.ndarray):
    """On interior edges: Bergou et al.'s quadratic bending stencils — corners (x0, x1 on the edge; x2, x3 opposite),
    weights from the cotangents at the edge's ends, scale 3 / (A0 + A1) — and which edges split a quad (both
    opposite angles wider than DIAGONAL_ANGLE: a shear diagonal that resists stretch but not compression). Every
    cotangent is a dot product over twice its triangle's area."""
    inner = np.flatnonzero(faces_of[:, 1] >= 0)
    e, f = edges[inner], faces_of[inner]
    x0, x1 = e[:, 0], e[:, 1]
    x2, x3 = _opposite(tri, f[:, 0], e), _opposite(tri, f[:, 1], e)
    a2, b2 = double_area[f[:, 0]], double_area[f[:, 1]]
    dot = lambda corner, p, q: np.einsum("ij,ij->i", v[p] - v[corner], v[q] - v[corner])  # noqa: E731
    c01, c02 = dot(x0, x1, x2) / a2, dot(x0, x1, x3) / b2  # the angles at the edge's ends, in each face
    c03, c04 = dot(x1, x0, x2) / a2, dot(x1, x0, x3) / b2
    weights = np.stack([c03 + c04, c01 + c02, -(c01 + c03), -(c02 + c04)], 1)
    wide = np.cos(np.radians(DIAGONAL_ANGLE)) / np.sin(np.radians(DIAGONAL_ANGLE))
    diagonal = np.zeros(len(edges), bool)
    diagonal[inner] = (dot(x2, x0, x1) / a2 < wide) & (dot(x3, x0, x1) / b2 < wide)
    return np.stack([x0, x1, x2, x3], 1).astype(np.int32), weights, 6.0 / (a2 + b2), diagonal


def colour_edges(edges: np.ndarray, vertex_count: int) -> list[np.ndarray]:
    """Edges split into sets that share no vertex (each set projected at once), by rounds of a parallel matching:
    every vertex proposes its remaining edge of highest (seeded random) priority, and an edge both its ends proposed
    joins the set; random priorities finish a set in a few rounds where index order would crawl along a grid."""
    priority = np.random.default_rng(0).permutation(len(edges))
    remaining = np.argsort(priority)  # kept in ascending priority: the last write per vertex is its highest
    from_a, from_b = np.full(vertex_count, -1, np.int64), np.full(vertex_count, -1, np.int64)
    taken = np.zeros(vertex_count, bool)
    colours = []
    while len(remaining):
        chosen = []
        cand, a, b = remaining, edges[remaining, 0], edges[remaining, 1]
        p = priority[cand]
        while len(cand):
            from_a[a], from_b[b] = p, p
            top_a, top_b = np.maximum(from_a[a], from_b[a]), np.maximum(from_a[b], from_b[b])
            from_a[a], from_b[b] = -1, -1
            win = (top_a == p) & (top_b == p)
            chosen.append(cand[win])
            taken[a[win]], taken[b[win]] = True, True
            keep = ~(taken[a] | taken[b])
            cand, a, b, p = cand[keep], a[keep], b[keep], p[keep]
        chosen = np.concatenate(chosen)
        taken[edges[chosen].reshape(-1)] = False
        colours.append(np.sort(chosen))
        out = np.ones(len(edges), bool)
        out[chosen] = False
        remaining = remaining[out[remaining]]
    return _merge_tail(colours)


def _merge_tail(colours: list[np.ndarray]) -> list[np.ndarray]:
    """The last, small sets (under half the largest) joined into one: each set costs a sweep step whatever its size;
    a vertex that the joined set holds twice takes half of each correction (``Topology.multiplicity``)."""
    largest = max(len(c) for c in colours)
    head = [c for c in colours if len(c) >= largest / 2]
    tail = [c for c in colours if len(c) < largest / 2]
    return head + ([np.sort(np.concatenate(tail))] if tail else [])


def tethers(edges: np.ndarray, rest: np.ndarray, vertex_count: int, pinned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each vertex's nearest pinned vertex along the mesh and the rest distance to it there (-1 and inf where no pin
    is reachable), by rounds of relaxation from a frontier of vertices whose distance just fell (arrays only: a
    million vertices in a few hundred MB). A path along edges is never shorter than the surface's own geodesic, so a
    tether of this length never holds the cloth tighter than its rest shape."""
    a = np.concatenate([edges[:, 0], edges[:, 1]])
    b = np.concatenate([edges[:, 1], edges[:, 0]])
    length = np.concatenate([rest, rest])
    order = np.argsort(a, kind="stable")
    a, b, length = a[order], b[order], length[order]
    start = np.searchsorted(a, np.arange(vertex_count + 1))
    distance = np.full(vertex_count, np.inf)
    anchor = np.full(vertex_count, -1, np.int64)
    distance[pinned], anchor[pinned] = 0.0, pinned
    frontier = np.unique(pinned)
    while len(frontier):
        counts = start[frontier + 1] - start[frontier]
        slots = np.repeat(start[frontier] - np.cumsum(np.concatenate([[0], counts[:-1]])), counts) + np.arange(counts.sum())
        source = np.repeat(frontier, counts)
        target, candidate = b[slots], distance[source] + length[slots]
        better = candidate < distance[target]
        target, candidate, source = target[better], candidate[better], source[better]
        if not len(target):
            break
        pick = np.lexsort((candidate, target))  # per target, its shortest candidate first
        first = np.concatenate([[True], target[pick][1:] != target[pick][:-1]])
        target, candidate, source = target[pick][first], candidate[pick][first], source[pick][first]
        distance[target], anchor[target] = candidate, anchor[source]
        frontier = target
    return anchor, distance
