"""The cloth layer as one simulation stage: built from the request, the mesh and its scene (pins that follow
animation, colliders, the ground, wind and force fields), and advanced once a frame, alone or guided by the reduced
motion. The narrow interface ``Simulation`` calls (``DetailStage.frame``). No bpy use."""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from ....bridge.request import LocalScene, SimulationRequest
from ...mesh import MeshInput
from .. import energies
from ..cubature import is_closed
from ..material import AUTO_CLOTH, CLOTH_PRESET_FILE, G_REF, Material
from ..scene import SceneDriver
from . import contact
from .layer import ClothLayer, LayerMaterial, Loads

# Blender Cloth starts a collision at its own distance (Collision > Distance, 0.015 m) plus the collider's outer
# thickness, and pushes a vertex out to 8/9 of that: where a cloth rests on a collider
CLOTH_DISTANCE = 0.015
REST_FRACTION = 8.0 / 9.0
GROUND_FRICTION = 0.5
BLENDER_FPS = 24.0  # Blender Cloth's drag acts per frame; the layer's damping is its rate at Blender's default fps


def preset_file() -> dict:
    """The calibrated cloth presets (``cloth_presets.json``): Blender's own preset numbers and the layer's constants."""
    with open(CLOTH_PRESET_FILE) as fh:
        return json.load(fh)


def layer_material(preset: str, material: Material, mean_edge_m: float, length_scale: float, stiffness: float,
                   damping: float) -> LayerMaterial:
    """The layer's material for a Blender cloth preset (or "auto", its default), on a mesh whose mean edge is
    ``mean_edge_m`` metres: bending from Blender's bending / mass scaled by the edge² as Cloth's own per-vertex masses
    and per-edge hinges make it (finer meshes fold finer); still-air damping from its air damping / mass; the
    artist's stiffness and damping multipliers on top."""
    doc = preset_file()
    blender = doc["blender_presets"][AUTO_CLOTH if preset in ("auto", "shape") else preset]
    layer = doc["layer"]
    per_mass = blender["bending_stiffness"] / blender["mass"]
    bending = layer["bending_scale"] * per_mass * G_REF * mean_edge_m**2 / length_scale**2
    still_air = layer["damping_scale"] * blender["air_damping"] / blender["mass"]
    return LayerMaterial(bending=bending * stiffness, damping=still_air * damping, drag=material.drag,
                         shear=layer["shear"])


class DetailStage:
    """One open surface's full-resolution layer through a bake. ``frame(i)`` advances it to output frame i and returns
    its vertices (V, 3) in the simulation frame."""

    def __init__(self, mesh: MeshInput, request: SimulationRequest, local: LocalScene, driver: SceneDriver,
                 material: Material, dtype: torch.dtype, device: str) -> None:
        self.request, self.local, self.driver, self.material = request, local, driver, material
        self.dtype, self.device = dtype, device
        self.dt = 1.0 / request.fps
        edges = _mean_edge(mesh.vertices, mesh.triangles) * driver.length_scale
        lm = layer_material(request.cloth_preset, material, edges, driver.length_scale, request.stiffness,
                            request.damping)
        self.layer = ClothLayer(mesh.vertices, mesh.triangles, mesh.pin_weights, lm, request.solver.detail_sweeps,
                                dtype, device)
        self.layer.substeps = max(request.solver.detail_sweeps, self.layer.stable_substeps(self.dt))
        self.tensor = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
        self.gravity = self.tensor(local.gravity)
        self.surfaces = self._surfaces(mesh)

    def _surfaces(self, mesh: MeshInput) -> list:
        out, d = [], self.driver
        for i, (c, tri) in enumerate(zip(self.request.colliders, mesh.scene.collider_triangles if mesh.scene else [])):
            distance = REST_FRACTION * (c.thickness + CLOTH_DISTANCE) / d.length_scale
            frames = np.stack([d.collider_vertices(i, f) for f in range(self.request.frame_count)])
            size = float(np.linalg.norm(np.ptp(frames[0], axis=0)))
            closed = is_closed(tri)
            max_depth = math.inf if closed else max(4 * distance, 0.05 * size)
            transforms = contact.rigid_motion(frames)
            if transforms is not None:
                grid = contact.GridSDF(frames[0], tri, 2 * distance + 0.05 * size, self.dtype, self.device)
                out.append(contact.RigidCollider(grid, transforms, distance, c.friction, max_depth, self.dtype,
                                                 self.device))
            else:
                at = lambda f, i=i: self.tensor(d.collider_vertices(i, f))  # noqa: E731
                out.append(contact.DeformingCollider(tri, at, distance, c.friction, max_depth, self.device))
        if self.local.ground is not None:
            normal, offset = self.local.ground
            out.append(contact.Ground(self.tensor(normal), offset, REST_FRACTION * CLOTH_DISTANCE / d.length_scale,
                                      GROUND_FRICTION))
        return out

    def frame(self, i: int) -> torch.Tensor:
        t0, t1 = (i - 1) * self.dt, i * self.dt
        loads = Loads(self.gravity, surfaces=tuple(self.surfaces), span=(i - 1.0, float(i)))
        wind, accel = self._air(t0)
        loads.wind, loads.acceleration = wind, accel
        targets = self.driver.vertex_pin_targets(t0)
        if targets is not None:
            loads.pins_start, loads.pins_end = self.tensor(targets), self.tensor(self.driver.vertex_pin_targets(t1))
        with torch.inference_mode():
            return self.layer.advance(self.dt, loads).clone()

    def _air(self, t: float) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The wind (air velocity, with its gusts) and the fields' acceleration at the layer's vertices at time t."""
        m = self.material
        wind = self.tensor(self.local.wind)
        wind = energies.gust(wind, t, m.gust_amplitude, m.gust_frequency) if bool(wind.any()) else None
        field_wind, accel = self.driver.field_effects(self.layer.x, t)
        if field_wind is not None:
            field_wind = energies.gust(field_wind, t, m.gust_amplitude, m.gust_frequency)
            wind = field_wind if wind is None else wind + field_wind
        return wind, accel


def _mean_edge(vertices: np.ndarray, triangles: np.ndarray) -> float:
    e = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    return float(np.linalg.norm(vertices[e[:, 1]] - vertices[e[:, 0]], axis=1).mean())

