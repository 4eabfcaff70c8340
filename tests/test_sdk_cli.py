"""The Python SDK and the command line: pins files, settings, mesh files in and caches out."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.runtime import api  # noqa: E402
from tests.conftest import ROOT, grid_sheet, needs_model  # noqa: E402


def test_bad_pin_files_are_input_errors(tmp_path):

    np.save(tmp_path / "short.npy", np.ones(3))
    with pytest.raises(InputError, match="4 finite weights"):
        api.load_pins(str(tmp_path / "short.npy"), 4)
    (tmp_path / "words.txt").write_text("left edge\n")
    with pytest.raises(InputError, match="vertex indices"):
        api.load_pins(str(tmp_path / "words.txt"), 4)
    with pytest.raises(InputError, match="no pins file"):
        api.load_pins(str(tmp_path / "missing.txt"), 4)


def test_the_sdk_builds_the_same_request_the_add_on_sends():
    from neurok_blender.bridge.request import Ground, SimulationRequest, Solver

    req = api.build_request(frame_count=8, ground=0.5, solver={"integrator": "verlet"})
    assert req == SimulationRequest(frame_count=8, ground=Ground(offset=0.5), solver=Solver(integrator="verlet"))
    assert api.build_request(req, wind=(1, 0, 0)).wind == (1.0, 0.0, 0.0)
    with pytest.raises(InputError, match="unknown solver keys"):
        api.build_request(solver={"integrater": "verlet"})
    with pytest.raises(InputError, match="integrator"):
        api.build_request(solver={"integrator": "rk4"})


# -- the command line ---------------------------------------------------------------------------------------------
def run_cli(*args, cwd):
    import os
    import subprocess
    import sys


    return subprocess.run([sys.executable, "-m", "neurok_blender.runtime", "simulate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))


@needs_model
def test_cli_simulates_a_mesh_file_into_npz_and_pc2(tmp_path):
    import trimesh

    from neurok_blender.pc2 import read_pc2

    v, t = grid_sheet(9, 7)
    order = np.random.default_rng(0).permutation(len(v))  # a vertex order trimesh must not change
    inverse = np.argsort(order)
    trimesh.Trimesh(v[order], inverse[t], process=False).export(tmp_path / "sheet.obj")
    top = np.flatnonzero(v[order][:, 2] > 1.4 - 1e-6)
    (tmp_path / "pins.txt").write_text("# the top edge\n" + "\n".join(map(str, top)) + "\n")
    done = run_cli("sheet.obj", "--frames", "5", "--fps", "24", "--wind", "0", "3", "0", "--pins", "pins.txt",
                   "--ground", "-1", "--seed", "2", "--device", "cpu", "--out", "out.npz", "--energy", "e.json",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    frames = np.load(tmp_path / "out.npz")["frames"]
    assert frames.shape == (5, len(v), 3) and np.allclose(frames[0], v[order], atol=1e-6)
    assert np.abs(frames[-1][top] - v[order][top]).max() < 0.05  # pins hold, in the file's own vertex order
    weights = np.zeros(len(v))
    weights[top] = 1.0
    np.save(tmp_path / "pins.npy", weights)
    done = run_cli("sheet.obj", "--frames", "3", "--pins", "pins.npy", "--out", "out.pc2", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pc2, start, _ = read_pc2(str(tmp_path / "out.pc2"))
    assert pc2.shape == (3, len(v), 3) and start == 1


def test_cli_errors_are_one_clear_line_and_write_nothing(tmp_path):
    done = run_cli("missing.obj", "--out", "x.npz", cwd=tmp_path)
    assert done.returncode == 2 and "no mesh file" in done.stderr
    (tmp_path / "a.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    done = run_cli("a.obj", "--out", "x.abc", cwd=tmp_path)
    assert done.returncode == 2 and ".pc2 or .npz" in done.stderr
    (tmp_path / "pins.txt").write_text("7\n")
    done = run_cli("a.obj", "--pins", "pins.txt", "--out", "x.npz", cwd=tmp_path)
    assert done.returncode == 2 and "outside" in done.stderr
    assert not list(tmp_path.glob("x.*"))


@needs_model
def test_python_api_simulates_and_streams():

    v, t = grid_sheet(8, 6)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    result = api.simulate(v, t, pins=pins, frame_count=4, wind=(0, 2, 0), device="cpu", seed=1)
    assert result.frames.shape == (4, len(v), 3) and len(result.energy) == 4 and result.device == "cpu"
    streamed = list(api.stream(v, t, pins=pins, frame_count=4, wind=(0, 2, 0), device="cpu", seed=1))
    np.testing.assert_array_equal(np.stack(streamed), result.frames)  # deterministic, frame by frame
    with pytest.raises(InputError, match="unknown request keys.*valid keys"):
        api.simulate(v, t, frame_count=2, wnid=(1, 0, 0))  # a misspelt option is an error, not ignored


@pytest.mark.parametrize("settings, message", [
    ({"stiffness": -1.0}, "stiffness multiplier must be between 0.01 and 100, got -1.0"),
    ({"damping": float("inf")}, "damping multiplier must be a finite number"),
    ({"wind": (1e6, 0, 0)}, "wind of 1e\\+06 m/s is beyond the physical limit of 200 m/s"),
    ({"gravity": (0, 0, float("nan"))}, "gravity must be 3 finite numbers"),
    ({"joint_stiffness": -1.0}, "joint stiffness multiplier must be between 0.01 and 100, got -1.0"),
    ({"joint_limit": 10.0}, "joint_limit \\(rad\\) \\(0: not given\\) must be between 0.01 and 6.3, got 10.0"),
    ({"threads": 1000}, "threads \\(0: the free cores\\) must be between 0 and 256, got 1000"),
    ({"threads": 1.5}, "threads \\(0: the free cores\\) must be a whole number, got 1.5"),
    ({"joints": [{"type": "slider"}]}, "joint override's type must be one of auto, hinge, slide, ball, weld"),
    ({"joints": [{"axis": (0, 0, 0)}]}, "joint override's axis must be a non-zero direction"),
])
def test_the_sdk_refuses_unphysical_settings_before_any_work(settings, message):
    v, t = grid_sheet(4, 3)
    with pytest.raises(InputError, match=message):
        api.prepare(v, t, checkpoint="/nonexistent/model", **settings)  # refused before the model is even looked for


@pytest.mark.parametrize("option, message", [
    (["--stiffness", "-1"], "stiffness multiplier must be between 0.01 and 100, got -1.0"),
    (["--wind", "1e6", "0", "0"], "wind of 1e+06 m/s is beyond the physical limit of 200 m/s"),
    (["--gravity", "0", "0", "-5000"], "gravity of 5000 m/s² is beyond the physical limit of 1000 m/s²"),
    (["--density", "800"], "density is used only with young_modulus"),
    (["--joint-limit", "0"], "--joint-limit must be above 0 degrees"),
    (["--threads", "-2"], "threads (0: the free cores) must be between 0 and 256, got -2"),
    (["--solid-material", "steel"], "solid_material must be one of jelly, rubber, plastic, wood, metal, got 'steel'"),
    (["--joint", '{"type": "prismatic"}'], "joint override's type must be one of auto, hinge, slide, ball, weld"),
    (["--joint", "slide"], "--joint must be a JSON object of joint override keys"),
])
def test_the_cli_refuses_unphysical_settings_in_one_line(tmp_path, option, message):
    (tmp_path / "a.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    done = run_cli("a.obj", *option, "--out", "x.npz", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith(f"error: {message}")
    assert not list(tmp_path.glob("x.*"))


@needs_model
def test_the_cli_takes_joint_overrides_and_refuses_a_joint_the_mesh_lacks_before_writing(tmp_path):
    """A box resting on a board: told to slide, it bakes; an override of a joint it does not have (it has one) is
    refused in one line and no cache is written."""
    import trimesh

    board = trimesh.creation.box(extents=(0.6, 0.5, 0.03))
    box = trimesh.creation.box(extents=(0.5, 0.45, 0.2))
    box.apply_translation((0, 0, 0.115))
    trimesh.util.concatenate([board, box]).export(tmp_path / "drawer.obj")
    (tmp_path / "pins.txt").write_text("\n".join(str(i) for i in range(len(board.vertices))) + "\n")
    slide = '{"joint": 1, "type": "slide", "axis": [0, 1, 0], "range": [-0.1, 0.2]}'
    done = run_cli("drawer.obj", "--pins", "pins.txt", "--frames", "3", "--joint", slide, "--out", "ok.npz",
                   "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run_cli("drawer.obj", "--pins", "pins.txt", "--frames", "3", "--joint", '{"joint": 3, "type": "ball"}',
                   "--out", "no.npz", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == \
        "error: joint override for joint 3: this object has 1 joint"
    assert not list(tmp_path.glob("no.*"))
