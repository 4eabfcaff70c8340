"""NeuROK sidebar panels: settings of the active mesh object, Simulate, bake status. Draw code only."""

from __future__ import annotations

import bpy
import numpy as np

from ..ops.apply import find_modifier
from ..ops.interpreter import simulate_label


class NEUROK_PT_main(bpy.types.Panel):
    bl_label = "NeuROK"
    bl_idname = "NEUROK_PT_main"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "NeuROK"

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        obj = context.active_object
        if obj is None or obj.type != "MESH":
            what = "No active object" if obj is None else f"'{obj.name}' is a {obj.type.lower()}, not a mesh"
            layout.label(text=f"{what}: select a mesh object to simulate", icon="INFO")
            return
        settings = obj.neurok
        wm = context.window_manager
        if wm.neurok_status:
            layout.progress(factor=wm.neurok_progress, text=wm.neurok_status)
        row = layout.row()
        row.scale_y = 1.5
        row.operator("neurok.simulate", text=simulate_label(settings.device), icon="PLAY")
        if not settings.pin_group:
            layout.label(text="Tip: add a pin group (Forces and Pins) to hold part of it in place", icon="INFO")
        layout.operator("neurok.clear_bake", icon="TRASH")
        if settings.last_bake:
            layout.label(text=f"Last bake: {settings.last_bake}", icon="CHECKMARK")
        elif find_modifier(obj) is not None:
            layout.label(text="Baked (mesh cache)", icon="CHECKMARK")


class _MeshSubPanel:
    """Shared placement of the sub-panels, shown only for an active mesh object."""

    bl_parent_id = "NEUROK_PT_main"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "NeuROK"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return context.active_object is not None and context.active_object.type == "MESH"


class NEUROK_PT_forces(_MeshSubPanel, bpy.types.Panel):
    bl_label = "Forces and Pins"

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.use_property_split = True
        obj = context.active_object
        settings = obj.neurok
        layout.prop_search(settings, "pin_group", obj, "vertex_groups", icon="GROUP_VERTEX")
        if not settings.pin_group:
            layout.label(text="No pin group: the whole object moves freely", icon="INFO")
        sub = layout.column()
        sub.active = bool(settings.pin_group)
        sub.prop(settings, "pins_follow_animation")
        layout.prop(settings, "wind_velocity")
        layout.prop(settings, "use_scene_gravity")
        sub = layout.column()
        sub.active = not settings.use_scene_gravity
        sub.prop(settings, "gravity")
        layout.prop(settings, "initial_velocity")
        layout.prop(settings, "use_animation_velocity")
        layout.prop(settings, "use_ground")
        sub = layout.column()
        sub.active = settings.use_ground
        sub.prop(settings, "ground_height")


class NEUROK_PT_scene(_MeshSubPanel, bpy.types.Panel):
    """Colliders and Blender's force fields: what the scene does to the object."""

    bl_label = "Colliders and Force Fields"

    def draw(self, context: bpy.types.Context) -> None:
        from ..ops.scene_input import collider_objects, field_objects

        layout = self.layout
        layout.use_property_split = True
        obj = context.active_object
        settings = obj.neurok
        layout.prop(settings, "use_colliders")
        if settings.use_colliders:
            found = collider_objects(context.scene, obj, settings)
            text = (f"{len(found)} collider{'s' if len(found) != 1 else ''}: " + ", ".join(o.name for o in found[:3])
                    + ("…" if len(found) > 3 else "")) if found else "No colliders: add a Collision modifier to a mesh"
            layout.label(text=text, icon="MOD_PHYSICS")
        layout.prop(settings, "use_scene_wind")
        if settings.use_scene_wind:
            layout.prop(settings, "effector_collection")
            fields = field_objects(context.scene, obj, settings)
            layout.label(text=f"{len(fields)} force field{'s' if len(fields) != 1 else ''} act on it", icon="FORCE_WIND")
            col = layout.column(heading="Field Weights", align=True)
            for name in ("all", "gravity", "wind", "force", "vortex", "turbulence"):
                col.prop(settings, f"field_weight_{name}")


def is_closed_mesh(mesh: bpy.types.Mesh) -> bool:
    """Every edge shared by exactly two faces (watertight), as the runtime judges a solid; a numpy count over the
    face corners, cheap enough for a redraw."""
    corners = len(mesh.loops)
    if corners == 0:
        return False
    edge_of = np.empty(corners, dtype=np.int32)
    mesh.loops.foreach_get("edge_index", edge_of)
    return bool((np.bincount(edge_of, minlength=len(mesh.edges)) == 2).all())


class NEUROK_PT_material(_MeshSubPanel, bpy.types.Panel):
    bl_label = "Material and Output"

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.use_property_split = True
        settings = context.active_object.neurok
        layout.prop(settings, "use_physical_material")
        sub = layout.column(align=True)
        sub.active = settings.use_physical_material
        sub.prop(settings, "solid_material")
        numbers = sub.column(align=True)
        numbers.active = settings.solid_material == "CUSTOM"  # a named material brings its own numbers
        numbers.prop(settings, "young_modulus")
        numbers.prop(settings, "density")
        if settings.use_physical_material and not is_closed_mesh(context.active_object.data):
            sub.label(text="Open mesh: a physical material needs a closed solid", icon="ERROR")
        layout.prop(settings, "cloth_preset")
        row = layout.row(align=True)  # an open mesh's cloth layer; closed meshes ignore it
        row.prop(settings, "use_detail")
        sub = row.row(align=True)
        sub.active = settings.use_detail
        sub.prop(settings, "detail_sweeps")
        layout.prop(settings, "stiffness")
        layout.prop(settings, "damping")
        joints = layout.column(align=True)  # an assembly of loose pieces (a lamp); other meshes ignore them
        joints.prop(settings, "joint_stiffness")
        row = joints.row(align=True)
        row.prop(settings, "use_joint_limit")
        sub = row.row(align=True)
        sub.active = settings.use_joint_limit
        sub.prop(settings, "joint_limit", text="")
        joints.prop(settings, "joint_type")
        joints.prop(settings, "joint_index")
        joints.prop(settings, "joint_axis")
        row = joints.row(align=True)
        row.prop(settings, "use_joint_range")
        sub = row.row(align=True)
        sub.active = settings.use_joint_range
        sub.prop(settings, "joint_range_min")
        sub.prop(settings, "joint_range_max")
        layout.prop(settings, "seed")
        layout.prop(settings, "use_scene_range")
        sub = layout.column(align=True)
        sub.active = not settings.use_scene_range
        sub.prop(settings, "frame_start")
        sub.prop(settings, "frame_end")
        layout.prop(settings, "output")
        layout.prop(settings, "device")


CLASSES = [NEUROK_PT_main, NEUROK_PT_forces, NEUROK_PT_scene, NEUROK_PT_material]
