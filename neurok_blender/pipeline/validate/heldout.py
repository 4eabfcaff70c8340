"""Held-out rollouts against their simulator, the energy drift of the conservative integrator, and a sweep of
random settings counting divergences. No bpy use."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np
import torch

from ...errors import SimulationDiverged
from ...runtime.dynamics import integrators
from ..data.dataset import index_sequences, load_sequence
from .rollouts import Rollouts, current, only_families, pick, rest_error, rollout, simulation

SHEET_FRAMES = (0, 10, 20, 40, 59)  # the held-out rollout sheet's columns


def heldout(args: argparse.Namespace, setup: Rollouts) -> dict[str, Any]:
    refs = pick(only_families(current(index_sequences(args.data, args.rollout_split), args.keep_stale,
                                      args.keep_collapsed), args.families), args.per_family, args.seed)
    rows, curves, shown = [], {}, []
    for ref in refs:
        seq = load_sequence(ref)
        details: dict[str, Any] = {}
        err, excess = rollout(seq, ref.meta, args.ckpt, 60, details=details, setup=setup)
        rest = rest_error(seq, 60)  # also the simulator's own motion: its mean displacement from rest
        fam = ref.meta["family"]
        motion = details.get("motion", np.full(len(rest), np.inf))
        rows.append({"family": fam, "category": ref.meta.get("category", ""), "key": ref.key,
                     "neurok": float(err.mean()), "rest": float(rest.mean()), "excess_strain": excess,
                     "final_neurok": float(err[-1]), "final_rest": float(rest[-1]),
                     "motion_neurok": float(motion.mean()), "motion_simulator": float(rest.mean()),
                     "ms_per_frame": details.get("ms_per_frame", float("nan"))})
        curves.setdefault(fam, []).append((err.tolist(), rest.tolist()))
        if "frames" in details and fam not in {s["family"] for s in shown}:  # each family's first sequence
            shown.append({"family": fam, "error": float(err.mean() / max(rest.mean(), 1e-12)), "seq": seq,
                          "neurok": details["frames"]})
        print(f"{fam:<10} NeuROK {err.mean():.3f}  rest {rest.mean():.3f}  motion {motion.mean():.3f}",
              file=sys.stderr, flush=True)
    if shown:
        os.makedirs(args.out, exist_ok=True)
        rollout_sheet(os.path.join(args.out, "heldout_sheet.png"), shown)
    return {"rows": rows, "curves": curves}


def rollout_sheet(path: str, shown: list[dict[str, Any]]) -> str:
    """Simulator and NeuROK side by side: per family a row of each at ``SHEET_FRAMES``, one view and one box
    per family (so a shape that falls or folds is seen to), pinned vertices red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..data.preview import _draw

    cols = len(SHEET_FRAMES)
    fig = plt.figure(figsize=(2.4 * cols, 2.3 * 2 * len(shown)))
    for i, item in enumerate(shown):
        seq, ours = item["seq"], item["neurok"]
        frames = [f for f in SHEET_FRAMES if f < min(len(ours), len(seq["frames"]))]
        both = np.concatenate([seq["frames"][frames], ours[frames]]).reshape(-1, 3)
        lo, hi = both.min(0), both.max(0)
        tris = seq["triangles"].astype(np.int64)
        for row, (name, data) in enumerate((("simulator", seq["frames"]), ("NeuROK", ours))):
            for j, f in enumerate(frames):
                ax = fig.add_subplot(2 * len(shown), cols, (2 * i + row) * cols + j + 1, projection="3d")
                _draw(ax, data[f], tris, seq["pins"], lo, hi)
                ax.view_init(elev=12, azim=-70)
                title = f"frame {f}" if row == 0 else ""
                if j == 0:
                    label = f"{item['family']}: {name}" + (f" (error {item['error']:.2f}× rest)" if row else "")
                    title = f"{label}\n{title}" if title else label
                ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def drift(args: argparse.Namespace) -> dict[str, Any]:
    """Undamped, windless conservative run (pins, springs, gravity, prior) from a random latent velocity:
    the total energy's drift over 1,000 Verlet steps, relative to the kinetic energy that is exchanged."""
    refs = [r for r in index_sequences(args.data, "test") if r.meta["family"] == args.drift_family]
    ref = refs[0]
    seq = load_sequence(ref)
    sim = simulation(seq, args.ckpt, frame_count=2, fps=240.0, gravity=(0.0, 0.0, -9.81), seed=1,
                     solver={"variation": 1.0, "cubature": 96, "integrator": "verlet"},
                     material={"stiffness": 1.0, "bending": 0.1, "damping_mass": 0.0, "damping_stiffness": 0.0})
    system = sim.system
    state = integrators.initial_state(system, torch.zeros(sim.k), sim.initial_velocity())
    h = 1.0 / (240 * args.drift_substeps)  # the same system (the same rest modes kept) at a smaller step
    energies, kinetic, started, failed_at = [], [], time.time(), None
    with torch.no_grad():
        for step in range(args.steps + 1):
            if step % 10 == 0:
                J, _ = system.jacobian(state.q)
                t_kin = float(0.5 * (torch.einsum("nik,k->ni", J, state.qdot) ** 2 * system.masses[:, None]).sum())
                total = system.energy(state.q, state.qdot)
                if not np.isfinite(total):
                    failed_at = step
                    break
                energies.append((step, total))
                kinetic.append(t_kin)
            if step < args.steps:
                state = integrators.verlet_step(system, state, h, conservative=True)
    e = np.array([v for _, v in energies])
    exchanged = max(max(kinetic), 1e-12)
    return {"family": ref.meta["family"], "steps": args.steps, "dt": h, "energy": energies, "kinetic": kinetic,
            "coordinates": sim.k, "dropped_modes": sim.dropped_modes,
            "relative_drift": float((e[-1] - e[0]) / exchanged),
            "max_relative_deviation": float(np.abs(e - e[0]).max() / exchanged),
            "diverged_at": failed_at, "seconds": time.time() - started}


def sweep(args: argparse.Namespace, setup: Rollouts) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    refs = index_sequences(args.data, "test") + index_sequences(args.data, "val")
    runs = []
    for i in range(args.runs):
        ref = refs[int(rng.integers(len(refs)))]
        seq = load_sequence(ref)
        settings = {"gravity": tuple(float(v) for v in rng.normal(0, 8, 3)),
                    "wind": tuple(float(v) for v in rng.normal(0, 10, 3)),
                    "stiffness": float(10 ** rng.uniform(-1.5, 1.5)), "damping": float(10 ** rng.uniform(-1, 1)),
                    "fps": float(rng.choice([12, 24, 30, 60])), "seed": int(rng.integers(1 << 30)),
                    "ground": float(seq["rest"][:, 2].min() - 0.1 * np.ptp(seq["rest"][:, 2])) if rng.random() < 0.5 else None}
        started, status = time.time(), "ok"
        try:
            sim = simulation(seq, args.ckpt, setup, frame_count=args.frames, **settings)
            for _ in sim.states():
                pass
        except SimulationDiverged as exc:
            status = f"diverged: {exc}"
        runs.append({"family": ref.meta["family"], "settings": settings, "status": status,
                     "seconds": time.time() - started})
        print(f"[{i + 1}/{args.runs}] {ref.meta['family']:<10} {status} {time.time() - started:.0f}s", file=sys.stderr, flush=True)
    return {"frames": args.frames, "runs": runs, "diverged": sum(r["status"] != "ok" for r in runs)}
