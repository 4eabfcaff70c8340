"""The README's quick starts run exactly as written: its shell block (the batch and the CLI, from a directory
outside the clone) and then its Python block in the same shell, on the example flag in examples/."""

from __future__ import annotations

import json
import os
import re
import subprocess

import numpy as np
import pytest

from neurok_blender.pc2 import read_pc2
from tests.conftest import ROOT, needs_model

pytest.importorskip("torch")
pytest.importorskip("bpy")


def quick_start_blocks() -> tuple[str, str]:
    """The shell and the Python code blocks of the README's "Quick starts" section, as written."""
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    section = text.split("## Quick starts", 1)[1].split("\n## ", 1)[0]
    shell = re.findall(r"```sh\n(.*?)```", section, re.S)
    python = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(shell) == 1 and len(python) == 1, "the quick starts hold one shell and one Python block"
    return shell[0], python[0]


def examples_state() -> dict[str, float]:
    folder = os.path.join(ROOT, "examples")
    return {name: os.path.getmtime(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}


@needs_model
@pytest.mark.slow
def test_the_readme_quick_starts_run_as_written(tmp_path):
    shell, python = quick_start_blocks()
    before = examples_state()
    assert "mktemp" in shell  # the snippets leave the clone: nothing may depend on the working directory
    script = f"set -e\n{shell}\npwd > {tmp_path}/where\npython - <<'PYTHON'\n{python}PYTHON\n"
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr[-3000:]
    where = (tmp_path / "where").read_text().strip()
    try:
        assert not where.startswith(ROOT)
        assert done.stdout.strip().splitlines()[-1] == "(48, 640, 3)"  # the Python block's print
        frames = read_pc2(os.path.join(where, "flag.pc2"))[0]
        assert frames.shape == (48, 640, 3) and np.isfinite(frames).all()
        assert np.abs(frames[-1] - frames[0]).max() > 0.05  # the flag moved in the wind
        assert os.path.isfile(os.path.join(where, "flag_baked.blend"))
        report = json.load(open(os.path.join(where, "flag.json")))["objects"][0]
        assert report["ok"] and report["frames"] == 48
        # baked straight beside the saved file, never beside the opened one in the clone
        assert report["path"].startswith(os.path.join(where, "neurok_cache")) and os.path.isfile(report["path"])
    finally:
        subprocess.run(["rm", "-rf", where])
    assert examples_state() == before  # the quick starts write nothing into the clone
    assert not os.path.exists(os.path.join(ROOT, "examples", "neurok_cache"))
