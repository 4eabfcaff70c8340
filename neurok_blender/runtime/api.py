"""The runtime as a Python SDK, for pipelines without Blender. No bpy use.

    from neurok_blender.runtime.api import simulate, load_mesh
    mesh = load_mesh("flag.obj")
    result = simulate(mesh.vertices, mesh.triangles, frame_count=120, fps=24, wind=(3, 0, 0), pins=mesh_pins)
    result.frames  # (120, V, 3) in the input's vertex order; result.energy, result.timing

Settings are the fields of ``SimulationRequest`` (the same object the add-on sends its worker), as keywords
or as one ``request=``; nested parts (``ground``, ``poke``, ``solver``) may be dicts. Vectors are in the mesh's
own frame unless ``world_matrix`` says otherwise. ``stream()`` yields one frame at a time for long bakes.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bridge.request import SimulationRequest
from ..errors import InputError
from ..pc2 import PC2Writer
from . import device as devices
from .dynamics.simulation import Simulation
from .engine import NeurokEngine
from .mesh import MeshInput


@dataclass
class Mesh:
    vertices: np.ndarray  # (V, 3)
    triangles: np.ndarray  # (F, 3), empty for a point cloud


@dataclass
class Result:
    frames: np.ndarray  # (T, V, 3)
    energy: list[dict[str, float]]
    timing: dict[str, float]
    device: str


def load_mesh(path: str) -> Mesh:
    """Any format trimesh reads, keeping the file's vertex order (no merging or reordering); polygons are
    triangulated; a file with points only becomes a point cloud."""
    import trimesh

    if not os.path.isfile(path):
        raise InputError(f"no mesh file at {path!r}")
    try:
        loaded = trimesh.load(path, process=False, maintain_order=True)
    except Exception as exc:  # trimesh raises many types for unreadable files
        raise InputError(f"cannot read the mesh {path!r}: {exc}") from exc
    if isinstance(loaded, trimesh.Scene):
        geoms = list(loaded.geometry.values())
        if len(geoms) != 1:
            raise InputError(f"{path!r} holds {len(geoms)} objects; export one object per file")
        loaded = geoms[0]
    vertices = np.asarray(getattr(loaded, "vertices", np.zeros((0, 3))), np.float64)
    faces = np.asarray(getattr(loaded, "faces", np.zeros((0, 3))), np.int64).reshape(-1, 3)
    if len(vertices) == 0:
        raise InputError(f"{path!r} has no vertices")
    return Mesh(vertices, faces)


def load_pins(path: str, vertex_count: int) -> np.ndarray:
    """A text file of vertex indices (one per line; weight 1) or a .npy of per-vertex weights in [0, 1]."""
    if not os.path.isfile(path):
        raise InputError(f"no pins file at {path!r}")
    if path.endswith(".npy"):
        weights = np.load(path, allow_pickle=False).astype(np.float64).reshape(-1)
        if weights.shape != (vertex_count,) or not np.isfinite(weights).all():
            raise InputError(f"{path!r} must hold {vertex_count} finite weights, one per vertex")
        return np.clip(weights, 0.0, 1.0)
    try:
        with open(path) as fh:
            idx = np.array([int(line.split("#")[0]) for line in fh if line.split("#")[0].strip()], np.int64)
    except ValueError as exc:
        raise InputError(f"{path!r} must list vertex indices, one per line: {exc}") from exc
    if idx.size and (idx.min() < 0 or idx.max() >= vertex_count):
        raise InputError(f"{path!r} names vertex indices outside 0..{vertex_count - 1}")
    weights = np.zeros(vertex_count)
    weights[idx] = 1.0
    return weights


def build_request(request: SimulationRequest | None = None, **settings: Any) -> SimulationRequest:
    """``request`` with ``settings`` on top (or the settings alone), validated as one SimulationRequest."""
    if request is None:
        return SimulationRequest.from_dict(settings)
    return SimulationRequest.from_dict({**request.to_dict(), **settings}) if settings else request


def prepare(vertices: np.ndarray, triangles: np.ndarray | None = None, *, pins: np.ndarray | None = None,
            request: SimulationRequest | None = None, **settings: Any) -> Simulation:
    """Set up a simulation (encode, reduce, fit q0). ``settings`` are fields of ``SimulationRequest``."""
    request = build_request(request, **settings)
    mesh = MeshInput.from_arrays(vertices, triangles, pins)
    dev, warning = devices.resolve_device(request.device)
    if warning:
        warnings.warn(warning, RuntimeWarning, stacklevel=2)
    return Simulation(mesh, request, NeurokEngine(request).checkpoint_dir, dev)


def stream(vertices: np.ndarray, triangles: np.ndarray | None = None, **kwargs: Any) -> Iterator[np.ndarray]:
    yield from prepare(vertices, triangles, **kwargs).frames()


def simulate(vertices: np.ndarray, triangles: np.ndarray | None = None, **kwargs: Any) -> Result:
    sim = prepare(vertices, triangles, **kwargs)
    frames = sim.run()
    return Result(frames, sim.energy, sim.timing, sim.device)


def save_frames(path: str, frames: Iterator[np.ndarray], vertex_count: int, count: int, start: int = 1,
                progress: bool = True) -> int:
    """Stream frames to OUT.pc2 or OUT.npz (``frames`` T×V×3), atomically: a failure leaves no file."""
    if not path.endswith((".pc2", ".npz")):
        raise InputError(f"the output must end in .pc2 or .npz, got {path!r}")
    tmp = path + ".partial"
    started, written = time.perf_counter(), 0
    try:
        if path.endswith(".pc2"):
            with PC2Writer(tmp, vertex_count, start_frame=start) as writer:
                for frame in frames:
                    writer.append(frame)
                    written += 1
                    _progress(progress, written, count, started)
        else:
            stack = []
            for frame in frames:
                stack.append(np.asarray(frame, np.float32))
                written += 1
                _progress(progress, written, count, started)
            with open(tmp, "wb") as fh:
                np.savez(fh, frames=np.stack(stack), start_frame=np.int64(start))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    if progress:
        print(file=sys.stderr)
    return written


def _progress(enabled: bool, done: int, total: int, started: float) -> None:
    if not enabled:
        return
    rate = done / max(time.perf_counter() - started, 1e-9)
    bar = "#" * int(30 * done / total)
    print(f"\r[{bar:<30}] frame {done}/{total} ({rate:.1f} frames/s)", end="", file=sys.stderr, flush=True)
