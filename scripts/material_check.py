"""Which stage loses the held-out motion: the material or the rest (docs/dynamics/VALIDATION.md, 2026-12-06).

    python scripts/material_check.py oracle --data datasets/full --split test --per-family 3
    python scripts/material_check.py rules --data datasets/d400 --split val --per-family 6

``oracle`` rolls each sequence out at every stiffness of the material fit's grid (bending at the predicted ratio,
everything else predicted) and reports error / rest baseline at each: the best is what the material alone could
buy. ``rules`` rolls each sequence out with the material predicted by the median and by the log-mean of the
nearest fitted sequences (``MaterialPredictor.average``). Sequences are drawn as the held-out table draws them
(``validate.pick``); ``--seed`` picks another draw.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from neurok_blender.pipeline.validate import (  # noqa: E402
    GRID,
    conditions_settings,
    index_sequences,
    load_sequence,
    pick,
    recorded_poke,
    rest_error,
    rollout,
    simulation,
)
from neurok_blender.runtime.dynamics import simulation as runtime_simulation  # noqa: E402

FRAMES = 60


def predicted_material(seq, meta, ckpt: str) -> dict[str, float]:
    sim = simulation(seq, ckpt, material={}, poke=recorded_poke(seq, meta), **conditions_settings(meta, 2))
    return sim.material.to_dict()


def oracle(refs, ckpt: str) -> list[dict]:
    rows = []
    for ref in refs:
        seq = load_sequence(ref)
        rest = float(rest_error(seq, FRAMES).mean())
        pred = predicted_material(seq, ref.meta, ckpt)
        ratios = {}
        for k in GRID["stiffness"]:
            trial = dict(pred, stiffness=k, bending=pred["bending"] * k / pred["stiffness"])
            err, _ = rollout(seq, ref.meta, ckpt, FRAMES, trial)
            ratios[k] = float(err.mean()) / rest
        best = min(ratios, key=ratios.get)
        rows.append({"family": ref.meta["family"], "key": ref.key, "rest": rest, "predicted": pred["stiffness"],
                     "ratios": ratios, "best": best})
        print(f"{ref.meta['family']:<9} {ref.key:<4} predicted {pred['stiffness']:<8.4g} "
              + " ".join(f"{k:g}:{r:.2f}" for k, r in ratios.items()) + f"  best {best:g}", flush=True)
    return rows


def rules(refs, ckpt: str) -> list[dict]:
    model, predictor = runtime_simulation.load_model(ckpt, "cpu")
    key = next(k for k, v in runtime_simulation._MODELS.items() if v[0] is model)
    rows = []
    for ref in refs:
        seq = load_sequence(ref)
        rest = float(rest_error(seq, FRAMES).mean())
        row = {"family": ref.meta["family"], "key": ref.key, "rest": rest}
        for rule in ("log-mean", "median"):
            runtime_simulation._MODELS[key] = (model, dataclasses.replace(predictor, average=rule))
            err, _ = rollout(seq, ref.meta, ckpt, FRAMES)
            row[rule] = float(err.mean())
        runtime_simulation._MODELS[key] = (model, predictor)
        rows.append(row)
        print(f"{row['family']:<9} {row['key']:<4} rest {rest:.3f}  log-mean {row['log-mean'] / rest:.2f}  "
              f"median {row['median'] / rest:.2f}", flush=True)
    for rule in ("log-mean", "median"):  # per family: mean error over mean rest baseline, as the held-out table
        fams = sorted({r["family"] for r in rows})
        summary = {f: round(sum(r[rule] for r in rows if r["family"] == f) / sum(r["rest"] for r in rows if r["family"] == f), 3)
                   for f in fams}
        print(rule, summary, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("oracle", "rules"))
    parser.add_argument("--data", default="datasets/full")
    parser.add_argument("--split", default="test", choices=("train", "val", "test"))
    parser.add_argument("--ckpt", default=os.path.join(ROOT, "neurok_blender", "runtime", "weights", "neurok-s"))
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    refs = pick(index_sequences(args.data, args.split), args.per_family, args.seed)
    rows = (oracle if args.what == "oracle" else rules)(refs, args.ckpt)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
