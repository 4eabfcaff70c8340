"""Where a frame of the reduced motion's time goes (the path of closed solids and assemblies, and of open surfaces with
Detail off): the bench's pinned sheet with the cloth layer off, each part of a frame timed by wrapping the functions
that do the work. Writes the marked profile section of docs/results.md.

    python scripts/profile_frame.py --sizes 1000 10000 --frames 48 --out docs/results.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import bench  # noqa: E402
import torch  # noqa: E402

from neurok_blender.runtime import api  # noqa: E402
from neurok_blender.runtime.dynamics import system  # noqa: E402

START, END = "<!-- profile:start -->", "<!-- profile:end -->"
GPU_START, GPU_END = "<!-- profile-gpu:start -->", "<!-- profile-gpu:end -->"
PARTS = {  # (owner, attribute) → the row's name; inner calls are subtracted from the outer ones
    (system.LatentSystem, "_latent_jacobian"): "decoder Jacobian (17 batched decodes, 1 step in 16, more on a model miss)",
    (system.LatentSystem, "positions"): "exact decodes at the cubature points (one a step, two on a rejection)",
    (system.LatentSystem, "nonlinear_residual_jacobian"): "residual Jacobians (springs, pins, ground)",
    (system.LatentSystem, "linear_residual_jacobian"): "residual Jacobians (springs, pins, ground)",
    (system.LatentSystem, "q_residual_jacobian"): "handle-strain Jacobian",
    (system.LatentSystem, "external_force"): "wind (normals)",
}


def profile(size: int, frames: int, solver: dict, device: str = "cpu") -> dict:
    totals: dict[str, float] = defaultdict(float)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)  # CUDA runs ahead of the clock otherwise
    depth = [0]
    originals = {}
    for (owner, name), label in PARTS.items():
        fn = getattr(owner, name)
        originals[(owner, name)] = fn

        def timed(*a, _fn=fn, _label=label, **kw):
            depth[0] += 1
            sync()
            started = time.perf_counter()
            try:
                return _fn(*a, **kw)
            finally:
                depth[0] -= 1
                if depth[0] == 0:  # outermost only, so nothing counts twice
                    sync()
                    totals[_label] += time.perf_counter() - started
        setattr(owner, name, timed)
    try:
        v, tris, pins = bench.sheet(size)
        started = time.perf_counter()
        sim = api.prepare(v, tris, pins=pins, device=device, frame_count=frames, fps=24.0, wind=(0.0, 3.0, 0.0),
                          solver={"variation": 0.0, "detail": False}, research=solver)
        setup = time.perf_counter() - started
        totals.clear()
        started = time.perf_counter()
        for _ in sim.frames():
            pass
        sync()
        loop = time.perf_counter() - started
    finally:
        for (owner, name), fn in originals.items():
            setattr(owner, name, fn)
    steps = frames - 1
    rows = {label: 1000 * t / steps for label, t in totals.items()}
    rows["decode of the full mesh"] = 1000 * sim.timing["decode_s"] / steps
    rows["the rest (model solves: residuals, Jacobians' products, solves, bookkeeping)"] = 1000 * loop / steps - sum(rows.values())
    return {"vertices": len(v), "frames": frames, "setup_s": setup, "frame_ms": 1000 * loop / steps, "parts": rows,
            "solver": solver, "device": device}


def write(path: str, results: list[dict], argv: list[str]) -> None:
    cuda = results[0]["device"] == "cuda"
    start, end = (GPU_START, GPU_END) if cuda else (START, END)
    where = (f"on CUDA ({torch.cuda.get_device_name(0)}, torch {torch.__version__}; every timed part ends in a "
             "device synchronize)" if cuda else f"{torch.get_num_threads()} torch thread(s) on {os.cpu_count()} cores")
    labels = list(results[0]["parts"])
    head = " | ".join(f"{r['vertices']:,} v, {json.dumps(r['solver']) if r['solver'] else 'default'}" for r in results)
    lines = [start, "## Where a frame's time goes" + (" on CUDA" if cuda else "") + "", "",
             f"`python scripts/profile_frame.py {' '.join(argv)}`: the reduced motion (the path of closed solids and "
             "assemblies, and of open surfaces with Detail off; the cloth layer's cost is in the cloth sections) on the "
             f"bench's pinned sheet with a 3 m/s side wind, {results[0]['frames']} frames at 24 fps, ms per frame "
             f"averaged over frames 2…N, {where}.",
             "", f"| part | {head} |", "| --- |" + " --- |" * len(results)]
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(f"{r['parts'].get(label, 0.0):.1f}" for r in results) + " |")
    lines.append("| **frame** | " + " | ".join(f"**{r['frame_ms']:.1f}**" for r in results) + " |")
    lines.append("| set-up (s) | " + " | ".join(f"{r['setup_s']:.1f}" for r in results) + " |")
    lines += ["", end]
    bench.replace_section(path, start, end, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 10000])
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--solvers", nargs="+", default=["{}", '{"latent": "exact"}'],
                        help="research switches to compare, as JSON (default: the product's, and the exact-decode "
                             "step)")
    parser.add_argument("--out", help="docs/results.md to update (default: print only)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="cuda writes its own section (profile-gpu) of docs/results.md")
    args = parser.parse_args(argv)
    results = []
    for size in args.sizes:
        for solver in args.solvers:
            results.append(profile(size, args.frames, json.loads(solver), args.device))
            print(json.dumps(results[-1], indent=None), flush=True)
    if args.out:
        write(args.out, results, argv if argv is not None else sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
