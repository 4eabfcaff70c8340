"""Cubature points (masses, pins, spring graph) and the material table's multipliers and overrides."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.runtime.dynamics.cubature import count_parts, from_mesh, from_points, knn_graph, two_hop  # noqa: E402
from neurok_blender.runtime.dynamics.material import Material, MaterialPredictor, shape_features  # noqa: E402
from tests.conftest import grid_sheet  # noqa: E402


def test_cubature_masses_pins_and_graph():
    v, t = grid_sheet()
    pins = (v[:, 0] < 1e-6).astype(float)  # the left edge
    cub = from_mesh(v, t, pins, 120, np.random.default_rng(0))
    assert len(cub.points) == 120 and not cub.solid
    assert cub.total_mass == pytest.approx(2.0 * 1.4, rel=1e-6)  # density 1 per unit area
    assert (cub.pins[cub.points[:, 0] < 1e-6] == 1).any() and (cub.pins[cub.points[:, 0] > 0.5] == 0).all()
    assert len(cub.edges) >= 120 and len(cub.bends) > 0
    assert not set(map(tuple, cub.edges.tolist())) & set(map(tuple, cub.bends.tolist()))
    cloud = from_points(v, pins, 60, np.random.default_rng(0))
    assert len(cloud.points) == 60 and np.allclose(np.abs(cloud.normals[:, 1]), 1.0, atol=1e-6)
    assert knn_graph(np.zeros((1, 3)), 4).shape == (0, 2) and two_hop(np.array([[0, 1], [1, 2]]), 3).tolist() == [[0, 2]]


def test_pins_hold_the_pinned_vertices_not_the_strip_of_triangles_beside_them():
    """As Blender Cloth and MuJoCo pin vertices: a sample inside a triangle with a free corner is free, so a
    sheet pinned along an edge turns about it (an interpolated weight clamped the first row of triangles, and
    the sheet hung out as a cantilever); a sample inside a wholly pinned region stays held."""
    v, t = grid_sheet()
    edge = (v[:, 0] < 1e-6).astype(float)
    cub = from_mesh(v, t, edge, 120, np.random.default_rng(0))
    off_edge = cub.points[:, 0] > 1e-6
    assert off_edge.sum() > 100 and (cub.pins[off_edge] == 0).all()
    assert (cub.pins[~off_edge] == 1).all() and (~off_edge).sum() >= 4
    band = (v[:, 0] < 0.5).astype(float)  # a wide pinned band: the samples inside it are held
    cub = from_mesh(v, t, band, 120, np.random.default_rng(0))
    inside, outside = cub.points[:, 0] < 0.45, cub.points[:, 0] > 0.55
    assert (cub.pins[inside] == 1).all() and (cub.pins[outside] == 0).all() and inside.sum() > 20
    soft = from_mesh(v, t, 0.5 * band, 120, np.random.default_rng(0))  # a painted weight carries over
    assert np.allclose(soft.pins[inside], 0.5)


def test_material_multipliers_overrides_and_validation():
    m = Material().with_multipliers(stiffness=2.0, damping=0.5)
    assert m.stiffness == 2 * Material().stiffness and m.damping_mass == 0.5 * Material().damping_mass
    assert Material().updated({"drag": 3}).drag == 3.0
    with pytest.raises(InputError, match="unknown material keys"):
        Material().updated({"stifness": 1})
    with pytest.raises(InputError):
        Material(stiffness=-1)


def _box(lo, hi):
    """A closed box's 8 corners and 12 triangles."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    t = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return v, t


def test_loose_parts_are_counted_as_blender_does():
    a, ta = _box((0, 0, 0), (1, 1, 1))
    b, tb = _box((0, 0, 1), (0.2, 0.2, 2))  # standing on the first, touching it: still a separate piece
    c, tc = _box((3, 0, 0), (4, 1, 1))
    v = np.concatenate([a, b, c])
    t = np.concatenate([ta, tb + 8, tc + 16])
    assert count_parts(a, ta) == 1 and count_parts(v, t) == 3
    order = np.random.default_rng(0).permutation(len(v))  # vertex order does not matter
    assert count_parts(v[order], np.argsort(order)[t]) == 3
    soup = v[t.reshape(-1)]  # every triangle on its own vertices (an STL): welded, the pieces it shows
    assert count_parts(soup, np.arange(len(soup)).reshape(-1, 3)) == 2  # the touching boxes weld into one
    sheet_v, sheet_t = grid_sheet()
    assert count_parts(sheet_v, sheet_t) == 1
    cub = from_mesh(v, t, np.zeros(len(v)), 64, np.random.default_rng(0))
    assert cub.parts == 3 and cub.solid


def test_the_material_predictor_tells_assemblies_from_single_bodies():
    pins = np.zeros(100)
    points = np.random.default_rng(0).uniform(size=(100, 3))
    single, assembly = shape_features(points, pins, True), shape_features(points, pins, True, parts=4)
    assert single[-1] == 0.0 and assembly[-1] == 1.0 and np.allclose(single[:-1], assembly[:-1])
    stiff, soft = {"stiffness": 3125.0}, {"stiffness": 5.0}
    table = MaterialPredictor(np.array([single, single, assembly]), [soft, soft, stiff], k=1)
    assert table.predict(assembly).stiffness == pytest.approx(3125.0) and table.predict(single).stiffness == pytest.approx(5.0)
    old = MaterialPredictor(np.array([single[:4]]), [soft], k=1)  # a table fitted before the parts feature
    assert old.predict(assembly).stiffness == pytest.approx(5.0)


def test_the_material_predictor_takes_the_median_of_its_neighbours():
    """One neighbour whose fit disagrees by orders of magnitude does not drag the prediction to a material no
    neighbour had (their log-mean, the rule before, is 1828 here: the held-out lamp folded at it)."""
    points = np.random.default_rng(0).uniform(size=(100, 3))
    feats = shape_features(points, np.zeros(100), True, parts=2)
    table = MaterialPredictor(np.array([feats, feats, feats]), [{"stiffness": 15625.0, "drag": 1.0},
                              {"stiffness": 15625.0, "drag": 4.0}, {"stiffness": 25.0, "drag": 2.0}], k=3)
    predicted = table.predict(feats)
    assert predicted.stiffness == pytest.approx(15625.0) and predicted.drag == pytest.approx(2.0)
    assert predicted.bending == pytest.approx(Material().bending)  # a parameter no entry fitted keeps its default
    previous = dataclasses.replace(table, average="log-mean").predict(feats)
    assert previous.stiffness == pytest.approx((15625.0**2 * 25.0) ** (1 / 3)) and previous.drag == pytest.approx(2.0)
