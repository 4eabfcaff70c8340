"""The validation harness's own pieces: the held-out rollout sheet, the material fit's tie rule."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("torch")

from neurok_blender.pipeline.validate import GRID, SHEET_FRAMES, rollout_sheet, settle, tie_break, updated_table  # noqa: E402
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


def test_a_fit_that_cannot_tell_the_values_apart_settles_where_it_is_told():
    flat = [(0.100, 0.100, v) for v in (1.0, 25.0, 625.0, 15625.0)]
    flat[-1] = (0.0999, 0.0999, 15625.0)  # the extreme wins by noise only
    assert settle(flat, 25.0, 0.002)[0] == 25.0
    clear = [(0.30, 0.30, 1.0), (0.20, 0.20, 25.0), (0.05, 0.05, 625.0), (0.06, 0.06, 15625.0)]
    assert settle(clear, 25.0, 0.002) == (625.0, 0.05, 0.05)  # a real minimum is kept
    near = [(0.30, 0.30, 1.0), (0.20, 0.20, 25.0), (0.051, 0.051, 625.0), (0.050, 0.050, 15625.0)]
    assert settle(near, 25.0, 0.002)[0] == 625.0  # within the tolerance: the value nearer the start
    diverged = [(float("inf"), float("inf"), v) for v in (1.0, 25.0)]
    assert settle(diverged, 25.0, 0.002)[0] == 25.0
    stiff = [(0.100, 0.100, v) for v in (25.0, 625.0, 3125.0, 15625.0)]
    stiff[1] = (0.0999, 0.0999, 625.0)
    assert settle(stiff, tie_break("stiffness", solid=True), 0.002)[0] == max(GRID["stiffness"])  # held still: stiff
    assert settle(stiff, tie_break("stiffness", solid=False), 0.002)[0] == 25.0  # a shell: the start
    assert tie_break("bending_ratio", solid=True) == tie_break("bending_ratio", solid=False) == 0.02


def test_the_held_out_table_has_a_row_per_family_per_category_and_overall(tmp_path):
    """The issue measures per category (cloth: ribbon and drape), so the table says it, beside each family."""
    from neurok_blender.pipeline import validate

    def row(family, category, neurok, rest):
        return {"family": family, "category": category, "neurok": neurok, "rest": rest, "motion_neurok": 0.1,
                "motion_simulator": rest, "final_neurok": neurok, "final_rest": rest, "ms_per_frame": 10.0}

    rows = [row("ribbon", "cloth", 0.6, 1.0), row("drape", "cloth", 0.1, 1.0), row("drape", "cloth", 0.2, 1.0),
            row("lamp", "articulated", 0.9, 1.0)]
    path = str(tmp_path / "V.md")
    validate.write_table(path, {"heldout": {"rows": rows}}, {"heldout": "python -m …"})
    table = {line.split("|")[1].strip(): line for line in open(path) if line.startswith("| ")}
    assert "| 0.15 |" in table["drape"] and "| 2 |" in table["drape"]
    assert "| 0.30 |" in table["*cloth*"] and "| 3 |" in table["*cloth*"]  # over the category's sequences
    assert "*articulated*" not in table  # one family: its own row says it
    assert "| 0.45 |" in table["all"] and "| 4 |" in table["all"]


def test_an_update_refits_only_the_fitted_families_and_keeps_the_law(tmp_path):
    """``fit-material --update``: the fitted families' entries are replaced (an uninformative fit left out), the
    other families' fits and the physical law stay, and the update is recorded."""
    import json

    def entry(family, error, rest=0.1):
        return {"family": family, "features": [0, 0, 1, 0, 1], "params": {"stiffness": 1.0}, "error": error,
                "rest_error": rest}

    path = tmp_path / "material.json"
    path.write_text(json.dumps({"sequences": [entry("door", 0.05), entry("beam", 0.02)], "defaults": {},
                                "physical": {"scale": 1.0, "exponent": 1.0}}))
    fitted = {"command": "fit", "grid": GRID, "defaults": {"joint": 0.3},
              "sequences": [entry("door", 0.01), entry("laptop", 0.02), entry("laptop", 0.9)]}
    table = updated_table(str(path), fitted)
    assert [(e["family"], e["error"]) for e in table["sequences"]] == [("beam", 0.02), ("door", 0.01), ("laptop", 0.02)]
    assert table["physical"] == {"scale": 1.0, "exponent": 1.0} and table["defaults"] == {"joint": 0.3}
    (update,) = table["updates"]
    assert update["families"] == ["door", "laptop"] and update["fitted"] == 2 and len(update["dropped"]) == 1


def test_families_narrow_a_fit_or_a_table_and_a_typo_is_an_error():
    """``--families``: only the named families' sequences; a name with no sequence in the split stops the run
    instead of fitting (or scoring) nothing."""
    from types import SimpleNamespace

    from neurok_blender.pipeline.validate import only_families

    refs = [SimpleNamespace(meta={"family": f}) for f in ("beam", "blob", "cape", "beam")]
    assert only_families(refs, []) == refs
    assert [r.meta["family"] for r in only_families(refs, ["beam", "blob"])] == ["beam", "blob", "beam"]
    with pytest.raises(SystemExit, match="no sequences of plate"):
        only_families(refs, ["beam", "plate"])


def test_the_command_line_sets_every_part_of_what_the_rollouts_are_given():
    from neurok_blender.pipeline.validate.__main__ import _parser, rollouts_from

    args = _parser().parse_args(["heldout", "--material", "recorded", "--pins", "held", "--solver", '{"handles": 8}',
                                 "--research", '{"handles": false}', "--cloth-preset", "shape"])
    setup = rollouts_from(args)
    assert (setup.material, setup.pins, setup.cloth) == ("recorded", "held", "shape")
    assert setup.solver == {"handles": 8} and setup.research == {"handles": False}
    from neurok_blender.pipeline.validate import DEFAULT

    assert rollouts_from(_parser().parse_args(["heldout"])) == DEFAULT
