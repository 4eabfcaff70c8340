"""Finding, checking and installing the runtime interpreter. Blender side, no torch."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time

import bpy

from ..bridge import protocol
from ..bridge.client import RuntimeProcess
from ..errors import NeurokError, RuntimeUnavailable
from ..prefs import ADDON_ID, get_prefs

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(PACKAGE_DIR, "runtime", "launch.py")
RUNTIME_REQUIREMENTS = os.path.join(PACKAGE_DIR, "runtime", "requirements.txt")
ENTRY_ENV = "NEUROK_WORKER_ENTRY"  # for the test suite's analytic worker; never set in production


def managed_venv_dir() -> str:
    return os.path.join(bpy.utils.extension_path_user(ADDON_ID, path="runtime", create=False), "venv")


def venv_python(venv: str) -> str:
    return os.path.join(venv, "Scripts", "python.exe") if sys.platform == "win32" else os.path.join(venv, "bin", "python")


def find_interpreter(context: bpy.types.Context | None = None) -> tuple[str, str]:
    """(interpreter, where it came from): preference → NEUROK_PYTHON → managed venv → this Python with torch."""
    prefs = get_prefs(context)
    configured = bpy.path.abspath(prefs.runtime_python) if prefs and prefs.runtime_python else ""
    if configured:
        if not os.path.isfile(configured):
            raise RuntimeUnavailable(f"the runtime interpreter set in the preferences does not exist: {configured}")
        return configured, "preferences"
    env = os.environ.get("NEUROK_PYTHON", "")
    if env:
        if not os.path.isfile(env):
            raise RuntimeUnavailable(f"NEUROK_PYTHON points at a missing file: {env}")
        return env, "NEUROK_PYTHON"
    managed = _managed_python()
    if managed:
        return managed, "managed runtime"
    if importlib.util.find_spec("torch") is not None:
        return sys.executable, "Blender's Python"
    raise RuntimeUnavailable(
        "no runtime interpreter with PyTorch was found; use Install Runtime in the NeuROK preferences, "
        "or set a Python with torch there or in NEUROK_PYTHON"
    )


def _managed_python() -> str | None:
    try:
        path = venv_python(managed_venv_dir())
    except (ValueError, RuntimeError):  # not loaded as an extension: no user folder
        return None
    return path if os.path.isfile(path) else None


def worker_argv(interpreter: str, *worker_args: str) -> list[str]:
    entry = os.environ.get(ENTRY_ENV)
    argv = [interpreter, LAUNCHER]
    if entry:
        argv += ["--entry", entry]
    return [*argv, "--", *worker_args]


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def new_process(interpreter: str, *worker_args: str, log_path: str | None = None, **timeouts: float) -> RuntimeProcess:
    return RuntimeProcess(worker_argv(interpreter, *worker_args), env=worker_env(), log_path=log_path, **timeouts)


LAST_DEVICE = {"auto": ""}  # what the runtime last reported for device 'auto' (a check or a bake), for the panel


def simulate_label(requested: str) -> str:
    """The Simulate button's text: the device that will run, as far as this session knows."""
    seen = LAST_DEVICE["auto"]
    if requested == "CPU":
        return "Simulate on CPU"
    if requested == "CUDA":
        return "Simulate on CUDA" if not seen or seen.startswith("CUDA") else "Simulate on CUDA (none seen: CPU)"
    return f"Simulate on {seen}" if seen else "Simulate (device: auto)"


def probe(interpreter: str, timeout: float = 120.0) -> dict:
    """Start the worker with --probe and return its HELLO data (torch version, device)."""
    proc = new_process(interpreter, "--probe", handshake_timeout=timeout)
    proc.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in proc.poll():
                if msg.type == protocol.ERROR:
                    raise RuntimeUnavailable(str(msg.data.get("message", "the runtime failed its check")))
                if msg.type == protocol.DONE:
                    info = dict(proc.hello.data)
                    LAST_DEVICE["auto"] = "CUDA" if info.get("cuda") else "CPU"
                    return info
            time.sleep(0.02)
        raise RuntimeUnavailable(f"the runtime did not answer within {timeout:.0f} s")
    finally:
        proc.close()


def install_command(venv: str, wheel_folder: str = "", requirements: str = RUNTIME_REQUIREMENTS) -> list[str]:
    cmd = [venv_python(venv), "-m", "pip", "install", "--disable-pip-version-check", "-r", requirements]
    if wheel_folder:
        cmd += ["--no-index", "--find-links", wheel_folder]
    return cmd


def install_runtime(venv: str, wheel_folder: str = "", requirements: str = RUNTIME_REQUIREMENTS,
                    online: bool = False, log=print) -> str:
    """Create the venv and pip-install the runtime into it; returns its interpreter."""
    if not wheel_folder and not online:
        raise RuntimeUnavailable(
            "Blender's online access is off: allow it in Preferences > System > Network, "
            "or set a folder of local wheels in the NeuROK preferences"
        )
    for step in ([sys.executable, "-m", "venv", venv], install_command(venv, wheel_folder, requirements)):
        log("running: " + " ".join(step))
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise RuntimeUnavailable(f"installing the runtime failed at '{step[2]}':\n{tail}")
    return venv_python(venv)


class NEUROK_OT_check_runtime(bpy.types.Operator):
    """Find the runtime interpreter and report its PyTorch version and device"""

    bl_idname = "neurok.check_runtime"
    bl_label = "Check Runtime"

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            interpreter, source = find_interpreter(context)
            info = probe(interpreter)
        except NeurokError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"{interpreter} ({source}): Python {info.get('python')}, torch {info.get('torch')}, "
                              f"device {info.get('device_name')}")
        return {"FINISHED"}


class NEUROK_OT_install_runtime(bpy.types.Operator):
    """Create NeuROK's own Python environment and install PyTorch and the runtime into it"""

    bl_idname = "neurok.install_runtime"
    bl_label = "Install Runtime"

    def execute(self, context: bpy.types.Context) -> set[str]:
        prefs = get_prefs(context)
        wheels = bpy.path.abspath(prefs.wheel_folder) if prefs and prefs.wheel_folder else ""
        try:
            venv = managed_venv_dir()
            interpreter = install_runtime(venv, wheels, online=bpy.app.online_access,
                                          log=lambda line: self.report({"INFO"}, line))
        except (NeurokError, ValueError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"runtime installed: {interpreter}")
        return {"FINISHED"}


CLASSES = [NEUROK_OT_check_runtime, NEUROK_OT_install_runtime]
