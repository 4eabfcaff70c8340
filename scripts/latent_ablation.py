"""What the learned latent adds to the reduced motion (Detail off; the cloth layer does not use the latent): the same
solver run with the shipped latent, with its latent cut to one direction, and with no latent (its directions decode
nothing) — and with a candidate cloth model (``--cloth``) — against the simulator that made each scene. Scenes: the repo's own cloth scenes against Blender Cloth
(scripts/cloth_check.py: drapes, the carried cape, the two-corner sheet) and held-out sequences of the contact
families (Blender Cloth dropped on colliders, carried and spun by its object: ``--data``, ``--split``).

Columns: error over the rest baseline, fold angle (mean angle between neighbouring faces over the last half second)
beside the simulator's, reach (the coordinates' best fit to the simulator's last frame: handles alone; handles and
latent) beside the dynamics, ms per frame. Writes the marked "ablation" section of docs/results.md and a frame sheet.

    python scripts/latent_ablation.py --data datasets/contact_eval --split val --per-family 4          # decide
    python scripts/latent_ablation.py --data datasets/contact_eval --split test --per-family 6 \\
        --out docs/results.md --sheet docs/results/ablation_sheet.png --json docs/results/ablation.json      # report
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cloth_check as cc  # noqa: E402  (the scenes, the Blender side and the measures)

START, END = "<!-- ablation:start -->", "<!-- ablation:end -->"
OWN_SCENES = ("drape_ball_small", "drape_ball", "drape_table", "cape_carried", "sheet_two_corners")
ROWS = {  # the ablation's rows: SDK settings on top of the scene's; the reduced motion alone (the cloth layer, which
    # the latent does not steer, is off: scripts/cloth_ablation.py measures it)
    "shipped": {"solver": {"detail": False}},
    "cut to one direction": {"solver": {"subspace": 1, "detail": False}},
    "no latent": {"solver": {"subspace": 1, "detail": False}, "research": {"no_latent": True}},
}
CANDIDATE = "cloth model (candidate)"  # --cloth: a training run's cloth model installed beside the shipped one


def install(cloth: str | None) -> str:
    """A scratch checkpoint folder: the shipped shape model, and ``cloth`` as its cloth model (None: none)."""
    import shutil
    import tempfile

    from neurok_blender.runtime.dynamics.simulation import CLOTH_MODEL
    from neurok_blender.runtime.engine import DEFAULT_CHECKPOINT_DIR

    folder = os.path.join(tempfile.mkdtemp(), "ckpt")
    shutil.copytree(DEFAULT_CHECKPOINT_DIR, folder, ignore=shutil.ignore_patterns(CLOTH_MODEL))
    if cloth:
        shutil.copytree(cloth, os.path.join(folder, CLOTH_MODEL))
        shutil.copy(os.path.join(folder, "material.json"), os.path.join(folder, CLOTH_MODEL, "material.json"))
    return folder


# -- held-out sequences as scenes --------------------------------------------------------------------------------
def _primitive(collider: dict) -> tuple[np.ndarray, np.ndarray, object]:
    """A spec's primitive collider as (vertices, triangles, depth function positive inside), in world space."""
    import trimesh

    size, centre, yaw = np.asarray(collider["size"], float), np.asarray(collider["centre"], float), collider["yaw"]
    if collider["kind"] == "sphere":
        return cc.ball(size[0] / 2, centre)
    if collider["kind"] == "cylinder":
        m = trimesh.creation.cylinder(radius=size[0] / 2, height=size[2], sections=32)
        radius, half = size[0] / 2, size[2] / 2

        def depth(p):
            d = p - centre
            return np.minimum(radius - np.linalg.norm(d[..., :2], axis=-1), half - np.abs(d[..., 2]))
        return np.asarray(m.vertices) + centre, np.asarray(m.faces), depth
    turn = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    b = trimesh.creation.box(extents=size).subdivide().subdivide()
    half = size / 2
    return (np.asarray(b.vertices) @ turn.T + centre, np.asarray(b.faces),
            lambda p: np.min(half - np.abs((p - centre) @ turn), axis=-1))


def _object_matrices(spec) -> np.ndarray:
    """The object's world matrix at every frame, as Blender animates it from the spec's keyframes."""
    import bpy

    from neurok_blender.pipeline.data import blender_backend

    scene, obj = blender_backend._scene(spec)
    out = []
    for f in range(1, spec.frames + 1):
        scene.frame_set(f)
        out.append(np.array(obj.matrix_world))
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return np.asarray(out)


def nearest_preset(material: dict) -> str:
    """The Blender cloth preset nearest a sequence's drawn settings (stretch and bending per vertex mass, in log)."""
    presets = json.load(open(os.path.join(ROOT, "neurok_blender", "runtime", "dynamics", "cloth_presets.json")))
    blender = presets["blender_presets"]
    key = lambda m, t, b: np.log([m[t] / m["mass"], max(m[b], 1e-3) / m["mass"]])  # noqa: E731
    own = key(material, "tension", "bending")
    return min(blender, key=lambda n: float(np.linalg.norm(key(blender[n], "tension_stiffness",
                                                                "bending_stiffness") - own)))


def dataset_scenes(root: str, split: str, per_family: int) -> list[dict]:
    """The first ``per_family`` sequences of each family of the split, as scenes with the simulator's frames."""
    from neurok_blender.pipeline.data.dataset import index_sequences, load_sequence
    from neurok_blender.pipeline.data.families import make_spec

    out, seen = [], {}
    for ref in index_sequences(root, split):
        family = ref.meta["family"]
        if seen.get(family, 0) >= per_family:
            continue
        seen[family] = seen.get(family, 0) + 1
        seq = load_sequence(ref)
        spec = dataclasses.replace(make_spec(family, int(ref.meta["seed"])), frames=len(seq["frames"]), fps=cc.FPS)
        matrices = _object_matrices(spec) if spec.drive else None
        frames = seq["frames"]
        if matrices is not None:  # stored in the object's frame: into the world
            frames = np.einsum("tab,tvb->tva", matrices[:, :3, :3], frames) + matrices[:, None, :3, 3]
        colliders = [_primitive(c) for c in spec.colliders]
        out.append({"name": f"{family} {ref.meta['seed']}", "kind": "carried" if spec.drive else "drape",
                    "v": seq["rest"], "f": seq["triangles"].astype(np.int64), "pins": seq["pins"],
                    "collider": colliders[0] if colliders else None, "ground": spec.ground, "frames": len(frames),
                    "matrices": matrices, "reference": frames, "preset": nearest_preset(spec.material)})
    return out


# -- one scene, every row ----------------------------------------------------------------------------------------
def run(scene: dict, settings: dict) -> tuple[np.ndarray, float, object]:
    """NeuROK's world-space frames for a scene (cloth_check's, with the ground and the scene's preset)."""
    extra = {}
    if scene.get("ground") is not None:
        extra["ground"] = {"normal": (0.0, 0.0, 1.0), "offset": float(scene["ground"])}
    if scene.get("preset"):
        extra["cloth_preset"] = scene["preset"]
    solver = dict({"variation": 0.0}, **settings.get("solver", {}))
    return cc.neurok(scene, **extra, **{**settings, "solver": solver})


def _local(scene: dict, frame: np.ndarray) -> np.ndarray:
    """A world-space frame of a carried scene in the object's own frame at the last frame (where the fit works)."""
    if scene["matrices"] is None:
        return frame
    m = scene["matrices"][-1]
    return (frame - m[:3, 3]) @ m[:3, :3]


def measure(scene: dict, reference: np.ndarray) -> list[dict]:
    rest = cc.rest_frames(scene, reference)
    diag = float(np.linalg.norm(np.ptp(scene["v"], axis=0)))
    base = float(np.linalg.norm(rest - reference, axis=-1).mean() / diag)
    last = slice(-cc.FPS // 2, None)
    fold_ref = cc.fold_angle(reference[last], scene["f"])
    target = _local(scene, reference[-1])
    last_base = float(np.linalg.norm(scene["v"] - target, axis=-1).mean())
    rows = []
    for label, settings in ROWS.items():
        ours, ms, sim = run(scene, settings)
        fit = cc.reach(sim, target, scene["f"])
        rows.append({"scene": scene["name"], "row": label, "vertices": len(scene["v"]), "preset": scene.get("preset"),
                     "error": float(np.linalg.norm(ours - reference, axis=-1).mean() / diag), "baseline": base,
                     "fold": cc.fold_angle(ours[last], scene["f"]), "fold_reference": fold_ref,
                     "fold_last": cc.fold_angle(ours[-1:], scene["f"]),
                     "dynamics_last": float(np.linalg.norm(_local(scene, ours[-1]) - target, axis=-1).mean())
                     / max(last_base, 1e-12),
                     **{f"reach_{k}": v / max(last_base, 1e-12) for k, v in fit.items() if not k.startswith("fold")},
                     **{k: v for k, v in fit.items() if k.startswith("fold")},
                     "fold_reference_last": cc.fold_angle(target[None], scene["f"]),
                     "ms": ms, "frames_ours": ours, "frames_reference": reference})
        print(json.dumps({k: v for k, v in rows[-1].items() if not k.startswith("frames")}), flush=True)
    return rows


def summary(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per row: the mean error over baseline, the mean fold ratio (ours / simulator's), the mean reach, the ms."""
    out = {}
    for label in ROWS:
        mine = [r for r in rows if r["row"] == label]
        out[label] = {"ratio": float(np.mean([r["error"] / r["baseline"] for r in mine])),
                      "fold_ratio": float(np.mean([r["fold"] / max(r["fold_reference"], 1e-9) for r in mine])),
                      "reach_handles": float(np.mean([r.get("reach_handles", np.nan) for r in mine])),
                      "reach_handles_latent": float(np.mean([r.get("reach_handles_latent", np.nan) for r in mine])),
                      "ms": float(np.mean([r["ms"] for r in mine]))}
    return out


def table(rows: list[dict], command: str, sheet_path: str | None, doc: str) -> str:
    means = summary(rows)
    shipped = {r["scene"]: r for r in rows if r["row"] == "shipped"}
    lines = [START, "## What the learned latent adds", "",
             f"`{command}`: the reduced motion alone (Detail off; open surfaces now move through the cloth layer, which "
             "the latent does not steer: see the next section), every scene run by the same solver with the shipped "
             "latent, with the latent cut to one direction, with no latent (its directions decode nothing: handles and springs alone)"
             + (", and with the candidate cloth model trained through the handles (not shipped: see the model card)"
                if CANDIDATE in ROWS else "") + " — against the simulator that made it (Blender Cloth). Error: mean "
             "vertex distance over the rest baseline; folds: mean angle between neighbouring faces over the last half "
             "second, ours / the simulator's; reach: the coordinates' best fit to the simulator's last frame (handles; "
             "handles + latent) beside where the dynamics got, each over that frame's rest baseline.", "",
             "| row | error / baseline (mean) | folds ours / simulator (mean ratio) | reach handles / handles + latent "
             "| ms / frame |", "| --- | --- | --- | --- | --- |"]
    for label, m in means.items():
        lines.append(f"| {label} | {m['ratio']:.3f} | {m['fold_ratio']:.2f} | {m['reach_handles']:.2f} / "
                     f"{m['reach_handles_latent']:.2f} | {m['ms']:.0f} |")
    lines += ["", "Per scene (the shipped latent's last frame; folds there: the dynamics', the handles' best fit's, the "
              "handles + latent's best fit's, the simulator's):", "",
              "| scene | vertices | preset | " + " | ".join(f"{label}: error / folds (°)" for label in ROWS)
              + " | simulator folds (°) | last frame: dynamics / reach handles / handles + latent "
                "| last frame folds (°): dynamics / fit handles / fit handles + latent / simulator |",
              "| --- | --- | --- | " + " | ".join("---" for _ in ROWS) + " | --- | --- | --- |"]
    for name, s in shipped.items():
        cells = []
        for label in ROWS:
            r = next(x for x in rows if x["scene"] == name and x["row"] == label)
            cells.append(f"{r['error'] / r['baseline']:.3f} / {r['fold']:.1f}")
        lines.append(f"| {name} | {s['vertices']:,} | {s['preset'] or 'cotton'} | " + " | ".join(cells)
                     + f" | {s['fold_reference']:.1f} | {s['dynamics_last']:.2f} / {s.get('reach_handles', np.nan):.2f}"
                       f" / {s.get('reach_handles_latent', np.nan):.2f} | {s['fold_last']:.1f} / "
                       f"{s.get('fold_handles', np.nan):.1f} / {s.get('fold_handles_latent', np.nan):.1f} / "
                       f"{s['fold_reference_last']:.1f} |")
    if sheet_path:
        rel = os.path.relpath(sheet_path, os.path.dirname(os.path.abspath(doc)))
        lines += ["", f"Last frames, the simulator beside each row: ![the ablation's last frames]({rel})"]
    return "\n".join(lines + [END])


def draw_mesh(ax, tri: np.ndarray, centre: np.ndarray, half: float, simulator: bool) -> None:
    """One frame's triangles (F, 3, 3) on a 3D axis, shaded by their normals: the simulator's in orange, ours in
    blue, in a cube of half-width ``half`` about ``centre``."""
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
    shade = 0.3 + 0.7 * np.abs(n @ np.array([0.3, -0.5, 0.8]))
    colour = np.array([0.85, 0.45, 0.2]) if simulator else np.array([0.25, 0.5, 0.85])
    ax.add_collection3d(Poly3DCollection(tri, facecolors=shade[:, None] * colour, edgecolors="none"))
    for k, set_lim in enumerate((ax.set_xlim, ax.set_ylim, ax.set_zlim)):
        set_lim(centre[k] - half, centre[k] + half)
    ax.view_init(elev=20, azim=-60)
    ax.set_axis_off()


def sheet(path: str, rows: list[dict], scenes: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["scene"] for r in rows))
    columns = ["simulator", *ROWS]
    fig = plt.figure(figsize=(2.6 * len(columns), 2.6 * len(names)))
    for i, name in enumerate(names):
        scene, mine = scenes[name], {r["row"]: r for r in rows if r["scene"] == name}
        frames = [mine["shipped"]["frames_reference"][-1]] + [mine[label]["frames_ours"][-1] for label in ROWS]
        both = np.concatenate(frames)
        centre, half = (both.min(0) + both.max(0)) / 2, (both.max(0) - both.min(0)).max() / 2
        for j, (label, x) in enumerate(zip(columns, frames)):
            ax = fig.add_subplot(len(names), len(columns), i * len(columns) + j + 1, projection="3d")
            draw_mesh(ax, x[scene["f"]], centre, half, simulator=j == 0)
            r = mine["shipped" if j == 0 else label]
            text = (f"{r['fold_reference']:.1f}°" if j == 0 else f"{r['error'] / r['baseline']:.2f}, {r['fold']:.1f}°")
            ax.set_title(f"{name}\n{label}: {text}" if j == 0 else f"{label}: {text}", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=75)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenes", nargs="*", default=list(OWN_SCENES), help="the repo's own cloth scenes")
    parser.add_argument("--data", help="a dataset of the contact families (datasets/contact_eval)")
    parser.add_argument("--split", choices=["val", "test"], default="val",
                        help="decide on val; the final table on test")
    parser.add_argument("--per-family", type=int, default=4)
    parser.add_argument("--out", help="the results page whose ablation section is rewritten (default: print only)")
    parser.add_argument("--sheet", help="write the last frames side by side here")
    parser.add_argument("--json", help="write the rows (without frames) and the summary here")
    parser.add_argument("--cloth", help="also a candidate cloth model (a training run's checkpoint folder) as a row")
    args = parser.parse_args(argv)
    if args.cloth:
        ROWS[CANDIDATE] = {"checkpoint": install(args.cloth), "solver": {"detail": False}}
    own = cc.scenes()
    scenes = {name: own[name] for name in args.scenes}
    rows = []
    for scene in scenes.values():
        rows += measure(scene, cc.blender_cloth(scene)[0])
    for scene in dataset_scenes(args.data, args.split, args.per_family) if args.data else ():
        scenes[scene["name"]] = scene
        rows += measure(scene, scene["reference"])
    print(json.dumps(summary(rows), indent=1))
    if args.sheet:
        sheet(args.sheet, rows, scenes)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"summary": summary(rows), "rows": [{k: v for k, v in r.items() if not k.startswith("frames")}
                                                          for r in rows]}, fh, indent=1)
    if args.out:
        cc.write_section(args.out, (START, END), "latent_ablation.py", argv,
                         lambda command: table(rows, command, args.sheet, args.out))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the bpy module can hang in its C++ exit handlers
