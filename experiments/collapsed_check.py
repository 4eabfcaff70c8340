"""Which closed solids did their simulator collapse? (docs/dataset/DATASET_CARD.md, generator 1.4.0)

    python experiments/collapsed_check.py --data datasets/d400 datasets/solids40 datasets/full datasets/drop \
        --out docs/dataset/collapsed_sheet.png

For every closed sequence of the roots (each counted once), the largest change of its signed enclosed volume over
the frames (``curate.volume_change``), per family: how many exceed ``curate.MAX_VOLUME_CHANGE`` — a soft blob turned
inside out, a thin plate folded through itself at its clamp — and the spread of the changes of both groups. With
``--out``, a sheet of the worst plate, the worst blob and the soundest plate over five frames, each frame titled
with its volume over the rest volume.

A one-off study, kept to rerun; its journal entry: docs/journal/validation.md, "2026-12-06 (ninth)"; docs/journal/dataset-card-history.md, generator 1.4.0.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from neurok_blender.pipeline.data.curate import MAX_VOLUME_CHANGE, volume_change  # noqa: E402
from neurok_blender.pipeline.data.dataset import index_sequences, load_sequence  # noqa: E402
from neurok_blender.runtime.dynamics.cubature import signed_volumes  # noqa: E402

FRAMES = (0, 10, 20, 40, 59)


def sheet(path: str, rows: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from neurok_blender.pipeline.data.preview import _draw

    fig = plt.figure(figsize=(2.4 * len(FRAMES), 2.4 * len(rows)))
    for i, (ref, seq) in enumerate(rows):
        tris = seq["triangles"].astype(np.int64)
        volumes = signed_volumes(seq["frames"], tris) / signed_volumes(seq["rest"], tris)
        frames = [f for f in FRAMES if f < len(seq["frames"])]
        shown = seq["frames"][frames].reshape(-1, 3)
        for j, f in enumerate(frames):
            ax = fig.add_subplot(len(rows), len(FRAMES), i * len(FRAMES) + j + 1, projection="3d")
            _draw(ax, seq["frames"][f], tris, seq["pins"], shown.min(0), shown.max(0))
            ax.view_init(elev=12, azim=-70)
            title = f"frame {f}: volume {volumes[f]:+.2f}"
            if j == 0:
                young = ref.meta.get("material", {}).get("young", 0.0) / 1e3
                title = f"{ref.meta['family']} {ref.meta['seed']} (E {young:.0f} kPa)\n{title}"
            ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", default=["datasets/full"])
    parser.add_argument("--out", default="", help="the sheet's path (none without)")
    args = parser.parse_args()
    changes: dict[str, list] = {}
    for ref in index_sequences(args.data):
        if ref.meta.get("category") not in ("elastic_solid", "soft_toy"):
            continue
        seq = load_sequence(ref)
        change = volume_change(seq["frames"], seq["triangles"].astype(np.int64))
        if change is not None:
            changes.setdefault(ref.meta["family"], []).append((change, ref))
    print("| family | collapsed / closed | change, collapsed | change, sound |\n| --- | --- | --- | --- |")
    total = [0, 0]
    for family, items in sorted(changes.items()):
        bad = sorted(c for c, _ in items if c > MAX_VOLUME_CHANGE)
        good = sorted(c for c, _ in items if c <= MAX_VOLUME_CHANGE)
        spread = lambda v: f"{v[0]:.2f}–{v[-1]:.2f}" if v else "—"  # noqa: E731
        print(f"| {family} | {len(bad)}/{len(items)} | {spread(bad)} | {spread(good)} |")
        total = [total[0] + len(bad), total[1] + len(items)]
    print(f"| all | {total[0]}/{total[1]} | | |")
    if args.out:
        rows = []
        for family, pick in (("plate", max), ("blob", max), ("plate", min)):
            if family in changes:
                _, ref = pick(changes[family], key=lambda item: item[0])
                rows.append((ref, load_sequence(ref)))
        if rows:
            sheet(args.out, rows)
            print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
