"""Reads one object and its scene into a SimulationRequest plus mesh arrays. Blender side, no torch.

``build_request`` is the one place where Blender properties become a request. The scene around the object —
colliders (mesh objects with a Collision modifier), force fields, the object's own animation for pins that
follow it — is evaluated frame by frame into the scene track file (``neurok_blender/track.py``) before the
bake, with the object's previous NeuROK bake switched off while it is read.
"""

from __future__ import annotations

import contextlib
import os

import bpy
import numpy as np
from mathutils import Vector

from .. import track as tracks
from ..bridge.request import MAX_FIELD, Ground, SimulationRequest, Solver
from ..errors import InputError
from .apply import KEY_PREFIX, MODIFIER_NAME

FIELD_KINDS = {"WIND": "wind", "FORCE": "force", "VORTEX": "vortex", "TURBULENCE": "turbulence"}
FIELD_SHAPES = {"POINT": "point", "LINE": "line", "PLANE": "plane"}  # the others measure from the origin

MAX_VERTICES = 2_000_000  # about 100 MB of arrays on the wire; above it a bake is refused before any work


def frame_range(scene: bpy.types.Scene, settings) -> tuple[int, int]:
    start, end = (scene.frame_start, scene.frame_end) if settings.use_scene_range else (settings.frame_start, settings.frame_end)
    if end < start:
        raise InputError(f"the frame range ends ({end}) before it starts ({start})")
    return start, end


def scene_fps(scene: bpy.types.Scene) -> float:
    return scene.render.fps / scene.render.fps_base


def joint_overrides(settings) -> tuple:
    """The object's joint overrides as JointOverride objects: its stored list (the batch's --joint), then the
    panel's one (a hinge's range in degrees there, radians in the request)."""
    import json
    import math

    try:
        out = list(json.loads(settings.joint_overrides)) if settings.joint_overrides else []
    except (TypeError, ValueError) as exc:
        raise InputError(f"the object's joint overrides are not a JSON list: {exc}") from exc
    kind = settings.joint_type.lower()
    if kind == "auto" and settings.joint_axis == "AUTO" and not settings.use_joint_range:
        return tuple(out)
    override = {"joint": settings.joint_index, "type": kind}
    if settings.joint_axis != "AUTO":
        override["axis"] = tuple(float(settings.joint_axis == a) for a in "XYZ")
    if settings.use_joint_range:
        if kind not in ("hinge", "slide"):
            raise InputError("a joint range is for a hinge (degrees) or a slide (the object's units): set Joint Type")
        lower, upper = settings.joint_range_min, settings.joint_range_max
        override["range"] = (math.radians(lower), math.radians(upper)) if kind == "hinge" else (lower, upper)
    return (*out, override)


def world_gravity(scene: bpy.types.Scene, settings) -> Vector:
    """The scene's gravity (off with its switch) or the panel's, times the object's gravity field weight."""
    if settings.use_scene_gravity:
        gravity = Vector(scene.gravity) if scene.use_gravity else Vector((0.0, 0.0, 0.0))
        return gravity * settings.field_weight_all * settings.field_weight_gravity
    return Vector(settings.gravity)


def _visible(ob: bpy.types.Object) -> bool:
    return not (ob.hide_viewport or ob.hide_get())


def field_objects(scene: bpy.types.Scene, obj: bpy.types.Object, settings) -> list[bpy.types.Object]:
    """The visible Wind, Force, Vortex and Turbulence fields acting on ``obj``: those in its effector
    collection when it has one (as Cloth's Field Weights do), else every one in the scene."""
    if not settings.use_scene_wind:
        return []
    pool = settings.effector_collection.all_objects if settings.effector_collection else scene.objects
    return [ob for ob in pool if ob is not obj and ob.field is not None and ob.field.type in FIELD_KINDS
            and _visible(ob)]


def force_field(ob: bpy.types.Object, settings) -> dict:
    """One field object as a request's ForceField (world space; its animation goes in the scene track)."""
    f = ob.field
    kind = FIELD_KINDS[f.type]
    if not abs(f.strength) <= MAX_FIELD:
        raise InputError(f"the {kind} field '{ob.name}' has strength {f.strength:g}; the limit is {MAX_FIELD:g}")
    return {"kind": kind, "name": ob.name, "strength": float(f.strength),
            "matrix": tuple(v for row in ob.matrix_world for v in row),
            "shape": FIELD_SHAPES.get(f.shape, "point"), "falloff_power": float(f.falloff_power),
            "distance_min": float(f.distance_min) if f.use_min_distance else 0.0,
            "distance_max": float(f.distance_max) if f.use_max_distance else 0.0,
            "size": max(float(getattr(f, "size", 1.0)), 1e-4), "noise": float(min(max(f.noise, 0.0), 10.0)),
            "seed": int(f.seed), "weight": settings.field_weight_all * getattr(settings, f"field_weight_{kind}")}


def collider_objects(scene: bpy.types.Scene, obj: bpy.types.Object, settings) -> list[bpy.types.Object]:
    """Visible mesh objects with a Collision modifier (the convention Cloth and Soft Body use)."""
    if not settings.use_colliders:
        return []
    return [ob for ob in scene.objects if ob is not obj and ob.type == "MESH" and _visible(ob)
            and any(m.type == "COLLISION" for m in ob.modifiers)]


def deforms(obj: bpy.types.Object) -> bool:
    """Whether the object's evaluated shape differs from its base mesh (modifiers, user shape keys) —
    NeuROK's own cache and shape keys aside."""
    if any(m.name != MODIFIER_NAME and m.type != "COLLISION" and m.show_viewport for m in obj.modifiers):
        return True
    keys = obj.data.shape_keys
    return keys is not None and any(not kb.name.startswith(KEY_PREFIX) for kb in keys.key_blocks[1:])


def moves(obj: bpy.types.Object) -> bool:
    """Whether the object may move during the bake: animated, parented, constrained or deformed."""
    return bool(obj.animation_data or obj.parent or obj.constraints or deforms(obj))


@contextlib.contextmanager
def own_bake_off(obj: bpy.types.Object):
    """Switch NeuROK's previous bake of ``obj`` (cache modifier, shape keys) off while the scene is read."""
    mod = obj.modifiers.get(MODIFIER_NAME)
    keys = obj.data.shape_keys
    ours = [kb for kb in keys.key_blocks if kb.name.startswith(KEY_PREFIX)] if keys else []
    saved = (mod.show_viewport if mod else None, [kb.mute for kb in ours])
    try:
        if mod:
            mod.show_viewport = False
        for kb in ours:
            kb.mute = True
        yield
    finally:
        if mod:
            mod.show_viewport = saved[0]
        for kb, mute in zip(ours, saved[1]):
            kb.mute = mute


def _world_vertices(ob: bpy.types.Object, depsgraph, count: int | None = None) -> np.ndarray | None:
    """The evaluated mesh's vertices in world space (None when ``count`` is given and differs)."""
    evaluated = ob.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    try:
        if count is not None and len(mesh.vertices) != count:
            return None
        co = np.empty(len(mesh.vertices) * 3, np.float64)
        mesh.vertices.foreach_get("co", co)
    finally:
        evaluated.to_mesh_clear()
    m = np.array(evaluated.matrix_world, np.float64)
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def _triangles(ob: bpy.types.Object, depsgraph) -> np.ndarray:
    evaluated = ob.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    try:
        mesh.calc_loop_triangles()
        tri = np.empty(len(mesh.loop_triangles) * 3, np.int32)
        mesh.loop_triangles.foreach_get("vertices", tri)
    finally:
        evaluated.to_mesh_clear()
    return tri.reshape(-1, 3)


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


def track_path(output_path: str) -> str:
    """Where a bake's scene track is written: beside its output, removed when the bake ends."""
    return os.path.splitext(output_path)[0] + ".scene.npy"


def build_request(
    context: bpy.types.Context, obj: bpy.types.Object, output_path: str, checkpoint: str = "", progress=None,
    threads: int = 0,
) -> tuple[SimulationRequest, dict[str, np.ndarray]]:
    """The one mapping from an object, its settings and its scene to a worker request (world-space vectors and
    the object's transform; the request validates them and turns them into the mesh's frame), plus its arrays.
    When the scene moves around the object (colliders, fields, its own animation) this evaluates every frame
    into the scene track; ``progress(done, total)`` hears about it."""
    scene, settings = context.scene, obj.neurok
    arrays = mesh_arrays(obj)
    start, end = frame_range(scene, settings)
    colliders, fields = collider_objects(scene, obj, settings), field_objects(scene, obj, settings)
    animated = moves(obj)
    pinned = np.flatnonzero(arrays["pin_weights"] > 0)
    follow = settings.pins_follow_animation and animated and len(pinned) > 0
    original_frame = scene.frame_current
    fields_info = [force_field(ob, settings) for ob in fields]
    depsgraph = context.evaluated_depsgraph_get()
    collider_parts = []
    for i, ob in enumerate(colliders):
        tri = _triangles(ob, depsgraph)
        if len(tri) == 0:
            raise InputError(f"the collider '{ob.name}' has no faces; give it a surface or remove its Collision modifier")
        arrays[f"collider{i}_triangles"] = tri
        settings_c = ob.collision
        collider_parts.append({"name": ob.name, "vertex_count": len(_world_vertices(ob, depsgraph)),
                               "thickness": float(settings_c.thickness_outer),
                               "friction": float(settings_c.cloth_friction) / 10.0})
    world_matrix = obj.matrix_world
    try:
        with own_bake_off(obj):
            if animated:  # the shape at the first frame, as the artist sees it there (with its modifiers)
                scene.frame_set(start)
                depsgraph = context.evaluated_depsgraph_get()
                world_matrix = obj.evaluated_get(depsgraph).matrix_world.copy()
                if deforms(obj):
                    local = _world_vertices(obj, depsgraph, len(arrays["vertices"]))
                    if local is not None:
                        inv = np.linalg.inv(np.array(world_matrix, np.float64))
                        arrays["vertices"] = (local @ inv[:3, :3].T + inv[:3, 3]).astype(np.float32)
                        arrays["evaluated_rest"] = np.ones(1, np.uint8)  # the cache goes last in the stack
                if settings.use_animation_velocity:
                    arrays["initial_velocities"] = _animation_velocity(context, obj, start, len(arrays["vertices"]))
            named = settings.solid_material.lower() if settings.use_physical_material and \
                settings.solid_material != "CUSTOM" else None
            request = SimulationRequest(
                output_path=output_path,
                object_name=obj.name,
                frame_start=start,
                frame_count=end - start + 1,
                fps=scene_fps(scene),
                gravity=tuple(world_gravity(scene, settings)),
                wind=tuple(settings.wind_velocity),
                initial_velocity=tuple(settings.initial_velocity),
                ground=Ground(offset=settings.ground_height) if settings.use_ground else None,
                world_matrix=tuple(v for row in world_matrix for v in row),
                stiffness=settings.stiffness,
                damping=settings.damping,
                young_modulus=settings.young_modulus if settings.use_physical_material and named is None else 0.0,
                density=settings.density if settings.use_physical_material and named is None else 0.0,
                solid_material=named or "",
                joint_stiffness=settings.joint_stiffness,
                cloth_preset=settings.cloth_preset.lower(),
                solver=Solver(detail=settings.use_detail, detail_sweeps=settings.detail_sweeps),
                joint_limit=settings.joint_limit if settings.use_joint_limit else 0.0,
                joints=joint_overrides(settings),
                seed=settings.seed,
                device=settings.device.lower(),
                threads=threads,
                checkpoint=checkpoint,
                colliders=tuple(collider_parts),
                fields=tuple(fields_info),
                animated_pins=bool(follow),
            )
            if colliders or follow or animated or any(_animated(ob) for ob in fields):
                path = track_path(output_path)
                write_track(context, obj, request, path, colliders, fields, pinned, progress)
                request = SimulationRequest.from_dict({**request.to_dict(), "track": path})
    finally:
        if scene.frame_current != original_frame:
            scene.frame_set(original_frame)
    return request, arrays


def _animated(ob: bpy.types.Object) -> bool:
    return bool(ob.animation_data or ob.parent or ob.constraints)


def _animation_velocity(context, obj: bpy.types.Object, start: int, count: int) -> np.ndarray:
    """World-space vertex velocities at the first frame, from the frame before it (m/s)."""
    scene = context.scene
    positions = []
    for frame in (start - 1, start):
        scene.frame_set(frame)
        world = _world_vertices(obj, context.evaluated_depsgraph_get(), count)
        if world is None:  # a modifier changes the vertex count: the base mesh under the transform
            m = np.array(obj.matrix_world, np.float64)
            co = np.empty(count * 3, np.float64)
            obj.data.vertices.foreach_get("co", co)
            world = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
        positions.append(world)
    velocity = (positions[1] - positions[0]) * scene_fps(scene)
    return np.ascontiguousarray(velocity, dtype=np.float32)


def write_track(context, obj: bpy.types.Object, request: SimulationRequest, path: str, colliders, fields,
                pinned: np.ndarray, progress=None) -> None:
    """Evaluate the scene on every baked frame and append it to the track file (flat in memory)."""
    scene = context.scene
    layout = tracks.layout_for(request, np.isin(np.arange(max(len(obj.data.vertices), 1)), pinned).astype(float))
    writer = tracks.TrackWriter(path, request.frame_count, layout)
    base = None
    try:
        for i in range(request.frame_count):
            scene.frame_set(request.frame_start + i)
            depsgraph = context.evaluated_depsgraph_get()
            evaluated = obj.evaluated_get(depsgraph)
            parts = {"object": np.array(evaluated.matrix_world, np.float64)}
            if request.animated_pins:
                world = _world_vertices(obj, depsgraph, len(obj.data.vertices))
                if world is None:
                    if base is None:
                        base = np.empty(len(obj.data.vertices) * 3, np.float64)
                        obj.data.vertices.foreach_get("co", base)
                        base = base.reshape(-1, 3)
                    m = parts["object"]
                    world = base @ m[:3, :3].T + m[:3, 3]
                parts["pins"] = world[pinned]
            for c, ob in enumerate(colliders):
                vertices = _world_vertices(ob, depsgraph, request.colliders[c].vertex_count)
                if vertices is None:
                    raise InputError(f"the collider '{ob.name}' changes its vertex count during the bake "
                                     "(a modifier that adds or removes geometry); apply it or simplify the collider")
                parts[f"collider{c}"] = vertices
            for j, ob in enumerate(fields):
                m = np.array(ob.evaluated_get(depsgraph).matrix_world, np.float64)
                parts[f"field{j}"] = np.concatenate([m.ravel(), [float(ob.field.strength)]])
            if not all(np.isfinite(v).all() for v in parts.values()):
                raise InputError(f"the scene has NaN or infinite values at frame {request.frame_start + i}")
            writer.append(**parts)
            if progress is not None:
                progress(i + 1, request.frame_count)
        writer.close()
    except BaseException:
        writer.abort()
        raise
