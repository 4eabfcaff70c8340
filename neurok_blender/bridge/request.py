"""SimulationRequest: the typed header of one bake, shared by the add-on and the worker. Standard library only."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError

DEVICES = ("auto", "cpu", "cuda")
MAX_FRAMES = 100_000


def _vec3(name: str, value: Any) -> tuple[float, float, float]:
    try:
        vec = tuple(float(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be three numbers, got {value!r}") from exc
    if len(vec) != 3 or not all(math.isfinite(v) for v in vec):
        raise InputError(f"{name} must be three finite numbers, got {value!r}")
    return vec  # type: ignore[return-value]


@dataclass(frozen=True)
class SimulationRequest:
    """Everything the worker needs besides the mesh arrays. Vectors are in the object's local frame."""

    output_path: str
    frame_start: int = 1
    frame_count: int = 250
    fps: float = 24.0
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    wind: tuple[float, float, float] = (0.0, 0.0, 0.0)
    stiffness: float = 1.0
    damping: float = 1.0
    seed: int = 0
    device: str = "auto"
    checkpoint: str = ""
    object_name: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._coerce()
        if not self.output_path:
            raise InputError("the request names no output file")
        if not 1 <= int(self.frame_count) <= MAX_FRAMES:
            raise InputError(f"frame_count must be between 1 and {MAX_FRAMES}, got {self.frame_count}")
        if not (math.isfinite(self.fps) and self.fps > 0):
            raise InputError(f"fps must be positive, got {self.fps}")
        if self.device not in DEVICES:
            raise InputError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        for name in ("stiffness", "damping"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"{name} multiplier must be a finite number >= 0, got {value}")
        object.__setattr__(self, "gravity", _vec3("gravity", self.gravity))
        object.__setattr__(self, "wind", _vec3("wind", self.wind))

    def _coerce(self) -> None:
        casts = {"frame_start": int, "frame_count": int, "seed": int, "fps": float, "stiffness": float, "damping": float}
        for name, cast in casts.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{name} must be a number, got {value!r}")
            object.__setattr__(self, name, cast(value))
        for name in ("output_path", "device", "checkpoint", "object_name"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"{name} must be a string, got {getattr(self, name)!r}")
        if not isinstance(self.extras, dict):
            raise InputError("extras must be an object")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimulationRequest:
        """Build from a decoded header; unknown keys are an error that names the valid ones."""
        if not isinstance(data, dict):
            raise InputError("a simulation request must be a JSON object")
        valid = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - valid)
        if unknown:
            raise InputError(f"unknown request keys {unknown}; valid keys are {sorted(valid)}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise InputError(f"malformed simulation request: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
