"""Puts a finished bake on an object: a Mesh Cache modifier, or keyed shape keys. Blender side, no torch.

Works on Blender 4.2+ and 5.x: keyframes go through ``Action.fcurve_ensure_for_datablock``
where it exists (4.4+; in 5.0 Action.fcurves is gone), ``Action.fcurves`` before that.
"""

from __future__ import annotations

import bpy
import numpy as np

from ..errors import CacheError
from ..pc2 import read_pc2

MODIFIER_NAME = "NeuROK Cache"
KEY_PREFIX = "NeuROK "
ACTION_PREFIX = "NeuROK Keys "


def find_modifier(obj: bpy.types.Object) -> bpy.types.Modifier | None:
    mod = obj.modifiers.get(MODIFIER_NAME)
    return mod if mod is not None and mod.type == "MESH_CACHE" else None


def apply_mesh_cache(obj: bpy.types.Object, filepath: str, frame_start: int, last: bool = False) -> bpy.types.Modifier:
    """Add or update the Mesh Cache modifier, first in the stack, so scene frame k shows sample k — or last,
    when the bake started from the shape the object's own modifiers make (an armature-driven cape)."""
    remove_shape_key_bake(obj)
    mod = find_modifier(obj) or obj.modifiers.new(MODIFIER_NAME, "MESH_CACHE")
    mod.cache_format = "PC2"
    mod.filepath = filepath
    mod.time_mode = "FRAME"
    mod.play_mode = "SCENE"
    mod.frame_start = float(frame_start)
    mod.frame_scale = 1.0
    mod.deform_mode = "OVERWRITE"
    mod.interpolation = "LINEAR"
    mod.forward_axis, mod.up_axis, mod.flip_axis = "POS_Y", "POS_Z", (False, False, False)
    index, target = list(obj.modifiers).index(mod), len(obj.modifiers) - 1 if last else 0
    if index != target:
        obj.modifiers.move(index, target)
    return mod


def remove_mesh_cache(obj: bpy.types.Object) -> str | None:
    """Remove the modifier; returns the absolute path of the file it read."""
    mod = find_modifier(obj)
    if mod is None:
        return None
    path = bpy.path.abspath(mod.filepath)
    obj.modifiers.remove(mod)
    return path


def _fcurve(action: bpy.types.Action, key_data: bpy.types.Key, data_path: str) -> bpy.types.FCurve:
    if hasattr(action, "fcurve_ensure_for_datablock"):
        return action.fcurve_ensure_for_datablock(key_data, data_path)
    return action.fcurves.new(data_path)


def _key_pulse(fcurve: bpy.types.FCurve, frame: int) -> None:
    """Value 1 at ``frame`` and 0 on the frames either side, held constant in between."""
    points = fcurve.keyframe_points
    points.add(3)
    points.foreach_set("co", [frame - 1, 0.0, frame, 1.0, frame + 1, 0.0])
    points.foreach_set("interpolation", [0, 0, 0])  # CONSTANT
    fcurve.update()


def apply_shape_keys(obj: bpy.types.Object, pc2_path: str, frame_start: int) -> int:
    """One shape key per baked frame, keyed so scene frame k shows sample k. Returns the key count."""
    frames, _, _ = read_pc2(pc2_path)  # read first: a failure here leaves the old bake in place
    if frames.shape[1] != len(obj.data.vertices):
        raise CacheError(f"the cache has {frames.shape[1]} points but '{obj.name}' has {len(obj.data.vertices)} vertices")
    remove_shape_key_bake(obj)
    remove_mesh_cache(obj)
    settings = obj.neurok
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
        settings.created_basis = True
    key_data = obj.data.shape_keys
    anim = key_data.animation_data or key_data.animation_data_create()
    action = bpy.data.actions.new(ACTION_PREFIX + obj.name)
    anim.action = action
    for i, positions in enumerate(frames):
        frame = frame_start + i
        block = obj.shape_key_add(name=f"{KEY_PREFIX}{frame:06d}", from_mix=False)
        block.data.foreach_set("co", np.ascontiguousarray(positions, dtype=np.float32).ravel())
        block.value = 0.0
        _key_pulse(_fcurve(action, key_data, f'key_blocks["{block.name}"].value'), frame)
    return len(frames)


def remove_shape_key_bake(obj: bpy.types.Object) -> int:
    """Remove NeuROK's shape keys and their action; the Basis goes too if NeuROK created it."""
    key_data = obj.data.shape_keys if obj.type == "MESH" else None
    if key_data is None:
        return 0
    ours = [kb for kb in key_data.key_blocks if kb.name.startswith(KEY_PREFIX)]
    anim = key_data.animation_data
    if anim and anim.action and anim.action.name.startswith(ACTION_PREFIX):
        action = anim.action
        anim.action = None
        bpy.data.actions.remove(action)
    for block in ours:
        obj.shape_key_remove(block)
    if obj.neurok.created_basis and obj.data.shape_keys and len(obj.data.shape_keys.key_blocks) == 1:
        obj.shape_key_clear()
        obj.neurok.created_basis = False
    return len(ours)
