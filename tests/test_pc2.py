"""PC2 files: streaming writer, reader, damaged files."""

from __future__ import annotations

import numpy as np
import pytest

from neurok_blender.errors import CacheError
from neurok_blender.pc2 import PC2Writer, read_header, read_pc2


def test_roundtrip(tmp_path):
    frames = np.random.default_rng(0).normal(size=(5, 7, 3)).astype(np.float32)
    with PC2Writer(tmp_path / "a.pc2", 7, start_frame=3) as w:
        for f in frames:
            w.append(f)
    got, start, rate = read_pc2(tmp_path / "a.pc2")
    assert np.array_equal(got, frames) and start == 3.0 and rate == 1.0


def test_header_counts_frames_as_they_stream(tmp_path):
    w = PC2Writer(tmp_path / "b.pc2", 2)
    w.append(np.zeros((2, 3)))
    w.append(np.ones((2, 3)))
    assert read_header(tmp_path / "b.pc2") == (2, 1.0, 1.0, 2)
    w.close()


def test_wrong_shape_is_refused(tmp_path):
    with PC2Writer(tmp_path / "c.pc2", 4) as w, pytest.raises(CacheError):
        w.append(np.zeros((3, 3)))


def test_garbage_and_truncated_files_are_cache_errors(tmp_path):
    (tmp_path / "g.pc2").write_bytes(b"not a cache at all, sorry!!!!!!!!")
    with pytest.raises(CacheError):
        read_pc2(tmp_path / "g.pc2")
    with PC2Writer(tmp_path / "t.pc2", 4) as w:
        w.append(np.zeros((4, 3)))
    data = (tmp_path / "t.pc2").read_bytes()
    (tmp_path / "t.pc2").write_bytes(data[:-8])
    with pytest.raises(CacheError, match="truncated"):
        read_pc2(tmp_path / "t.pc2")
