"""SequenceSpec: everything needed to simulate one sequence, and the per-sequence record. numpy only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

CATEGORIES = ("cloth", "elastic_solid", "soft_toy", "articulated")


@dataclass
class Joint:
    """A joint of an articulated object: part ``child`` moves relative to part ``parent`` (0 = fixed base)."""

    kind: str  # "hinge" or "slide"
    child: int
    parent: int
    axis: tuple[float, float, float]
    anchor: tuple[float, float, float]
    stiffness: float
    damping: float
    range: tuple[float, float]
    qpos0: float = 0.0
    qvel0: float = 0.0


@dataclass
class SequenceSpec:
    family: str
    category: str
    backend: str
    seed: int
    vertices: np.ndarray  # (V, 3) rest positions, world space (z up)
    triangles: np.ndarray  # (F, 3)
    pin_weights: np.ndarray  # (V,)
    fps: float
    frames: int
    gravity: np.ndarray
    wind: np.ndarray
    gust: tuple[float, float] = (0.0, 1.0)  # relative amplitude, frequency (Hz)
    material: dict[str, float] = field(default_factory=dict)
    grid: tuple[int, int, int] = (0, 0, 0)  # FE grid for solids and toys
    parts: np.ndarray | None = None  # (V,) part index per vertex, articulated only
    joints: list[Joint] = field(default_factory=list)
    poke: dict[str, Any] = field(default_factory=dict)  # {"vertices": idx array, "velocity": (3,)}
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))  # yaw applied to the family's local frame
    ground: float | None = None  # height (z) of a floor the object lands on; None: no floor
    # primitive colliders in world space: {"kind": "sphere" | "box" | "cylinder", "size": (3,), "centre": (3,),
    # "yaw": radians}; Blender backends only
    colliders: list[dict[str, Any]] = field(default_factory=list)
    # the object's animation (its pins follow it): keyframes {"time": s, "location": (3,), "yaw": radians}; the
    # frames are stored in the object's own frame, so pins stay put and the cloth's lag is its deformation
    drive: list[dict[str, Any]] = field(default_factory=list)

    def wind_at(self, t: float) -> np.ndarray:
        amp, freq = self.gust
        return self.wind * (1.0 + amp * np.sin(2 * np.pi * freq * t + 0.7 * self.seed % 6.28))

    def conditions(self) -> dict[str, Any]:
        out = {"gravity": self.gravity.tolist(), "wind": self.wind.tolist(), "gust": list(self.gust), "fps": self.fps,
               "poke_velocity": list(map(float, self.poke.get("velocity", (0.0, 0.0, 0.0))))}
        if self.ground is not None:
            out["ground"] = float(self.ground)
        if self.colliders:
            out["colliders"] = [{"kind": c["kind"], "size": list(map(float, c["size"])),
                                 "centre": list(map(float, c["centre"])), "yaw": float(c.get("yaw", 0.0))}
                                for c in self.colliders]
        if self.drive:
            out["drive"] = [{"time": float(d["time"]), "location": list(map(float, d["location"])),
                             "yaw": float(d["yaw"])} for d in self.drive]
        return out
