"""Calibrating and validating the latent dynamics against the generating simulators. No bpy use.

    python -m neurok_blender.pipeline.validate fit-material --data datasets/full --ckpt neurok_blender/runtime/weights/neurok-s
    python -m neurok_blender.pipeline.validate all --data datasets/full --ckpt neurok_blender/runtime/weights/neurok-s

``fit-material`` (fit.py) rolls out training sequences under their recorded conditions and picks, per sequence,
the stiffness, damping and drag that best match the simulator's motion; the engine predicts a new shape's
defaults from its nearest fitted sequences. ``heldout`` (heldout.py): per-frame vertex error / bounding-box
diagonal over 60 frames on held-out (test-split) families, against the rest-shape baseline. ``drift``: energy
drift of the undamped conservative integrator over 1,000 steps. ``sweep``: random settings, counting
divergences. What every rollout is given is one ``Rollouts`` (rollouts.py), from the command line. Results go to
eval/ (JSON and plots) and the generated section of docs/results.md (report.py).
"""

from .fit import GRID, TIE, fit_material, merge_material, settle, tie_break, updated_table
from .heldout import SHEET_FRAMES, drift, heldout, rollout_sheet, sweep
from .report import plots, write_section, write_table
from .rollouts import (
    DEFAULT,
    Rollouts,
    conditions_settings,
    current,
    held_pins,
    only_families,
    pick,
    rebuilt_spec,
    recorded_initial_velocities,
    recorded_joint_overrides,
    recorded_joints,
    recorded_material,
    recorded_poke,
    rest_error,
    rollout,
    simulation,
)

__all__ = ["DEFAULT", "GRID", "SHEET_FRAMES", "TIE", "Rollouts", "conditions_settings", "current", "drift",
           "fit_material", "held_pins", "heldout", "merge_material", "only_families", "pick", "plots", "rebuilt_spec",
           "recorded_initial_velocities", "recorded_joint_overrides", "recorded_joints", "recorded_material", "recorded_poke", "rest_error",
           "rollout", "rollout_sheet", "settle", "simulation", "sweep", "tie_break", "updated_table", "write_section",
           "write_table"]
