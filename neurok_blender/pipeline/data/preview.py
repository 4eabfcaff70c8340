"""Contact sheet of random sequences (first, middle, last frame) so a person can see the data. No bpy use."""

from __future__ import annotations

import numpy as np

from .dataset import index_sequences, load_sequence

MAX_TRIANGLES = 2500


def _draw(ax, verts, tris, pins, lo, hi) -> None:
    if len(tris) > MAX_TRIANGLES:
        tris = tris[:: int(np.ceil(len(tris) / MAX_TRIANGLES))]
    ax.plot_trisurf(verts[:, 0], verts[:, 1], verts[:, 2], triangles=tris, color="#8fb3d9", edgecolor="#33557766",
                    linewidth=0.1, shade=True)
    pinned = pins > 0.5
    if pinned.any():
        ax.scatter(*verts[pinned].T, s=2, color="#d62728")
    centre, half = (lo + hi) / 2, (hi - lo).max() / 2
    for setter, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), centre):
        setter(c - half, c + half)
    ax.set_axis_off()


def contact_sheet(root: str, out: str, count: int = 8, seed: int = 0) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    refs = index_sequences(root)
    rng = np.random.default_rng(seed)
    by_family: dict[str, list] = {}
    for ref in refs:
        by_family.setdefault(ref.meta["family"], []).append(ref)
    families = sorted(by_family)
    picks = [by_family[f][rng.integers(len(by_family[f]))] for f in rng.permutation(families)[:count]]
    fig = plt.figure(figsize=(9, 2.6 * len(picks)))
    for row, ref in enumerate(picks):
        seq = load_sequence(ref)
        frames, tris, pins = seq["frames"], seq["triangles"], seq["pins"]
        lo, hi = frames.reshape(-1, 3).min(0), frames.reshape(-1, 3).max(0)
        for col, t in enumerate((0, len(frames) // 2, len(frames) - 1)):
            ax = fig.add_subplot(len(picks), 3, row * 3 + col + 1, projection="3d")
            _draw(ax, frames[t], tris, pins, lo, hi)
            meta = ref.meta
            title = f"{meta['family']} ({meta['simulator']}, {meta['split']})" if col == 0 else ""
            ax.set_title(f"{title}\nframe {t}", fontsize=8)
    fig.suptitle("NeuROK dataset: first, middle and last frame (red: pinned)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
