"""Training and judging the learned kinematics reading (runtime/dynamics/kinematics.py) against the rules
(runtime/dynamics/joints.py). No bpy use; numpy only (no simulation: the labels are the seeded specs' own joints).

    python -m neurok_blender.pipeline.kinematics train --out neurok_blender/runtime/weights/neurok-s/kinematics.json
    python -m neurok_blender.pipeline.kinematics compare --families drawer door laptop slider

``train`` reads the training split's articulated families (door, laptop, slider: the recorded joints of specs
drawn from their generator, seeds 0 … N−1) and fits the type, axis and range models; ``compare`` scores the rules
and the reading joint by joint on fresh seeds (COMPARE_SEED onward): whether the type is right (a simulator joint
that turns less than MIN_RECORDED_TURN either way counts as a weld), the axis's angle from the recorded one, and
the range's error. The rollouts that decide the product's default are the validation tool's (validate heldout
with ``--research '{"joints": "rules"}'`` or ``"learned"``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from ..runtime.dynamics import cubature as cubature_mod
from ..runtime.dynamics import joints as joints_mod
from ..runtime.dynamics.kinematics import TYPES, KinematicsReader, axis_candidates, joint_features
from .data.families import FAMILIES, make_spec
from .validate.rollouts import MIN_RECORDED_TURN

TRAIN_FAMILIES = ("door", "laptop", "slider")  # the articulated families of the training split
CUBATURE = 160  # Solver.cubature: the reading sees the pieces as the simulation does
COMPARE_SEED = 1_000_000  # the comparison's seeds start here, far from any training seed


def labelled_joints(family: str, seed: int) -> list[dict]:
    """Each joint the rules find on the spec's rest shape, with the simulator joint it stands for: its type (a
    weld for one that hardly turns), unit axis, range from the rest pose; the pieces as the simulation sees them."""
    spec = make_spec(family, seed)
    c = cubature_mod.from_mesh(spec.vertices, spec.triangles, spec.pin_weights, CUBATURE, np.random.default_rng(0))
    found = joints_mod.assembly(c.points, c.masses, c.pins, c.labels)
    if found is None:
        return []
    own = lambda piece: int(np.bincount(spec.parts[c.vertex_labels == piece]).argmax())  # noqa: E731
    out = []
    for joint in found.joints:
        parent, child = own(joint.parent), own(joint.child)
        match = [j for j in spec.joints if {j.parent, j.child} == {parent, child}]
        if not match:
            continue
        j = match[0]
        start = float(np.clip(j.qpos0, *j.range))
        lower, upper = j.range[0] - start, j.range[1] - start
        if j.child != child:
            lower, upper = -upper, -lower
        kind = "weld" if j.kind == "hinge" and min(-j.range[0], j.range[1]) < MIN_RECORDED_TURN else j.kind
        out.append({"family": family, "seed": seed, "joint": joint, "points": c.points, "labels": c.labels,
                    "masses": c.masses, "kind": kind, "axis": np.asarray(j.axis, float),
                    "range": (min(lower, 0.0), max(upper, 0.0))})
    return out


def _logistic(x: np.ndarray, y: np.ndarray, classes: int, l2: float = 1e-2, steps: int = 3000,
              rate: float = 0.5) -> np.ndarray:
    """Multinomial logistic regression by gradient descent: weights (F, classes)."""
    w = np.zeros((x.shape[1], classes))
    target = np.eye(classes)[y]
    for _ in range(steps):
        z = x @ w
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        w -= rate * (x.T @ (p - target) / len(x) + l2 * w)
    return w


def _axis_scorer(groups: list[tuple[np.ndarray, int]], mean: np.ndarray, scale: np.ndarray, l2: float = 1e-2,
                 steps: int = 3000, rate: float = 0.5) -> np.ndarray:
    """A linear scorer over candidate features, softmax over each joint's candidates, fit to the right one
    (joints padded to the most candidates, the padding masked out)."""
    width = max(len(feats) for feats, _ in groups)
    x = np.zeros((len(groups), width, len(mean)))
    mask = np.full((len(groups), width), -np.inf)
    target = np.zeros((len(groups), width))
    for i, (feats, right) in enumerate(groups):
        x[i, : len(feats)] = (feats - mean) / scale
        mask[i, : len(feats)] = 0.0
        target[i, right] = 1.0
    w = np.zeros(len(mean))
    for _ in range(steps):
        z = x @ w + mask
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        w -= rate * (np.einsum("gc,gcf->f", p - target, x) / len(groups) + l2 * w)
    return w


def train(samples: list[dict]) -> KinematicsReader:
    feats = np.array([joint_features(s["joint"], s["points"], s["labels"], s["masses"]) for s in samples])
    mean, scale = feats.mean(0), feats.std(0)
    mean[-1], scale[-1] = 0.0, 1.0  # the bias column stays 1
    scale[scale < 1e-9] = 1.0
    x = (feats - mean) / scale
    y = np.array([TYPES.index(s["kind"]) for s in samples])
    type_weights = _logistic(x, y, len(TYPES))
    groups: dict[str, list] = {}
    all_candidates = []
    ranges: dict[str, tuple[list, list]] = {}
    for s, row in zip(samples, x):
        if s["kind"] == "weld":
            continue
        directions, cands = axis_candidates(s["joint"], s["points"], s["labels"])
        match = np.abs(directions @ s["axis"])
        if match.max() > 0.95:  # a candidate within 18° of the recorded axis: the right one to learn
            groups.setdefault(s["kind"], []).append((cands, int(np.argmax(match))))
            all_candidates.append(cands)
        target = np.array(s["range"])
        if s["kind"] == "slide":
            target = target / max(float(np.ptp(s["points"][s["labels"] == s["joint"].parent] @ s["axis"])), 1e-9)
        ranges.setdefault(s["kind"], ([], []))[0].append(row)
        ranges[s["kind"]][1].append(target)
    stacked = np.concatenate(all_candidates)
    a_mean, a_scale = stacked.mean(0), stacked.std(0)
    a_scale[a_scale < 1e-9] = 1.0
    axis_weights = {k: _axis_scorer(g, a_mean, a_scale) for k, g in groups.items()}
    range_weights = {}
    for kind, (rows, targets) in ranges.items():
        a, b = np.array(rows), np.array(targets)
        range_weights[kind] = np.linalg.solve(a.T @ a + 1e-1 * np.eye(a.shape[1]), a.T @ b)  # ridge
    for kind in ("hinge", "slide"):  # a type never seen keeps no axis preference and a zero range
        axis_weights.setdefault(kind, np.zeros(len(a_mean)))
        range_weights.setdefault(kind, np.zeros((len(mean), 2)))
    return KinematicsReader(mean, scale, type_weights, a_mean, a_scale, axis_weights, range_weights)


def _angle(a: np.ndarray | None, b: np.ndarray) -> float:
    if a is None:
        return 90.0
    return float(np.degrees(np.arccos(np.clip(abs(float(a @ b)), 0.0, 1.0))))


def compare(samples: list[dict], reader: KinematicsReader) -> dict[str, dict]:
    """Per family: type accuracy, mean axis angle (degrees, joints whose recorded type moves) and mean range
    error (rad for hinges, m for slides) of the rules and of the reading."""
    out: dict[str, dict] = {}
    for fam in sorted({s["family"] for s in samples}):
        rows = [s for s in samples if s["family"] == fam]
        stats = {"joints": len(rows)}
        for name in ("rules", "learned"):
            right, angles, spans = 0, [], []
            for s in rows:
                joint = s["joint"]
                if name == "rules":
                    kind = "weld" if joint.kind in ("weld", "ball") and s["kind"] == "weld" else joint.kind
                    kind = {"ball": "hinge"}.get(kind, kind) if kind != "weld" else "weld"
                    axis, limits = (None if joint.weld else joint.axis), None
                else:
                    override = reader.read(joints_mod.Assembly(s["labels"], 0, [joint], {}), s["points"],
                                           s["masses"])[0]
                    kind = override.type
                    axis = None if override.axis is None else np.asarray(override.axis)
                    limits = override.range
                right += kind == s["kind"]
                if s["kind"] != "weld":
                    angles.append(_angle(axis, s["axis"]))
                    if limits is not None:
                        spans.append(0.5 * (abs(limits[0] - s["range"][0]) + abs(limits[1] - s["range"][1])))
            stats[name] = {"type_accuracy": right / max(len(rows), 1),
                           "axis_degrees": float(np.mean(angles)) if angles else float("nan"),
                           "range_error": float(np.mean(spans)) if spans else float("nan")}
        out[fam] = stats
    return out


def _samples(families: list[str], first: int, count: int) -> list[dict]:
    out = []
    for fam in families:
        for seed in range(first, first + count):
            out += labelled_joints(fam, seed)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neurok_blender.pipeline.kinematics")
    parser.add_argument("what", choices=("train", "compare"))
    parser.add_argument("--families", nargs="+", default=list(TRAIN_FAMILIES))
    parser.add_argument("--sequences", type=int, default=200, help="seeds per family")
    parser.add_argument("--out", default="neurok_blender/runtime/weights/neurok-s/kinematics.json")
    parser.add_argument("--json", help="compare: also write the table here")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}")
    if args.what == "train":
        held = [f for f in args.families if FAMILIES[f].split != "train"]
        if held:
            parser.error(f"{held} are not training families (their split is {FAMILIES[held[0]].split})")
        samples = _samples(args.families, 0, args.sequences)
        reader = train(samples)
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(dict(reader.to_dict(), trained_on={"families": args.families, "seeds": args.sequences,
                                                         "joints": len(samples)}), fh, indent=1)
        print(f"trained on {len(samples)} joints of {', '.join(args.families)}; wrote {args.out}", file=sys.stderr)
        return 0
    reader = KinematicsReader.load(os.path.dirname(args.out))
    if reader is None:
        parser.error(f"no trained reading at {args.out}; run train first")
    table = compare(_samples(args.families, COMPARE_SEED, args.sequences), reader)
    for fam, stats in table.items():
        print(f"{fam:<8} {stats['joints']:>4} joints  " + "  ".join(
            f"{name}: type {stats[name]['type_accuracy']:.2f}, axis {stats[name]['axis_degrees']:.1f}°, "
            f"range {stats[name]['range_error']:.3f}" for name in ("rules", "learned")))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(table, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
