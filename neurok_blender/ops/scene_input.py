"""Reads one object and its scene into a SimulationRequest plus mesh arrays. Blender side, no torch.

``build_request`` is the one place where Blender properties become a request.
"""

from __future__ import annotations

import math

import bpy
import numpy as np
from mathutils import Matrix, Vector

from ..bridge.request import SimulationRequest
from ..errors import InputError

MAX_VERTICES = 2_000_000  # about 100 MB of arrays on the wire; above it a bake is refused before any work
MAX_COORDINATE = 1e9  # Blender clamps an infinite coordinate to ±3.4e38; anything this far out is corrupt


def frame_range(scene: bpy.types.Scene, settings) -> tuple[int, int]:
    start, end = (scene.frame_start, scene.frame_end) if settings.use_scene_range else (settings.frame_start, settings.frame_end)
    if end < start:
        raise InputError(f"the frame range ends ({end}) before it starts ({start})")
    return start, end


def scene_fps(scene: bpy.types.Scene) -> float:
    return scene.render.fps / scene.render.fps_base


def world_to_local(obj: bpy.types.Object, vector) -> tuple[float, float, float]:
    """A world-space vector (acceleration, velocity) in the object's local frame (rotation and scale)."""
    linear: Matrix = obj.matrix_world.to_3x3()
    if abs(linear.determinant()) < 1e-12:
        raise InputError(f"'{obj.name}' has zero scale on some axis, so it has no local frame")
    return tuple(linear.inverted() @ Vector(vector))


def ground_plane(obj: bpy.types.Object, height: float) -> dict[str, object]:
    """The world plane z = height in the object's local frame: {'normal': n, 'offset': d} with n·x = d."""
    matrix: Matrix = obj.matrix_world
    linear = matrix.to_3x3()
    if abs(linear.determinant()) < 1e-12:
        raise InputError(f"'{obj.name}' has zero scale on some axis, so it has no local frame")
    normal = (linear.transposed() @ Vector((0.0, 0.0, 1.0))).normalized()  # the plane's normal under M⁻ᵀ
    point = matrix.inverted() @ Vector((0.0, 0.0, height))
    return {"normal": list(normal), "offset": float(normal.dot(point))}


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
    vertices = vertices.reshape(count, 3)
    if not np.isfinite(vertices).all() or np.abs(vertices).max() > MAX_COORDINATE:
        raise InputError(f"'{obj.name}' has NaN or infinite vertex coordinates (or ones beyond ±{MAX_COORDINATE:.0e})")
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


def _check_extent(obj: bpy.types.Object, vertices: np.ndarray) -> None:
    extent = float(np.ptp(vertices, axis=0).max())
    if not math.isfinite(extent) or extent <= 1e-9:
        raise InputError(f"'{obj.name}' has zero size (all vertices in one point)")


def build_request(
    context: bpy.types.Context, obj: bpy.types.Object, output_path: str, checkpoint: str = ""
) -> tuple[SimulationRequest, dict[str, np.ndarray]]:
    """The one mapping from an object, its settings and its scene to a worker request."""
    scene, settings = context.scene, obj.neurok
    arrays = mesh_arrays(obj)
    _check_extent(obj, arrays["vertices"])
    start, end = frame_range(scene, settings)
    extras: dict[str, object] = {}
    if settings.use_ground:
        extras["ground"] = ground_plane(obj, settings.ground_height)
    if any(settings.initial_velocity):
        extras["initial_velocity"] = list(world_to_local(obj, settings.initial_velocity))
    request = SimulationRequest(
        output_path=output_path,
        frame_start=start,
        frame_count=end - start + 1,
        fps=scene_fps(scene),
        gravity=world_to_local(obj, world_gravity(scene, settings)),
        wind=world_to_local(obj, world_wind(scene, obj, settings)),
        stiffness=settings.stiffness,
        damping=settings.damping,
        seed=settings.seed,
        device=settings.device.lower(),
        checkpoint=checkpoint,
        object_name=obj.name,
        extras=extras,
    )
    return request, arrays
