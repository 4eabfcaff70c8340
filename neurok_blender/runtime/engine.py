"""The engine interface the worker drives, and the product engine's loader. No bpy use."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ..bridge.request import SimulationRequest
from ..errors import InputError, ModelNotInstalled

DEFAULT_CHECKPOINT_DIR = Path(__file__).resolve().parent / "weights" / "neurok-s"


@dataclass(frozen=True)
class MeshInput:
    """The base mesh in the object's local space: vertices (V, 3), triangles (F, 3), pin weights (V,)."""

    vertices: np.ndarray
    triangles: np.ndarray
    pin_weights: np.ndarray

    def __post_init__(self) -> None:
        v, t, w = self.vertices, self.triangles, self.pin_weights
        if v.ndim != 2 or v.shape[1] != 3 or len(v) == 0:
            raise InputError(f"vertices must be a non-empty (V, 3) array, got shape {v.shape}")
        if not np.isfinite(v).all():
            raise InputError("the mesh has NaN or infinite vertex coordinates")
        if t.size and (t.ndim != 2 or t.shape[1] != 3 or t.min() < 0 or t.max() >= len(v)):
            raise InputError("triangles must be a (F, 3) array of valid vertex indices")
        if w.shape != (len(v),):
            raise InputError(f"pin weights must have one value per vertex ({len(v)}), got shape {w.shape}")


class Engine(Protocol):
    """Produces the frames of one bake, one (V, 3) array at a time, in the input's vertex order."""

    name: str

    def frames(self, request: SimulationRequest, mesh: MeshInput, device: str) -> Iterator[np.ndarray]: ...


EngineFactory = Callable[[SimulationRequest], Engine]


def checkpoint_path(request: SimulationRequest) -> Path:
    return Path(request.checkpoint) if request.checkpoint else DEFAULT_CHECKPOINT_DIR


def load_default_engine(request: SimulationRequest) -> Engine:
    """The product engine: NeuROK from the requested (or the shipped) checkpoint."""
    path = checkpoint_path(request)
    if not os.path.exists(path):
        where = "the shipped default checkpoint" if not request.checkpoint else "the checkpoint set in the preferences"
        raise ModelNotInstalled(
            f"No NeuROK model is installed: {where} was not found at {path}. "
            "Nothing was simulated and any previous bake is unchanged."
        )
    from .dynamics.simulate import NeurokEngine

    return NeurokEngine(request, str(path))
