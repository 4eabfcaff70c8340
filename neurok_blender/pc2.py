"""PC2 point-cache files (Blender's MESH_CACHE format): streaming writer and reader. numpy only, no bpy, no torch.

Layout: ``b"POINTCACHE2\\0"``, int32 version (1), int32 points, float32 start frame,
float32 sample rate, int32 samples, then float32 xyz per point per sample (little-endian).
"""

from __future__ import annotations

import os
import struct

import numpy as np

from .errors import CacheError

SIGNATURE = b"POINTCACHE2\0"
_HEADER = struct.Struct("<12siiffi")
_SAMPLES_OFFSET = 28


def _write_all(fh, data: bytes) -> None:
    """An unbuffered write may be partial; finish it or fail with the OSError."""
    view = memoryview(data)
    while view:
        written = fh.write(view)
        if not written:
            raise OSError(28, "No space left on device")
        view = view[written:]


class PC2Writer:
    """Appends frames one at a time; the header's sample count is kept current after each frame,
    so a file cut short by a crash is still a valid (shorter) cache."""

    def __init__(self, path: str | os.PathLike, num_points: int, start_frame: float = 1.0, sample_rate: float = 1.0) -> None:
        self.path, self.num_points, self.samples = os.fspath(path), int(num_points), 0
        try:
            self._fh = open(self.path, "wb", buffering=0)  # unbuffered: nothing is left to flush on failure
            self._fh.write(_HEADER.pack(SIGNATURE, 1, self.num_points, float(start_frame), float(sample_rate), 0))
        except OSError as exc:
            raise CacheError(f"cannot write the cache file {self.path!r}: {exc.strerror or exc}") from exc

    def append(self, positions: np.ndarray) -> None:
        pos = np.ascontiguousarray(positions, dtype="<f4")
        if pos.shape != (self.num_points, 3):
            raise CacheError(f"frame has shape {pos.shape}, the cache expects ({self.num_points}, 3)")
        try:
            self._fh.seek(0, os.SEEK_END)
            _write_all(self._fh, pos.tobytes())
            self.samples += 1
            self._fh.seek(_SAMPLES_OFFSET)
            _write_all(self._fh, struct.pack("<i", self.samples))
        except OSError as exc:
            raise CacheError(f"cannot write the cache file {self.path!r}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        if self._fh.closed:
            return
        try:
            os.fsync(self._fh.fileno())
        except OSError as exc:
            self._abandon()
            raise CacheError(f"cannot write the cache file {self.path!r}: {exc.strerror or exc}") from exc
        self._fh.close()

    def _abandon(self) -> None:
        try:
            self._fh.close()
        except OSError:
            pass

    def __enter__(self) -> PC2Writer:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:  # the error already on its way says what went wrong; don't mask it with a second one
            self._abandon()


def read_header(path: str | os.PathLike) -> tuple[int, float, float, int]:
    """(points, start frame, sample rate, samples) of a PC2 file."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_HEADER.size)
    except OSError as exc:
        raise CacheError(f"cannot read the cache file {os.fspath(path)!r}: {exc.strerror or exc}") from exc
    if len(raw) < _HEADER.size:
        raise CacheError(f"{os.fspath(path)!r} is not a PC2 file (too short)")
    sig, version, points, start, rate, samples = _HEADER.unpack(raw)
    if sig != SIGNATURE or version != 1 or points < 0 or samples < 0:
        raise CacheError(f"{os.fspath(path)!r} is not a PC2 version 1 file")
    return points, start, rate, samples


def read_pc2(path: str | os.PathLike) -> tuple[np.ndarray, float, float]:
    """All frames as a (samples, points, 3) float32 array, plus start frame and sample rate."""
    points, start, rate, samples = read_header(path)
    expected = points * samples * 3
    data = np.fromfile(path, dtype="<f4", offset=_HEADER.size)
    if data.size < expected:
        raise CacheError(f"{os.fspath(path)!r} is truncated: {data.size} of {expected} values")
    return data[:expected].reshape(samples, points, 3), start, rate
