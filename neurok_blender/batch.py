"""Headless bakes, inside Blender or with the bpy module. Blender side, no torch.

Inside Blender:  blender -b scene.blend --python-exit-code 1 --python <addon dir>/batch.py -- --object Flag
With bpy:        python -m neurok_blender.batch --blend scene.blend --object Flag [options]
Progress goes to stderr; on failure the exit code is non-zero and the last line says why.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neurok-batch", description="Bake NeuROK simulations without the UI.")
    p.add_argument("--blend", help="open this .blend first (required with the bpy module)")
    p.add_argument("--object", action="append", required=True, metavar="NAME", help="object to bake (repeatable)")
    p.add_argument("--frames", nargs=2, type=int, metavar=("A", "B"), help="frame range (default: the scene's)")
    p.add_argument("--wind", nargs=3, type=float, metavar=("X", "Y", "Z"), help="wind velocity, world space (m/s)")
    p.add_argument("--gravity", nargs=3, type=float, metavar=("X", "Y", "Z"), help="gravity, world space (m/s²)")
    p.add_argument("--pin-group", help="vertex group of pin weights")
    p.add_argument("--output", choices=["mesh_cache", "shape_keys"], help="bake as a mesh cache or shape keys")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="where the runtime computes")
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads per bake, 1-256 (default: the preference's, else 0: the cores other processes "
                        "leave free when the bake starts)")
    p.add_argument("--seed", type=int, help="variation seed")
    p.add_argument("--stiffness", type=float, help="stiffness multiplier")
    p.add_argument("--damping", type=float, help="damping multiplier")
    p.add_argument("--young-modulus", type=float, metavar="PA",
                   help="a closed solid's Young's modulus in pascals: its stiffness from its physical material "
                        "(the model's calibrated law) instead of the shape's prediction")
    p.add_argument("--density", type=float, metavar="KG_M3",
                   help="the physical material's density in kg/m³ (used with --young-modulus or an object whose "
                        "Physical Material is on; default: the object's setting, 1000)")
    p.add_argument("--solid-material", metavar="NAME",
                   help="a closed solid's material by name: jelly, rubber, plastic, wood or metal (its Young's modulus "
                        "and density through the model's calibrated law, as --young-modulus)")
    p.add_argument("--cloth-preset", metavar="NAME",
                   help="an open mesh's material: auto (Blender Cloth's default), shape (predicted from the shape), "
                        "or a Blender cloth preset: cotton, denim, leather, rubber, silk")
    p.add_argument("--detail", choices=("on", "off"),
                   help="an open mesh's full-resolution cloth layer (the folds); off: the reduced motion alone, a faster "
                        "preview (default: the object's setting, on)")
    p.add_argument("--detail-sweeps", type=int, metavar="N",
                   help="the cloth layer's substeps per frame, 1-200 (default: the object's setting, 20)")
    p.add_argument("--joint-stiffness", type=float, metavar="X",
                   help="an assembly's (a mesh of loose closed pieces: a desk lamp) multiplier on its joints' spring")
    p.add_argument("--joint-limit", type=float, metavar="DEGREES",
                   help="an assembly's joints stop this far from the modelled pose (default: the object's setting, "
                        "else predicted)")
    p.add_argument("--joint", action="append", default=[], metavar="JSON",
                   help='an assembly\'s joint override, e.g. \'{"joint": 1, "type": "slide", "axis": [0, 1, 0], '
                        '"range": [-0.05, 0.4]}\' (joint 1, 2, … as a report lists them, 0 or left out: every joint; '
                        "type hinge, slide, ball or weld; axis in the object's local axes; range from the rest pose, "
                        "radians for a hinge, the object's units for a slide; repeatable)")
    p.add_argument("--no-colliders", action="store_true",
                   help="ignore the scene's Collision-modifier objects (by default they are obstacles)")
    p.add_argument("--no-fields", action="store_true",
                   help="ignore the scene's Wind/Force/Vortex/Turbulence field objects (by default they act)")
    p.add_argument("--static-pins", action="store_true",
                   help="pins stay where they are at the first frame instead of following the object's animation")
    p.add_argument("--save", metavar="OUT.blend", help="save the baked scene here")
    p.add_argument("--export", metavar="OUT.abc|OUT.usd", action="append", default=[],
                   help="after baking, export the baked objects' animation with Blender's Alembic or USD exporter "
                        "(.abc, .usd, .usda, .usdc; repeatable)")
    p.add_argument("--report", metavar="OUT.json",
                   help="write a JSON report: per object, success, message, frames, seconds, device and engine stats")
    return p


EXPORT_SUFFIXES = (".abc", ".usd", ".usda", ".usdc")


def check_exports(paths: list[str]) -> list[str]:
    """Absolute export paths, refused before any work when the format or the folder is wrong."""
    out = []
    for path in paths:
        full = os.path.abspath(path)
        if not full.lower().endswith(EXPORT_SUFFIXES):
            raise ValueError(f"--export {path!r}: the file must end in {', '.join(EXPORT_SUFFIXES)}")
        if not os.path.isdir(os.path.dirname(full)):
            raise FileNotFoundError(f"--export {path!r}: the folder {os.path.dirname(full)!r} does not exist")
        out.append(full)
    return out


def export(bpy, objects, path: str, frame_start: int, frame_end: int) -> None:
    """Write the evaluated (baked) meshes of ``objects`` for every frame through Blender's own exporter."""
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    for ob in objects:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = objects[0]
    scene = bpy.context.scene
    saved = scene.frame_start, scene.frame_end
    scene.frame_start, scene.frame_end = frame_start, frame_end
    try:
        if path.lower().endswith(".abc"):
            result = bpy.ops.wm.alembic_export(filepath=path, selected=True, start=frame_start, end=frame_end)
        else:
            result = bpy.ops.wm.usd_export(filepath=path, selected_objects_only=True, export_animation=True)
    finally:
        scene.frame_start, scene.frame_end = saved
    if "FINISHED" not in result or not os.path.isfile(path):
        raise RuntimeError(f"the export to {path} failed")


def check_overrides(package, args: argparse.Namespace) -> None:
    """Refuse bad values before they reach a property (Blender would silently clamp them), through the same
    validation every request gets."""
    request = sys.modules[package.__name__ + ".bridge.request"]
    given = {name: getattr(args, name) for name in ("wind", "gravity", "seed", "stiffness", "damping",
                                                    "young_modulus", "density", "threads")
             if getattr(args, name) is not None}
    if args.density is not None and args.young_modulus is None:  # the object's own modulus, if it has one: any
        given["young_modulus"] = 1e5  # valid modulus, so the density is checked on its own range
    if args.joint_stiffness is not None:
        given["joint_stiffness"] = args.joint_stiffness
    if args.cloth_preset is not None:
        given["cloth_preset"] = args.cloth_preset.lower()
    if args.solid_material is not None:
        given["solid_material"] = args.solid_material.lower()
    if args.joint_limit is not None:
        given["joint_limit"] = request.joint_limit_from_degrees(args.joint_limit)
    if args.detail_sweeps is not None:
        given["solver"] = {"detail_sweeps": args.detail_sweeps}
    if args.joint:
        given["joints"] = joint_list(args.joint)
    request.SimulationRequest.from_dict(given)


def joint_list(texts: list[str]) -> list:
    """The --joint options as a list of JointOverride objects (checked by the request)."""
    import json

    out = []
    for text in texts:
        try:
            out.append(json.loads(text))
        except ValueError as exc:
            raise ValueError(f"--joint must be a JSON object of joint override keys, got {text!r}: {exc}") from exc
    return out


def apply_overrides(settings, args: argparse.Namespace) -> None:
    """Command-line options override the object's stored NeuROK settings."""
    if args.frames:
        settings.use_scene_range = False
        settings.frame_start, settings.frame_end = args.frames
    if args.wind is not None:
        settings.wind_velocity = args.wind
    if args.gravity is not None:
        settings.use_scene_gravity = False
        settings.gravity = args.gravity
    for name in ("pin_group", "seed", "stiffness", "damping", "young_modulus", "density"):
        if getattr(args, name) is not None:
            setattr(settings, name, getattr(args, name))
    if args.young_modulus is not None:
        settings.use_physical_material, settings.solid_material = True, "CUSTOM"
    if args.solid_material is not None:
        settings.use_physical_material, settings.solid_material = True, args.solid_material.upper()
    if args.joint_stiffness is not None:
        settings.joint_stiffness = args.joint_stiffness
    if args.cloth_preset is not None:
        settings.cloth_preset = args.cloth_preset.upper()
    if args.joint_limit is not None:
        settings.use_joint_limit, settings.joint_limit = True, math.radians(args.joint_limit)
    if args.joint:
        import json

        settings.joint_overrides = json.dumps(joint_list(args.joint))
    if args.detail is not None:
        settings.use_detail = args.detail == "on"
    if args.detail_sweeps is not None:
        settings.detail_sweeps = args.detail_sweeps
    if args.no_colliders:
        settings.use_colliders = False
    if args.no_fields:
        settings.use_scene_wind = False
    if args.static_pins:
        settings.pins_follow_animation = False
    if args.output:
        settings.output = args.output.upper()
    if args.device:
        settings.device = args.device.upper()


def write_report(path: str, outcomes) -> None:
    import json

    doc = {"objects": [{"name": o.name, "ok": o.ok, "message": o.message, **o.result} for o in outcomes]}
    tmp = os.path.abspath(path) + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, os.path.abspath(path))
    _progress(f"report written to {os.path.abspath(path)}")


def _progress(line: str) -> None:
    print(f"neurok: {line}", file=sys.stderr, flush=True)


def run(argv: list[str], package) -> int:
    """Parse, open, bake, save. Returns the process exit code."""
    import bpy

    args = build_parser().parse_args(argv)
    bake = sys.modules[package.__name__ + ".ops.bake"]
    try:
        exports = check_exports(args.export)
        check_overrides(package, args)
        if args.blend:
            if not os.path.isfile(args.blend):
                raise FileNotFoundError(f"no such .blend: {args.blend}")
            bpy.ops.wm.open_mainfile(filepath=args.blend)
        objects = []
        for name in args.object:
            obj = bpy.data.objects.get(name)
            if obj is None:
                raise LookupError(f"no object named '{name}' in {bpy.data.filepath or 'the scene'}")
            apply_overrides(obj.neurok, args)
            objects.append(obj)
        # with --save, the caches go straight beside the saved file: the opened scene's folder may be read-only
        session = bake.BakeSession([ob.name for ob in objects], blend_path=os.path.abspath(args.save) if args.save else None,
                                   threads=args.threads)
        session.run_blocking(bpy.context, report=_progress)
        for outcome in session.outcomes:
            for warning in outcome.warnings:
                _progress(f"{outcome.name}: warning: {warning}")
            _progress(f"{outcome.name}: {'baked, ' if outcome.ok else 'FAILED: '}{outcome.message}")
        failed = session.errors()
        if args.report:
            write_report(args.report, session.outcomes)
        if args.save and not failed:
            bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(args.save))
            _progress(f"saved {os.path.abspath(args.save)}")
        if exports and not failed:
            start = min(ob.neurok.last_bake_start for ob in objects)
            end = max(ob.neurok.last_bake_end for ob in objects)
            for path in exports:
                export(bpy, objects, path, start, end)
                _progress(f"exported frames {start}-{end} to {path}")
    except Exception as exc:
        print(f"neurok: error: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
        return 1
    if failed:
        print(f"neurok: error: {failed[0].name}: {' '.join(failed[0].message.split())}", file=sys.stderr, flush=True)
        return 1
    return 0


def _load_addon():
    """The add-on package, registered: reuse an enabled copy, else load this folder as a package."""
    import bpy

    init = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.py")
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and os.path.abspath(module.__file__) == init and module.__name__ != "__main__":
            package = module
            break
    else:
        spec = importlib.util.spec_from_file_location("neurok_blender", init,
                                                      submodule_search_locations=[os.path.dirname(init)])
        package = importlib.util.module_from_spec(spec)
        sys.modules["neurok_blender"] = package
        spec.loader.exec_module(package)
    if not hasattr(bpy.types.Object, "neurok"):
        package.register()
    importlib.import_module(package.__name__ + ".ops.bake")
    importlib.import_module(package.__name__ + ".bridge.request")
    return package


def main() -> int:
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    package = _load_addon()
    batch = importlib.import_module(package.__name__ + ".batch")
    return batch.run(argv, package)


def _exit(code: int) -> None:
    """Leave the process. The bpy module can deadlock in its C++ exit handlers (a delayed-close
    thread), so outside a Blender binary the process ends with os._exit once output is flushed."""
    import bpy

    sys.stdout.flush()
    sys.stderr.flush()
    if not bpy.app.binary_path:
        os._exit(code)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    try:
        status = main()
    except SystemExit as e:  # argparse's --help and usage errors: leave through _exit too, or bpy can hang
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    _exit(status)
