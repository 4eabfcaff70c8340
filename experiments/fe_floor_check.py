"""Would a floor on the FE solids' bending number keep them sound? (docs/dataset/DATASET_CARD.md, 2026-12-07)

    python experiments/fe_floor_check.py --families blob jelly plate beam --sequences 15 --floors 1 3

MuJoCo's 3-D flex elasticity is Saint Venant–Kirchhoff, which softens under compression and lets an element turn
inside out; about half the FE grid simulator's closed solids collapse that way (``curate`` rejects them as
``collapsed``). Across the draws on this machine the collapsed ones are those too soft to carry their own weight
in bending: the number B = E / (ρ g ℓ) · (t / ℓ)² (Young's modulus, density, the diagonal ℓ, the thinnest extent
t) is small. For each family this draws the generator's own seeded specs (seeds 5000 on), simulates each as drawn
and again with its Young's modulus raised so that B is at least each floor (nothing else changed), and reports per
floor how many collapse (``curate.volume_change`` over ``MAX_VOLUME_CHANGE``), how many runs MuJoCo warned about
(an ill-conditioned or near-singular solve) and the median peak motion of the sound ones (largest mean
displacement from the first frame / ℓ): whether the floor keeps the data sound *and* moving. A check, not the
generator: the ``sound`` recipe of ``pipeline.data generate`` applies the floor to the blobs and jellies only
(``generate.FLOOR_FAMILIES``).

A one-off study, kept to rerun; its journal entry: docs/journal/dataset-card-history.md, "Why they collapse, and what a floor on the material would do".
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from neurok_blender.pipeline.data.curate import MAX_VOLUME_CHANGE, volume_change  # noqa: E402
from neurok_blender.pipeline.data.families import bending_number, make_spec, with_bending_floor  # noqa: E402
from neurok_blender.pipeline.data.mujoco_backend import simulate_grid  # noqa: E402


def simulated(spec) -> tuple[np.ndarray, bool]:
    """The frames, and whether MuJoCo printed a warning (it writes them to the process's stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            frames = simulate_grid(spec)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        return frames, b"WARNING" in log.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", default=["blob", "jelly", "plate", "beam"])
    parser.add_argument("--sequences", type=int, default=15)
    parser.add_argument("--floors", type=float, nargs="+", default=[1.0, 3.0])
    args = parser.parse_args()
    floors = [0.0] + sorted(args.floors)
    print("| family | floor on B | raised | collapsed | MuJoCo warned | median peak motion of the sound ones |")
    print("| --- | --- | --- | --- | --- | --- |")
    for family in args.families:
        results = {floor: [] for floor in floors}  # (collapsed, warned, motion, raised)
        for seed in range(5000, 5000 + args.sequences):
            spec = make_spec(family, seed)
            if spec.backend != "mujoco_grid":
                raise SystemExit(f"--families: {family} is not an FE grid family ({spec.backend})")
            number, diagonal = bending_number(spec), float(np.linalg.norm(np.ptp(spec.vertices, axis=0)))
            for floor in floors:
                raised = number < floor
                frames, warned = simulated(with_bending_floor(spec, floor))
                change = volume_change(frames, spec.triangles)
                motion = float(np.linalg.norm(frames - frames[0], axis=-1).mean(1).max() / diagonal)
                results[floor].append((change is not None and change > MAX_VOLUME_CHANGE, warned, motion, raised))
        for floor in floors:
            rows = results[floor]
            sound = [m for c, _, m, _ in rows if not c]
            print(f"| {family} | {'as drawn' if floor == 0 else f'{floor:g}'} | {sum(r[3] for r in rows)} "
                  f"| {sum(r[0] for r in rows)}/{len(rows)} | {sum(r[1] for r in rows)} "
                  f"| {np.median(sound) if sound else float('nan'):.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
