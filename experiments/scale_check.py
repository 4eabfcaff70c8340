"""Set-up and per-frame cost of one large mesh: the bench's pinned sheet at N vertices through api.prepare,
then a few frames (no Blender run). For the 1.2M-vertex row of docs/results.md:

    python experiments/scale_check.py 1200000

A one-off study, kept to rerun; its journal entry: docs/journal/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import bench  # noqa: E402

from neurok_blender.runtime import api  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("vertices", type=int)
    parser.add_argument("--frames", type=int, default=6)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    v, tris, pins = bench.sheet(args.vertices)
    started = time.perf_counter()
    sim = api.prepare(v, tris, pins=pins, device=args.device, frame_count=args.frames, fps=24.0, solver={"variation": 0.0})
    setup = time.perf_counter() - started
    started = time.perf_counter()
    sim.run()
    steps = args.frames - 1
    ms = lambda s: 1000 * s / steps  # noqa: E731
    print(f"{len(v):,} vertices: set-up {setup:.1f} s, {ms(time.perf_counter() - started):.0f} ms/frame (dynamics "
          f"{ms(sim.timing['dynamics_s']):.0f}, decode {ms(sim.timing['decode_s']):.0f}), peak RSS {bench.peak_rss_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
