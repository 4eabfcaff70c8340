"""A side-by-side frame sheet: Blender Cloth against NeuROK (pure-latent ablation and the default with skinning
handles) on the bench's falling sheet (about 1k vertices, pinned along one edge). Writes a PNG and prints
the error against Blender over the rest-shape baseline.

    python experiments/sheet_compare.py --out docs/dynamics/sheet_vs_blender.png

A one-off study, kept to rerun; its journal entry: docs/journal/validation.md, "2026-12, first stage" and "2026-12-05".
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import bench  # noqa: E402

FRAMES = 48
SHOWN = (0, 8, 16, 24, 36, 47)


def blender_cloth(v, tris, pins) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(inp, v=v, tris=tris, pins=pins, kind="cloth", frames=FRAMES)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench.py"), "--blender-worker", inp, out],
                       check=True, env=dict(os.environ, PYTHONPATH=ROOT))
        return np.load(out)["frames"].astype(np.float64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "dynamics", "sheet_vs_blender.png"))
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from neurok_blender.runtime import api

    v, tris, pins = bench.sheet(1000)
    rows = {"Blender Cloth": blender_cloth(v, tris, pins)}
    for label, handles in (("NeuROK, pure latent (ablation)", 0), ("NeuROK, latent + 4 handles (default)", 4)):
        sim = api.prepare(v, tris, pins=pins, device="cpu", frame_count=FRAMES, solver={"variation": 0.0, "handles": max(handles, 1)},
                          research={"handles": handles > 0})
        rows[label] = sim.run()
    fig = plt.figure(figsize=(3 * len(SHOWN), 3.2 * len(rows)))
    reference = rows["Blender Cloth"]
    for r, (label, frames) in enumerate(rows.items()):
        err, base = bench.fidelity(frames, reference, v)
        drop = float((v[:, 2].mean() - frames[1:, :, 2].mean(1)).mean())
        title = label if r == 0 else f"{label}: error {err:.3f} (rest {base:.3f}), mean drop {drop:.2f} m"
        print(title if r else f"{label}: mean drop {drop:.2f} m")
        for c, f in enumerate(SHOWN):
            ax = fig.add_subplot(len(rows), len(SHOWN), r * len(SHOWN) + c + 1, projection="3d")
            x = frames[f]
            ax.plot_trisurf(x[:, 0], x[:, 1], x[:, 2], triangles=tris, color="#5b8bd6" if r else "#d68a3c",
                            linewidth=0, antialiased=False)
            ax.set_xlim(-1, 1.2), ax.set_ylim(-1.1, 1.1), ax.set_zlim(-1.2, 1.2)
            ax.view_init(elev=12, azim=-60)
            ax.set_axis_off()
            ax.set_title(f"frame {f}", fontsize=8)
        fig.text(0.01, 1 - (r + 0.08) / len(rows), title, fontsize=10, va="top")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=70, bbox_inches="tight")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
