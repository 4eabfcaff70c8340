"""Helpers for the Blender-facing tests (need bpy)."""

from __future__ import annotations

import bpy
import numpy as np


def make_grid(name: str = "Flag", size: int = 4, location=(0.0, 0.0, 0.0)) -> bpy.types.Object:
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=size, y_subdivisions=size, size=2.0, location=location)
    obj = bpy.context.active_object
    obj.name = name
    return obj


def select_only(*objects: bpy.types.Object) -> None:
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    for ob in objects:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = objects[0]


def rest_positions(obj: bpy.types.Object) -> np.ndarray:
    co = np.empty(len(obj.data.vertices) * 3, np.float32)
    obj.data.vertices.foreach_get("co", co)
    return co.reshape(-1, 3)


def evaluated_positions(obj: bpy.types.Object, frame: int) -> np.ndarray:
    scene = bpy.context.scene
    scene.frame_set(frame)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = obj.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    co = np.empty(len(mesh.vertices) * 3, np.float32)
    mesh.vertices.foreach_get("co", co)
    evaluated.to_mesh_clear()
    return co.reshape(-1, 3)


def simulate(*objects: bpy.types.Object) -> set[str] | str:
    """Run the Simulate operator; its result set, or the error text it reported."""
    select_only(*objects)
    try:
        return bpy.ops.neurok.simulate()
    except RuntimeError as exc:  # bpy.ops raises when an operator reports an error
        return str(exc)
