"""The device path: the CUDA fallback on machines without a GPU, and the CUDA path itself where one is
present (``gpu``-marked; skipped without CUDA). Device assertions pin the device they mean."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.runtime import device as devices  # noqa: E402
from tests.conftest import needs_cuda, needs_model, run_job, runtime_has_cuda, worker_job  # noqa: E402

REST = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float32)
ARRAYS = {"vertices": REST, "triangles": np.array([[0, 1, 2], [1, 3, 2]], np.int32),
          "pin_weights": np.zeros(4, np.float32)}
no_cuda = pytest.mark.skipif(runtime_has_cuda(), reason="CUDA is available: nothing falls back")


def test_cpu_is_always_the_cpu():
    assert devices.resolve_device("cpu") == ("cpu", None)


@no_cuda
def test_without_cuda_auto_is_the_cpu_and_cuda_falls_back_with_a_warning():
    assert devices.resolve_device("auto") == ("cpu", None)
    device, warning = devices.resolve_device("cuda")
    assert device == "cpu" and "CUDA was requested but is not available" in warning


@no_cuda
def test_the_fallback_warning_reaches_the_add_on(tmp_path):
    job = run_job(worker_job(tmp_path / "out.pc2", ARRAYS, frames=3, device="cuda"))
    assert job.result["device"] == "CPU"
    assert job.warnings == ["CUDA was requested but is not available; running on the CPU"]


@pytest.mark.gpu
@needs_cuda
def test_with_cuda_auto_picks_the_gpu(tmp_path):
    assert devices.resolve_device("auto") == ("cuda", None)
    job = run_job(worker_job(tmp_path / "out.pc2", ARRAYS, frames=3, device="auto"))
    assert job.result["device"].startswith("CUDA") and not job.warnings


@pytest.mark.gpu
@needs_cuda
@needs_model
def test_the_shipped_model_runs_on_cuda_like_on_the_cpu():
    from neurok_blender.runtime import api
    from tests.conftest import grid_sheet

    v, t = grid_sheet(10, 8)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    settings = {"frame_count": 6, "wind": (0, 3, 0), "solver": {"variation": 0.0}}
    cpu = api.simulate(v, t, pins=pins, device="cpu", **settings)
    gpu = api.simulate(v, t, pins=pins, device="cuda", **settings)
    assert gpu.device == "cuda" and np.isfinite(gpu.frames).all()
    diag = float(np.linalg.norm(np.ptp(v, axis=0)))
    assert np.abs(gpu.frames - cpu.frames).max() < 0.02 * diag  # float32 on two devices, a few steps apart


def cube(size: float = 0.6, centre=(0.0, 0.0, 0.0)):
    """A closed cube (8 vertices, 12 outward triangles) without trimesh, which a GPU machine may lack."""
    v = (np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], float) - 0.5) * size + centre
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    f = []
    for a, b, c, d in quads:
        f += [[a, b, c], [a, c, d]]
    return v, np.asarray(f)


@pytest.mark.gpu
@needs_cuda
@needs_model
def test_on_cuda_a_free_body_falls_half_g_t_squared_and_keeps_its_shape():
    from neurok_blender.runtime import api

    v, f = cube(centre=(0.0, 0.0, 2.0))
    frames = api.simulate(v, f, frame_count=25, device="cuda").frames  # frame 24 is one second in
    drop = v[:, 2].mean() - frames[-1][:, 2].mean()
    assert drop == pytest.approx(0.5 * 9.81, rel=0.05)
    assert np.abs((frames[-1] - frames[-1].mean(0)) - (v - v.mean(0))).max() < 0.01 * 0.6


@pytest.mark.gpu
@needs_cuda
@needs_model
def test_the_scene_path_runs_on_cuda_like_on_the_cpu():
    """Colliders, pins that follow an animated parent, a wind field and the exact-decode ablation: every
    tensor of the scene path on one device, and the same motion as on the CPU."""
    from neurok_blender.runtime import api
    from tests.conftest import grid_sheet

    v, t = grid_sheet(12, 10)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    frames = 10
    parent = np.tile(np.eye(4), (frames, 1, 1))
    parent[:, 0, 3] = np.linspace(0.0, 0.3, frames)
    targets = np.einsum("tab,vb->tva", parent[:, :3, :3], v[pins > 0]) + parent[:, None, :3, 3]
    box_v, box_f = cube(0.5, centre=(1.0, 0.4, 0.2))
    to_y = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 0], [0, 0, 0, 1]], float)  # the field's +Z is world +y
    field = {"kind": "wind", "strength": 4.0, "shape": "plane", "matrix": tuple(to_y.ravel())}
    diag = float(np.linalg.norm(np.ptp(v, axis=0)))
    for research in ({}, {"latent": "exact"}):
        settings = dict(pins=pins, frame_count=frames, fps=24, object_matrices=parent, pin_targets=targets,
                        colliders=[{"vertices": box_v, "triangles": box_f, "name": "box"}], fields=[field],
                        solver={"variation": 0.0}, research=research)
        cpu = api.simulate(v, t, device="cpu", **settings)
        gpu = api.simulate(v, t, device="cuda", **settings)
        assert gpu.device == "cuda" and np.isfinite(gpu.frames).all()
        assert np.abs(gpu.frames - cpu.frames).max() < 0.02 * diag, research
        assert np.abs(gpu.frames[-1] - v).max() > 0.01 * diag  # and something moved


@pytest.mark.gpu
@needs_cuda
def test_the_sparse_vertex_blend_and_the_mesh_smoothing_agree_on_cuda_and_cpu():
    from neurok_blender.runtime.dynamics.handles import smooth_on_mesh
    from neurok_blender.runtime.model import dualquat, knn
    from tests.conftest import grid_sheet

    gen = torch.Generator().manual_seed(0)
    v, tris = grid_sheet(30, 20)
    vertices = torch.as_tensor(v, dtype=torch.float32)
    index, weights = knn.smooth_neighbours(vertices, vertices[::7], 16)
    dq = dualquat.normalize(torch.randn(len(vertices[::7]), 8, generator=gen))
    cpu = knn.drive(vertices, dq, index, weights=weights)
    gpu = knn.drive(vertices.cuda(), dq.cuda(), index.cuda(), weights=weights.cuda())
    assert torch.allclose(gpu.cpu(), cpu, atol=1e-5)
    values = torch.rand(len(v), 4, generator=gen)
    assert torch.allclose(smooth_on_mesh(values.cuda(), tris, 8.0).cpu(), smooth_on_mesh(values, tris, 8.0), atol=1e-5)


@pytest.mark.gpu
@needs_cuda
@needs_model
def test_the_cloth_layer_drapes_on_cuda_like_on_the_cpu():
    """The cloth layer on a ball collider (its grid, contact planes, sweeps and bending) through the same torch code."""
    import trimesh

    from neurok_blender.runtime import api

    xs, ys = np.meshgrid(np.linspace(-0.5, 0.5, 16), np.linspace(-0.5, 0.5, 16))
    v = np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, 0.8)], 1)
    i = np.arange(256).reshape(16, 16)
    a, b, c, d = i[:-1, :-1].ravel(), i[1:, :-1].ravel(), i[1:, 1:].ravel(), i[:-1, 1:].ravel()
    t = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    ball = trimesh.creation.icosphere(2, radius=0.3)
    settings = {"frame_count": 12, "solver": {"variation": 0.0},
                "colliders": [{"vertices": np.asarray(ball.vertices) + [0, 0, 0.3], "triangles": np.asarray(ball.faces)}]}
    cpu = api.simulate(v, t, device="cpu", **settings)
    gpu = api.simulate(v, t, device="cuda", **settings)
    assert gpu.device == "cuda" and np.isfinite(gpu.frames).all()
    assert np.abs(gpu.frames - cpu.frames).max() < 0.02  # float32 on two devices
