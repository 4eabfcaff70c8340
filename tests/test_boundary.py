"""The import boundary, over every module of the package with relative imports resolved: runtime/ and pipeline/
never import bpy; the Blender side (ops/, ui/, bridge/ and the top-level add-on modules) never imports torch,
directly or through the runtime; bridge/ is standard library only; nothing the product runs imports the
training pipeline."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "neurok_blender"
BLENDER_MODULES = {"bpy", "mathutils", "bmesh", "addon_utils", "bl_math", "gpu", "blf"}
TORCH_MODULES = {"torch", "torchvision", "safetensors"}
# The one module outside Blender that may import bpy: the dataset's Blender backend, run in its own bpy process.
BPY_ALLOWED = {"pipeline/data/blender_backend.py"}
BLENDER_SIDE = ("ops/", "ui/", "bridge/", "__init__.py", "batch.py", "handlers.py", "props.py", "prefs.py")
SHARED = ("errors.py", "version.py", "pc2.py", "track.py")
OFFLINE = "pipeline/"


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def module_name(path: Path) -> list[str]:
    parts = ["neurok_blender", *path.relative_to(PACKAGE).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_modules(path: Path) -> set[str]:
    """Dotted names of every import anywhere in the file (also inside functions), relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path)[:-1]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            prefix = ".".join(base + ([node.module] if node.module else []))
            if node.module:
                names.add(prefix)
            names.update(f"{prefix}.{alias.name}" for alias in node.names)  # `from . import x` imports x
    return names


def roots(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(path)}


def internal(path: Path, sub: str) -> set[str]:
    """Imports of neurok_blender.<sub>… from this file."""
    return {n for n in imported_modules(path) if n == f"neurok_blender.{sub}" or n.startswith(f"neurok_blender.{sub}.")}


ALL = sorted(PACKAGE.rglob("*.py"))
RUNTIME_AND_PIPELINE = [p for p in ALL if rel(p).startswith(("runtime/", OFFLINE))]
BLENDER = [p for p in ALL if rel(p).startswith(BLENDER_SIDE)]
PRODUCT = [p for p in ALL if not rel(p).startswith(OFFLINE)]


def test_every_module_is_on_a_known_side():
    """A new module must be placed on a side, so that one of the boundary rules below covers it."""
    unplaced = [rel(p) for p in ALL if not rel(p).startswith((*BLENDER_SIDE, *SHARED, "runtime/", OFFLINE))]
    assert not unplaced
    assert len(ALL) > 60 and BLENDER and RUNTIME_AND_PIPELINE


@pytest.mark.parametrize("path", RUNTIME_AND_PIPELINE, ids=rel)
def test_runtime_and_pipeline_import_no_blender(path):
    if rel(path) in BPY_ALLOWED:
        assert roots(path) & {"bpy"}, "the Blender backend is the one allowed bpy user; keep the list exact"
        return
    assert not roots(path) & BLENDER_MODULES


@pytest.mark.parametrize("path", BLENDER, ids=rel)
def test_blender_side_imports_no_torch_not_even_through_the_runtime(path):
    assert not roots(path) & TORCH_MODULES
    assert not internal(path, "runtime") and not internal(path, "pipeline")


@pytest.mark.parametrize("path", [p for p in ALL if rel(p).startswith("bridge/")], ids=rel)
def test_bridge_is_standard_library_only(path):
    third_party = {r for r in roots(path) if r not in sys.stdlib_module_names and r != "neurok_blender"}
    assert not third_party
    assert all(n.startswith(("neurok_blender.bridge", "neurok_blender.errors")) for n in imported_modules(path)
               if n.startswith("neurok_blender"))


@pytest.mark.parametrize("path", PRODUCT, ids=rel)
def test_the_product_never_imports_the_training_pipeline(path):
    assert not internal(path, "pipeline")


@pytest.mark.parametrize("name", SHARED)
def test_shared_modules_import_neither_side(name):
    assert not roots(PACKAGE / name) & (BLENDER_MODULES | TORCH_MODULES)


def test_relative_imports_are_resolved():
    names = imported_modules(PACKAGE / "runtime" / "engine.py")
    assert {"neurok_blender.bridge.request", "neurok_blender.runtime.mesh", "neurok_blender.errors"} <= names
    assert "neurok_blender.runtime.dynamics.simulation" in names  # imported inside a method


def test_package_init_has_no_module_level_blender_import():
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not top, "importing the package must not need bpy (the worker imports it without Blender)"
