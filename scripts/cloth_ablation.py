"""What each stage of the cloth solver adds, at equal cost: the product (the full-resolution cloth layer on its own),
the reduced motion alone (Detail off: what cloth was before the layer), the two scales (the reduced motion as the
layer's coarse level: fitted to the layer each frame, stepped, its smooth part handed back), the two scales without
the learned latent, and the layer alone given as many sweeps as the two scales' time buys. Against Blender Cloth on
the repo's own scenes (scripts/cloth_check.py, with 10k-vertex versions of a drape and a hanging sheet) and against
the simulator on held-out contact sequences (``--data``, ``--split``). Writes the marked "stages" section of
docs/results.md and a frame sheet of the last frames.

    python scripts/cloth_ablation.py --data datasets/contact_eval --split val --per-family 2              # decide
    python scripts/cloth_ablation.py --data datasets/contact_eval --split test --per-family 3 \\
        --out docs/results.md --sheet docs/results/stages_sheet.png --json docs/results/stages.json      # report
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cloth_check as cc  # noqa: E402  (the scenes, the Blender side and the measures)
import latent_ablation as la  # noqa: E402  (held-out sequences as scenes)

START, END = "<!-- stages:start -->", "<!-- stages:end -->"
OWN_SCENES = ("drape_ball_small", "drape_table", "cape_carried", "cape_spun", "sheet_two_corners", "drape_ball_10k",
              "sheet_edge_10k")
SWEEPS = 20  # the product's
PRODUCT = "layer alone (product)"
REDUCED = "reduced motion alone"
TWO = "two scales"
TWO_NO_LATENT = "two scales, no latent"
EQUAL = "layer alone at the two scales' cost"
ROWS = {PRODUCT: {}, REDUCED: {"solver": {"detail": False}},
        TWO: {"research": {"detail_guide": "reduced"}},
        TWO_NO_LATENT: {"research": {"detail_guide": "reduced", "no_latent": True}}}


def large_scenes() -> dict[str, dict]:
    """The 10k-vertex scenes: the ball drape and the sheet swinging from its edge at 100 × 100."""
    return {"drape_ball_10k": cc.drape("drape_ball_10k", 1.6, 100, cc.ball(0.45, (0, 0, 0.45)), 1.2),
            "sheet_edge_10k": cc.swinging("sheet_edge_10k", 1.0, 100, "edge")}


def row(scene: dict, reference: np.ndarray, label: str, settings: dict) -> dict:
    ours, ms, _ = la.run(scene, settings)
    diag = float(np.linalg.norm(np.ptp(scene["v"], axis=0)))
    rest = cc.rest_frames(scene, reference)
    last = slice(-cc.FPS // 2, None)
    edges = cc._last_edges(ours, scene)
    out = {"scene": scene["name"], "row": label, "vertices": len(scene["v"]), "ms": ms,
           "error": float(np.linalg.norm(ours - reference, axis=-1).mean() / diag),
           "baseline": float(np.linalg.norm(rest - reference, axis=-1).mean() / diag),
           "fold": cc.fold_angle(ours[last], scene["f"]), "fold_reference": cc.fold_angle(reference[last], scene["f"]),
           "edge": [float(edges.mean()), float(np.percentile(edges, 1)), float(np.percentile(edges, 99))],
           "sweeps": (settings.get("solver") or {}).get("detail_sweeps", SWEEPS), "frames": ours}
    print(json.dumps({k: v for k, v in out.items() if k != "frames"}), flush=True)
    return out


def measure(scene: dict, reference: np.ndarray) -> list[dict]:
    rows = [row(scene, reference, label, settings) for label, settings in ROWS.items()]
    two, alone = rows[2]["ms"], rows[0]["ms"]
    sweeps = int(np.clip(round(SWEEPS * two / max(alone, 1e-9)), 1, 200))
    rows.append(row(scene, reference, EQUAL, {"solver": {"detail_sweeps": sweeps}}))
    return rows


def summary(rows: list[dict]) -> dict[str, dict[str, float]]:
    labels = list(dict.fromkeys(r["row"] for r in rows))
    out = {}
    for label in labels:
        mine = [r for r in rows if r["row"] == label]
        out[label] = {"ratio": float(np.mean([r["error"] / r["baseline"] for r in mine])),
                      "fold_ratio": float(np.mean([r["fold"] / max(r["fold_reference"], 1e-9) for r in mine])),
                      "edge_p99": float(np.mean([r["edge"][2] for r in mine])),
                      "ms": float(np.mean([r["ms"] for r in mine]))}
    return out


def table(rows: list[dict], command: str, sheet_path: str | None, doc: str) -> str:
    means = summary(rows)
    lines = [START, "## What each stage of the cloth solver adds", "",
             f"`{command}`: every scene run five ways — the product (the full-resolution cloth layer on its own, "
             f"{SWEEPS} sweeps a frame); the reduced motion alone (Detail off: cloth before the layer); the two scales "
             "(the reduced motion as the layer's coarse level: fitted to the layer each frame, stepped one frame, its "
             "smooth part handed back; the layer's own 20 sweeps); the two scales without the learned latent; and the "
             "layer alone with as many sweeps as the two scales' time buys (equal cost) — against the simulator that "
             "made the scene (Blender Cloth). Error: mean vertex distance over the rest baseline; folds: mean angle "
             "between neighbouring faces over the last half second, ours / the simulator's; edges: the 99th percentile "
             "of edge length over rest over the last half second; ms per frame on this machine.", "",
             "| row | error / baseline (mean) | folds ours / simulator (mean ratio) | edges p99 (mean) | ms / frame (mean) |",
             "| --- | --- | --- | --- | --- |"]
    for label, m in means.items():
        lines.append(f"| {label} | {m['ratio']:.3f} | {m['fold_ratio']:.2f} | {m['edge_p99']:.3f} | {m['ms']:.0f} |")
    labels = list(means)
    lines += ["", "Per scene (error / folds ° / ms per frame; the equal-cost row's sweeps in brackets):", "",
              "| scene | vertices | simulator folds (°) | " + " | ".join(labels) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in labels) + " |"]
    for name in dict.fromkeys(r["scene"] for r in rows):
        mine = {r["row"]: r for r in rows if r["scene"] == name}
        cells = []
        for label in labels:
            r = mine[label]
            extra = f" ({r['sweeps']})" if label == EQUAL else ""
            cells.append(f"{r['error'] / r['baseline']:.2f} / {r['fold']:.1f} / {r['ms']:.0f}{extra}")
        first = mine[labels[0]]
        lines.append(f"| {name} | {first['vertices']:,} | {first['fold_reference']:.1f} | " + " | ".join(cells) + " |")
    if sheet_path:
        rel = os.path.relpath(sheet_path, os.path.dirname(os.path.abspath(doc)))
        lines += ["", f"Last frames, the simulator beside each row: ![the stages' last frames]({rel})"]
    return "\n".join(lines + [END])


def sheet(path: str, rows: list[dict], scenes: dict, references: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["scene"] for r in rows))
    labels = list(dict.fromkeys(r["row"] for r in rows))
    columns = ["simulator", *labels]
    fig = plt.figure(figsize=(2.4 * len(columns), 2.4 * len(names)))
    for i, name in enumerate(names):
        scene, mine = scenes[name], {r["row"]: r for r in rows if r["scene"] == name}
        frames = [references[name][-1]] + [mine[label]["frames"][-1] for label in labels]
        both = np.concatenate(frames)
        centre, half = (both.min(0) + both.max(0)) / 2, (both.max(0) - both.min(0)).max() / 2
        for j, (label, x) in enumerate(zip(columns, frames)):
            ax = fig.add_subplot(len(names), len(columns), i * len(columns) + j + 1, projection="3d")
            la.draw_mesh(ax, x[scene["f"]], centre, half, simulator=j == 0)
            text = "" if j == 0 else f": {mine[label]['error'] / mine[label]['baseline']:.2f}, {mine[label]['fold']:.1f}°"
            ax.set_title((f"{name}\n" if j == 0 else "") + label + text, fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=75)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenes", nargs="*", default=list(OWN_SCENES), help="the repo's own cloth scenes")
    parser.add_argument("--data", help="a dataset of the contact families (datasets/contact_eval)")
    parser.add_argument("--split", choices=["val", "test"], default="val",
                        help="decide on val; the final table on test")
    parser.add_argument("--per-family", type=int, default=2)
    parser.add_argument("--out", help="the results page whose stages section is rewritten (default: print only)")
    parser.add_argument("--sheet", help="write the last frames side by side here")
    parser.add_argument("--json", help="write the rows (without frames) and the summary here")
    args = parser.parse_args(argv)
    every = {**cc.scenes(), **large_scenes()}
    scenes, references, rows = {}, {}, []
    for name in args.scenes:
        scenes[name] = every[name]
        references[name] = cc.blender_cloth(every[name])[0]
        rows += measure(every[name], references[name])
    for scene in la.dataset_scenes(args.data, args.split, args.per_family) if args.data else ():
        scenes[scene["name"]], references[scene["name"]] = scene, scene["reference"]
        rows += measure(scene, scene["reference"])
    print(json.dumps(summary(rows), indent=1))
    if args.sheet:
        sheet(args.sheet, rows, scenes, references)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"summary": summary(rows), "rows": [{k: v for k, v in r.items() if k != "frames"} for r in rows]},
                      fh, indent=1)
    if args.out:
        cc.write_section(args.out, (START, END), "cloth_ablation.py", argv,
                         lambda command: table(rows, command, args.sheet, args.out))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the bpy module can hang in its C++ exit handlers
