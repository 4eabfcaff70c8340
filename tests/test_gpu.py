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
