"""Which stage loses the held-out motion: the material or the rest (docs/journal/validation.md, 2026-12-06).

    python experiments/material_check.py oracle --data datasets/full --split test --per-family 3
    python experiments/material_check.py rules --data datasets/d400 --split val --per-family 6

``oracle`` rolls each sequence out at every stiffness of the material fit's grid (bending at the predicted ratio,
everything else predicted) and reports error / rest baseline at each: the best is what the material alone could
buy. ``rules`` rolls each sequence out with the material predicted by the median and by the log-mean of the
nearest fitted sequences (``MaterialPredictor.average``). Sequences are drawn as the held-out table draws them
(``validate.pick``); ``--seed`` picks another draw.

    python experiments/material_check.py calibrate --data datasets/d400 --split train --simulator mujoco_grid \
        --per-family 10 --out /tmp/calib_train.json

``calibrate`` runs ``oracle`` on the training split's FE solids (their Young's modulus and density are recorded)
and fits the physical-material law (``runtime/dynamics/material.py: PhysicalLaw``) to each one's best stiffness,
then stores it in the checkpoint's material.json: what ``young_modulus`` / ``density`` in a request use.
``--rows`` fits on an earlier run's rows instead of rolling out again.

A one-off study, kept to rerun; its journal entry: docs/journal/validation.md, "2026-12-06 (later)" and "2026-12-06 (ninth)".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from neurok_blender.pipeline import validate  # noqa: E402
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
    sound,
)
from neurok_blender.runtime.dynamics import simulation as runtime_simulation  # noqa: E402
from neurok_blender.runtime.dynamics.material import G_REF, MATERIAL_FILE, PhysicalLaw  # noqa: E402

FRAMES = 60

SETUP = [validate.DEFAULT]  # what every rollout is given (the command line sets it)


def predicted_material(seq, meta, ckpt: str) -> dict[str, float]:
    sim = simulation(seq, ckpt, SETUP[0], material={}, poke=recorded_poke(seq, meta),
                     **conditions_settings(meta, 2, SETUP[0]))
    return sim.material.to_dict()


def physical_number(seq, meta) -> float | None:
    """E / (ρ g_ref ℓ) of a sequence whose simulator recorded a Young's modulus and density (the FE grids), else
    None: the material's stiffness in the units of ``Material.stiffness`` (M g_ref ℓ per unit strain²), up to the
    constant the calibration fits."""
    m = meta.get("material", {})
    if "young" not in m or "density" not in m:
        return None
    return float(m["young"] / (m["density"] * G_REF * np.linalg.norm(np.ptp(seq["rest"], axis=0))))


def oracle(refs, ckpt: str) -> list[dict]:
    rows = []
    for ref in refs:
        seq = load_sequence(ref)
        rest = float(rest_error(seq, FRAMES).mean())
        pred = predicted_material(seq, ref.meta, ckpt)
        ratios = {}
        for k in GRID["stiffness"]:
            trial = dict(pred, stiffness=k, bending=pred["bending"] * k / pred["stiffness"])
            err, _ = rollout(seq, ref.meta, ckpt, FRAMES, trial, setup=SETUP[0])
            ratios[k] = float(err.mean()) / rest
        best = min(ratios, key=ratios.get)
        rows.append({"family": ref.meta["family"], "key": ref.key, "rest": rest, "predicted": pred["stiffness"],
                     "ratios": ratios, "best": best, "physical": physical_number(seq, ref.meta)})
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
            err, _ = rollout(seq, ref.meta, ckpt, FRAMES, setup=SETUP[0])
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


INFORMATIVE = 0.8  # a sequence whose best stiffness beats its rest baseline by less says little about the material


def best_stiffness(ratios: dict) -> tuple[float, float, bool]:
    """(stiffness, error ratio, inside) at the minimum of a row's error / rest-baseline curve: a parabola through
    the best grid point and its neighbours in log–log space (its vertex kept between them); ``inside`` is False
    when the best is at the grid's end (the material may lie beyond it)."""
    ks = np.array([float(k) for k in ratios])
    v = np.array([float(r) for r in ratios.values()])
    i = int(np.argmin(v))
    if not 0 < i < len(v) - 1:
        return float(ks[i]), float(v[i]), False
    c = np.polyfit(np.log(ks[i - 1:i + 2]), np.log(v[i - 1:i + 2]), 2)
    best = float(np.exp(-c[1] / (2 * c[0]))) if c[0] > 0 else float(ks[i])
    return float(np.clip(best, ks[i - 1], ks[i + 1])), float(v[i]), True


def ratio_at(ratios: dict, stiffness: float) -> float:
    """A row's error / rest baseline at any stiffness: interpolated in log–log space between grid points."""
    ks = np.log([float(k) for k in ratios])
    return float(np.exp(np.interp(np.log(stiffness), ks, np.log([float(r) for r in ratios.values()]))))


def calibrate(rows: list[dict], ckpt: str, command: str) -> PhysicalLaw:
    """Fit the physical-material law on the rows whose best stiffness is informative, report what it buys per
    family against the shape's prediction, and store it in the checkpoint's material.json."""
    kept = [(r, *best_stiffness(r["ratios"])) for r in rows if r.get("physical")]
    kept = [(r, s) for r, s, ratio, inside in kept if inside and ratio < INFORMATIVE]
    law = PhysicalLaw.fit(np.array([r["physical"] for r, _ in kept]), np.array([s for _, s in kept]))
    print(f"law: stiffness = {law.scale:.4g} · P^{law.exponent:.3f} from {law.fitted_on} sequences (of {len(rows)}), "
          f"residual spread ×{np.exp(law.spread):.2f}", flush=True)
    for fam in sorted({r["family"] for r in rows}):
        mine = [r for r in rows if r["family"] == fam and r.get("physical")]
        by_law = np.mean([ratio_at(r["ratios"], law.scale * r["physical"] ** law.exponent) for r in mine])
        by_shape = np.mean([ratio_at(r["ratios"], r["predicted"]) for r in mine])
        best = np.mean([min(r["ratios"].values()) for r in mine])
        print(f"  {fam:<9} error / rest: law {by_law:.2f}, shape-predicted {by_shape:.2f}, best of grid {best:.2f} "
              f"({len(mine)} sequences)", flush=True)
    path = os.path.join(ckpt, MATERIAL_FILE)
    with open(path) as fh:
        doc = json.load(fh)
    doc["physical"] = dict(dataclasses.asdict(law), command=command,
                           number="E / (density * 9.81 m/s² * bounding-box diagonal in m)")
    with open(path + ".tmp", "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(path + ".tmp", path)
    print(f"wrote the law into {path}", file=sys.stderr)
    return law


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("oracle", "rules", "calibrate"))
    parser.add_argument("--data", default="datasets/full")
    parser.add_argument("--split", default="test", choices=("train", "val", "test"))
    parser.add_argument("--ckpt", default=os.path.join(ROOT, "neurok_blender", "runtime", "weights", "neurok-s"))
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--simulator", help="only sequences of this simulator (mujoco_grid: the FE solids, whose "
                        "Young's modulus and density are recorded)")
    parser.add_argument("--pins", choices=("stored", "held"), default="stored",
                        help="roll out with the stored pins or what the FE simulator held (validate --pins)")
    parser.add_argument("--rows", help="calibrate: fit on this earlier oracle run's rows instead of rolling out again")
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--solver", default="{}", help='solver overrides for every rollout, as JSON (validate '
                        '--solver), e.g. \'{"solid_handles": 4}\'')
    args = parser.parse_args()
    SETUP[0] = validate.Rollouts(pins=args.pins, solver=json.loads(args.solver))
    if args.what == "calibrate" and args.rows:
        with open(args.rows) as fh:
            calibrate(json.load(fh), args.ckpt, " ".join(sys.argv))
        return 0
    refs = sound([r for r in index_sequences(args.data, args.split)
                  if args.simulator is None or r.meta["simulator"] == args.simulator])  # collapsed FE solids left out
    refs = pick(refs, args.per_family, args.seed)
    rows = (rules if args.what == "rules" else oracle)(refs, args.ckpt)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    if args.what == "calibrate":
        calibrate(rows, args.ckpt, " ".join(sys.argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
