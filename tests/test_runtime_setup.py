"""Runtime interpreter discovery, Check Runtime, and Install Runtime from a local wheel folder."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile

import pytest

pytestmark = pytest.mark.blender
bpy = pytest.importorskip("bpy")

from neurok_blender.errors import RuntimeUnavailable  # noqa: E402
from neurok_blender.ops import interpreter  # noqa: E402
from tests.conftest import runtime_python  # noqa: E402


@pytest.fixture
def prefs(blender):
    p = bpy.context.preferences.addons["neurok_blender"].preferences
    yield p
    p.runtime_python = ""


def test_preference_path_comes_first(prefs, monkeypatch, tmp_path):
    fake = tmp_path / "python"
    fake.write_text("")
    prefs.runtime_python = str(fake)
    monkeypatch.setenv("NEUROK_PYTHON", sys.executable)
    assert interpreter.find_interpreter(bpy.context) == (str(fake), "preferences")


def test_missing_preference_path_is_a_clear_error(prefs):
    prefs.runtime_python = "/no/such/python"
    with pytest.raises(RuntimeUnavailable, match="does not exist"):
        interpreter.find_interpreter(bpy.context)


def test_environment_variable_is_next(prefs, monkeypatch):
    monkeypatch.setenv("NEUROK_PYTHON", sys.executable)
    assert interpreter.find_interpreter(bpy.context) == (sys.executable, "NEUROK_PYTHON")
    monkeypatch.setenv("NEUROK_PYTHON", "/missing/python")
    with pytest.raises(RuntimeUnavailable, match="NEUROK_PYTHON"):
        interpreter.find_interpreter(bpy.context)


def test_managed_venv_before_blenders_python(prefs, monkeypatch, tmp_path):
    monkeypatch.delenv("NEUROK_PYTHON", raising=False)
    venv = tmp_path / "venv"
    python = interpreter.venv_python(str(venv))
    os.makedirs(os.path.dirname(python))
    open(python, "w").close()
    monkeypatch.setattr(interpreter, "managed_venv_dir", lambda: str(venv))
    assert interpreter.find_interpreter(bpy.context) == (python, "managed runtime")


def test_falls_back_to_this_python_when_it_has_torch(prefs, monkeypatch, tmp_path):
    monkeypatch.delenv("NEUROK_PYTHON", raising=False)
    monkeypatch.setattr(interpreter, "managed_venv_dir", lambda: str(tmp_path / "none"))
    monkeypatch.setattr(interpreter.importlib.util, "find_spec", lambda name: object() if name == "torch" else None)
    assert interpreter.find_interpreter(bpy.context) == (sys.executable, "Blender's Python")
    monkeypatch.setattr(interpreter.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeUnavailable, match="Install Runtime"):
        interpreter.find_interpreter(bpy.context)


def test_check_runtime_reports_torch_and_device(prefs, monkeypatch):
    monkeypatch.setenv("NEUROK_PYTHON", runtime_python())
    monkeypatch.delenv("NEUROK_WORKER_ENTRY", raising=False)
    info = interpreter.probe(runtime_python())
    assert info["torch"] and info["device_name"]
    assert bpy.ops.neurok.check_runtime() == {"FINISHED"}


def test_install_refuses_when_offline_without_wheels(tmp_path):
    with pytest.raises(RuntimeUnavailable, match="online access is off"):
        interpreter.install_runtime(str(tmp_path / "venv"), wheel_folder="", online=False)


def _tiny_wheel(folder) -> None:
    """A minimal pure-Python wheel, written by hand so the test needs no network and no build backend."""
    name, version = "neurok_probe_pkg", "1.0"
    files = {
        f"{name}/__init__.py": b"VALUE = 42\n",
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for path, data in files.items()]
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)


@pytest.mark.slow
def test_install_runtime_from_a_local_wheel_folder(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _tiny_wheel(wheels)
    requirements = tmp_path / "req.txt"
    requirements.write_text("neurok_probe_pkg==1.0\n")
    python = interpreter.install_runtime(str(tmp_path / "venv"), str(wheels), str(requirements), online=False, log=lambda s: None)
    out = subprocess.run([python, "-c", "import neurok_probe_pkg; print(neurok_probe_pkg.VALUE)"],
                         capture_output=True, text=True)
    assert out.stdout.strip() == "42"
    assert "--no-index" in interpreter.install_command(str(tmp_path / "venv"), str(wheels))
