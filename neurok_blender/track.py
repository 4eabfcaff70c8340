"""The scene track: what the scene does around one simulated object, frame by frame, as one float32 row per
frame in a ``.npy`` file. numpy only, no bpy, no torch.

The add-on evaluates the scene once per frame before the bake (the object's animated transform, the
pinned vertices' animated positions, every collider's deformed vertices, the force fields' transforms and
strengths) and appends one row per frame to the file; the worker memory-maps it and reads the rows it
needs, so a long bake stays flat in memory on both sides. The SDK builds the same rows from arrays.

A row holds, in this order (world space; counts fixed for the whole bake):

- ``object``: the object's local-to-world 4×4, row-major (16)
- ``pins``: the pinned vertices' positions, in vertex-index order (3 per vertex with a pin weight > 0),
  only when the request has ``animated_pins``
- ``collider<i>``: each collider's vertices (3 × ``vertex_count``)
- ``field<j>``: each force field's 4×4 (16) and strength (1)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .errors import InputError

DTYPE = np.float32


@dataclass(frozen=True)
class Layout:
    """Where each part of a row lies: name → (start, stop)."""

    parts: dict[str, tuple[int, int]]

    @classmethod
    def build(cls, pinned: int, collider_vertices: list[int], fields: int) -> Layout:
        parts, at = {}, 0
        sizes = [("object", 16), ("pins", 3 * pinned)] + [(f"collider{i}", 3 * n) for i, n in enumerate(collider_vertices)]
        sizes += [(f"field{j}", 17) for j in range(fields)]
        for name, size in sizes:
            if size:
                parts[name] = (at, at + size)
                at += size
        return cls(parts)

    @property
    def width(self) -> int:
        return max((stop for _, stop in self.parts.values()), default=0)

    def get(self, row: np.ndarray, name: str) -> np.ndarray:
        start, stop = self.parts[name]
        return row[..., start:stop]


def layout_for(request, pin_weights: np.ndarray) -> Layout:
    """The layout a request implies (``request`` is a SimulationRequest)."""
    pinned = int((np.asarray(pin_weights) > 0).sum()) if request.animated_pins else 0
    return Layout.build(pinned, [c.vertex_count for c in request.colliders], len(request.fields))


class TrackWriter:
    """Appends rows to a new track file (written to ``path``.partial, moved into place by ``close``)."""

    def __init__(self, path: str, frames: int, layout: Layout) -> None:
        self.path, self.layout, self.frames = path, layout, frames
        self._tmp = path + ".partial"
        self._array = np.lib.format.open_memmap(self._tmp, mode="w+", dtype=DTYPE, shape=(frames, layout.width))
        self.written = 0

    def append(self, **parts: np.ndarray) -> None:
        if self.written >= self.frames:
            raise InputError(f"the scene track holds {self.frames} frames; one more was written")
        row = self._array[self.written]
        for name, value in parts.items():
            if name not in self.layout.parts:
                continue  # a part this layout does not carry (no animated pins, say)
            start, stop = self.layout.parts[name]
            flat = np.asarray(value, dtype=np.float64).reshape(-1)
            if flat.size != stop - start:
                raise InputError(f"scene track part {name!r} has {flat.size} values, the layout says {stop - start}")
            row[start:stop] = flat
        self.written += 1

    def close(self) -> str:
        self._array.flush()
        del self._array
        if self.written != self.frames:
            os.remove(self._tmp)
            raise InputError(f"the scene track got {self.written} of {self.frames} frames")
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        if hasattr(self, "_array"):
            del self._array
        if os.path.exists(self._tmp):
            os.remove(self._tmp)


def open_track(path: str, frames: int, layout: Layout) -> np.ndarray:
    """The track's rows, memory-mapped; checked for shape here and for finite values where each row is read."""
    if not os.path.isfile(path):
        raise InputError(f"the scene track {path!r} does not exist")
    try:
        rows = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"the scene track {path!r} is unreadable: {exc}") from exc
    if rows.ndim != 2 or rows.shape[1] != layout.width or rows.shape[0] < frames:
        raise InputError(f"the scene track {path!r} has shape {rows.shape}; this bake needs at least "
                         f"({frames}, {layout.width})")
    return rows


def from_arrays(frames: int, layout: Layout, object_matrices=None, pin_targets=None, colliders=(),
                fields=()) -> np.ndarray:
    """Rows for the SDK: ``object_matrices`` (T, 4, 4) or (4, 4) or None (identity); ``pin_targets`` (T, P, 3)
    for the pinned vertices; ``colliders`` a list of (T, V, 3) or (V, 3) vertex arrays; ``fields`` a list of
    (matrices (T, 4, 4) or (4, 4), strengths (T,) or scalar). A static part is repeated on every frame."""
    rows = np.zeros((frames, layout.width), DTYPE)

    def put(name: str, value, per_frame: int) -> None:
        arr = np.asarray(value, np.float64)
        if not np.isfinite(arr).all():
            raise InputError(f"{name} has NaN or infinite values")
        if arr.size == per_frame:
            arr = np.broadcast_to(arr.reshape(1, per_frame), (frames, per_frame))
        elif arr.size >= frames * per_frame and arr.size % per_frame == 0 and arr.shape[0] >= frames:
            arr = arr.reshape(arr.shape[0], per_frame)[:frames]
        else:
            raise InputError(f"{name} must hold {per_frame // 3 if per_frame % 3 == 0 else per_frame} values per "
                             f"frame for {frames} frames (or one static set), got shape {np.shape(value)}")
        start, stop = layout.parts[name]
        rows[:, start:stop] = arr

    put("object", np.eye(4) if object_matrices is None else object_matrices, 16)
    if "pins" in layout.parts:
        if pin_targets is None:
            raise InputError("animated pins need pin targets")
        put("pins", pin_targets, layout.parts["pins"][1] - layout.parts["pins"][0])
    for i, vertices in enumerate(colliders):
        name = f"collider{i}"
        put(name, vertices, layout.parts[name][1] - layout.parts[name][0])
    for j, (matrices, strengths) in enumerate(fields):
        m = np.asarray(matrices, np.float64).reshape(-1, 16)
        s = np.asarray(strengths, np.float64).reshape(-1, 1)
        if len(m) == 1:
            m = np.repeat(m, len(s) if len(s) > 1 else frames, 0)
        if len(s) == 1:
            s = np.repeat(s, len(m), 0)
        if len(m) != len(s):
            raise InputError(f"field {j}: {len(m)} matrices but {len(s)} strengths")
        put(f"field{j}", np.concatenate([m, s], 1), 17)
    return rows
