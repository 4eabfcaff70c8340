"""Reads one object and its scene into a SimulationRequest plus mesh arrays. Blender side, no torch.

``build_request`` is the one place where Blender properties become a request.
"""

from __future__ import annotations

import bpy
import numpy as np
from mathutils import Vector

from ..bridge.request import Ground, SimulationRequest
from ..errors import InputError

MAX_VERTICES = 2_000_000  # about 100 MB of arrays on the wire; above it a bake is refused before any work


def frame_range(scene: bpy.types.Scene, settings) -> tuple[int, int]:
    start, end = (scene.frame_start, scene.frame_end) if settings.use_scene_range else (settings.frame_start, settings.frame_end)
    if end < start:
        raise InputError(f"the frame range ends ({end}) before it starts ({start})")
    return start, end


def scene_fps(scene: bpy.types.Scene) -> float:
    return scene.render.fps / scene.render.fps_base


def world_gravity(scene: bpy.types.Scene, settings) -> Vector:
    if settings.use_scene_gravity:
        return Vector(scene.gravity) if scene.use_gravity else Vector((0.0, 0.0, 0.0))
    return Vector(settings.gravity)


def scene_wind(scene: bpy.types.Scene, exclude: bpy.types.Object) -> Vector:
    """Sum of the scene's visible Wind fields, each blowing along its object's +Z at its strength (as m/s)."""
    total = Vector((0.0, 0.0, 0.0))
    for ob in scene.objects:
        field = ob.field
        if ob is exclude or field is None or field.type != "WIND" or ob.hide_viewport or ob.hide_get():
            continue
        axis = ob.matrix_world.to_3x3().col[2].normalized()
        total += axis * field.strength
    return total


def world_wind(scene: bpy.types.Scene, obj: bpy.types.Object, settings) -> Vector:
    wind = Vector(settings.wind_velocity)
    if settings.use_scene_wind:
        wind += scene_wind(scene, obj)
    return wind


def mesh_arrays(obj: bpy.types.Object) -> dict[str, np.ndarray]:
    """Base mesh (local space, modifiers not applied), triangles and pin weights."""
    if obj.type != "MESH":
        raise InputError(f"'{obj.name}' is a {obj.type.lower()} object; NeuROK simulates mesh objects only")
    mesh: bpy.types.Mesh = obj.data
    count = len(mesh.vertices)
    if count == 0:
        raise InputError(f"'{obj.name}' has no vertices")
    if count > MAX_VERTICES:
        raise InputError(f"'{obj.name}' has {count:,} vertices; the limit is {MAX_VERTICES:,}. Decimate it or bake a proxy")
    vertices = np.empty(count * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", vertices)
    vertices = vertices.reshape(count, 3)  # checked where it is received (runtime/mesh.py)
    mesh.calc_loop_triangles()
    triangles = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
    mesh.loop_triangles.foreach_get("vertices", triangles)
    return {"vertices": vertices, "triangles": triangles.reshape(-1, 3), "pin_weights": pin_weights(obj)}


def pin_weights(obj: bpy.types.Object) -> np.ndarray:
    weights = np.zeros(len(obj.data.vertices), dtype=np.float32)
    name = obj.neurok.pin_group
    if not name:
        return weights
    group = obj.vertex_groups.get(name)
    if group is None:
        raise InputError(f"the pin group '{name}' does not exist on '{obj.name}'")
    index = group.index
    for vertex in obj.data.vertices:
        for elem in vertex.groups:
            if elem.group == index:
                weights[vertex.index] = elem.weight
    return weights


def build_request(
    context: bpy.types.Context, obj: bpy.types.Object, output_path: str, checkpoint: str = ""
) -> tuple[SimulationRequest, dict[str, np.ndarray]]:
    """The one mapping from an object, its settings and its scene to a worker request (world-space vectors and
    the object's transform; the request validates them and turns them into the mesh's frame)."""
    scene, settings = context.scene, obj.neurok
    arrays = mesh_arrays(obj)
    start, end = frame_range(scene, settings)
    request = SimulationRequest(
        output_path=output_path,
        object_name=obj.name,
        frame_start=start,
        frame_count=end - start + 1,
        fps=scene_fps(scene),
        gravity=tuple(world_gravity(scene, settings)),
        wind=tuple(world_wind(scene, obj, settings)),
        initial_velocity=tuple(settings.initial_velocity),
        ground=Ground(offset=settings.ground_height) if settings.use_ground else None,
        world_matrix=tuple(v for row in obj.matrix_world for v in row),
        stiffness=settings.stiffness,
        damping=settings.damping,
        seed=settings.seed,
        device=settings.device.lower(),
        checkpoint=checkpoint,
    )
    return request, arrays
