"""The NeuROK engine on the shipped model: pins, gravity, wind, seeds, point clouds, pokes."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.runtime import api  # noqa: E402
from tests.conftest import grid_sheet, needs_model  # noqa: E402


def prepare(v, t, pins, frames, **settings):
    settings.setdefault("solver", {"variation": 0.0})
    return api.prepare(v, t, pins=pins, frame_count=frames, device="cpu", **settings)


def simulate_sheet(frames=16, **settings):
    v, t = grid_sheet()
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)  # the top edge
    sim = prepare(v, t, pins, frames, **settings)
    return v, pins, sim.run(), sim


@needs_model
def test_engine_streams_frames_and_pins_hold():
    v, pins, out, sim = simulate_sheet(gravity=(0, 0, -9.81), wind=(0, 4, 0))
    assert out.shape == (16, len(v), 3) and np.isfinite(out).all()
    assert np.array_equal(out[0], v)  # frame 0 is the input snapshot exactly (q0 = 0 decodes to it)
    diag = np.linalg.norm(v.max(0) - v.min(0))
    pinned_motion = np.linalg.norm(out[:, pins > 0] - v[pins > 0], axis=-1).max()
    free_motion = np.linalg.norm(out[:, pins == 0] - v[pins == 0], axis=-1).max()
    assert pinned_motion < 0.03 * diag and free_motion > 3 * pinned_motion
    assert len(sim.energy) == 16 and sim.timing["dynamics_s"] > 0


@needs_model
@pytest.mark.parametrize("axis", [1, -1])
def test_wind_pushes_along_its_direction(axis):
    v, pins, out, _ = simulate_sheet(gravity=(0, 0, 0), wind=(0, 6.0 * axis, 0))
    shift = (out[-1, pins == 0] - v[pins == 0]).mean(0)
    assert shift[1] * axis > 0 and abs(shift[1]) > abs(shift[0])


@needs_model
def test_gravity_pulls_along_its_direction_in_local_space():
    v, pins, out, _ = simulate_sheet(gravity=(0, -9.81, 0))  # "down" is -y in this object's local frame
    shift = (out[-1, pins == 0] - v[pins == 0]).mean(0)
    assert shift[1] < 0 and abs(shift[1]) > abs(shift[0])


@needs_model
def test_seeds_draw_different_motions_deterministically():
    v, t = grid_sheet(8, 6)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    runs = [prepare(v, t, pins, 6, seed=s, gravity=(0, 0, 0), solver={}).run() for s in (1, 1, 2)]
    assert np.array_equal(runs[0], runs[1]) and not np.allclose(runs[0], runs[2])


@needs_model
def test_point_clouds_simulate_through_a_knn_graph():
    v, _ = grid_sheet(10, 8)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    out = prepare(v, None, pins, 6).run()
    assert out.shape == (6, len(v), 3) and np.isfinite(out).all() and not np.allclose(out[-1], v)


@needs_model
def test_poke_and_initial_velocity_move_the_shape_that_way():
    v, t = grid_sheet(10, 8)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    corner = int(np.argmin(v[:, 2] - v[:, 0]))  # bottom right
    out = prepare(v, t, pins, 4, gravity=(0, 0, 0), damping=0.0, poke={"vertices": [corner], "velocity": [0, 3.0, 0]}).run()
    assert out[2, corner, 1] > v[corner, 1]


@needs_model
@pytest.mark.parametrize("poke", [{"vertices": [10_000], "velocity": [0, 1, 0]}, {"vertices": [0]},
                                  {"vertices": [0], "velocity": [0, float("nan"), 0]}, {"vertices": [], "velocity": [0, 1, 0]}])
def test_a_bad_poke_is_an_input_error(poke):
    v, t = grid_sheet(6, 5)
    with pytest.raises(InputError, match="poke"):
        prepare(v, t, None, 2, poke=poke)
