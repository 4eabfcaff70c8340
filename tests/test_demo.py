"""`make demo`'s script, short: it bakes, reopens, draws and renders everything under its out folder, prints nothing
alarming, and leaves the clone as it found it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, needs_model

pytest.importorskip("torch")
pytest.importorskip("bpy")

OUTPUTS = ("demo.blend", "demo.gif", "cape_vs_cloth.gif", "demo_sheet.png", "demo_energy.png", "demo_report.json")


def tree() -> tuple:
    """What git sees changed or added in the clone, and the ignored places a demo could write to by mistake: the
    repository's own out/ and neurok_cache/, and the published pictures' times."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                            text=True).stdout
    listing = {folder: sorted(os.listdir(os.path.join(ROOT, folder))) if os.path.isdir(os.path.join(ROOT, folder)) else None
               for folder in ("out", "neurok_cache", "examples")}
    published = {name: os.path.getmtime(os.path.join(ROOT, "docs", "demo", name))
                 for name in sorted(os.listdir(os.path.join(ROOT, "docs", "demo")))}
    return status, listing, published


@needs_model
@pytest.mark.slow
def test_the_demo_writes_only_under_its_out_folder(tmp_path):
    out = tmp_path / "out"
    before = tree()
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "demo.py"), "--out", str(out), "--frames", "6"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr[-3000:]
    for name in OUTPUTS:
        assert (out / name).stat().st_size > 0, name
    assert "EGL Error" not in done.stdout + done.stderr  # kept in render.log, and said so in one line
    assert tree() == before
