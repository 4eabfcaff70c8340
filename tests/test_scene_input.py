"""Reading an object and its scene into a request: world vectors and the local frame, frame range, bad input."""

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
    assert req.gravity == pytest.approx((0.0, 0.0, -9.81))
    assert req.local_gravity == pytest.approx((0.0, -9.81 / 2, 0.0), abs=1e-5)


def test_wind_panel_plus_scene_wind_field_in_local_frame(blender):
    """The panel's wind is a uniform air velocity; a Wind field object travels as a field (with its falloff,
    its transform and the object's field weight), so the engine can weigh it per point."""
    obj = make_grid()
    obj.rotation_euler = (0.0, 0.0, math.pi / 2)  # local +X is world +Y
    obj.neurok.wind_velocity = (0.0, 3.0, 0.0)
    bpy.ops.object.effector_add(type="WIND", rotation=(0.0, math.pi / 2, 0.0))  # field +Z → world +X
    wind = bpy.context.active_object
    wind.field.strength = 2.0
    wind.field.use_max_distance, wind.field.distance_max = True, 5.0
    obj.neurok.field_weight_wind = 0.5
    bpy.context.view_layer.update()
    req, _ = request_for(obj)
    assert req.wind == pytest.approx((0.0, 3.0, 0.0), abs=1e-5)  # world
    assert req.local_wind == pytest.approx((3.0, 0.0, 0.0), abs=1e-5)
    (field,) = req.fields
    assert (field.kind, field.strength, field.distance_max, field.weight, field.shape) == ("wind", 2.0, 5.0, 0.5, "plane")
    z_axis = np.array(field.matrix).reshape(4, 4)[:3, 2]
    assert z_axis == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)
    obj.neurok.use_scene_wind = False
    assert request_for(obj)[0].fields == ()
    obj.neurok.use_scene_wind = True
    obj.neurok.effector_collection = bpy.data.collections.new("Only These")  # an empty effector collection
    assert request_for(obj)[0].fields == ()


def test_ground_plane_and_initial_velocity_in_the_local_frame(blender):
    from mathutils import Vector

    obj = make_grid(location=(1.0, 2.0, 3.0))
    obj.rotation_euler = (0.3, -0.5, 1.1)
    obj.scale = (2.0, 0.5, 1.5)
    obj.neurok.use_ground, obj.neurok.ground_height = True, 0.25
    obj.neurok.initial_velocity = (0.0, 0.0, 4.0)
    bpy.context.view_layer.update()
    req, _ = request_for(obj)
    normal, d = req.local_ground()
    n = np.array(normal)
    inverse = obj.matrix_world.inverted()
    for world in ((0.0, 0.0, 0.25), (5.0, -3.0, 0.25)):  # points on the world plane lie on the local plane
        assert float(n @ np.array(inverse @ Vector(world))) == pytest.approx(d, abs=1e-5)
    above = np.array(inverse @ Vector((0.0, 0.0, 1.0)))
    assert float(n @ above) > d  # and the normal points to the free side
    local_v = np.array(req.local_initial_velocity)
    assert np.allclose(np.array(obj.matrix_world.to_3x3() @ Vector(local_v)), (0.0, 0.0, 4.0), atol=1e-5)
    obj.neurok.use_ground, obj.neurok.initial_velocity = False, (0.0, 0.0, 0.0)
    req = request_for(obj)[0]
    assert req.ground is None and req.local_initial_velocity == (0.0, 0.0, 0.0)


def test_the_physical_material_reaches_the_request_only_when_it_is_on(blender):
    obj = make_grid()
    obj.neurok.young_modulus, obj.neurok.density = 2e4, 600.0
    req, _ = request_for(obj)
    assert (req.young_modulus, req.density) == (0.0, 0.0)  # off: the stiffness is predicted from the shape
    obj.neurok.use_physical_material = True
    req, _ = request_for(obj)
    assert (req.young_modulus, req.density) == (pytest.approx(2e4), pytest.approx(600.0))


def test_the_joint_settings_reach_the_request_the_limit_only_when_it_is_on(blender):
    obj = make_grid()
    obj.neurok.joint_stiffness, obj.neurok.joint_limit = 0.25, 0.8
    req, _ = request_for(obj)
    assert (req.joint_stiffness, req.joint_limit) == (pytest.approx(0.25), 0.0)  # off: the predicted stop
    obj.neurok.use_joint_limit = True
    assert request_for(obj)[0].joint_limit == pytest.approx(0.8)


def test_the_cloth_preset_reaches_the_request(blender):
    obj = make_grid()
    assert request_for(obj)[0].cloth_preset == "auto"
    obj.neurok.cloth_preset = "SILK"
    assert request_for(obj)[0].cloth_preset == "silk"


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
    with pytest.raises(InputError, match=message):
        request_for(obj)


@pytest.mark.parametrize("case, message", [("nan_vertex", "'Flag' has NaN"), ("single_point", "'Flag' has zero size")])
def test_bad_geometry_is_refused_where_it_is_received_and_changes_nothing(blender, analytic_worker, case, message):
    """The mesh is checked once, by the worker that receives it; the error names the object."""
    obj = make_grid()
    if case == "nan_vertex":
        obj.data.vertices[0].co = (float("nan"), 0.0, 0.0)
    else:
        obj.data.vertices.foreach_set("co", np.zeros(len(obj.data.vertices) * 3, np.float32))
    assert message in simulate(obj)
    assert not obj.modifiers


def test_simulate_reports_bad_input_and_changes_nothing(blender, analytic_worker):
    obj = make_grid()
    obj.neurok.pin_group = "nope"
    result = simulate(obj)
    assert "does not exist" in result
    assert not obj.modifiers


def test_simulate_without_a_model_says_no_model_installed(blender, monkeypatch, tmp_path):
    """The product engine pointed at a checkpoint that is not there fails clearly and fakes nothing."""
    from neurok_blender.prefs import get_prefs

    monkeypatch.delenv("NEUROK_WORKER_ENTRY", raising=False)
    monkeypatch.setenv("NEUROK_PYTHON", runtime_python())
    prefs = get_prefs(bpy.context)
    prefs.checkpoint_path = str(tmp_path / "missing-model")
    try:
        obj = make_grid()
        bpy.context.scene.frame_end = 3
        result = simulate(obj)
    finally:
        prefs.checkpoint_path = ""
    assert "No NeuROK model is installed" in result and "preferences" in result
    assert not obj.modifiers


def test_simulate_runs_the_shipped_model_end_to_end(blender, monkeypatch):
    """Simulate → worker → NeuROK engine (encoder, latent dynamics, decoder) → mesh cache on the object."""
    from neurok_blender.runtime.engine import DEFAULT_CHECKPOINT_DIR
    from tests.blender_helpers import evaluated_positions, rest_positions

    if not (DEFAULT_CHECKPOINT_DIR / "config.json").exists():
        pytest.skip("no shipped checkpoint")
    monkeypatch.delenv("NEUROK_WORKER_ENTRY", raising=False)
    monkeypatch.setenv("NEUROK_PYTHON", runtime_python())
    obj = make_grid(size=12)
    obj.rotation_euler = (math.pi / 2, 0.0, 0.0)  # a vertical sheet
    group = obj.vertex_groups.new(name="top")
    group.add([v.index for v in obj.data.vertices if v.co.y > 0.99], 1.0, "REPLACE")
    obj.neurok.pin_group = "top"
    obj.neurok.wind_velocity = (0.0, 5.0, 0.0)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 8
    assert simulate(obj) == {"FINISHED"}
    assert obj.modifiers[0].type == "MESH_CACHE"
    rest = rest_positions(obj)
    np.testing.assert_allclose(evaluated_positions(obj, 1), rest, atol=1e-5)
    last = evaluated_positions(obj, 8)
    assert np.isfinite(last).all() and np.abs(last - rest).max() > 1e-3
    assert "frames 1-8" in obj.neurok.last_bake and "CPU" in obj.neurok.last_bake
    assert "stiffness " in obj.neurok.last_bake  # the material the model predicted, to compare and adjust


def box_mesh(name, boxes):
    """One object of loose boxes, each (size (3,), centre (3,)): an assembly as an artist models it."""
    corners = np.array([(x, y, z) for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    verts, faces = [], []
    for size, centre in boxes:
        faces += [tuple(i + len(verts) for i in q) for q in quads]
        verts += [tuple(c) for c in corners * np.asarray(size) + np.asarray(centre)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def test_an_assembly_bakes_as_pieces_turning_at_their_joints(blender, monkeypatch):
    """A post with an arm on top, modelled as two loose boxes, the post pinned: the bake moves the arm about its
    joint and keeps the post, and the last-bake line says it moved as pieces."""
    from neurok_blender.runtime.engine import DEFAULT_CHECKPOINT_DIR
    from tests.blender_helpers import evaluated_positions, rest_positions

    if not (DEFAULT_CHECKPOINT_DIR / "config.json").exists():
        pytest.skip("no shipped checkpoint")
    monkeypatch.delenv("NEUROK_WORKER_ENTRY", raising=False)
    monkeypatch.setenv("NEUROK_PYTHON", runtime_python())
    obj = box_mesh("Lamp", [((0.06, 0.06, 0.6), (0, 0, 0.3)), ((0.6, 0.06, 0.06), (0.27, 0, 0.63))])
    group = obj.vertex_groups.new(name="post")
    group.add(list(range(8)), 1.0, "REPLACE")
    obj.neurok.pin_group = "post"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 13
    assert simulate(obj) == {"FINISHED"}, obj.neurok.last_bake
    rest, last = rest_positions(obj), evaluated_positions(obj, 13)
    assert "2 pieces on 1 joint (1: hinge)" in obj.neurok.last_bake  # numbered as Which Joint reads them
    np.testing.assert_allclose(last[:8], rest[:8], atol=1e-4)  # the pinned post
    tip = 8 + int(np.argmax(rest[8:, 0]))
    assert rest[tip, 2] - last[tip, 2] > 0.2  # the arm has swung down (0.55 m of its 0.6 m in half a second)
    lengths = [np.linalg.norm(x[tip] - x[8 + int(np.argmin(rest[8:, 0]))]) for x in (rest, last)]
    assert lengths[1] == pytest.approx(lengths[0], rel=0.05)  # as a rigid arm
