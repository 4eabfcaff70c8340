"""Headless batch bakes: with the bpy module (always) and a real Blender binary (where installed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytestmark = [pytest.mark.blender, pytest.mark.slow]
bpy = pytest.importorskip("bpy")

from tests.blender_helpers import evaluated_positions, make_grid, rest_positions  # noqa: E402
from tests.conftest import ANALYTIC_ENTRY, ROOT, runtime_has_cuda, runtime_python  # noqa: E402
from tests.support.analytic_worker import sample  # noqa: E402


def scene_file(tmp_path) -> str:
    make_grid()
    path = str(tmp_path / "in scene.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    return path


def batch_env() -> dict[str, str]:
    return dict(os.environ, NEUROK_WORKER_ENTRY=ANALYTIC_ENTRY, NEUROK_PYTHON=runtime_python(), NEUROK_TEST_ENGINE="")


def check_baked(path: str, start: int, end: int) -> None:
    bpy.ops.wm.open_mainfile(filepath=path)
    obj = bpy.data.objects["Flag"]
    assert obj.modifiers[0].type == "MESH_CACHE"
    rest = rest_positions(obj).astype(np.float64)
    for frame in range(start, end + 1):
        np.testing.assert_allclose(evaluated_positions(obj, frame), sample(rest, frame - start), atol=1e-6)


def test_batch_with_the_bpy_module(blender, tmp_path):
    src = scene_file(tmp_path)
    out = str(tmp_path / "out" / "baked.blend")
    os.makedirs(os.path.dirname(out))
    done = subprocess.run(
        [sys.executable, "-m", "neurok_blender.batch", "--blend", src, "--object", "Flag", "--frames", "2", "6",
         "--wind", "1", "0", "0", "--device", "cpu", "--threads", "1", "--save", out, "--report", str(tmp_path / "r.json")],
        cwd=ROOT, env=batch_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Flag: baked" in done.stderr
    report = json.load(open(tmp_path / "r.json"))["objects"][0]
    assert report["threads"] == 1  # --threads reached the worker
    assert report["path"].startswith(os.path.join(os.path.dirname(out), "neurok_cache")) and os.path.isfile(report["path"])
    assert not os.path.exists(tmp_path / "neurok_cache")  # with --save, nothing beside the opened scene
    check_baked(out, 2, 6)


def test_batch_exports_the_baked_animation_to_alembic_and_usd(blender, tmp_path):
    src = scene_file(tmp_path)
    abc, usd = str(tmp_path / "flag anim.abc"), str(tmp_path / "flag.usdc")
    done = subprocess.run(
        [sys.executable, "-m", "neurok_blender.batch", "--blend", src, "--object", "Flag", "--frames", "3", "7",
         "--export", abc, "--export", usd],
        cwd=ROOT, env=batch_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"exported frames 3-7 to {abc}" in done.stderr and os.path.getsize(usd) > 0
    # the Alembic file carries the baked motion: import it and compare with the analytic samples
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.wm.alembic_import(filepath=abc)
    obj = next(ob for ob in bpy.data.objects if ob.type == "MESH")
    first = evaluated_positions(obj, 3).astype(np.float64)
    rest = first  # sample 0 is the rest shape
    for frame in (5, 7):
        np.testing.assert_allclose(evaluated_positions(obj, frame), sample(rest, frame - 3), atol=1e-5)


def test_batch_refuses_an_unknown_export_format_before_baking(blender, tmp_path):
    src = scene_file(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "neurok_blender.batch", "--blend", src, "--object", "Flag", "--export",
         str(tmp_path / "out.fbx")],
        cwd=ROOT, env=batch_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1 and ".abc" in done.stderr.strip().splitlines()[-1]
    assert "baked" not in done.stderr


def test_batch_help_and_usage_errors_exit_promptly():
    """argparse leaves by SystemExit; the bpy module's exit handlers used to hang the process after --help."""
    run = [sys.executable, "-m", "neurok_blender.batch"]
    done = subprocess.run([*run, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--no-colliders" in done.stdout and "--static-pins" in done.stdout
    done = subprocess.run([*run, "--frames", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--frames" in done.stderr


def test_batch_failure_exits_nonzero_with_one_line_reason(blender, tmp_path):
    src = scene_file(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "neurok_blender.batch", "--blend", src, "--object", "Nope"],
        cwd=ROOT, env=batch_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("neurok: error:") and "Nope" in last


def test_batch_reports_worker_errors(blender, tmp_path):
    src = scene_file(tmp_path)
    env = dict(batch_env(), NEUROK_TEST_ENGINE="raise_at:1")
    done = subprocess.run(
        [sys.executable, "-m", "neurok_blender.batch", "--blend", src, "--object", "Flag", "--frames", "1", "3"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1 and "exploded on purpose" in done.stderr.strip().splitlines()[-1]


@pytest.mark.skipif(shutil.which("blender") is None, reason="no Blender binary on PATH")
def test_batch_inside_a_real_blender(blender, tmp_path):
    src = scene_file(tmp_path)
    out = str(tmp_path / "baked.blend")
    done = subprocess.run(
        ["blender", "-b", src, "--factory-startup", "--python-exit-code", "1",
         "--python", os.path.join(ROOT, "neurok_blender", "batch.py"), "--",
         "--object", "Flag", "--frames", "1", "4", "--save", out],
        env=batch_env(), capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    check_baked(out, 1, 4)


def file_digest(path: str) -> str:
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@pytest.mark.parametrize("option, message", [
    (["--stiffness", "-1"], "stiffness multiplier must be between 0.01 and 100, got -1.0"),
    (["--stiffness", "nan"], "stiffness multiplier must be a finite number"),
    (["--damping", "-0.5"], "damping multiplier must be between 0 and 100, got -0.5"),
    (["--wind", "1e6", "0", "0"], "wind of 1e+06 m/s is beyond the physical limit of 200 m/s"),
    (["--wind", "inf", "0", "0"], "wind must be 3 finite numbers"),
    (["--gravity", "0", "0", "-5000"], "gravity of 5000 m/s² is beyond the physical limit of 1000 m/s²"),
    (["--young-modulus", "-3"], "young_modulus (Pa) (0: not given) must be between 1 and 1e+12, got -3.0"),
    (["--density", "1e9"], "density (kg/m³) (0: not given) must be between 1 and 100000, got 1000000000.0"),
    (["--joint-stiffness", "0"], "joint stiffness multiplier must be between 0.01 and 100, got 0.0"),
    (["--joint-limit", "0"], "--joint-limit must be above 0 degrees"),
    (["--joint-limit", "400"], "joint_limit (rad) (0: not given) must be between 0.01 and 6.3"),
    (["--cloth-preset", "velvet"], "cloth_preset must be one of auto, shape, cotton, denim, leather, rubber, silk"),
    (["--threads", "-1"], "threads (0: the free cores) must be between 0 and 256, got -1"),
    (["--solid-material", "velvet"], "solid_material must be one of jelly, rubber, plastic, wood, metal, got 'velvet'"),
    (["--joint", '{"type": "slide", "range": [0.1, 0.4]}'], "joint override's range must go from at most 0 to at least 0"),
    (["--joint", '{"joint": 1, "hinge": 2}'], "unknown joint override keys ['hinge']; valid keys are ['axis', 'joint', 'range', 'type']"),
])
def test_batch_refuses_unphysical_settings_before_any_work(blender, tmp_path, option, message):
    src = scene_file(tmp_path)
    before = file_digest(src)
    done = subprocess.run(
        [sys.executable, "-m", "neurok_blender.batch", "--blend", src, "--object", "Flag", "--frames", "1", "3",
         *option, "--save", src],
        cwd=ROOT, env=batch_env(), capture_output=True, text=True, timeout=300,
    )
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith("neurok: error:") and message in last, done.stderr
    assert "baked" not in done.stderr and "simulating" not in done.stderr  # refused before any worker started
    assert file_digest(src) == before
    assert not os.path.exists(os.path.join(tmp_path, "neurok_cache"))


@pytest.mark.skipif(runtime_has_cuda(), reason="CUDA is available: nothing falls back")
def test_batch_prints_worker_warnings_on_stderr(blender, tmp_path):
    src = scene_file(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "neurok_blender.batch", "--blend", src, "--object", "Flag", "--frames", "1", "2",
         "--device", "cuda"],
        cwd=ROOT, env=batch_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "neurok: Flag: warning: CUDA was requested but is not available; running on the CPU" in done.stderr


def test_batch_joint_options_set_the_objects_joint_settings(blender):
    """--joint-stiffness is the panel's multiplier; --joint-limit is in degrees and switches the limit on."""
    from neurok_blender import batch

    settings = make_grid().neurok
    batch.apply_overrides(settings, batch.build_parser().parse_args(["--object", "Flag"]))
    assert (settings.joint_stiffness, settings.use_joint_limit) == (1.0, False)  # not given: the object's own
    args = batch.build_parser().parse_args(["--object", "Flag", "--joint-stiffness", "0.5", "--joint-limit", "45"])
    batch.apply_overrides(settings, args)
    assert settings.joint_stiffness == pytest.approx(0.5) and settings.use_joint_limit
    assert settings.joint_limit == pytest.approx(np.pi / 4)


def test_batch_joint_overrides_are_stored_on_the_object_and_reach_its_request(blender):
    """--joint (JSON, repeatable) is stored with the object; the panel's own override comes after it, a hinge's
    range there in degrees."""
    import json

    from neurok_blender import batch
    from neurok_blender.ops.scene_input import joint_overrides

    settings = make_grid().neurok
    args = batch.build_parser().parse_args(["--object", "Flag", "--joint", '{"joint": 1, "type": "slide", "axis": [0, 1, 0]}'])
    batch.apply_overrides(settings, args)
    assert json.loads(settings.joint_overrides) == [{"joint": 1, "type": "slide", "axis": [0, 1, 0]}]
    settings.joint_type, settings.joint_index, settings.joint_axis = "HINGE", 2, "Z"
    settings.use_joint_range, settings.joint_range_min, settings.joint_range_max = True, -90.0, 30.0
    found = joint_overrides(settings)
    assert found[0]["type"] == "slide" and found[1]["axis"] == (0.0, 0.0, 1.0) and found[1]["joint"] == 2
    assert found[1]["range"] == pytest.approx((-np.pi / 2, np.pi / 6))
    settings.joint_type = "BALL"
    with pytest.raises(Exception, match="a joint range is for a hinge"):
        joint_overrides(settings)


def test_batch_cloth_preset_sets_the_objects_cloth(blender):
    from neurok_blender import batch

    settings = make_grid().neurok
    batch.apply_overrides(settings, batch.build_parser().parse_args(["--object", "Flag"]))
    assert settings.cloth_preset == "AUTO"  # not given: the object's own
    batch.apply_overrides(settings, batch.build_parser().parse_args(["--object", "Flag", "--cloth-preset", "Denim"]))
    assert settings.cloth_preset == "DENIM"
