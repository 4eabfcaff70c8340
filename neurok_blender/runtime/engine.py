"""The engine interface the worker drives, and the product engine behind it (NeuROK). No bpy use."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..bridge.request import SimulationRequest
from ..errors import ModelNotInstalled
from .mesh import MeshInput

DEFAULT_CHECKPOINT_DIR = Path(__file__).resolve().parent / "weights" / "neurok-s"


class Engine(Protocol):
    """Built from one request; produces the frames of that bake, one (V, 3) array at a time, in the input's
    vertex order."""

    name: str

    def frames(self, mesh: MeshInput, device: str) -> Iterator[np.ndarray]: ...


EngineFactory = Callable[[SimulationRequest], Engine]


def checkpoint_path(request: SimulationRequest) -> Path:
    return Path(request.checkpoint) if request.checkpoint else DEFAULT_CHECKPOINT_DIR


class NeurokEngine:
    """The product engine behind Simulate, the batch script and the SDK (the worker's default EngineFactory)."""

    name = "neurok"

    def __init__(self, request: SimulationRequest) -> None:
        from .model import checkpoint

        path = checkpoint_path(request)
        if not os.path.exists(path):
            where = "the checkpoint set in the preferences" if request.checkpoint else "the shipped default checkpoint"
            raise ModelNotInstalled(f"No NeuROK model is installed: {where} was not found at {path}. "
                                    "Nothing was simulated and any previous bake is unchanged.")
        checkpoint.read_config(str(path))  # a missing or other-version checkpoint fails early and clearly
        self.request, self.checkpoint_dir = request, str(path)
        self.simulation: Any = None

    def frames(self, mesh: MeshInput, device: str) -> Iterator[np.ndarray]:
        from .dynamics.simulation import Simulation

        self.simulation = Simulation(mesh, self.request, self.request.local_scene(), self.checkpoint_dir, device)
        yield from self.simulation.frames()

    def stats(self) -> dict[str, Any]:
        """What the DONE message reports besides the frames: timings, the material used, the energy trace."""
        return {} if self.simulation is None else self.simulation.stats()


load_default_engine: EngineFactory = NeurokEngine
