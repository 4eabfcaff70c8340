"""The import boundary: runtime/ never imports bpy; ops/, ui/, bridge/ never import torch."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "neurok_blender"
BLENDER_MODULES = {"bpy", "mathutils", "bmesh", "addon_utils", "bl_math", "gpu", "blf"}
TORCH_MODULES = {"torch", "torchvision", "safetensors"}
# The one runtime module that may import bpy: the dataset's Blender backend, run in its own bpy process.
RUNTIME_BPY_ALLOWED = {"runtime/data/blender_backend.py"}


def imported_roots(path: Path) -> set[str]:
    """Top-level names of every absolute import anywhere in the file (also inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def files_under(sub: str) -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", files_under("runtime"), ids=rel)
def test_runtime_imports_no_blender(path):
    if rel(path) in RUNTIME_BPY_ALLOWED:
        pytest.skip("the Blender dataset backend runs in its own bpy process")
    assert not imported_roots(path) & BLENDER_MODULES


@pytest.mark.parametrize("path", files_under("ops") + files_under("ui") + files_under("bridge"), ids=rel)
def test_blender_side_imports_no_torch(path):
    assert not imported_roots(path) & TORCH_MODULES


@pytest.mark.parametrize("path", files_under("bridge"), ids=rel)
def test_bridge_is_standard_library_only(path):
    third_party = {r for r in imported_roots(path) if r not in sys.stdlib_module_names}
    assert not third_party


@pytest.mark.parametrize("name", ["errors.py", "version.py", "pc2.py"])
def test_shared_modules_import_neither_side(name):
    assert not imported_roots(PACKAGE / name) & (BLENDER_MODULES | TORCH_MODULES)


def test_package_init_has_no_module_level_blender_import():
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not top, "importing the package must not need bpy (the worker imports it without Blender)"


def test_every_file_parses():
    for path in PACKAGE.rglob("*.py"):
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
