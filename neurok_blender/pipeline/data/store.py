"""Shard files and the dataset card. numpy only.

A shard ``shards/shard-00012.npz`` holds several sequences under keys ``<k>/rest`` (V, 3),
``<k>/triangles`` (F, 3), ``<k>/frames`` (T, V, 3), ``<k>/pins`` (V,) and ``<k>/meta`` (JSON:
family, category, split, simulator, material, conditions, seed). Beside it, ``shard-00012.json``
summarizes the shard (kept and rejected counts); its presence marks the shard as finished.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import numpy as np


def shard_path(root: str, index: int, ext: str = "npz") -> str:
    return os.path.join(root, "shards", f"shard-{index:05d}.{ext}")


def write_shard(root: str, index: int, sequences: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Write atomically: the npz first, then the JSON summary that marks the shard done."""
    os.makedirs(os.path.join(root, "shards"), exist_ok=True)
    arrays = {}
    for k, seq in enumerate(sequences):
        arrays[f"{k}/rest"] = seq["frames"][0].astype(np.float32)
        arrays[f"{k}/triangles"] = seq["triangles"].astype(np.int32)
        arrays[f"{k}/frames"] = seq["frames"].astype(np.float32)
        arrays[f"{k}/pins"] = seq["pins"].astype(np.float32)
        arrays[f"{k}/meta"] = np.array(json.dumps(seq["meta"]))
    path = shard_path(root, index)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    tmp_json = shard_path(root, index, "json") + ".tmp"
    with open(tmp_json, "w") as fh:
        json.dump({**summary, "sequences": len(sequences)}, fh)
    os.replace(tmp_json, shard_path(root, index, "json"))


def shard_done(root: str, index: int) -> bool:
    return os.path.exists(shard_path(root, index, "json")) and os.path.exists(shard_path(root, index))


def read_shard(path: str) -> list[dict[str, Any]]:
    with np.load(path) as data:
        count = len({key.split("/")[0] for key in data.files})
        return [{"rest": data[f"{k}/rest"], "triangles": data[f"{k}/triangles"], "frames": data[f"{k}/frames"],
                 "pins": data[f"{k}/pins"], "meta": json.loads(str(data[f"{k}/meta"]))} for k in range(count)]


def shard_summaries(root: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(glob.glob(os.path.join(root, "shards", "shard-*.json"))):
        with open(path) as fh:
            out.append(json.load(fh))
    return out


def _tally(into: dict, key: str, amount: int = 1) -> None:
    into[key] = into.get(key, 0) + amount


def build_card(root: str, recipe: dict[str, Any], generator_version: str) -> dict[str, Any]:
    """Aggregate the shard summaries into dataset.json and DATASET_CARD.md."""
    card: dict[str, Any] = {"generator_version": generator_version, "recipe": recipe, "sequences": 0,
                            "rejected": 0, "by_family": {}, "by_category": {}, "by_split": {}, "by_simulator": {},
                            "rejections": {}, "rejections_by_family": {}, "frames": 0, "vertices": [],
                            "cpu_seconds": 0.0, "families": {}}
    for s in shard_summaries(root):
        card["sequences"] += s["kept"]
        card["rejected"] += s["rejected"]
        card["frames"] += s["frames"]
        if card["cpu_seconds"] is not None and "cpu_seconds" in s:
            card["cpu_seconds"] += s["cpu_seconds"]
        else:  # shards from before the CPU time was measured per shard
            card["cpu_seconds"] = None
        card["vertices"] += s["vertex_counts"]
        for field in ("by_family", "by_category", "by_split", "by_simulator", "rejections", "rejections_by_family"):
            for key, value in s[field].items():
                _tally(card[field], key, value)
        card["families"].update(s["families"])
    verts = np.array(card.pop("vertices") or [0])
    card["vertex_count"] = {"min": int(verts.min()), "median": int(np.median(verts)), "max": int(verts.max())}
    with open(os.path.join(root, "dataset.json"), "w") as fh:
        json.dump(card, fh, indent=2, sort_keys=True)
    with open(os.path.join(root, "DATASET_CARD.md"), "w") as fh:
        fh.write(card_markdown(card))
    return card


def card_markdown(card: dict[str, Any]) -> str:
    lines = [
        "# NeuROK 4D dataset card", "",
        f"Generator {card['generator_version']}, recipe `{card['recipe'].get('name')}` "
        f"(seed {card['recipe'].get('seed')}, {card['recipe'].get('frames')} frames at "
        f"{card['recipe'].get('fps')} fps).", "",
        f"- kept sequences: **{card['sequences']}**; rejected: **{card['rejected']}** "
        f"({', '.join(f'{k} {v}' for k, v in sorted(card['rejections'].items())) or 'none'})",
        f"- frames: {card['frames']}; vertices per sequence: min {card['vertex_count']['min']}, "
        f"median {card['vertex_count']['median']}, max {card['vertex_count']['max']}",
        (f"- simulation CPU time: {card['cpu_seconds'] / 60:.1f} min (summed over workers)"
         if card["cpu_seconds"] is not None else "- simulation CPU time: not recorded"),
        "",
        "| family | category | simulator | split | kept | rejected |", "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, info in sorted(card["families"].items()):
        lines.append(f"| {name} | {info['category']} | {info['simulator']} | {info['split']} | "
                     f"{card['by_family'].get(name, 0)} | {card['rejections_by_family'].get(name, 0)} |")
    lines += ["", "| category | kept |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in sorted(card["by_category"].items())]
    lines += ["", "| split | kept |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in sorted(card["by_split"].items())]
    return "\n".join(lines) + "\n"
