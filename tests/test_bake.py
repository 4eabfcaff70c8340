"""The bake workflow in Blender with the analytic test worker: exact frames, cancel, kill, save/reopen."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytestmark = pytest.mark.blender
bpy = pytest.importorskip("bpy")

from tests.blender_helpers import evaluated_positions, make_grid, rest_positions, simulate  # noqa: E402
from tests.support.analytic_worker import sample  # noqa: E402


def expected(obj, i):
    return sample(rest_positions(obj).astype(np.float64), i).astype(np.float32)


def set_range(start, end):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = start, end


def assert_frames_exact(obj, start, end):
    for frame in range(start, end + 1):
        got = evaluated_positions(obj, frame)
        np.testing.assert_allclose(got, expected(obj, frame - start), rtol=0, atol=1e-6, err_msg=f"frame {frame}")


def test_mesh_cache_frame_k_shows_sample_k(blender, analytic_worker, tmp_path):
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    obj = make_grid()
    set_range(3, 9)
    assert simulate(obj) == {"FINISHED"}
    mod = obj.modifiers[0]
    assert mod.type == "MESH_CACHE" and mod.time_mode == "FRAME" and mod.frame_start == 3
    assert mod.filepath.startswith("//neurok_cache/")
    assert os.path.isfile(bpy.path.abspath(mod.filepath))
    assert_frames_exact(obj, 3, 9)
    assert "frames 3-9" in obj.neurok.last_bake


def test_mesh_cache_is_first_in_the_stack(blender, analytic_worker, tmp_path):
    obj = make_grid()
    obj.modifiers.new("Sub", "SUBSURF")
    set_range(1, 3)
    simulate(obj)
    assert [m.type for m in obj.modifiers] == ["MESH_CACHE", "SUBSURF"]


def test_shape_keys_frame_k_shows_sample_k(blender, analytic_worker):
    obj = make_grid()
    obj.neurok.output = "SHAPE_KEYS"
    set_range(2, 6)
    assert simulate(obj) == {"FINISHED"}
    keys = obj.data.shape_keys.key_blocks
    assert len(keys) == 1 + 5 and keys[0].name == "Basis"
    assert_frames_exact(obj, 2, 6)
    assert not obj.modifiers


def test_bake_survives_save_and_reopen(blender, analytic_worker, tmp_path):
    path = str(tmp_path / "scene with space.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    obj = make_grid()
    set_range(1, 5)
    simulate(obj)
    bpy.ops.wm.save_mainfile()
    bpy.ops.wm.open_mainfile(filepath=path)
    obj = bpy.data.objects["Flag"]
    assert_frames_exact(obj, 1, 5)


def test_unsaved_file_cache_moves_next_to_the_blend_on_save(blender, analytic_worker, tmp_path):
    obj = make_grid()
    set_range(1, 4)
    simulate(obj)
    temp_file = bpy.path.abspath(obj.modifiers[0].filepath)
    assert os.path.isfile(temp_file)
    path = str(tmp_path / "later.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    assert not os.path.exists(temp_file)
    bpy.ops.wm.open_mainfile(filepath=path)
    obj = bpy.data.objects["Flag"]
    cache_file = bpy.path.abspath(obj.modifiers[0].filepath)
    assert cache_file.startswith(str(tmp_path)) and os.path.isfile(cache_file)
    assert obj.modifiers[0].filepath.startswith("//")
    assert_frames_exact(obj, 1, 4)


def test_save_as_into_another_folder_takes_the_cache_along(blender, analytic_worker, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "a" / "one.blend"))
    obj = make_grid()
    set_range(1, 3)
    simulate(obj)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "b" / "two.blend"))
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "b" / "two.blend"))
    obj = bpy.data.objects["Flag"]
    assert bpy.path.abspath(obj.modifiers[0].filepath).startswith(str(tmp_path / "b"))
    assert_frames_exact(obj, 1, 3)


def baked_flag(tmp_path, last_frame):
    """A saved scene with a flag baked over frames 1..last_frame: (object, cache file, its bytes)."""
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    obj = make_grid()
    set_range(1, last_frame)
    simulate(obj)
    cache_file = bpy.path.abspath(obj.modifiers[0].filepath)
    return obj, cache_file, open(cache_file, "rb").read()


def test_rebake_replaces_and_failed_bake_keeps_previous(blender, analytic_worker, tmp_path):
    obj, cache_file, before = baked_flag(tmp_path, 6)
    analytic_worker.setenv("NEUROK_TEST_ENGINE", "die_at:3")
    assert "exited unexpectedly" in simulate(obj)
    assert open(cache_file, "rb").read() == before
    assert_frames_exact(obj, 1, 6)
    assert not [f for f in os.listdir(os.path.dirname(cache_file)) if f.endswith(".partial")]


def test_cancel_mid_bake_keeps_previous_bake(blender, analytic_worker, tmp_path):
    from neurok_blender.ops.bake import BakeSession

    obj, cache_file, before = baked_flag(tmp_path, 4)
    analytic_worker.setenv("NEUROK_TEST_ENGINE", "slow:0.1")
    set_range(1, 200)
    session = BakeSession([obj.name])
    while session.current is None or session.current.job.frames_done < 3:
        session.step(bpy.context)
    session.cancel()
    while not session.step(bpy.context):
        pass
    assert "cancelled" in session.outcomes[0].message and not session.outcomes[0].ok
    assert open(cache_file, "rb").read() == before
    assert obj.modifiers[0].frame_start == 1


def test_same_object_cannot_be_baked_twice_at_once(blender, analytic_worker):
    from neurok_blender.errors import InputError
    from neurok_blender.ops.bake import BakeSession

    obj = make_grid()
    analytic_worker.setenv("NEUROK_TEST_ENGINE", "slow:0.05")
    first = BakeSession([obj.name])
    try:
        with pytest.raises(InputError, match="already baking"):
            BakeSession([obj.name])
    finally:
        first.cancel()
        first.close()


def test_several_selected_objects_bake_active_first(blender, analytic_worker):
    a, b = make_grid("A"), make_grid("B", location=(3, 0, 0))
    set_range(1, 3)
    assert simulate(b, a) == {"FINISHED"}
    assert a.modifiers and b.modifiers


def test_clear_bake_removes_modifier_and_file(blender, analytic_worker):
    obj = make_grid()
    set_range(1, 3)
    simulate(obj)
    path = bpy.path.abspath(obj.modifiers[0].filepath)
    assert bpy.ops.neurok.clear_bake() == {"FINISHED"}
    assert not obj.modifiers and not os.path.exists(path)


def test_clear_bake_removes_shape_keys_it_made(blender, analytic_worker):
    obj = make_grid()
    obj.neurok.output = "SHAPE_KEYS"
    set_range(1, 3)
    simulate(obj)
    bpy.ops.neurok.clear_bake()
    assert obj.data.shape_keys is None


def test_worker_warnings_reach_the_artist_as_operator_warnings(blender, analytic_worker):
    """A warning from the worker (here the CUDA fallback) is reported with report({'WARNING'}), not printed."""
    from neurok_blender.ops.bake import BakeSession
    from neurok_blender.ops.operators import report_outcomes
    from tests.conftest import runtime_has_cuda

    if runtime_has_cuda():
        pytest.skip("CUDA is available: nothing falls back")
    obj = make_grid()
    obj.neurok.device = "CUDA"
    bpy.context.scene.frame_end = 3
    session = BakeSession([obj.name])
    session.run_blocking(bpy.context)
    assert session.outcomes[0].ok
    reports = []

    class Recorder:
        def report(self, kind, text):
            reports.append((kind, text))

    assert report_outcomes(Recorder(), session) == {"FINISHED"}
    assert ({"WARNING"}, "Flag: CUDA was requested but is not available; running on the CPU") in reports
