"""The scene around an object, through the SDK: colliders, pins that follow animation, force fields, the
animation's initial motion, the scene track, and their typed errors. Physics checks, not timings."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender import track as tracks  # noqa: E402
from neurok_blender.bridge.request import ForceField, SimulationRequest  # noqa: E402
from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.runtime import api  # noqa: E402
from neurok_blender.runtime.dynamics import scene as scenes  # noqa: E402


def grid(n: int, plane: str = "xy", offset=(0.0, 0.0, 0.0), size: float = 1.0):
    g = np.linspace(-size / 2, size / 2, n)
    a, b = np.meshgrid(g, g)
    zeros = np.zeros(n * n)
    cols = {"xy": (a.ravel(), b.ravel(), zeros), "xz": (a.ravel(), zeros, b.ravel()), "yz": (zeros, a.ravel(), b.ravel())}
    v = np.stack(cols[plane], 1) + np.asarray(offset)
    f = []
    for i in range(n - 1):
        for j in range(n - 1):
            k = i * n + j
            f += [[k, k + 1, k + n], [k + 1, k + n + 1, k + n]]
    return v, np.asarray(f)


def icosphere(radius: float, subdivisions: int = 2):
    import trimesh

    s = trimesh.creation.icosphere(subdivisions, radius=radius)
    return np.asarray(s.vertices), np.asarray(s.faces)


def box(extent):
    import trimesh

    b = trimesh.creation.box(extent)
    return np.asarray(b.vertices), np.asarray(b.faces)


# -- geometry --------------------------------------------------------------------------------------------
def test_signed_distance_to_a_box_is_exact_inside_and_outside():
    v, f = box((2.0, 2.0, 2.0))
    sdf = scenes.MeshSDF(f, len(v), "cpu")
    sdf.update(torch.as_tensor(v, dtype=torch.float64))
    points = torch.tensor([[0.0, 0.0, 1.5], [0.0, 0.0, 0.5], [2.0, 2.0, 0.0], [1.5, 0.0, 0.2], [0.0, 0.0, 0.0]],
                          dtype=torch.float64)
    d, g = sdf.query(points, sdf.candidates(points))
    expected = [0.5, -0.5, math.sqrt(2.0), 0.5, -1.0]
    assert d.tolist() == pytest.approx(expected, abs=1e-9)
    assert g[0].tolist() == pytest.approx([0, 0, 1], abs=1e-9)  # the gradient points out
    assert g[1].tolist() == pytest.approx([0, 0, 1], abs=1e-9)
    assert g[2].tolist() == pytest.approx([2**-0.5, 2**-0.5, 0], abs=1e-9)  # nearest an edge: still outside
    assert sdf.closed


def test_field_effects_follow_blender_conventions():
    pts = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
    eye = np.eye(4)
    force = scenes.field_effect(ForceField(kind="force", strength=2.0), eye, 2.0, pts, 0.0)
    assert torch.allclose(force, 2.0 * pts / pts.norm(dim=-1, keepdim=True))  # positive strength pushes away
    vortex = scenes.field_effect(ForceField(kind="vortex", strength=1.0), eye, 1.0, pts[:2], 0.0)
    assert vortex[0].tolist() == pytest.approx([0, 1, 0]) and vortex[1].tolist() == pytest.approx([-1, 0, 0])
    wind = scenes.field_effect(ForceField(kind="wind", strength=3.0, shape="plane", falloff_power=1.0,
                                          distance_max=2.5), eye, 3.0, pts, 0.0)
    assert wind[:, 2].tolist() == pytest.approx([3.0, 3.0, 0.0])  # plane: z distance 0, 0, 3 (past the max)
    far = scenes.field_effect(ForceField(kind="force", strength=1.0, falloff_power=2.0), eye, 1.0, pts, 0.0)
    assert far.norm(dim=-1).tolist() == pytest.approx([1 / 4, 1 / 9, 1 / 16])  # (1 + r)^-2
    turbulence = scenes.field_effect(ForceField(kind="turbulence", strength=1.0, size=0.5, seed=3), eye, 1.0, pts, 0.0)
    again = scenes.field_effect(ForceField(kind="turbulence", strength=1.0, size=0.5, seed=3), eye, 1.0, pts, 0.0)
    assert torch.equal(turbulence, again) and float(turbulence.norm()) > 0  # seeded, not zero


# -- colliders ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_sheet_dropped_on_a_sphere_collider_stays_outside_it():
    v, f = grid(14, offset=(0, 0, 0.6))
    ball_v, ball_f = icosphere(0.4, 3)
    settings = dict(frame_count=24, fps=24)
    sim = api.prepare(v, f, colliders=[{"vertices": ball_v, "triangles": ball_f, "name": "ball"}], **settings)
    frames = sim.run()
    radius = np.linalg.norm(frames, axis=-1)  # the ball sits at the origin
    # the icosphere's faces lie down to 0.3975 from its centre: no decoded vertex is inside it
    assert radius.min() > 0.395, radius.min()
    centre = np.linalg.norm(v[:, :2], axis=1) < 0.1
    assert frames[-1][centre, 2].mean() == pytest.approx(0.42, abs=0.03)  # it came down and rests on top
    assert frames[-1][~centre, 2].min() < 0.35  # the sides hang over it
    pen = sim.stats()["penetration"]
    assert pen["deepest_cubature"] < 0.02  # the contact points themselves stay within the thickness
    free = api.simulate(v, f, **settings).frames
    assert np.linalg.norm(free, axis=-1).min() < 0.3  # without the collider it falls through the ball


@pytest.mark.slow
def test_a_moving_collider_pushes_a_jelly():
    jelly_v, jelly_f = icosphere(0.3)
    wall_v, wall_f = box((0.4, 1.0, 1.0))
    frames = 30
    moves = np.tile(np.eye(4), (frames, 1, 1))
    moves[:, 0, 3] = -0.8 + 0.03 * np.arange(frames)  # 0.72 m/s along +x; it reaches the jelly at frame ~10
    settings = dict(frame_count=frames, fps=24, gravity=(0, 0, 0), solver={"variation": 0.0})
    out = api.simulate(jelly_v, jelly_f, colliders=[{"vertices": wall_v, "triangles": wall_f, "transforms": moves}],
                       **settings).frames
    x = out[:, :, 0].mean(1)
    assert abs(x[8]) < 0.01  # untouched before the wall arrives
    assert x[-1] > 0.25  # pushed along
    wall_front = moves[-1, 0, 3] + 0.2
    assert out[-1][:, 0].min() > wall_front - 0.01  # and not through the wall
    alone = api.simulate(jelly_v, jelly_f, **settings).frames
    assert abs(alone[-1][:, 0].mean()) < 0.01


# -- pins that follow animation ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("detail", [True, False])
def test_pinned_vertices_follow_an_animated_parent_and_the_rest_lags(detail):
    v, f = grid(12, "xz", offset=(0, 0, 1.5))
    pins = (v[:, 2] > 1.99).astype(float)
    frames = 24
    parent = np.tile(np.eye(4), (frames, 1, 1))
    parent[:, 1, 3] = np.clip(np.arange(frames) / 6, 0, 1) * 0.5  # 0.5 m along the cape's normal in 0.25 s
    targets = np.einsum("tab,vb->tva", parent[:, :3, :3], v[pins > 0]) + parent[:, None, :3, 3]
    sim = api.prepare(v, f, pins=pins, frame_count=frames, fps=24, object_matrices=parent, pin_targets=targets,
                      solver={"detail": detail})
    lag = []
    out = sim.run()
    size = float(np.ptp(v, 0).max())
    for i in range(frames):  # the bake is in the object's own (moving) frame: pinned vertices stay put there
        assert np.abs(out[i][pins > 0] - v[pins > 0]).max() < 0.01 * size
        world = out[i] @ parent[i, :3, :3].T + parent[i, :3, 3]
        lag.append(world[v[:, 2] < 1.05, 1].mean() - parent[i, 1, 3])
    assert min(lag[:8]) < -0.1  # the free edge is left behind while the shoulders move...
    assert max(lag[8:]) > 0.05  # ...and swings through, like a pendulum, once they stop
    if not detail:  # the reduced dynamics themselves hold the pinned cubature points on their targets
        system = sim.system
        pinned = system.pins > 0.99
        state = sim.last_state
        assert float((state.x[pinned] - system.pin_target[pinned]).norm(dim=-1).max()) < 0.01 * size


@pytest.mark.slow
def test_the_animation_motion_at_the_first_frame_carries_on():
    jelly_v, jelly_f = icosphere(0.3)
    velocity = np.tile([1.0, 0.0, 0.0], (len(jelly_v), 1))
    out = api.simulate(jelly_v, jelly_f, frame_count=13, fps=24, gravity=(0, 0, 0), initial_velocities=velocity,
                       solver={"variation": 0.0}).frames
    assert out[-1][:, 0].mean() == pytest.approx(0.5, rel=0.05)  # 1 m/s for half a second


# -- force fields ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_wind_field_pushes_a_flag_along_its_axis_with_no_panel_wind():
    v, f = grid(12, "yz", offset=(0, 0.5, 1.5))
    pins = (v[:, 1] < 0.01).astype(float)  # the pole along z at y = 0
    to_x = np.array([[0, 0, 1, 0], [0, 1, 0, 0], [-1, 0, 0, 0], [0, 0, 0, 1]], float)  # the field's +Z is world +x
    for sign, matrix in ((1, to_x), (-1, to_x @ np.diag([-1, 1, -1, 1]))):
        out = api.simulate(v, f, pins=pins, frame_count=16, fps=24, gravity=(0, 0, 0), wind=(0, 0, 0),
                           fields=[{"kind": "wind", "strength": 8.0, "shape": "plane", "matrix": tuple(matrix.ravel())}]).frames
        shift = (out[-1][:, 0] - v[:, 0]).mean()
        assert sign * shift > 0.1, shift


# -- the scene track and bad input ----------------------------------------------------------------------------
def test_the_scene_track_round_trips_through_its_file(tmp_path):
    request = SimulationRequest(frame_count=3, colliders=({"vertex_count": 4},), fields=({"kind": "force"},),
                                animated_pins=True)
    layout = tracks.layout_for(request, np.array([0.0, 1.0, 0.5]))
    assert layout.width == 16 + 2 * 3 + 4 * 3 + 17
    writer = tracks.TrackWriter(str(tmp_path / "scene.npy"), 3, layout)
    for i in range(3):
        writer.append(object=np.eye(4), pins=np.full((2, 3), i), collider0=np.zeros((4, 3)), field0=np.arange(17))
    path = writer.close()
    rows = tracks.open_track(path, 3, layout)
    assert rows.shape == (3, layout.width) and float(layout.get(rows[2], "pins")[0]) == 2.0
    assert not (tmp_path / "scene.npy.partial").exists()


def test_bad_scene_input_is_refused_with_a_clear_error():
    v, f = grid(6)
    ball_v, ball_f = icosphere(0.2, 1)
    with pytest.raises(InputError, match="no faces"):
        api.prepare(v, f, frame_count=4, colliders=[{"vertices": ball_v, "triangles": np.zeros((0, 3), int)}])
    with pytest.raises(InputError, match="outside"):
        api.prepare(v, f, frame_count=4, colliders=[{"vertices": ball_v, "triangles": ball_f + len(ball_v)}])
    pins = np.zeros(len(v))
    pins[:3] = 1.0
    bad = np.zeros((4, 3, 3))
    bad[2, 1, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        api.prepare(v, f, pins=pins, frame_count=4, pin_targets=bad)
    with pytest.raises(InputError, match="no vertex has a pin weight"):
        api.prepare(v, f, frame_count=4, pin_targets=np.zeros((4, 0, 3)))
    with pytest.raises(InputError, match="field kind"):
        SimulationRequest(fields=({"kind": "magnet"},))
    with pytest.raises(InputError, match="thickness"):
        SimulationRequest(colliders=({"vertex_count": 3, "thickness": -1.0},))
    with pytest.raises(InputError, match="need a scene track"):
        from neurok_blender.runtime.dynamics.scene import SceneDriver

        request = SimulationRequest(colliders=({"vertex_count": 3},))
        SceneDriver(request, v, np.zeros(len(v)), v, np.zeros(len(v)), scenes.SceneInput([np.array([[0, 1, 2]])]),
                    torch.float32, "cpu")


def test_a_nan_in_the_track_file_names_the_frame(tmp_path):
    from neurok_blender.runtime.dynamics.scene import SceneDriver

    v, _ = grid(4)
    pins = np.zeros(len(v))
    pins[0] = 1
    request = SimulationRequest(frame_count=5, animated_pins=True)
    layout = tracks.layout_for(request, pins)
    rows = np.tile(np.concatenate([np.eye(4).ravel(), v[0]]), (5, 1)).astype(np.float32)
    rows[3, 16] = np.nan
    with pytest.raises(InputError, match="pin target at frame 3"):
        SceneDriver(request, v, pins, v, pins, scenes.SceneInput([], rows), torch.float32, "cpu")
    assert layout.width == rows.shape[1]


@pytest.mark.slow
def test_the_cli_takes_a_collider_file_and_a_field(tmp_path):
    import trimesh

    from neurok_blender.runtime.__main__ import main

    v, f = grid(10, offset=(0, 0, 0.5))
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "sheet.obj")
    ball_v, ball_f = icosphere(0.3, 2)
    trimesh.Trimesh(ball_v, ball_f, process=False).export(tmp_path / "ball.obj")
    out = tmp_path / "out.npz"
    field = '{"kind": "force", "strength": 0.0}'
    assert main(["simulate", str(tmp_path / "sheet.obj"), "--frames", "12", "--collider", str(tmp_path / "ball.obj"),
                 "--field", field, "--out", str(out), "--quiet"]) == 0
    frames = np.load(out)["frames"]
    assert frames[-1][:, 2].max() < 0.45 and np.linalg.norm(frames, axis=-1).min() > 0.29
    assert main(["simulate", str(tmp_path / "sheet.obj"), "--field", "{not json", "--out", str(out)]) == 2
