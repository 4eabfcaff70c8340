"""Blender's own Cloth and Soft Body as dataset backends. The one runtime module that imports bpy:
it runs only in its own process (``python -m neurok_blender.pipeline.data.blender_backend``).

Usage: ``blender_backend OUT.npz FAMILY:SEED:FRAMES:FPS [...]``. Specs are rebuilt from
(family, seed), so nothing but names and numbers crosses the process boundary; frames come back
in an npz with keys ``frames_<i>``.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np

from .families import make_spec
from .spec import SequenceSpec

WIND_FORCE_PER_MPS = 1.5  # Blender's wind strength is a force; this maps air speed onto it


def _scene(spec: SequenceSpec):
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = int(round(spec.fps)), round(spec.fps) / spec.fps
    scene.frame_start, scene.frame_end = 1, spec.frames
    scene.render.threads_mode, scene.render.threads = "FIXED", 1  # Soft Body splits work by these: keep it deterministic
    scene.gravity = tuple(spec.gravity)
    scene.use_gravity = True
    mesh = bpy.data.meshes.new(spec.family)
    mesh.from_pydata(spec.vertices.tolist(), [], spec.triangles.tolist())
    obj = bpy.data.objects.new(spec.family, mesh)
    scene.collection.objects.link(obj)
    group = obj.vertex_groups.new(name="pin")
    pinned = np.flatnonzero(spec.pin_weights > 0).tolist()
    if pinned:
        for i in pinned:
            group.add([i], float(spec.pin_weights[i]), "REPLACE")
    speed = float(np.linalg.norm(spec.wind))
    if speed > 0:
        bpy.ops.object.effector_add(type="WIND")
        wind = bpy.context.active_object
        wind.field.strength = WIND_FORCE_PER_MPS * speed
        wind.field.noise = float(spec.gust[0]) * 2.0
        wind.field.seed = spec.seed % 128 + 1
        wind.rotation_mode = "QUATERNION"
        wind.rotation_quaternion = _rotation_z_to(spec.wind / speed)
    for i, collider in enumerate(spec.colliders):
        _add_collider(scene, collider, i)
    if spec.ground is not None:
        _add_collider(scene, {"kind": "plane", "size": (40.0, 40.0, 0.0), "centre": (0.0, 0.0, spec.ground)}, -1)
    for key in spec.drive:  # the object's animation; its pins follow it
        frame = 1 + float(key["time"]) * spec.fps
        obj.location = tuple(float(v) for v in key["location"])
        obj.rotation_euler = (0.0, 0.0, float(key["yaw"]))
        obj.keyframe_insert("location", frame=frame)
        obj.keyframe_insert("rotation_euler", frame=frame)
    return scene, obj


def _add_collider(scene, collider: dict, index: int) -> None:
    """A primitive collision object (sphere, cylinder, box or plane) of the given size, centre and yaw."""
    import bpy

    size = [float(v) for v in collider["size"]]
    kind = collider["kind"]
    if kind == "sphere":
        bpy.ops.mesh.primitive_ico_sphere_add(subdivisions=3, radius=size[0] / 2)
    elif kind == "cylinder":
        bpy.ops.mesh.primitive_cylinder_add(vertices=32, radius=size[0] / 2, depth=size[2])
    elif kind == "box":
        bpy.ops.mesh.primitive_cube_add(size=1.0)
        bpy.context.active_object.scale = size
    elif kind == "plane":
        bpy.ops.mesh.primitive_plane_add(size=size[0])
    else:
        raise ValueError(f"unknown collider kind {kind!r}")
    obj = bpy.context.active_object
    obj.name = f"collider_{index}"
    obj.location = tuple(float(v) for v in collider["centre"])
    obj.rotation_euler = (0.0, 0.0, float(collider.get("yaw", 0.0)))
    obj.modifiers.new("Collision", "COLLISION")


def _rotation_z_to(direction: np.ndarray) -> tuple[float, float, float, float]:
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(z, direction)
    s, c = np.linalg.norm(axis), float(z @ direction)
    if s < 1e-9:
        return (1.0, 0.0, 0.0, 0.0) if c > 0 else (0.0, 1.0, 0.0, 0.0)
    half = np.arctan2(s, c) / 2
    axis = axis / s
    return (float(np.cos(half)), *(float(v) for v in axis * np.sin(half)))


def _add_cloth(obj, spec: SequenceSpec) -> None:
    mod = obj.modifiers.new("Cloth", "CLOTH")
    s = mod.settings
    m = spec.material
    s.quality = 6
    s.mass = float(m["mass"])  # Blender's cloth mass is per vertex
    if "tension" in m:  # Blender's own numbers (the families of generator 1.5.0)
        stiffness, bending = float(m["tension"]), float(m["bending"])
    else:
        stiffness = float(np.clip(m["young"] * m["thickness"] / 20.0, 5.0, 200.0))
        bending = stiffness * 0.01
    s.tension_stiffness = s.compression_stiffness = s.shear_stiffness = stiffness
    s.bending_stiffness = bending
    s.air_damping = float(m["drag"])
    s.vertex_group_mass = "pin"
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, spec.frames


def _add_softbody(obj, spec: SequenceSpec) -> None:
    import bpy

    bpy.context.view_layer.objects.active = obj  # modifiers.new leaves Soft Body's goal uninitialized
    bpy.ops.object.modifier_add(type="SOFT_BODY")
    sb = obj.soft_body
    m = spec.material
    sb.mass = float(m["mass"]) / len(spec.vertices)
    # Every vertex is held towards its rest position by a goal spring of uniform strength: a goal
    # vertex group was ignored by the bpy module's Soft Body here, so per-vertex pins are not used.
    sb.use_goal = True
    sb.goal_default = float(m["goal"])
    sb.goal_min, sb.goal_max = 0.0, 1.0
    sb.goal_spring, sb.goal_friction = 0.5, 1.0
    sb.use_edges = True
    sb.pull = sb.push = float(np.clip(np.log10(m["young"]) / 5.0, 0.3, 0.99))
    sb.bend = 2.0
    sb.damping = 1.0
    sb.friction = float(m["drag"])
    sb.speed = 1.0
    obj.modifiers["Softbody"].point_cache.frame_start = 1
    obj.modifiers["Softbody"].point_cache.frame_end = spec.frames


def simulate(spec: SequenceSpec) -> np.ndarray:
    import bpy

    scene, obj = _scene(spec)
    (_add_cloth if spec.backend == "blender_cloth" else _add_softbody)(obj, spec)
    frames = []
    count = len(spec.vertices)
    for f in range(1, spec.frames + 1):
        scene.frame_set(f)
        evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        co = np.empty(count * 3, np.float64)
        evaluated.data.vertices.foreach_get("co", co)
        frames.append(co.reshape(count, 3))
    return np.asarray(frames)


def main(argv: list[str]) -> int:
    out, jobs = argv[0], argv[1:]
    arrays = {}
    for i, job in enumerate(jobs):
        family, seed, frames, fps = job.split(":")
        spec = dataclasses.replace(make_spec(family, int(seed)), frames=int(frames), fps=float(fps))
        arrays[f"frames_{i}"] = simulate(spec)
    tmp = out + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the bpy module can hang in its C++ exit handlers
