"""The validation report: plots, and the generated section of the results page. No bpy use."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ...runtime.dynamics.simulation import VERLET_MODE_LIMIT
from .heldout import SHEET_FRAMES


def plots(out: str, results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "heldout" in results:
        curves = results["heldout"]["curves"]
        fig, axes = plt.subplots(1, len(curves), figsize=(4 * len(curves), 3.2), squeeze=False)
        for ax, (fam, runs) in zip(axes[0], sorted(curves.items())):
            for i, (err, rest) in enumerate(runs):
                ax.plot(err, color="C0", alpha=0.8, label="NeuROK" if i == 0 else None)
                ax.plot(rest, color="C7", ls="--", alpha=0.8, label="rest shape" if i == 0 else None)
            ax.set_title(fam)
            ax.set_xlabel("frame")
        axes[0][0].set_ylabel("vertex error / bbox diagonal")
        axes[0][0].legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "heldout_error.png"), dpi=110)
        plt.close(fig)
    if "drift" in results:
        steps, e = zip(*results["drift"]["energy"])
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.plot(steps, np.array(e) - e[0], label="total T + V (minus its start)")
        ax.plot(steps, results["drift"]["kinetic"][: len(steps)], label="kinetic T", alpha=0.7)
        ax.set_xlabel("step (dt = 1/240 s)")
        ax.set_ylabel("energy")
        ax.legend(fontsize=8)
        ax.set_title(f"undamped Verlet, {results['drift']['family']}: drift {results['drift']['relative_drift']:+.2%}")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "energy_drift.png"), dpi=110)
        plt.close(fig)


def write_table(path: str, results: dict[str, Any], commands: dict[str, str], figures: str | None = None) -> None:
    """Rewrite the generated section of the page at ``path``; its pictures are in ``figures`` (default: beside it)."""
    made = "; ".join(f"{part}: `{cmd}`" for part, cmd in commands.items()) or "(unknown)"
    where = os.path.relpath(figures, os.path.dirname(path) or ".") if figures else "."
    fig = lambda name: name if where == "." else f"{where}/{name}"  # noqa: E731
    lines = ["# Latent dynamics: validation against the generating simulators", "",
             f"Made on a 2-core CPU by — {made}. Plots (copied from `eval/`): [`heldout_error.png`]"
             f"({fig('heldout_error.png')}), [`energy_drift.png`]({fig('energy_drift.png')}); raw numbers: "
             f"[`validation.json`]({fig('validation.json')}).", ""]
    if "heldout" in results:
        rows = results["heldout"]["rows"]
        solver = results["heldout"].get("solver") or {}
        research = results["heldout"].get("research") or {}
        split = results["heldout"].get("split", "test")
        lines += [f"## {'Held-out families' if split == 'test' else 'Families'} ({split} split), 60 frames under each "
                  "sequence's recorded gravity, wind and fps",
                  "", "Mean per-frame vertex error over the bounding-box diagonal (lower is better); the rest-shape "
                  "baseline is also the simulator's own motion (its mean displacement from rest), shown beside "
                  "NeuROK's so a small error cannot hide a shape that never moved. Solver: "
                  f"{json.dumps(solver) if solver else 'the defaults'}"
                  + (f"; research switches {json.dumps(research)}" if research else "") + ". Material: "
                  + ("the FE solids' recorded Young's modulus and density through the checkpoint's calibrated law, "
                     "the assemblies' recorded joints (type, axis, range), springs, damping and air "
                     "(`--material recorded`), the others predicted from the shape"
                     if results["heldout"].get("material") == "recorded" else "predicted from the shape")
                  + ("; open surfaces: " + ("Blender Cloth's default (cotton)" if results["heldout"].get("cloth") == "auto"
                                            else f"cloth preset `{results['heldout']['cloth']}`")
                     if results["heldout"].get("cloth", "shape") != "shape" else "") + ". Pins: "
                  + ("for the FE solids what their simulator held (whole grid cells; `--pins held`)"
                     if results["heldout"].get("pins") == "held" else "as stored") + ".", "",
                  "The error / baseline column is the mean error over the mean baseline, so a sequence that moves far "
                  "(a solid falling free) weighs most; the next column is the median of each sequence's own ratio.", "",
                  "| family | category | sequences | NeuROK error | rest baseline | error / baseline | median sequence "
                  "| NeuROK motion | simulator motion | NeuROK, last frame | rest, last frame | ms / frame |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        fams = sorted({r["family"] for r in rows})
        cats = sorted({r.get("category", "") for r in rows} - {""})
        groups = [(fam, [r for r in rows if r["family"] == fam], None) for fam in fams]
        groups += [(f"*{cat}*", [r for r in rows if r.get("category") == cat], cat) for cat in cats
                   if len({r["family"] for r in rows if r.get("category") == cat}) > 1]  # the per category
        groups.append(("all", rows, ""))
        for fam, sel, category in groups:
            m = lambda key, sel=sel: np.mean([r.get(key, np.nan) for r in sel])  # noqa: E731
            category = sel[0].get("category", "") if category is None else category
            ratio = np.median([r["neurok"] / max(r["rest"], 1e-12) for r in sel])
            lines.append(f"| {fam} | {category} | {len(sel)} | {m('neurok'):.3f} | {m('rest'):.3f} | "
                         f"{m('neurok') / m('rest'):.2f} | {ratio:.2f} | {m('motion_neurok'):.3f} | {m('motion_simulator'):.3f} | "
                         f"{m('final_neurok'):.3f} | {m('final_rest'):.3f} | {m('ms_per_frame'):.0f} |")
        lines += ["", f"Each family's first sequence, simulator above NeuROK, frames {', '.join(map(str, SHEET_FRAMES))}:",
                  "", f"![held-out rollouts, simulator vs NeuROK]({fig('heldout_sheet.png')})", ""]
    if "drift" in results:
        d = results["drift"]
        lines += ["## Energy drift", "",
                  f"Undamped, windless, conservative Verlet on a held-out {d['family']} (forward-mode Jacobians and Coriolis term; "
                  "pins, springs, gravity and the prior term on; stiffness 1, bending 0.1; mass-orthonormal coordinates "
                  f"with the {d.get('dropped_modes', 0)} rest modes faster than {VERLET_MODE_LIMIT * 240:g} rad/s "
                  f"({VERLET_MODE_LIMIT} per 1/240 s step) dropped, {d.get('coordinates', '?')} "
                  "kept), "
                  f"{d['steps']} steps of {d['dt']:.5f} s from a random prior velocity: total-energy change "
                  f"{d['relative_drift']:+.3g} × the largest kinetic energy in the run, largest deviation "
                  f"{d['max_relative_deviation']:.3g} × ({d['seconds']:.0f} s)"
                  + (f"; **it diverged at step {d['diverged_at']}**." if d.get("diverged_at") is not None else ".")]
        if d.get("diverged_at") is None and d["max_relative_deviation"] > 0.01:
            lines += ["", "Stable over the whole run, but the energy wanders by more than the 1 % target."]
        if d.get("diverged_at") is not None:
            lines += ["", "**The explicit integrator is not stable on the learned decoder**: the latent runs, within a few "
                      "dozen steps, into directions where the decoder barely moves the cubature (a near-singular M(q)) "
                      "and the motion there blows up. Energy "
                      "conservation of the Verlet integrator itself is shown on analytic systems in "
                      "`tests/test_integrators.py` (pendulum: drift < 10⁻⁴ over 1,500 steps; harmonic oscillator; a free "
                      "particle in polar coordinates). Simulate and the batch script use the implicit integrator "
                      "(divergence sweep below)."]
        lines.append("")
    if "sweep" in results:
        s = results["sweep"]
        lines += ["## Divergence sweep", "",
                  f"{len(s['runs'])} random settings (held-out and validation shapes; gravity and wind ~ N(0, 8²) and N(0, 10²) "
                  "per axis, stiffness 10^U(-1.5, 1.5), damping 10^U(-1, 1), fps in {12, 24, 30, 60}, half with a ground "
                  f"plane), {s['frames']} frames each with the default implicit integrator: **{s['diverged']} diverged**.", ""]
    write_section(path, "\n".join(lines[2:]))


BEGIN, END = "<!-- pipeline.validate: begin (generated) -->", "<!-- pipeline.validate: end -->"


def write_section(path: str, body: str) -> None:
    """Replace the held-out and drift section of the page, keeping what is written around it by hand."""
    replace_marked(path, (BEGIN, END), body)


def replace_marked(path: str, marks: tuple[str, str], body: str) -> None:
    """Replace what stands between the two ``marks`` in the page at ``path`` (appended when they are missing),
    keeping the rest of the page; written atomically."""
    begin, end = marks
    text = open(path).read() if os.path.exists(path) else "# Results\n\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1]
    else:
        head, tail = text.rstrip("\n") + "\n\n", "\n"
    with open(path + ".tmp", "w") as fh:
        fh.write(f"{head}{begin}\n{body.rstrip()}\n{end}{tail}")
    os.replace(path + ".tmp", path)
