"""Procedural surface meshes for the shape families (vertices, triangles). numpy only."""

from __future__ import annotations

import numpy as np


def compact(vertices: np.ndarray, triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop vertices no triangle uses and renumber."""
    used = np.unique(triangles)
    remap = -np.ones(len(vertices), dtype=np.int64)
    remap[used] = np.arange(len(used))
    return vertices[used], remap[triangles]


def sheet(width: float, height: float, nx: int, ny: int, holes: list[tuple[float, float, float, float]] = ()) -> tuple:
    """A rectangle in the XZ plane (x from 0 to width, z from 0 down to -height), optional rectangular
    cut-outs given as (x0, x1, z0, z1) fractions of the sheet."""
    xs, zs = np.meshgrid(np.linspace(0, width, nx), np.linspace(0, -height, ny), indexing="ij")
    verts = np.stack([xs.ravel(), np.zeros(nx * ny), zs.ravel()], 1)
    idx = np.arange(nx * ny).reshape(nx, ny)
    tris = []
    for i in range(nx - 1):
        for j in range(ny - 1):
            cx, cz = (i + 0.5) / (nx - 1), (j + 0.5) / (ny - 1)
            if any(x0 <= cx <= x1 and z0 <= cz <= z1 for x0, x1, z0, z1 in holes):
                continue
            a, b, c, d = idx[i, j], idx[i + 1, j], idx[i, j + 1], idx[i + 1, j + 1]
            tris += [(a, b, d), (a, d, c)]
    return compact(verts, np.array(tris, dtype=np.int64))


def box_surface(size: tuple[float, float, float], res: tuple[int, int, int]) -> tuple:
    """A closed box surface centred at the origin with ``res`` vertices per edge."""
    verts, tris = [], []
    sx, sy, sz = (s / 2 for s in size)
    faces = [  # (axis fixed, sign, the two varying axes)
        (0, -1, 1, 2), (0, 1, 2, 1), (1, -1, 2, 0), (1, 1, 0, 2), (2, -1, 0, 1), (2, 1, 1, 0)]
    half = (sx, sy, sz)
    for axis, sign, ua, va in faces:
        nu, nv = res[ua], res[va]
        us, vs = np.meshgrid(np.linspace(-half[ua], half[ua], nu), np.linspace(-half[va], half[va], nv), indexing="ij")
        pts = np.zeros((nu * nv, 3))
        pts[:, axis] = sign * half[axis]
        pts[:, ua], pts[:, va] = us.ravel(), vs.ravel()
        base = sum(len(v) for v in verts)
        idx = np.arange(nu * nv).reshape(nu, nv) + base
        for i in range(nu - 1):
            for j in range(nv - 1):
                a, b, c, d = idx[i, j], idx[i + 1, j], idx[i, j + 1], idx[i + 1, j + 1]
                tris += [(a, b, d), (a, d, c)] if sign > 0 else [(a, d, b), (a, c, d)]
        verts.append(pts)
    return weld(np.concatenate(verts), np.array(tris, dtype=np.int64))


def weld(vertices: np.ndarray, triangles: np.ndarray, tol: float = 1e-7) -> tuple:
    """Merge coincident vertices (box seams)."""
    keys = np.round(vertices / tol).astype(np.int64)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    tris = inverse.reshape(-1)[triangles]
    tris = tris[(tris[:, 0] != tris[:, 1]) & (tris[:, 1] != tris[:, 2]) & (tris[:, 0] != tris[:, 2])]
    return vertices[first], tris


def uv_sphere(radius: float, rings: int, segments: int) -> tuple:
    verts = [(0.0, 0.0, radius)]
    for i in range(1, rings):
        theta = np.pi * i / rings
        for j in range(segments):
            phi = 2 * np.pi * j / segments
            verts.append((radius * np.sin(theta) * np.cos(phi), radius * np.sin(theta) * np.sin(phi), radius * np.cos(theta)))
    verts.append((0.0, 0.0, -radius))
    verts = np.array(verts)
    tris = []
    ring = lambda i, j: 1 + (i - 1) * segments + (j % segments)  # noqa: E731
    for j in range(segments):
        tris.append((0, ring(1, j), ring(1, j + 1)))
        tris.append((len(verts) - 1, ring(rings - 1, j + 1), ring(rings - 1, j)))
    for i in range(1, rings - 1):
        for j in range(segments):
            a, b, c, d = ring(i, j), ring(i, j + 1), ring(i + 1, j), ring(i + 1, j + 1)
            tris += [(a, c, d), (a, d, b)]
    return verts, np.array(tris, dtype=np.int64)


def blob(radius: float, rings: int, segments: int, rng: np.random.Generator, bumps: int = 4, amount: float = 0.25) -> tuple:
    """A sphere pushed in and out by a few random smooth bumps."""
    verts, tris = uv_sphere(radius, rings, segments)
    dirs = verts / np.linalg.norm(verts, axis=1, keepdims=True)
    scale = np.ones(len(verts))
    for _ in range(bumps):
        centre = rng.normal(size=3)
        centre /= np.linalg.norm(centre)
        scale += rng.uniform(-amount, amount) * np.exp(-8 * (1 - dirs @ centre))
    return verts * scale[:, None], tris


def star_prism(outer: float, inner: float, points: int, depth: float, rings: int = 3) -> tuple:
    """An extruded star (a soft toy), centred at the origin, axis along Y."""
    angles = np.linspace(0, 2 * np.pi, 2 * points, endpoint=False)
    radii = np.where(np.arange(2 * points) % 2 == 0, outer, inner)
    outline = np.stack([radii * np.cos(angles), radii * np.sin(angles)], 1)
    layers = np.linspace(-depth / 2, depth / 2, rings)
    n = len(outline)
    verts = [np.array([[p[0], y, p[1]] for p in outline]) for y in layers]
    verts.append(np.array([[0, layers[0], 0], [0, layers[-1], 0]]))
    verts = np.concatenate(verts)
    tris = []
    for r in range(rings - 1):
        for k in range(n):
            a, b = r * n + k, r * n + (k + 1) % n
            c, d = a + n, b + n
            tris += [(a, b, d), (a, d, c)]
    c0, c1 = rings * n, rings * n + 1
    for k in range(n):
        tris.append((c0, (k + 1) % n, k))
        tris.append((c1, (rings - 1) * n + k, (rings - 1) * n + (k + 1) % n))
    return verts, np.array(tris, dtype=np.int64)


def merge(*parts: tuple) -> tuple:
    """Concatenate meshes; returns vertices, triangles and each vertex's part index."""
    verts, tris, owner, base = [], [], [], 0
    for k, (v, t) in enumerate(parts):
        verts.append(v)
        tris.append(t + base)
        owner.append(np.full(len(v), k))
        base += len(v)
    return np.concatenate(verts), np.concatenate(tris), np.concatenate(owner)


def subdivide(vertices: np.ndarray, triangles: np.ndarray, owner: np.ndarray | None = None) -> tuple:
    """Split every triangle into four at its edge midpoints (shared midpoints are reused)."""
    edges = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    edges.sort(axis=1)
    unique, inverse = np.unique(edges, axis=0, return_inverse=True)
    mids = len(vertices) + inverse.reshape(3, -1).T  # (F, 3): midpoints of edges 01, 12, 20
    new_verts = np.concatenate([vertices, vertices[unique].mean(axis=1)])
    a, b, c = triangles.T
    ab, bc, ca = mids.T
    tris = np.concatenate([np.stack(t, 1) for t in ((a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca))])
    new_owner = None if owner is None else np.concatenate([owner, owner[unique[:, 0]]])
    return new_verts, tris, new_owner


def subdivide_to(vertices: np.ndarray, triangles: np.ndarray, min_vertices: int) -> tuple:
    while len(vertices) < min_vertices:
        vertices, triangles, _ = subdivide(vertices, triangles)
    return vertices, triangles
