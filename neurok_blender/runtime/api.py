"""The runtime as a Python SDK, for pipelines without Blender. No bpy use.

    from neurok_blender.runtime.api import simulate, load_mesh
    mesh = load_mesh("flag.obj")
    result = simulate(mesh.vertices, mesh.triangles, frame_count=120, fps=24, wind=(3, 0, 0), pins=mesh_pins)
    result.frames  # (120, V, 3) in the input's vertex order; result.energy, result.timing

Settings are the fields of ``SimulationRequest`` (the same object the add-on sends its worker), as keywords
or as one ``request=``; nested parts (``ground``, ``poke``, ``solver``) may be dicts. Vectors are in the mesh's
own frame unless ``world_matrix`` says otherwise. ``stream()`` yields one frame at a time for long bakes.

The scene around the object, as arrays (world space, one entry per baked frame where it moves):

    simulate(v, f, frame_count=48, pins=pins,
             colliders=[{"vertices": ball_v, "triangles": ball_f, "transforms": ball_T}],  # T (T, 4, 4) optional
             pin_targets=targets,            # (T, P, 3) for the P pinned vertices, or (T, V, 3): pins follow it
             object_matrices=obj_T,          # (T, 4, 4): the object's animated transform
             fields=[{"kind": "wind", "strength": 5, "matrix": m}],  # ForceField keys; "matrices"/"strengths" animate
             initial_velocities=vel)         # (V, 3) m/s, the animation's motion at the first frame

A collider's ``vertices`` may be (V, 3) (still or moved by ``transforms``) or (T, V, 3) (deforming).
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

from .. import track as tracks
from ..bridge.request import SimulationRequest
from ..errors import InputError
from ..pc2 import PC2Writer
from . import device as devices
from . import threads
from .dynamics.scene import SceneInput
from .dynamics.simulation import Simulation
from .engine import NeurokEngine
from .mesh import MeshInput
from .research import Research


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


def scene_input(request: SimulationRequest, pin_weights: np.ndarray | None, vertex_count: int, colliders=None,
                pin_targets=None, object_matrices=None, fields=None, initial_velocities=None,
                ) -> tuple[SimulationRequest, SceneInput | None]:
    """The request with its scene parts filled in, and the arrays beside it (the scene track built in memory)."""
    if not any(a is not None for a in (colliders, pin_targets, object_matrices, fields, initial_velocities)):
        return request, None
    frames = request.frame_count
    weights = np.zeros(vertex_count) if pin_weights is None else np.asarray(pin_weights, np.float64)
    changes: dict[str, Any] = {}
    collider_parts, collider_vertices, triangles_list = [], [], []
    for i, c in enumerate(colliders or []):
        if not isinstance(c, dict) or "vertices" not in c or "triangles" not in c:
            raise InputError(f"collider {i} must be a dict with 'vertices' and 'triangles' (and optionally "
                             "'transforms', 'thickness', 'friction', 'name')")
        v = np.asarray(c["vertices"], np.float64)
        if v.ndim not in (2, 3) or v.shape[-1] != 3 or v.shape[-2] < 3:
            raise InputError(f"collider {i}: vertices must be (V, 3) or (T, V, 3), got shape {v.shape}")
        if "transforms" in c and c["transforms"] is not None:
            m = np.asarray(c["transforms"], np.float64).reshape(-1, 4, 4)
            v = np.einsum("tab,tvb->tva", m[:, :3, :3], np.broadcast_to(v, (len(m), *v.shape[-2:]))) + m[:, None, :3, 3]
        collider_vertices.append(v)
        triangles_list.append(np.asarray(c["triangles"]).reshape(-1, 3) if np.size(c["triangles"]) else np.zeros((0, 3), np.int64))
        collider_parts.append({"name": str(c.get("name", f"collider{i}")), "vertex_count": v.shape[-2],
                               **{k: c[k] for k in ("thickness", "friction") if k in c}})
    if colliders is not None:
        changes["colliders"] = collider_parts
    field_parts, field_tracks = [], []
    for j, f in enumerate(fields or []):
        if not isinstance(f, dict):
            raise InputError(f"field {j} must be a dict of ForceField keys, got {f!r}")
        f = dict(f)
        matrices, strengths = f.pop("matrices", None), f.pop("strengths", None)
        if matrices is not None:
            f.setdefault("matrix", tuple(np.asarray(matrices, np.float64).reshape(-1, 16)[0]))
        if strengths is not None:
            f.setdefault("strength", float(np.asarray(strengths, np.float64).reshape(-1)[0]))
        field_parts.append(f)
        field_tracks.append((matrices if matrices is not None else np.asarray(f.get("matrix", np.eye(4))),
                             strengths if strengths is not None else f.get("strength", 1.0)))
    if fields is not None:
        changes["fields"] = field_parts
    if pin_targets is not None:
        targets = np.asarray(pin_targets, np.float64)
        pinned = np.flatnonzero(weights > 0)
        if targets.ndim == 3 and targets.shape[1] == vertex_count and len(pinned) != vertex_count:
            targets = targets[:, pinned]
        pin_targets = targets
        changes["animated_pins"] = True
    if object_matrices is not None:
        first = np.asarray(object_matrices, np.float64).reshape(-1, 16)[0]
        changes["world_matrix"] = tuple(first)
    request = build_request(request, **changes)
    rows = None
    if colliders or pin_targets is not None or object_matrices is not None or fields:
        layout = tracks.layout_for(request, weights)
        rows = tracks.from_arrays(frames, layout, object_matrices if object_matrices is not None
                                  else np.asarray(request.world_matrix).reshape(4, 4), pin_targets, collider_vertices,
                                  field_tracks)
    return request, SceneInput(triangles_list, rows, initial_velocities)


def prepare(vertices: np.ndarray, triangles: np.ndarray | None = None, *, pins: np.ndarray | None = None,
            request: SimulationRequest | None = None, colliders=None, pin_targets=None, object_matrices=None,
            fields=None, initial_velocities=None, research: Research | dict[str, Any] | None = None,
            **settings: Any) -> Simulation:
    """Set up a simulation (encode, reduce, fit q0). ``settings`` are fields of ``SimulationRequest``; the
    scene's arrays are described in the module's docstring. ``research``: ablation switches
    (``runtime/research.py``; e.g. ``{"handles": False}``, the learned latent alone), for studies only."""
    research = Research.of(research)
    request = build_request(request, **settings)
    request, scene = scene_input(request, pins, len(np.asarray(vertices).reshape(-1, 3)), colliders, pin_targets,
                                 object_matrices, fields, initial_velocities)
    mesh = MeshInput.from_arrays(vertices, triangles, pins, scene=scene)
    threads.apply(request.threads)
    dev, warning = devices.resolve_device(request.device)
    if warning:
        warnings.warn(warning, RuntimeWarning, stacklevel=2)
    return Simulation(mesh, request, request.local_scene(), NeurokEngine(request).checkpoint_dir, dev, research)


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
