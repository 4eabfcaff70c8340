"""The built zip installs into Blender as an extension, and register/unregister cycles are clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.blender, pytest.mark.slow]
pytest.importorskip("bpy")

from tests.conftest import ROOT  # noqa: E402


@pytest.fixture(scope="module")
def install_report(tmp_path_factory):
    import build_addon

    zip_path = build_addon.build(str(tmp_path_factory.mktemp("dist")))
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path_factory.mktemp("blender-user")))
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "support", "install_check.py"), zip_path],
                          env=env, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("NEUROK_REPORT ")]
    assert lines, done.stdout + done.stderr
    return json.loads(lines[-1].split(" ", 1)[1])


def test_zip_installs_and_enables_as_bl_ext(install_report):
    assert install_report["install"] == ["FINISHED"]
    assert install_report["enabled"] and install_report["has_props"]
    assert install_report["prefs_class"] == "NeurokPreferences"


def test_unregister_register_cycles_leave_nothing_behind(install_report):
    for cycle in install_report["cycles"]:
        assert cycle["left_after_disable"] == []
        assert cycle["registered_after_enable"]
