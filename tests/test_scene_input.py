"""Reading an object and its scene into a request: world→local vectors, frame range, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytestmark = pytest.mark.blender
bpy = pytest.importorskip("bpy")

from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.ops.scene_input import build_request  # noqa: E402
from tests.blender_helpers import make_grid, simulate  # noqa: E402
from tests.conftest import runtime_python  # noqa: E402


def request_for(obj):
    return build_request(bpy.context, obj, "/tmp/out.pc2")


def test_gravity_is_turned_into_the_local_frame(blender):
    obj = make_grid()
    obj.rotation_euler = (math.pi / 2, 0.0, 0.0)  # local +Y now points along world +Z
    obj.scale = (2.0, 2.0, 2.0)
    bpy.context.view_layer.update()
    req, _ = request_for(obj)
    # world gravity (0,0,-9.81) is local -Y, halved by the scale of 2
    assert req.gravity == pytest.approx((0.0, -9.81 / 2, 0.0), abs=1e-5)


def test_wind_panel_plus_scene_wind_field_in_local_frame(blender):
    obj = make_grid()
    obj.rotation_euler = (0.0, 0.0, math.pi / 2)  # local +X is world +Y
    obj.neurok.wind_velocity = (0.0, 3.0, 0.0)
    bpy.ops.object.effector_add(type="WIND", rotation=(0.0, math.pi / 2, 0.0))  # field +Z → world +X
    bpy.context.active_object.field.strength = 2.0
    bpy.context.view_layer.update()
    req, _ = request_for(obj)
    # world wind (2, 3, 0) → local (3, -2, 0)
    assert req.wind == pytest.approx((3.0, -2.0, 0.0), abs=1e-5)
    obj.neurok.use_scene_wind = False
    assert request_for(obj)[0].wind == pytest.approx((3.0, 0.0, 0.0), abs=1e-5)


def test_custom_gravity_when_scene_gravity_is_off(blender):
    obj = make_grid()
    obj.neurok.use_scene_gravity = False
    obj.neurok.gravity = (1.0, 0.0, 0.0)
    assert request_for(obj)[0].gravity == pytest.approx((1.0, 0.0, 0.0))


def test_scene_frame_range_and_fps(blender):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 10, 40
    scene.render.fps, scene.render.fps_base = 30, 1.001
    req, _ = request_for(make_grid())
    assert (req.frame_start, req.frame_count) == (10, 31)
    assert req.fps == pytest.approx(30 / 1.001)


def test_object_frame_range(blender):
    obj = make_grid()
    obj.neurok.use_scene_range = False
    obj.neurok.frame_start, obj.neurok.frame_end = 5, 7
    assert request_for(obj)[0].frame_count == 3


def test_pin_group_weights(blender):
    obj = make_grid()
    group = obj.vertex_groups.new(name="pins")
    group.add([0, 2], 0.5, "REPLACE")
    obj.neurok.pin_group = "pins"
    _, arrays = request_for(obj)
    assert arrays["pin_weights"][0] == 0.5 and arrays["pin_weights"][2] == 0.5
    assert arrays["pin_weights"].sum() == pytest.approx(1.0)


def test_ngons_are_triangulated(blender):
    bpy.ops.mesh.primitive_circle_add(vertices=12, fill_type="NGON")
    _, arrays = request_for(bpy.context.active_object)
    assert arrays["triangles"].shape == (10, 3)


@pytest.mark.parametrize("case, message", [
    ("missing_pin_group", "does not exist"),
    ("frame_end_before_start", "ends"),
    ("zero_scale", "zero scale"),
    ("empty_mesh", "no vertices"),
    ("nan_vertex", "NaN"),
    ("single_point", "zero size"),
])
def test_bad_input_is_a_clear_input_error(blender, case, message):
    obj = make_grid()
    if case == "missing_pin_group":
        obj.neurok.pin_group = "nope"
    elif case == "frame_end_before_start":
        obj.neurok.use_scene_range = False
        obj.neurok.frame_start, obj.neurok.frame_end = 10, 5
    elif case == "zero_scale":
        obj.scale = (1.0, 0.0, 1.0)
        bpy.context.view_layer.update()
    elif case == "empty_mesh":
        obj.data = bpy.data.meshes.new("empty")
    elif case == "nan_vertex":
        obj.data.vertices[0].co = (float("nan"), 0.0, 0.0)
    elif case == "single_point":
        co = np.zeros(len(obj.data.vertices) * 3, np.float32)
        obj.data.vertices.foreach_set("co", co)
    with pytest.raises(InputError, match=message):
        request_for(obj)


def test_simulate_reports_bad_input_and_changes_nothing(blender, analytic_worker):
    obj = make_grid()
    obj.neurok.pin_group = "nope"
    result = simulate(obj)
    assert "does not exist" in result
    assert not obj.modifiers


def test_simulate_without_a_model_says_no_model_installed(blender, monkeypatch, tmp_path):
    """The product engine, with no checkpoint shipped yet, fails clearly and fakes nothing."""
    monkeypatch.delenv("NEUROK_WORKER_ENTRY", raising=False)
    monkeypatch.setenv("NEUROK_PYTHON", runtime_python())
    obj = make_grid()
    bpy.context.scene.frame_end = 3
    result = simulate(obj)
    assert "No NeuROK model is installed" in result
    assert not obj.modifiers
