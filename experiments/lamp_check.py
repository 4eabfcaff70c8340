"""Held-out lamps, simulator against NeuROK, side by side (docs/journal/validation.md, 2026-12-07 section).

    python experiments/lamp_check.py --data datasets/lamp12 --keys 1 5 6 --out docs/dynamics/lamp_joints_sheet.png

For each lamp (its index in the test split), three rows over six frames, seen from the side of the plane its arms
turn in (the simulator's hinge axis points at the viewer): the simulator, NeuROK with the material predicted from
the shape (what a click gets), and NeuROK given the simulator's joint springs and limits (``validate
--material recorded``: ``recorded_joints``). Each NeuROK row is titled with its error / rest baseline over the 60
frames; the same numbers are printed.

A one-off study, kept to rerun; its journal entry: docs/journal/validation.md, "2026-12-07 (tenth)".
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from neurok_blender.pipeline import validate  # noqa: E402
from neurok_blender.pipeline.validate import index_sequences, load_sequence, rebuilt_spec, rest_error, rollout  # noqa: E402

FRAMES = (0, 8, 16, 24, 36, 59)
CKPT = os.path.join(ROOT, "neurok_blender", "runtime", "weights", "neurok-s")


def side_view(points: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """(V, 2): the horizontal direction in the plane the arms turn in, and height."""
    across = np.cross(axis, [0.0, 0.0, 1.0])
    across /= max(np.linalg.norm(across), 1e-12)
    return np.stack([points @ across, points[:, 2]], axis=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="datasets/lamp12")
    parser.add_argument("--keys", type=int, nargs="+", default=[1, 5, 6])
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    refs = [r for r in index_sequences(args.data, "test") if r.meta["family"] == "lamp"]
    chosen = [refs[k] for k in args.keys if k < len(refs)]
    if not chosen:
        raise SystemExit(f"--keys: no lamps with these indices among the {len(refs)} of {args.data}")
    rows = []
    for key, ref in zip(args.keys, chosen):
        seq = load_sequence(ref)
        spec = rebuilt_spec(seq, ref.meta, "the hinge axis")
        axis = np.array([0.0, 1.0, 0.0]) if spec is None else np.asarray(spec.joints[0].axis, float)
        rest = float(rest_error(seq, 60).mean())
        found = [("simulator", seq["frames"][:60], None)]
        for material in ("shape", "recorded"):
            details: dict = {}
            err, _ = rollout(seq, ref.meta, CKPT, 60, details=details, setup=validate.Rollouts(material=material))
            found.append((f"NeuROK, {'shape' if material == 'shape' else 'recorded joints'}", details["frames"],
                          float(err.mean()) / rest))
        print(f"lamp {key} (seed {ref.meta['seed']}): error / rest baseline {found[1][2]:.2f} with the shape's "
              f"material, {found[2][2]:.2f} with its recorded joints", flush=True)
        rows += [(key, name, side_view(frames.reshape(-1, 3), axis).reshape(len(frames), -1, 2), ratio)
                 for name, frames, ratio in found]
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(len(rows), len(FRAMES), figsize=(1.9 * len(FRAMES), 1.9 * len(rows)), squeeze=False)
        for i, (key, name, frames, ratio) in enumerate(rows):
            same = np.concatenate([r[2].reshape(-1, 2) for r in rows if r[0] == key])  # one scale per lamp
            lo, hi = same.min(0), same.max(0)
            for j, f in enumerate(FRAMES):
                ax = axes[i, j]
                ax.scatter(frames[f, :, 0], frames[f, :, 1], s=0.2, c="k" if name == "simulator" else "tab:blue")
                ax.set_xlim(lo[0] - 0.05, hi[0] + 0.05)
                ax.set_ylim(lo[1] - 0.05, hi[1] + 0.05)
                ax.set_aspect("equal")
                ax.set_xticks([])
                ax.set_yticks([])
                if j == 0:
                    ax.set_ylabel(f"lamp {key}\n{name}" + ("" if ratio is None else f"\n{ratio:.2f} × rest"),
                                  fontsize=7)
                if i == 0:
                    ax.set_title(f"frame {f}", fontsize=8)
        fig.tight_layout()
        fig.savefig(args.out, dpi=80)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
