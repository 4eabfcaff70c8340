"""Deciding the cloth model's energies on validation scenes only: a candidate cloth model (a training run's
checkpoint) installed beside the shipped shape model in a scratch checkpoint folder, then each material setting
(compression, plausibility) run through the same scenes as the ablation — the calibration scenes of
scripts/cloth_check.py and the shroud family (validation split) — with the shipped latent and cut to one direction.
Journal: validation, "2026-12-07 (thirteenth)".

    python experiments/cloth_latent_sweep.py --cloth runs/cloth/checkpoint --data datasets/contact_eval \
        --settings '{}' '{"material": {"compression": 0.1}}' '{"material": {"compression": 1.0}}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, ROOT)
import cloth_check as cc  # noqa: E402
import latent_ablation as la  # noqa: E402

VALIDATION = ("drape_ball_small", "sheet_edge", "cape_carried")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cloth", help="a training run's checkpoint folder, used as the cloth model")
    p.add_argument("--data", help="the held-out contact draw (its validation split: shroud)")
    p.add_argument("--per-family", type=int, default=3)
    p.add_argument("--settings", nargs="+", default=["{}"], help="JSON SDK settings, one candidate each")
    p.add_argument("--cut", action="store_true", help="also each candidate with the latent cut to one direction")
    args = p.parse_args()
    ckpt = la.install(args.cloth)
    own = cc.scenes()
    scenes = [own[name] for name in VALIDATION]
    if args.data:
        scenes += la.dataset_scenes(args.data, "val", args.per_family)
    references = {s["name"]: (s["reference"] if "reference" in s else cc.blender_cloth(s)[0]) for s in scenes}
    for text in args.settings:
        for cut in ((False, True) if args.cut else (False,)):
            settings = json.loads(text)
            settings["checkpoint"] = ckpt
            if cut:
                settings["solver"] = dict(settings.get("solver", {}), subspace=1)
            ratios, folds = [], []
            for scene in scenes:
                ref = references[scene["name"]]
                ours = la.run(scene, settings)[0]
                rest = cc.rest_frames(scene, ref)
                ratios.append(float(np.linalg.norm(ours - ref, axis=-1).mean() / np.linalg.norm(rest - ref, axis=-1).mean()))
                last = slice(-cc.FPS // 2, None)
                folds.append(cc.fold_angle(ours[last], scene["f"]) / max(cc.fold_angle(ref[last], scene["f"]), 1e-9))
            print(json.dumps({"settings": text, "cut": cut, "ratio": round(float(np.mean(ratios)), 4),
                              "fold_ratio": round(float(np.mean(folds)), 3),
                              "per_scene": {s["name"]: round(r, 3) for s, r in zip(scenes, ratios)}}), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
