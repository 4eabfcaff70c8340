"""Shared fixtures. Blender's user folder points at a temporary directory before bpy loads."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models: one thread each avoids oversubscribing 2 cores
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="neurok-blender-user-"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH", "")]))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ANALYTIC_ENTRY = "tests.support.analytic_worker"
LAUNCHER = os.path.join(ROOT, "neurok_blender", "runtime", "launch.py")
SHIPPED_CHECKPOINT = Path(ROOT) / "neurok_blender" / "runtime" / "weights" / "neurok-s"
needs_model = pytest.mark.skipif(not (SHIPPED_CHECKPOINT / "config.json").exists(), reason="no shipped checkpoint")


def has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def runtime_python() -> str:
    """An interpreter with torch for the worker (the bpy-5 venv borrows the main one)."""
    return os.environ.get("NEUROK_PYTHON") or sys.executable


def grid_sheet(nx=14, ny=10, width=2.0, height=1.4):
    """A flat sheet in the xz-plane: vertices (nx·ny, 3) and triangles."""
    xs, zs = np.meshgrid(np.linspace(0, width, nx), np.linspace(0, height, ny))
    v = np.stack([xs.ravel(), np.zeros(xs.size), zs.ravel()], 1)
    tris = []
    for j in range(ny - 1):
        for i in range(nx - 1):
            a = j * nx + i
            tris += [[a, a + 1, a + nx + 1], [a, a + nx + 1, a + nx]]
    return v, np.array(tris)


def worker_job(out, arrays, *, frames=6, entry=ANALYTIC_ENTRY, mode="", interpreter=None, timeouts=None, **request):
    """A BakeJob for one request through the real launcher and worker (``entry`` None: the product engine)."""
    from neurok_blender.bridge.client import RuntimeProcess
    from neurok_blender.bridge.job import BakeJob
    from neurok_blender.bridge.request import SimulationRequest

    env = dict(os.environ, NEUROK_TEST_ENGINE=mode)
    argv = [interpreter or runtime_python(), LAUNCHER] + (["--entry", entry] if entry else []) + ["--"]
    proc = RuntimeProcess(argv, env=env, **(timeouts or {}))
    req = SimulationRequest(output_path=str(out), frame_count=frames, **request)
    return BakeJob(proc, req.to_dict(), arrays)


def run_job(job, timeout=120.0):
    """Start ``job`` and poll it to the end (its typed error propagates); the process is always closed."""
    job.start()
    deadline = time.monotonic() + timeout
    try:
        while not job.poll():
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.01)
    finally:
        job.close()
    return job


@functools.lru_cache(maxsize=1)
def runtime_has_cuda() -> bool:
    """Whether the worker's interpreter sees a CUDA device (asked in a subprocess: the bpy venv has no torch)."""
    import subprocess

    done = subprocess.run([runtime_python(), "-c", "import torch; print(torch.cuda.is_available())"],
                          capture_output=True, text=True, timeout=120)
    return done.stdout.strip() == "True"


needs_cuda = pytest.mark.skipif(not runtime_has_cuda(), reason="needs CUDA")


@pytest.fixture
def analytic_worker(monkeypatch):
    """Route the add-on's worker launches to the analytic test engine."""
    monkeypatch.setenv("NEUROK_WORKER_ENTRY", ANALYTIC_ENTRY)
    monkeypatch.delenv("NEUROK_TEST_ENGINE", raising=False)
    if not os.environ.get("NEUROK_PYTHON"):
        monkeypatch.setenv("NEUROK_PYTHON", sys.executable)
    return monkeypatch


@pytest.fixture(scope="session")
def addon():
    """The add-on from this checkout, enabled the way Blender enables a legacy add-on."""
    bpy = pytest.importorskip("bpy")
    import addon_utils

    addon_utils.enable("neurok_blender", default_set=True, handle_error=None)
    assert hasattr(bpy.types.Object, "neurok"), "the add-on did not register"
    yield sys.modules["neurok_blender"]


@pytest.fixture
def blender(addon, tmp_path):
    """A fresh empty scene before and after each Blender test."""
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    yield bpy
    bpy.ops.wm.read_homefile(use_empty=True)
