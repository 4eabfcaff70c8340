"""The validation harness's own pieces: the held-out rollout sheet."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("torch")

from neurok_blender.pipeline.validate import SHEET_FRAMES, rollout_sheet  # noqa: E402
from tests.conftest import grid_sheet  # noqa: E402


def test_the_rollout_sheet_draws_simulator_and_neurok_side_by_side(tmp_path):
    from PIL import Image

    v, t = grid_sheet()
    frames = np.stack([v + [0.0, 0.0, -0.01 * f] for f in range(60)])  # a sheet sinking
    seq = {"rest": v, "triangles": t, "frames": frames, "pins": (v[:, 0] < 1e-6).astype(float)}
    shown = [{"family": "sheet", "error": 0.5, "seq": seq, "neurok": frames[::-1].copy()},
             {"family": "short", "error": 1.2, "seq": dict(seq, frames=frames[:30]), "neurok": frames[:30]}]
    path = rollout_sheet(str(tmp_path / "sheet.png"), shown)
    with Image.open(path) as im:  # a row pair per family, a column per frame
        w, h = im.size
        assert h / w == pytest.approx(2.3 * 4 / (2.4 * len(SHEET_FRAMES)), rel=0.02) and len(np.unique(np.asarray(im.convert("L")))) > 20
    assert SHEET_FRAMES[-1] < 60
