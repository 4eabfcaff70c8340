"""``python -m neurok_blender.pipeline.validate``: the command line of the validation package. No bpy use."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Any

import torch

from . import __doc__ as DOC
from .fit import GRID, fit_material, merge_material, typical_material
from .heldout import drift, heldout, sweep
from .report import plots, write_table
from .rollouts import Rollouts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m neurok_blender.pipeline.validate", description=DOC,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("fit-material", "merge-material", "typical-material", "heldout", "drift",
                                         "sweep", "all", "report"))
    parser.add_argument("--material-table", default="neurok_blender/runtime/weights/neurok-s/material.json",
                        help="typical-material: the table that gets the training solids' typical materials")
    parser.add_argument("--shard", default="0/1", help="i/n: fit only every n-th sequence starting at i")
    parser.add_argument("--data", default=["datasets/full"], nargs="+", help="one or more dataset roots, read as one")
    parser.add_argument("--split", default="train", choices=("train", "val", "test"),
                        help="fit-material: the split whose sequences are fitted (test only for the material-oracle "
                             "diagnostic: how far the right material alone gets each held-out sequence)")
    parser.add_argument("--ckpt", default="neurok_blender/runtime/weights/neurok-s")
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--families", nargs="+", default=[],
                        help="fit-material, heldout: only these families (e.g. refit the closed solids' entries with "
                             "--update)")
    parser.add_argument("--frames", type=int, default=48, help="frames per rollout when fitting the material")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--update", action="store_true",
                        help="fit-material: replace only the fitted families' entries of the checkpoint's material "
                             "table (keeping the others and the physical law) instead of writing a new one")
    parser.add_argument("--search", nargs="+", choices=sorted(GRID), default=list(GRID),
                        help="the material parameters fit-material searches, in order (the rest keep its start point)")
    parser.add_argument("--drift-family", default="ribbon", help="test-split family for the energy-drift run")
    parser.add_argument("--drift-substeps", type=int, default=1,
                        help="energy-drift steps of 1/(240 n) s on the same system (its coordinates are set up for "
                        "1/240 s): the step-size study")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--sweep-frames", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="eval")
    parser.add_argument("--doc", default="docs/results.md", help="the page whose generated section is rewritten")
    parser.add_argument("--figures", default="docs/results",
                        help="where the page's pictures and raw numbers are copied (linked relative to --doc)")
    parser.add_argument("--material", choices=("shape", "recorded"), default="shape",
                        help="the rollouts' material: predicted from the shape (the default, what a click gets), or "
                             "the simulator's recorded one: an FE solid's Young's modulus and density through the "
                             "checkpoint's calibrated law, an assembly's joints (type, axis, range as joint "
                             "overrides), springs, damping and air")
    parser.add_argument("--rollout-split", default="test", choices=("train", "val", "test"),
                        help="heldout: the split rolled out (test: the held-out families; train or val for families "
                             "the shipped model was not trained on yet, such as a newly added one)")
    parser.add_argument("--keep-stale", action="store_true",
                        help="heldout: also roll out sequences made before their family's current generator (the "
                             "articulated families before 1.2.0, whose joints were wrong)")
    parser.add_argument("--keep-collapsed", action="store_true",
                        help="heldout, fit-material: also use FE solids whose volume changed by more than "
                             "curate.MAX_VOLUME_CHANGE (surfaces flattened or turned inside out; left out by default)")
    parser.add_argument("--pins", choices=("stored", "held"), default="stored",
                        help="the rollouts' pins: as stored (painted), or for the FE solids what their simulator held "
                             "(it pins whole grid cells: 2-3x the painted vertices)")
    parser.add_argument("--solver", default="{}", help='Solver overrides for every rollout, as JSON, '
                        'e.g. \'{"handles": 8}\'')
    parser.add_argument("--cloth-preset", default="auto", help="the open surfaces' material (auto: Blender Cloth's "
                        "default; shape: predicted from the shape, as the closed ones'; or a preset name)")
    parser.add_argument("--research", default="{}", help='research switches (the ablations) for every rollout, as '
                        'JSON, e.g. \'{"handles": false}\' (the pure latent) or \'{"orthonormal": false}\'')
    return parser


def rollouts_from(args: argparse.Namespace) -> Rollouts:
    """What every rollout of this run is given, from the command line."""
    return Rollouts(material=args.material, pins=args.pins, solver=json.loads(args.solver),
                    research=json.loads(args.research), cloth=args.cloth_preset)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.drift_substeps < 1:
        parser.error(f"--drift-substeps must be 1 or more, got {args.drift_substeps}")
    setup = rollouts_from(args)
    torch.manual_seed(args.seed)
    if args.what == "fit-material":
        fit_material(args, setup)
        return 0
    if args.what == "merge-material":
        merge_material(args)
        return 0
    if args.what == "typical-material":
        print(json.dumps(typical_material(args.material_table)), file=sys.stderr)
        return 0
    os.makedirs(args.out, exist_ok=True)
    results: dict[str, Any] = {}
    saved = os.path.join(args.out, "validation.json")
    if args.what != "all" and os.path.exists(saved):  # re-running one part keeps the others' results
        with open(saved) as fh:
            results = json.load(fh)
    commands = results.pop("commands", {})
    if args.what in ("heldout", "all"):
        results["heldout"] = dict(heldout(args, setup), solver=setup.solver, research=setup.research,
                                  material=args.material, pins=args.pins, split=args.rollout_split, cloth=setup.cloth)
    if args.what in ("drift", "all"):
        results["drift"] = drift(args)
    if args.what in ("sweep", "all"):
        args.frames = args.sweep_frames
        results["sweep"] = sweep(args, setup)
    command = "python -m neurok_blender.pipeline.validate " + " ".join(argv or sys.argv[1:])
    for part in ("heldout", "drift", "sweep"):
        if args.what in (part, "all"):
            commands[part] = command
    plots(args.out, results)
    os.makedirs(os.path.dirname(args.doc) or ".", exist_ok=True)
    write_table(args.doc, results, commands, args.figures)
    with open(saved, "w") as fh:
        json.dump(dict(results, commands=commands), fh, indent=1)
    os.makedirs(args.figures, exist_ok=True)
    for name in ("heldout_error.png", "heldout_sheet.png", "energy_drift.png", "validation.json"):
        src, dst = os.path.join(args.out, name), os.path.join(args.figures, name)
        if os.path.exists(src) and not os.path.samefile(os.path.dirname(src), os.path.dirname(dst)):
            shutil.copy(src, dst)
    print(f"wrote {args.doc} and {args.out}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
