"""The extension manifest and the build."""

from __future__ import annotations

import os
import string
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from neurok_blender.version import RELEASE_VERSION

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = tomllib.loads((ROOT / "blender_manifest.toml").read_text())


def test_manifest_required_fields():
    assert MANIFEST["schema_version"] == "1.0.0"
    assert MANIFEST["id"] == "neurok"
    assert MANIFEST["type"] == "add-on"
    assert MANIFEST["blender_version_min"] == "4.2.0"
    assert MANIFEST["license"] == ["SPDX:GPL-3.0-or-later"]
    assert MANIFEST["name"] and MANIFEST["maintainer"]


def test_tagline_is_short_without_trailing_punctuation():
    tagline = MANIFEST["tagline"]
    assert 0 < len(tagline) <= 64
    assert tagline[-1] not in string.punctuation


def test_version_matches_the_package():
    assert MANIFEST["version"] == RELEASE_VERSION


def test_permissions_have_reasons():
    perms = MANIFEST["permissions"]
    assert set(perms) <= {"files", "network"} and "files" in perms
    assert all(reason.strip() and reason[-1] not in ".!" for reason in perms.values())


def test_build_excludes_development_files():
    patterns = MANIFEST["build"]["paths_exclude_pattern"]
    for needed in ("/tests/", "__pycache__/", "/datasets/", "/runs/", "/neurok_cache/"):
        assert needed in patterns


@pytest.mark.blender
def test_build_produces_a_validated_zip(tmp_path):
    pytest.importorskip("bpy")
    import build_addon

    path = Path(build_addon.build(str(tmp_path)))
    assert path.name == f"neurok-{RELEASE_VERSION}.zip"
    names = zipfile.ZipFile(path).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names
    assert "runtime/worker.py" in names and "runtime/launch.py" in names
    shipped = {f"runtime/weights/neurok-s/{f}" for f in ("model.safetensors", "config.json", "material.json")}
    assert shipped <= set(names), "the default model must ship inside the extension"
    assert os.path.getsize(path) < 25 * 2**20
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]
    assert not [n for n in names if n.startswith("pipeline/")], "the training pipeline stays out of the extension"
    assert "runtime/geometry.py" in names  # what inference shares with training ships
    out = subprocess.run([sys.executable, build_addon.blender_ext_tool(), "validate", str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
