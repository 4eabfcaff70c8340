"""Shared fixtures. Blender's user folder points at a temporary directory before bpy loads."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models: one thread each avoids oversubscribing 2 cores
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="neurok-blender-user-"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH", "")]))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ANALYTIC_ENTRY = "tests.support.analytic_worker"


def has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def runtime_python() -> str:
    """An interpreter with torch for the worker (the bpy-5 venv borrows the main one)."""
    return os.environ.get("NEUROK_PYTHON") or sys.executable


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
