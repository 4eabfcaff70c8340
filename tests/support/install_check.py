"""Run in a fresh bpy process: install the built zip as an extension, then cycle disable/enable.
Prints one JSON line of findings; exits through os._exit (see neurok_blender.batch._exit)."""

import json
import os
import sys

import bpy

addon_utils = __import__("addon_utils")  # importable only once bpy has put Blender's modules on sys.path

MODULE = "bl_ext.user_default.neurok"


def leftovers(package) -> list[str]:
    found = []
    for cls in (*package.props.CLASSES, *package.prefs.CLASSES, *package.ops.CLASSES, *package.ui.CLASSES):
        if cls.is_registered:
            found.append(cls.__name__)
    for owner, name in ((bpy.types.Object, "neurok"), (bpy.types.WindowManager, "neurok_status"),
                        (bpy.types.WindowManager, "neurok_progress")):
        if hasattr(owner, name):
            found.append(f"{owner.__name__}.{name}")
    for handler in (*bpy.app.handlers.save_pre, *bpy.app.handlers.save_post):
        if "neurok" in getattr(handler, "__module__", ""):
            found.append(f"handler {handler.__name__}")
    return found


def main() -> dict:
    result = bpy.ops.extensions.package_install_files(filepath=sys.argv[-1], repo="user_default", enable_on_install=True)
    package = sys.modules[MODULE]
    report = {"install": sorted(result), "enabled": MODULE in bpy.context.preferences.addons,
              "has_props": hasattr(bpy.types.Object, "neurok"), "cycles": []}
    for _ in range(3):
        addon_utils.disable(MODULE, default_set=True)
        after_disable = leftovers(package)
        addon_utils.enable(MODULE, default_set=True)
        package = sys.modules[MODULE]
        report["cycles"].append({"left_after_disable": after_disable,
                                 "registered_after_enable": hasattr(bpy.types.Object, "neurok")})
    report["prefs_class"] = type(bpy.context.preferences.addons[MODULE].preferences).__name__
    return report


if __name__ == "__main__":
    print("NEUROK_REPORT " + json.dumps(main()), flush=True)
    os._exit(0)
