"""Reliability in Blender (issue 8): bad input changes nothing, faults keep the previous bake and the
.blend, load. The analytic test engine makes every frame exact and every fault reproducible."""

from __future__ import annotations

import hashlib
import math
import os

import numpy as np
import pytest

pytestmark = pytest.mark.blender
bpy = pytest.importorskip("bpy")

from neurok_blender.errors import InputError  # noqa: E402
from tests.blender_helpers import evaluated_positions, make_grid, rest_positions, simulate  # noqa: E402
from tests.support.analytic_worker import sample  # noqa: E402


def set_range(start, end):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = start, end


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def baked_saved_flag(tmp_path, frames=6):
    """A flag baked and saved: (object, .blend path, cache path, cache digest, .blend digest)."""
    blend = str(tmp_path / "scene.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    obj = make_grid()
    set_range(1, frames)
    assert simulate(obj) == {"FINISHED"}
    bpy.ops.wm.save_mainfile()
    cache_file = bpy.path.abspath(obj.modifiers[0].filepath)
    return obj, blend, cache_file, digest(cache_file), digest(blend)


def assert_intact(obj, blend, cache_file, cache_digest, blend_digest, frames=6):
    assert digest(cache_file) == cache_digest and digest(blend) == blend_digest
    assert [m.type for m in obj.modifiers] == ["MESH_CACHE"]
    rest = rest_positions(obj).astype(np.float64)
    np.testing.assert_allclose(evaluated_positions(obj, frames), sample(rest, frames - 1), atol=1e-6)
    assert not [f for f in os.listdir(os.path.dirname(cache_file)) if f.endswith(".partial")]


# -- bad input ------------------------------------------------------------------------------------------------
def test_non_mesh_objects_are_refused_clearly(blender):
    from neurok_blender.ops.scene_input import build_request

    bpy.ops.object.camera_add()
    camera = bpy.context.active_object
    with pytest.raises(InputError, match="camera object; NeuROK simulates mesh objects only"):
        build_request(bpy.context, camera, "/tmp/x.pc2")
    assert not bpy.ops.neurok.simulate.poll()  # the button is greyed out, not a crash


def test_infinite_coordinates_are_refused_and_nothing_changes(blender, analytic_worker):
    obj = make_grid()
    obj.data.vertices[2].co = (float("inf"), 0.0, 0.0)
    assert "NaN or infinite" in simulate(obj)
    assert not obj.modifiers


def test_negative_scale_bakes_and_turns_gravity_into_the_mirrored_frame(blender, analytic_worker):
    from neurok_blender.ops.scene_input import build_request

    obj = make_grid()
    obj.scale = (1.0, 1.0, -2.0)
    bpy.context.view_layer.update()
    req, _ = build_request(bpy.context, obj, "/tmp/x.pc2")
    assert req.local_gravity == pytest.approx((0.0, 0.0, 9.81 / 2), abs=1e-5)  # world down is local +z
    set_range(1, 3)
    assert simulate(obj) == {"FINISHED"}


def test_odd_object_names_cannot_escape_the_cache_folder(blender, analytic_worker, tmp_path):
    from neurok_blender.ops import cache

    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    set_range(1, 2)
    names = ["../../evil", "a/b\\\\c", "..", "x" * 300, "name\u00e9 with spaces"]
    folder = os.path.realpath(cache.cache_dir())
    for i, name in enumerate(names):
        obj = make_grid(location=(3 * i, 0, 0))
        obj.name = name
        assert simulate(obj) == {"FINISHED"}, name
        path = os.path.realpath(bpy.path.abspath(obj.modifiers[0].filepath))
        assert os.path.dirname(path) == folder and len(os.path.basename(path)) < 120
    for weird in ("a\x00b", "/" * 20, "\u202e" * 40):
        name = cache.safe_name(weird)
        assert "/" not in name and "\x00" not in name and not name.startswith(".")
    assert len({cache.safe_name(n) for n in ("a/b", "a_b", "a\\b")}) == 3  # sanitizing keeps names distinct


# -- faults -----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_worker_killed_at_random_frames_never_loses_the_previous_bake(blender, analytic_worker, tmp_path):
    obj, blend, cache_file, cache_digest, blend_digest = baked_saved_flag(tmp_path)
    set_range(1, 40)
    rng = np.random.default_rng(8)
    for frame in rng.integers(0, 40, size=20):
        analytic_worker.setenv("NEUROK_TEST_ENGINE", f"die_at:{int(frame)}")
        assert "exited unexpectedly" in simulate(obj)
        assert_intact(obj, blend, cache_file, cache_digest, blend_digest)


def test_escape_during_the_handshake_keeps_the_previous_bake(blender, analytic_worker, tmp_path):
    from neurok_blender.ops.bake import BakeSession

    obj, blend, cache_file, cache_digest, blend_digest = baked_saved_flag(tmp_path)
    session = BakeSession([obj.name])
    session.step(bpy.context)  # the worker is starting: no hello yet
    assert session.current is not None and session.current.job.process.hello is None
    pid = session.current.job.process.pid
    session.cancel()
    while not session.step(bpy.context):
        pass
    assert not session.outcomes[0].ok and "cancel" in session.outcomes[0].message
    assert_intact(obj, blend, cache_file, cache_digest, blend_digest)
    with pytest.raises(OSError):  # and the worker is gone
        for _ in range(200):
            os.kill(pid, 0)
            import time

            time.sleep(0.05)


def test_a_blocked_cache_folder_is_a_clear_error_and_keeps_the_previous_bake(blender, analytic_worker, tmp_path):
    import shutil

    obj, blend, cache_file, cache_digest, blend_digest = baked_saved_flag(tmp_path)
    folder = os.path.dirname(cache_file)
    other = make_grid("Other", location=(4, 0, 0))
    backup = str(tmp_path / "moved-cache")
    shutil.move(folder, backup)
    open(folder, "w").close()  # a file where the cache folder should be: nothing can be written there
    try:
        message = simulate(other)
        assert "cache folder" in message
        assert not other.modifiers
    finally:
        os.remove(folder)
        shutil.move(backup, folder)
    assert_intact(obj, blend, cache_file, cache_digest, blend_digest)


# -- load -------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_ten_objects_bake_in_one_simulate(blender, analytic_worker):
    from tests.blender_helpers import select_only

    objects = [make_grid(f"Obj{i}", location=(3 * (i % 5), 3 * (i // 5), 0)) for i in range(10)]
    for i, ob in enumerate(objects):
        ob.rotation_euler = (0.0, 0.0, i * math.pi / 10)
    set_range(1, 4)
    select_only(*objects)
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    for ob in objects:
        assert ob.modifiers and ob.modifiers[0].type == "MESH_CACHE"
        rest = rest_positions(ob).astype(np.float64)
        np.testing.assert_allclose(evaluated_positions(ob, 4), sample(rest, 3), atol=1e-6)


@pytest.mark.slow
def test_a_thousand_frame_bake(blender, analytic_worker):
    obj = make_grid()
    set_range(1, 1000)
    assert simulate(obj) == {"FINISHED"}
    rest = rest_positions(obj).astype(np.float64)
    for frame in (1, 500, 1000):
        np.testing.assert_allclose(evaluated_positions(obj, frame), sample(rest, frame - 1), atol=1e-4)
    assert "frames 1-1000" in obj.neurok.last_bake


def test_the_worker_log_of_the_latest_bake_lies_beside_its_cache(blender, analytic_worker, tmp_path):
    obj, blend, cache_file, cache_digest, blend_digest = baked_saved_flag(tmp_path)
    log = os.path.splitext(cache_file)[0] + ".log"
    assert "analytic worker starting" in open(log).read()
    analytic_worker.setenv("NEUROK_TEST_ENGINE", "raise_at:2")
    message = simulate(obj)
    assert "exploded on purpose" in message
    text = open(log).read()
    assert "Traceback" in text and "exploded on purpose" in text  # the whole traceback, not just its tail
    assert_intact(obj, blend, cache_file, cache_digest, blend_digest)
