"""Curation: reject sequences that are broken or implausible, and say why. numpy only."""

from __future__ import annotations

import numpy as np

from ...runtime.dynamics.cubature import is_closed, signed_volumes  # the runtime's own closed-surface tests

MAX_SPEED = 40.0  # m/s: nothing in these recipes moves faster unless the solver blew up
MAX_STRETCH = 2.0  # edge length over rest length
MIN_MOTION = 0.005  # of the bounding-box diagonal: below this a sequence teaches nothing
MAX_PIN_DRIFT = 1e-3  # of the diagonal
# a closed solid's enclosed volume may change by this share of its rest volume, no more: an elastic solid with a
# Poisson's ratio of 0.2-0.4 keeps its volume within a few per cent under the strains here, but the FE grid simulator
# embeds a thin plate in one layer of cells and lets a soft blob crumple, and their surfaces then fold through
# themselves or turn inside out (held-out plates down to -3.5 of their volume, blobs to -0.9; the sound plates keep
# 0.80-1.06; experiments/collapsed_check.py, docs/journal/validation.md, 2026-12-06 ninth)
MAX_VOLUME_CHANGE = 0.3

REASONS = ("non_finite", "blow_up", "too_fast", "overstretched", "pins_drift", "static", "short", "collapsed")


def edges_of(triangles: np.ndarray) -> np.ndarray:
    e = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    e.sort(axis=1)
    return np.unique(e, axis=0)


def volume_change(frames: np.ndarray, triangles: np.ndarray) -> float | None:
    """The largest |V_t / V_0 - 1| over the frames of a closed surface's signed enclosed volume (a surface turned
    inside out has a negative one), None for an open one (a sheet encloses nothing) or a flat one."""
    if not len(triangles) or not is_closed(triangles):
        return None
    volume = signed_volumes(frames, triangles)  # (T,)
    if abs(volume[0]) < 1e-12:
        return None
    return float(np.abs(volume / volume[0] - 1.0).max())


def rejection_reason(frames: np.ndarray, triangles: np.ndarray, pins: np.ndarray, fps: float,
                     expected_frames: int, rigid_parts: bool = False) -> str | None:
    """None for a good sequence, else one of REASONS."""
    if len(frames) < expected_frames:
        return "non_finite" if not np.isfinite(frames).all() else "short"
    if not np.isfinite(frames).all():
        return "non_finite"
    rest = frames[0]
    diag = float(np.linalg.norm(np.ptp(rest, axis=0)))
    disp = np.linalg.norm(frames - rest, axis=2)
    if disp.max() > 20 * diag + 5.0:
        return "blow_up"
    if np.linalg.norm(np.diff(frames, axis=0), axis=2).max() * fps > MAX_SPEED:
        return "too_fast"
    if not rigid_parts and len(triangles):
        e = edges_of(triangles)
        rest_len = np.linalg.norm(rest[e[:, 0]] - rest[e[:, 1]], axis=1)
        ok = rest_len > 1e-9
        length = np.linalg.norm(frames[:, e[ok, 0]] - frames[:, e[ok, 1]], axis=2)
        if (length / rest_len[ok]).max() > MAX_STRETCH:
            return "overstretched"
        change = volume_change(frames, triangles)
        if change is not None and change > MAX_VOLUME_CHANGE:
            return "collapsed"
    pinned = pins > 0.5
    if pinned.any() and disp[:, pinned].max() > MAX_PIN_DRIFT * diag:
        return "pins_drift"
    if disp.max() < MIN_MOTION * diag:
        return "static"
    return None
