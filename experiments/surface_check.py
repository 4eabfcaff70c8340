"""How smooth the baked surface is: the mean change of the angle between neighbouring faces (``eval.
face_angle_change``) and the mean motion, on a flag in a strong wind, the demo's jelly and, with ``--large``, a
130k-vertex flag, under three rules for how a mesh vertex follows the cubature points: the equal mean of its 4
nearest, handle weights unsmoothed (the rule before 2026-12-06); the same with the handle weights smoothed along the
mesh; and today's, 16 nearest weighted smoothly by distance, then smoothed. Prints a table and draws the rules
above one another.

    python experiments/surface_check.py --out docs/dynamics/surface_sheet.png [--large]

A one-off study, kept to rerun; its journal entry: docs/journal/validation.md, "2026-12-06 (eighth)".
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from neurok_blender.pipeline.data import shapes  # noqa: E402
from neurok_blender.pipeline.eval import face_angle_change  # noqa: E402
from neurok_blender.runtime import api  # noqa: E402
from neurok_blender.runtime.dynamics import simulation  # noqa: E402
from neurok_blender.runtime.model import knn  # noqa: E402


def flag(nx: int):
    v, tris = shapes.sheet(1.6, 1.0, nx, int(nx * 0.65), ())
    v[:, 2] += 1.5
    return v, tris, {"pins": (v[:, 0] < 1e-6).astype(float), "frame_count": 30, "wind": (0.0, 6.0, 0.0)}


def jelly():
    """The demo's jelly: a 1 m cube (8 vertices an edge) on the ground, its base held, pushed at 2.5 m/s."""
    v, tris = shapes.box_surface((1.0, 1.0, 1.0), (8, 8, 8))
    v = v + [0.0, 0.0, 0.5]
    return v, tris, {"pins": (v[:, 2] < 0.01).astype(float), "frame_count": 30, "initial_velocity": (2.5, 0.0, 0.0),
                     "ground": 0.0}


def equal_four(vertices, queries, k):
    """The rule before 2026-12-06: the 4 nearest points, equally."""
    index = knn.nearest(vertices, queries, 4)
    return index, vertices.new_full(index.shape, 0.25)


RULES = {"4 nearest, equal; unsmoothed": (equal_four, 0.0),
         "4 nearest, equal; smoothed": (equal_four, simulation.WEIGHT_SMOOTHING),
         f"{simulation.DRIVE_NEIGHBOURS} nearest, by distance; smoothed": (knn.smooth_neighbours,
                                                                          simulation.WEIGHT_SMOOTHING)}


def run(case, rule: str):
    v, tris, settings = case
    neighbours, strength = RULES[rule]
    saved = simulation.WEIGHT_SMOOTHING, knn.smooth_neighbours
    simulation.WEIGHT_SMOOTHING, knn.smooth_neighbours = strength, neighbours
    try:
        sim = api.prepare(v, tris, solver={"variation": 0.0}, **settings)
        frames = sim.run()
    finally:
        simulation.WEIGHT_SMOOTHING, knn.smooth_neighbours = saved
    motion = float(np.mean([np.linalg.norm(f - v, axis=1).mean() for f in frames]))
    return frames, face_angle_change(v, frames, tris), motion, sim.timing["setup_s"]


def draw(path: str, rows: list[tuple[str, np.ndarray, np.ndarray, tuple[int, ...]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    cols = max(len(r[3]) for r in rows)
    fig = plt.figure(figsize=(2.6 * cols, 2.6 * len(rows)))
    light = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    for r, (title, frames, tris, shown) in enumerate(rows):
        for c, i in enumerate(shown):
            ax = fig.add_subplot(len(rows), cols, r * cols + c + 1, projection="3d")
            x = frames[i]
            lo, hi = x.min(0), x.max(0)  # each frame fills its panel: the surface's detail is what is compared
            half, mid = (hi - lo).max() / 2, (hi + lo) / 2
            ax.view_init(elev=25, azim=-35)
            n = np.cross(x[tris[:, 1]] - x[tris[:, 0]], x[tris[:, 2]] - x[tris[:, 0]])
            n /= np.linalg.norm(n, axis=1, keepdims=True).clip(1e-12)
            shade = 0.35 + 0.65 * np.abs(n @ light)
            ax.add_collection3d(Poly3DCollection(x[tris], facecolors=np.c_[0.85 * shade, 0.5 * shade, 0.25 * shade],
                                                 linewidth=0))
            ax.set_xlim(mid[0] - half, mid[0] + half)
            ax.set_ylim(mid[1] - half, mid[1] + half)
            ax.set_zlim(mid[2] - half, mid[2] + half)
            ax.set_axis_off()
            ax.set_title(f"{title}\nframe {i + 1}" if c == 0 else f"frame {i + 1}", fontsize=8)
    plt.tight_layout()
    plt.savefig(path, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out/surface_sheet.png")
    parser.add_argument("--large", action="store_true", help="also a 130k-vertex flag (a minute more)")
    args = parser.parse_args(argv)
    cases = {"flag (1,040 vertices)": (flag(40), (3, 5, 8, 11)), "jelly (296 vertices)": (jelly(), (5, 9, 12, 23))}
    if args.large:
        cases["flag (129,630 vertices)"] = (flag(447), ())
    print("| mesh | how a vertex follows the points | face-angle change (deg) | mean motion (m) | set-up s |\n| --- | --- | --- | --- | --- |")
    rows = []
    for name, (case, shown) in cases.items():
        for rule in RULES:
            frames, angle, motion, setup = run(case, rule)
            print(f"| {name} | {rule} | {angle:.2f} | {motion:.3f} | {setup:.1f} |", flush=True)
            if shown:
                rows.append((f"{name.split(' (')[0]}: {rule}", frames, case[1], shown))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    draw(args.out, rows)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
