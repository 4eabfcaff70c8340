"""Undamped, windless explicit Verlet on the bench's pinned sheet (400 vertices) from a random latent velocity:
the total-energy drift over 300 steps of 1/240 s, relative to the largest kinetic energy, per handle count.

    python experiments/verlet_drift.py 4 0     # handles=4 (the default), then the pure-latent ablation

A one-off study, kept to rerun; its journal entry: docs/journal/validation.md, "2026-12-06: the Coriolis term was wrong".
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import bench  # noqa: E402

from neurok_blender.runtime import api  # noqa: E402
from neurok_blender.runtime.dynamics import integrators  # noqa: E402

STEPS, H = 300, 1 / 240


def drift(handles: int) -> str:
    v, tris, pins = bench.sheet(400)
    sim = api.prepare(v, tris, pins=pins, device="cpu", frame_count=2, fps=240.0, seed=1,
                      solver={"variation": 1.0, "cubature": 96, "integrator": "verlet", "handles": max(handles, 1)},
                      research={"handles": handles > 0},
                      material={"damping_mass": 0.0, "damping_stiffness": 0.0})
    system = sim.system
    state = integrators.initial_state(system, torch.zeros(sim.k), sim.initial_velocity())
    energies, kinetic, started = [], [], time.time()
    with torch.no_grad():
        for step in range(STEPS + 1):
            if step % 10 == 0:
                J, _ = system.jacobian(state.q)
                xdot = torch.einsum("nik,k->ni", J, state.qdot)
                kinetic.append(float(0.5 * (xdot**2 * system.masses[:, None]).sum()))
                energies.append(system.energy(state.q, state.qdot))
                if not np.isfinite(energies[-1]):
                    break
            state = integrators.verlet_step(system, state, H, conservative=True)
    e, top = np.array(energies), max(kinetic)
    return (f"handles={handles}: {10 * (len(e) - 1)} steps, drift {(e[-1] - e[0]) / top:.3g}, largest deviation "
            f"{np.abs(e - e[0]).max() / top:.3g} × the largest kinetic energy ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["4"]:
        print(drift(int(arg)), flush=True)
