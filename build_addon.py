"""Builds the installable extension zip (dist/neurok-<version>.zip) and validates it with Blender's own
extension tool, which ships inside the bpy wheel. Run with the project's venv: ``python build_addon.py``."""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(ROOT, "neurok_blender")
MANIFEST = os.path.join(ROOT, "blender_manifest.toml")


class BuildError(Exception):
    pass


def blender_ext_tool() -> str:
    """Path of bl_pkg's blender_ext.py inside the installed bpy wheel."""
    import importlib.util

    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        raise BuildError("the bpy module is not installed in this interpreter; run `make venv` first")
    bpy_root = list(spec.submodule_search_locations)[0]
    hits = glob.glob(os.path.join(bpy_root, "*", "scripts", "addons_core", "bl_pkg", "cli", "blender_ext.py"))
    if not hits:
        raise BuildError(f"Blender's extension tool was not found under {bpy_root}")
    return hits[0]


def manifest_version() -> str:
    with open(MANIFEST, "rb") as fh:
        return tomllib.load(fh)["version"]


def _run_tool(tool: str, *args: str) -> str:
    done = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"blender_ext {args[0]} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def stage(dest: str) -> str:
    """The package folder plus the manifest, as the extension tool expects them."""
    staged = os.path.join(dest, "neurok")
    shutil.copytree(PACKAGE, staged, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(MANIFEST, os.path.join(staged, "blender_manifest.toml"))
    return staged


def build(out_dir: str = os.path.join(ROOT, "dist")) -> str:
    tool = blender_ext_tool()
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, f"neurok-{manifest_version()}.zip")
    with tempfile.TemporaryDirectory() as tmp:
        staged = stage(tmp)
        _run_tool(tool, "validate", staged)
        partial = target + ".partial"
        _run_tool(tool, "build", "--source-dir", staged, "--output-filepath", partial)
        _run_tool(tool, "validate", partial)
        os.replace(partial, target)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "dist"))
    args = parser.parse_args()
    try:
        path = build(args.out_dir)
    except BuildError as exc:
        print(f"build_addon: error: {exc}", file=sys.stderr)
        return 1
    print(f"built and validated {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
