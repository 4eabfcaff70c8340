"""Dataset generation: recipes, deterministic job lists, sharded and resumable, in a process pool. No bpy use
(Blender-simulated sequences run in a separate bpy process per shard)."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InputError
from . import GENERATOR_VERSION
from .curate import rejection_reason
from .families import FAMILIES, make_spec, with_bending_floor
from .spec import SequenceSpec
from .store import build_card, shard_done, write_shard

BLENDER_BACKENDS = ("blender_cloth", "blender_softbody")


@dataclass(frozen=True)
class Recipe:
    name: str
    per_family: int  # sequences per family (before --sequences overrides the total)
    frames: int
    fps: float
    shard_size: int
    # the FE soft toys' bending number B floor (``families.with_bending_floor``): their Young's modulus raised to
    # B >= min_bending, so the simulator does not collapse them; 0: as drawn
    min_bending: float = 0.0


# the families the floor applies to: the pinned soft toys, which it keeps sound and moving (blobs 10 -> 2
# collapsed of 15, jellies 10 -> 0, their motion kept; experiments/fe_floor_check.py). Not the plates (the floor that
# keeps them sound stops them moving, and MuJoCo's solve is ill-conditioned on them anyway), not the drops (8 of 12
# still collapse on landing), not the star toys (they never collapse at their tiny B)
FLOOR_FAMILIES = ("blob", "jelly")

RECIPES = {
    "smoke": Recipe("smoke", per_family=1, frames=24, fps=24.0, shard_size=8),
    "full": Recipe("full", per_family=200, frames=60, fps=24.0, shard_size=40),
    # ``full`` with the soft toys kept sound (DATASET_CARD, 2026-12-07): for the next retrain
    "sound": Recipe("sound", per_family=200, frames=60, fps=24.0, shard_size=40, min_bending=1.0),
    # cloth meeting things (the families of generator 1.5.0): two seconds each, small shards (Blender runs a shard
    # in one process)
    "contact": Recipe("contact", per_family=600, frames=48, fps=24.0, shard_size=20),
}
CONTACT_FAMILIES = ("cover", "carry", "shroud", "twirl")


# the families' places in the seeds: the sixteen of generator 1.0.0 in their original (alphabetical) order, then
# every family added since in the order it was added, so adding one never changes another's sequences
SEED_ORDER = ("banner", "beam", "blob", "cape", "door", "drawer", "flag", "jelly", "kerchief", "lamp", "laptop",
              "plate", "ribbon", "softball", "star_toy", "tower", "drape", "gale", "drop", "cover", "carry", "shroud",
              "twirl", "slider")


def sequence_seed(seed: int, family: str, k: int) -> int:
    fam = SEED_ORDER.index(family)
    return int(np.random.SeedSequence([seed, fam, k]).generate_state(1)[0] & 0x7FFFFFFF)


def job_list(recipe: Recipe, seed: int, families: list[str], sequences: int | None) -> list[tuple[str, int]]:
    """(family, seed) per sequence, families interleaved so every shard is a mix."""
    per_family = recipe.per_family if sequences is None else -(-sequences // len(families))
    jobs = [(fam, sequence_seed(seed, fam, k)) for k in range(per_family) for fam in families]
    return jobs[:sequences] if sequences is not None else jobs


def spec_for(family: str, seed: int, recipe: Recipe) -> SequenceSpec:
    spec = dataclasses.replace(make_spec(family, seed), frames=recipe.frames, fps=recipe.fps)
    return with_bending_floor(spec, recipe.min_bending) if family in FLOOR_FAMILIES else spec


def _simulate_blender(jobs: list[tuple[str, int]], recipe: Recipe) -> list[np.ndarray]:
    """Run Blender's simulators in their own bpy process (one per shard)."""
    if not jobs:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "frames.npz")
        args = [f"{fam}:{seed}:{recipe.frames}:{recipe.fps}" for fam, seed in jobs]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_package_parent(), os.environ.get("PYTHONPATH")])))
        done = subprocess.run([sys.executable, "-m", "neurok_blender.pipeline.data.blender_backend", out, *args],
                              capture_output=True, text=True, env=env)
        if done.returncode != 0 or not os.path.exists(out):
            tail = "\n".join(done.stderr.strip().splitlines()[-10:])
            raise RuntimeError(f"the Blender backend failed:\n{tail}")
        with np.load(out) as data:
            return [data[f"frames_{i}"] for i in range(len(jobs))]


def _package_parent() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def simulate_specs(specs: list[SequenceSpec], recipe: Recipe) -> list[np.ndarray]:
    from .mujoco_backend import BACKENDS, quiet

    quiet()
    blender = [(i, s) for i, s in enumerate(specs) if s.backend in BLENDER_BACKENDS]
    frames: list[np.ndarray | None] = [None] * len(specs)
    for (i, _), f in zip(blender, _simulate_blender([(s.family, s.seed) for _, s in blender], recipe)):
        frames[i] = f
    for i, spec in enumerate(specs):
        if frames[i] is None:
            frames[i] = BACKENDS[spec.backend](spec)
    return frames


def _meta(spec: SequenceSpec, recipe: Recipe) -> dict[str, Any]:
    fam = FAMILIES[spec.family]
    return {"family": spec.family, "category": spec.category, "split": fam.split, "simulator": spec.backend,
            "seed": spec.seed, "material": spec.material, "conditions": spec.conditions(),
            "generator_version": GENERATOR_VERSION, "recipe": recipe.name}


def run_shard(root: str, index: int, jobs: list[tuple[str, int]], recipe: Recipe) -> dict[str, Any]:
    started = time.process_time() + _child_seconds()
    specs = [spec_for(fam, seed, recipe) for fam, seed in jobs]
    all_frames = simulate_specs(specs, recipe)
    kept, summary = [], _empty_summary()
    for spec, frames in zip(specs, all_frames):
        reason = rejection_reason(frames, spec.triangles, spec.pin_weights, spec.fps, spec.frames,
                                  rigid_parts=spec.category == "articulated")
        fam = FAMILIES[spec.family]
        summary["families"][spec.family] = {"category": fam.category, "simulator": fam.backend, "split": fam.split}
        if reason:
            summary["rejected"] += 1
            for key, name in (("rejections", reason), ("rejections_by_family", spec.family)):
                summary[key][name] = summary[key].get(name, 0) + 1
            continue
        kept.append({"frames": frames, "triangles": spec.triangles, "pins": spec.pin_weights, "meta": _meta(spec, recipe)})
        summary["kept"] += 1
        summary["frames"] += len(frames)
        summary["vertex_counts"].append(len(spec.vertices))
        for key, name in (("by_family", spec.family), ("by_category", spec.category), ("by_split", fam.split),
                          ("by_simulator", spec.backend)):
            summary[key][name] = summary[key].get(name, 0) + 1
    summary["cpu_seconds"] = time.process_time() + _child_seconds() - started
    write_shard(root, index, kept, summary)
    return summary


def _child_seconds() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def _empty_summary() -> dict[str, Any]:
    return {"kept": 0, "rejected": 0, "frames": 0, "vertex_counts": [], "by_family": {}, "by_category": {},
            "by_split": {}, "by_simulator": {}, "rejections": {}, "rejections_by_family": {}, "families": {}}


def _shard_task(args) -> tuple[int, int]:
    root, index, jobs, recipe = args
    summary = run_shard(root, index, jobs, recipe)
    return index, summary["kept"] + summary["rejected"]


def parse_shard(text: str | None) -> tuple[int, int]:
    if not text:
        return 0, 1
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError as exc:
        raise InputError(f"--shard must look like i/n, got {text!r}") from exc
    if not 0 <= i < n:
        raise InputError(f"--shard {text}: need 0 <= i < n")
    return i, n


def generate(out: str, recipe_name: str = "smoke", sequences: int | None = None, families: list[str] | None = None,
             shard: str | None = None, workers: int = 1, seed: int = 0, progress: bool = True) -> dict[str, Any]:
    """Generate (or resume) a dataset; returns {'card', 'ran', 'skipped'}."""
    if recipe_name not in RECIPES:
        raise InputError(f"unknown recipe {recipe_name!r}; choose from {sorted(RECIPES)}")
    recipe = RECIPES[recipe_name]
    families = families or (list(CONTACT_FAMILIES) if recipe_name == "contact" else sorted(FAMILIES))
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise InputError(f"unknown families {unknown}; valid: {sorted(FAMILIES)}")
    jobs = job_list(recipe, seed, families, sequences)
    mine, count = parse_shard(shard)
    chunks = [(i, jobs[s : s + recipe.shard_size]) for i, s in enumerate(range(0, len(jobs), recipe.shard_size))]
    chunks = [(i, c) for i, c in chunks if i % count == mine]
    todo = [(out, i, c, recipe) for i, c in chunks if not shard_done(out, i)]
    skipped = len(chunks) - len(todo)
    _run_tasks(todo, workers, progress, total=sum(len(c) for _, c in chunks), done=sum(len(c) for i, c in chunks if shard_done(out, i)))
    card = build_card(out, {"name": recipe.name, "seed": seed, "frames": recipe.frames, "fps": recipe.fps,
                            "families": families, "sequences_requested": len(jobs),
                            **({"min_bending": recipe.min_bending, "floor_families": list(FLOOR_FAMILIES)}
                               if recipe.min_bending else {})}, GENERATOR_VERSION)
    return {"card": card, "ran": len(todo), "skipped": skipped}


def _run_tasks(todo: list, workers: int, progress: bool, total: int, done: int) -> None:
    from tqdm import tqdm

    bar = tqdm(total=total, initial=done, unit="seq", desc="simulating", disable=not progress, file=sys.stderr)
    if workers <= 1:
        for task in todo:
            bar.update(_shard_task(task)[1])
    else:
        with mp.get_context("spawn").Pool(workers) as pool:
            for _, n in pool.imap_unordered(_shard_task, todo):
                bar.update(n)
    bar.close()
