"""The scene around an object, in Blender, through Simulate and the shipped model: what an artist checks after
setting up a collider, an animated parent or a force field."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytestmark = [pytest.mark.blender, pytest.mark.slow]
bpy = pytest.importorskip("bpy")

from neurok_blender.runtime.engine import DEFAULT_CHECKPOINT_DIR  # noqa: E402
from tests.blender_helpers import evaluated_positions, make_grid, rest_positions, simulate  # noqa: E402
from tests.conftest import runtime_python  # noqa: E402


@pytest.fixture
def neurok(blender, monkeypatch):
    if not (DEFAULT_CHECKPOINT_DIR / "config.json").exists():
        pytest.skip("no shipped checkpoint")
    monkeypatch.delenv("NEUROK_WORKER_ENTRY", raising=False)
    monkeypatch.setenv("NEUROK_PYTHON", runtime_python())
    return blender


def frames(start: int, end: int) -> None:
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = start, end
    scene.frame_set(start)


def world_positions(obj, frame: int) -> np.ndarray:
    local = evaluated_positions(obj, frame)  # sets the frame
    m = np.array(obj.matrix_world)
    return local @ m[:3, :3].T + m[:3, 3]


def collider(obj) -> None:
    obj.modifiers.new("Collision", "COLLISION")


def test_a_sheet_dropped_on_a_sphere_with_a_collision_modifier_stays_outside_it(neurok):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(0.0, 0.0, 0.0))
    ball = bpy.context.active_object
    collider(ball)
    sheet = make_grid("Sheet", size=14, location=(0.0, 0.0, 0.8))
    frames(1, 20)
    assert simulate(sheet) == {"FINISHED"}, sheet.neurok.last_bake
    closest = min(np.linalg.norm(world_positions(sheet, f), axis=1).min() for f in range(1, 21))
    assert closest > 0.485  # the UV sphere's faces lie at 0.49 and beyond from its centre
    last = world_positions(sheet, 20)
    assert last[:, 2].max() < 0.7  # it fell onto the ball...
    assert last[:, 2].max() > 0.45  # ...and rests on it instead of falling through


def test_pinned_vertices_follow_an_animated_parent(neurok):
    body = bpy.data.objects.new("Body", None)
    bpy.context.collection.objects.link(body)
    body.location = (0.0, 0.0, 0.0)
    body.keyframe_insert("location", frame=1)
    body.location = (0.0, 0.6, 0.0)
    body.keyframe_insert("location", frame=7)
    cape = make_grid("Cape", size=10, location=(0.0, 0.0, 1.0))
    cape.rotation_euler = (math.pi / 2, 0.0, 0.0)  # hanging in the xz plane, its local +y up
    cape.parent = body
    group = cape.vertex_groups.new(name="shoulders")
    group.add([v.index for v in cape.data.vertices if v.co.y > 0.99], 1.0, "REPLACE")
    cape.neurok.pin_group = "shoulders"
    frames(1, 16)
    assert simulate(cape) == {"FINISHED"}, cape.neurok.last_bake
    rest = rest_positions(cape)
    pinned = rest[:, 1] > 0.99
    size = float(np.ptp(rest, 0).max())
    lags = []
    for f in range(1, 17):
        local = evaluated_positions(cape, f)
        assert np.abs(local[pinned] - rest[pinned]).max() < 0.01 * size  # the shoulders ride with the body
        m = np.array(cape.matrix_world)
        world = local @ m[:3, :3].T + m[:3, 3]
        expected = rest @ m[:3, :3].T + m[:3, 3]
        lags.append(float((world[~pinned, 1] - expected[~pinned, 1]).mean()))
    assert min(lags) < -0.05  # the hem is left behind while the body moves (the moving frame's inertia)


def test_a_wind_field_along_x_pushes_a_flag_along_x_with_no_panel_wind(neurok):
    flag = make_grid("Flag", size=10, location=(0.0, 1.0, 1.5))
    flag.rotation_euler = (0.0, math.pi / 2, 0.0)  # the yz plane: it faces the wind along x
    group = flag.vertex_groups.new(name="pole")
    bpy.context.view_layer.update()
    m = np.array(flag.matrix_world)
    pole = [v.index for v in flag.data.vertices if (m @ np.append(np.array(v.co), 1.0))[1] < 0.01]
    group.add(pole, 1.0, "REPLACE")
    flag.neurok.pin_group = "pole"
    flag.neurok.wind_velocity = (0.0, 0.0, 0.0)
    bpy.context.scene.use_gravity = False
    bpy.ops.object.effector_add(type="WIND", rotation=(0.0, math.pi / 2, 0.0))  # the field's +Z is world +x
    bpy.context.active_object.field.strength = 8.0
    frames(1, 12)
    assert simulate(flag) == {"FINISHED"}, flag.neurok.last_bake
    start, end = world_positions(flag, 1), world_positions(flag, 12)
    assert (end[:, 0] - start[:, 0]).mean() > 0.05


def test_a_moving_collider_pushes_a_jelly(neurok):
    bpy.ops.mesh.primitive_ico_sphere_add(radius=0.3, subdivisions=2, location=(0.0, 0.0, 1.0))
    jelly = bpy.context.active_object
    jelly.name = "Jelly"
    bpy.ops.mesh.primitive_cube_add(size=0.4, location=(-0.8, 0.0, 1.0))
    paddle = bpy.context.active_object
    collider(paddle)
    paddle.keyframe_insert("location", frame=1)
    paddle.location = (0.1, 0.0, 1.0)
    paddle.keyframe_insert("location", frame=25)
    for fc in (paddle.animation_data.action.fcurves if hasattr(paddle.animation_data.action, "fcurves") else []):
        for key in fc.keyframe_points:
            key.interpolation = "LINEAR"
    bpy.context.scene.use_gravity = False
    jelly.neurok.seed = 0
    frames(1, 25)
    assert simulate(jelly) == {"FINISHED"}, jelly.neurok.last_bake
    start, end = world_positions(jelly, 1), world_positions(jelly, 25)
    assert end[:, 0].mean() - start[:, 0].mean() > 0.1  # pushed along +x
    bpy.context.scene.frame_set(25)
    assert end[:, 0].min() > paddle.location.x + 0.2 - 0.02  # and not through the paddle's front face
