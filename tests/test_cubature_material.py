"""Cubature points (masses, pins, spring graph) and the material table's multipliers and overrides."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.runtime.dynamics.cubature import from_mesh, from_points, knn_graph, two_hop  # noqa: E402
from neurok_blender.runtime.dynamics.material import Material  # noqa: E402
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


def test_material_multipliers_overrides_and_validation():
    m = Material().with_multipliers(stiffness=2.0, damping=0.5)
    assert m.stiffness == 2 * Material().stiffness and m.damping_mass == 0.5 * Material().damping_mass
    assert Material().updated({"drag": 3}).drag == 3.0
    with pytest.raises(InputError, match="unknown material keys"):
        Material().updated({"stifness": 1})
    with pytest.raises(InputError):
        Material(stiffness=-1)
