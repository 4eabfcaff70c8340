"""Add-on preferences: runtime interpreter, checkpoint, offline wheel folder, CPU threads. Blender side."""

from __future__ import annotations

import bpy
from bpy.props import IntProperty, StringProperty

ADDON_ID = __package__


class NeurokPreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_ID

    runtime_python: StringProperty(
        name="Runtime Interpreter", subtype="FILE_PATH", default="",
        description="Python with PyTorch that runs the simulation (blank: NEUROK_PYTHON, the managed runtime, "
        "or Blender's own Python if it has torch)",
    )
    checkpoint_path: StringProperty(
        name="Checkpoint", subtype="DIR_PATH", default="",
        description="Folder of a NeuROK checkpoint (blank: the model shipped with the add-on)",
    )
    wheel_folder: StringProperty(
        name="Local Wheels", subtype="DIR_PATH", default="",
        description="Install the runtime from this folder of wheels instead of the internet",
    )

    cpu_threads: IntProperty(
        name="CPU Threads", default=0, min=0, max=256,
        description="Threads a bake computes with on the CPU (0: the cores other programs leave free when it starts, "
        "so a bake beside a render or a second bake does not fight it for every core)",
    )

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.prop(self, "runtime_python")
        layout.prop(self, "checkpoint_path")
        layout.prop(self, "wheel_folder")
        layout.prop(self, "cpu_threads")
        row = layout.row()
        row.operator("neurok.check_runtime", icon="CHECKMARK")
        row.operator("neurok.install_runtime", icon="IMPORT")


def get_prefs(context: bpy.types.Context | None = None) -> NeurokPreferences | None:
    """The add-on's preferences, or None when it is loaded without being enabled (e.g. a batch run)."""
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_ID)
    return addon.preferences if addon else None


CLASSES = [NeurokPreferences]
