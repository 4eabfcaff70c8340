"""Fitting the material table: per training sequence, the stiffness, damping and drag (a coordinate search on a
log grid) that best match its simulator; the table (shape features → parameters) is written beside the checkpoint
as material.json. No bpy use."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

import numpy as np

from ...runtime.dynamics.material import MATERIAL_FILE, Material
from ..data.dataset import index_sequences, load_sequence, sound
from .rollouts import Rollouts, only_families, pick, rest_error, rollout, shape_features_of

GRID = {"stiffness": [0.2, 1.0, 5.0, 25.0, 125.0, 625.0, 3125.0, 15625.0], "bending_ratio": [0.002, 0.02, 0.2], "damping_mass": [0.1, 0.4, 1.6],
        "drag": [0.05, 0.15, 0.5, 1.5, 4.5, 13.5, 40.5, 121.5], "joint": [0.003, 0.01, 0.03, 0.1, 0.3, 1.0],
        "joint_limit": [0.3, 0.6, 1.0, 1.6, 3.2]}


UNINFORMATIVE = 1.5  # merge-material leaves out fits whose error exceeds this × the rest-shape baseline


TIE = 0.02  # scores within this share of the rest baseline of the best are a tie (see ``settle``)


STRAIN_WEIGHT = 2.0  # stretch beyond the simulator's own costs this much per unit mean strain in the fit's score


def material_params(trial: dict[str, float]) -> dict[str, float]:
    """A search point (bending given as a ratio of stiffness) as Material fields."""
    params = {k: v for k, v in trial.items() if k != "bending_ratio"}
    params["bending"] = trial["stiffness"] * trial["bending_ratio"]
    return params


FIT_START = {"stiffness": 25.0, "bending_ratio": 0.02, "damping_mass": 0.4, "drag": 1.5, "joint": 0.3, "joint_limit": 3.2}


def settle(scored: list[tuple[float, float, float]], toward: float, tolerance: float) -> tuple[float, float, float]:
    """The grid value a coordinate search keeps from its (score, error, value) rows: among the values whose
    score is within ``tolerance`` of the best, the one nearest ``toward`` in log space. A door that the rollout
    cannot swing, or a sheet held at two corners that swings as it would at any stiffness, scores the same over
    much of the grid; such a fit says only "anywhere in this range", and the noise between equal scores should
    not pick the value."""
    low = min(s for s, _, _ in scored)
    if not math.isfinite(low):
        return toward, low, low
    ties = [row for row in scored if row[0] <= low + tolerance]
    score, err, value = min(ties, key=lambda row: (abs(math.log(row[2] / toward)), row[0]))
    return value, score, err


def tie_break(name: str, solid: bool) -> float:
    """Where a fit that cannot tell values apart settles. A closed solid that its simulator held still (a door,
    a laptop, a tower) takes the stiff end: too soft, an assembly folds at its joints (the held-out lamp, 1.9×
    its rest baseline with the doors stiff, 3.5× with them settled at the start). A shell takes the search's
    start: in these few handles a stretch-stiff sheet locks — dropped on a ball it tilts as a plate instead of
    draping — and a corner-held kerchief scores the same at 625 and 15625."""
    if name == "stiffness" and solid:
        return max(GRID["stiffness"])
    return FIT_START[name]


def fit_material(args: argparse.Namespace, setup: Rollouts) -> dict[str, Any]:
    """Coordinate search per sequence; the score is the vertex error plus STRAIN_WEIGHT × the stretch the
    rollout adds beyond the simulator's, so a fit cannot buy motion with implausible stretching."""
    refs = pick(only_families(sound(index_sequences(args.data, args.split), args.keep_collapsed), args.families),
                args.per_family, args.seed)
    index, count = (int(v) for v in args.shard.split("/"))
    if args.update and count != 1:
        raise SystemExit("--update refits into the checkpoint's table in one run: leave --shard out")
    refs = refs[index::count]
    entries, started = [], time.time()
    for n, ref in enumerate(refs):
        seq = load_sequence(ref)
        best = dict(FIT_START)
        best_score, best_err = float("inf"), float("inf")
        rest = float(rest_error(seq, args.frames).mean())
        features = shape_features_of(seq)
        solid = bool(features[2])
        for name in args.search:  # drag too without wind: still air drags (LatentSystem.external_force)
            scored = []
            for value in GRID[name]:
                trial = dict(best, **{name: value})
                err, excess = rollout(seq, ref.meta, args.ckpt, args.frames, material_params(trial), setup=setup)
                scored.append((float(err.mean()) + STRAIN_WEIGHT * excess, float(err.mean()), value))
            value, best_score, best_err = settle(scored, tie_break(name, solid), TIE * rest)
            best = dict(best, **{name: value})
        params = material_params(best)
        entries.append({"family": ref.meta["family"], "simulator": ref.meta["simulator"],
                        "features": features.tolist(), "params": params, "error": best_err,
                        "score": best_score, "rest_error": rest})
        print(f"[{n + 1}/{len(refs)}] {ref.meta['family']:<10} error {best_err:.3f} (rest {rest:.3f}) score "
              f"{best_score:.3f} {params} {time.time() - started:.0f}s", file=sys.stderr, flush=True)
    doc = {"command": " ".join(sys.argv), "frames": args.frames, "grid": GRID, "strain_weight": STRAIN_WEIGHT,
           "sequences": entries, "defaults": Material().to_dict()}
    name = MATERIAL_FILE if count == 1 else f"{MATERIAL_FILE}.shard-{index}-of-{count}"
    path = os.path.join(args.ckpt, name)
    if args.update:
        doc = updated_table(path, doc)
    with open(path + ".tmp", "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(path + ".tmp", path)
    print(f"wrote {path}", file=sys.stderr)
    return doc


def updated_table(path: str, fitted: dict[str, Any]) -> dict[str, Any]:
    """The material table at ``path`` with the fitted families' entries replaced by the informative ones of
    ``fitted`` (``--update``: refit some families — the articulated ones once their joints moved — keeping the
    others' fits and the physical law); the update is recorded in the table's ``updates``."""
    with open(path) as fh:
        table = json.load(fh)
    families = sorted({e["family"] for e in fitted["sequences"]})
    kept = [e for e in table["sequences"] if e["family"] not in families]
    new = [e for e in fitted["sequences"] if e["error"] <= e["rest_error"] * UNINFORMATIVE]
    dropped = [f"{e['family']} (error {e['error']:.3f}, rest {e['rest_error']:.3f})"
               for e in fitted["sequences"] if e not in new]
    updates = [*table.get("updates", []), {"command": fitted["command"], "families": families, "fitted": len(new),
                                           "dropped": dropped, "grid": fitted["grid"]}]
    return dict(table, sequences=kept + new, defaults=fitted["defaults"], updates=updates)


def merge_material(args: argparse.Namespace) -> None:
    """Join the shards' tables into material.json (and remove the shard files)."""
    import glob

    parts = sorted(glob.glob(os.path.join(args.ckpt, MATERIAL_FILE + ".shard-*")))
    if not parts:
        raise SystemExit(f"no material shards in {args.ckpt}")
    docs = [json.load(open(p)) for p in parts]
    entries = [e for d in docs for e in d["sequences"]]
    # a fit that cannot beat the rest shape says nothing about the material (the simulator did something the
    # rollout cannot, such as Blender's soft-body goal holding an unpinned ball): it is kept out of the table
    kept = [e for e in entries if e["error"] <= e["rest_error"] * UNINFORMATIVE]
    dropped = [f"{e['family']} (error {e['error']:.3f}, rest {e['rest_error']:.3f})" for e in entries if e not in kept]
    merged = dict(docs[0], sequences=kept, shards=len(docs), dropped=dropped)
    path = os.path.join(args.ckpt, MATERIAL_FILE)
    with open(path + ".tmp", "w") as fh:
        json.dump(merged, fh, indent=1)
    os.replace(path + ".tmp", path)
    for p in parts:
        os.remove(p)
    print(f"wrote {path} ({len(kept)} sequences; left out as uninformative: {', '.join(dropped) or 'none'})",
          file=sys.stderr)


def typical_material(path: str) -> dict[str, Any]:
    """Write into the material table at ``path`` the training solids' typical materials (``MaterialPredictor.
    typical``): each family's category, and per solid category the middle of the generator's materials — the
    geometric mean of its Young's moduli, the mean of its densities (families.SOLID_YOUNG, SOLID_DENSITY)."""
    from ..data.families import FAMILIES, SOLID_DENSITY, SOLID_YOUNG

    with open(path) as fh:
        doc = json.load(fh)
    doc["typical"] = {"category_of": {name: f.category for name, f in sorted(FAMILIES.items())},
                      "young": {c: float(np.sqrt(lo * hi)) for c, (lo, hi) in SOLID_YOUNG.items()},
                      "density": float(np.mean(SOLID_DENSITY)),
                      "command": f"python -m neurok_blender.pipeline.validate typical-material --material-table {path}"}
    with open(path + ".tmp", "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(path + ".tmp", path)
    return doc["typical"]
