"""How much of the model's reach its learned reduction keeps: on fixed batches of each split, the reconstruction
error (mean squared distance at the query points, shapes normalized into [-1, 1]^3) of the rest shape, of the full
posterior mean μ, and of μ projected on the leading k learned directions, z = μ_cond + W Wᵀ(μ − μ_cond) — the
training objective of ``--train reduction``, measured without augmentation. A per-batch training curve is too
noisy to read (the batches' shapes differ far more than the model's progress); this is the fixed yardstick.

    python experiments/reduction_check.py --ckpt runs/reduce32/checkpoint --data datasets/d400 --ks 8 16 32 --active 16

A one-off study, kept to rerun; its journal entry: docs/journal/validation.md, "2026-12-06 (third)"; docs/journal/model-card-history.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from neurok_blender.pipeline import train  # noqa: E402
from neurok_blender.pipeline.data.dataset import FramePairDataset  # noqa: E402
from neurok_blender.runtime.model import checkpoint, reduction  # noqa: E402


def measure(model, data: list[str], split: str, ks: list[int], batches: int, seed: int,
            active: int = 0) -> dict[str, float]:
    """Per sample errors over the batches; the median of each (a few thin ribbons' normalized errors are hundreds
    of times the others', so means say little), and for each k the median share of the full latent's gain over
    the rest shape that the reduction keeps, (rest − reduced) / (rest − full)."""
    loader = torch.utils.data.DataLoader(FramePairDataset(data, split, points=512, queries=256, seed=seed),
                                         batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(seed))
    rows: dict[str, list[torch.Tensor]] = {}
    batch_iter = iter(loader)
    for _ in range(batches):
        b = train.normalize_batch({k: v for k, v in next(batch_iter).items() if torch.is_tensor(v)})
        feats, queries, target = b["features"], b["queries"], b["query_delta"][:, 0]
        with torch.no_grad():
            mu_cond, tokens = model.encode_prior(feats)
            mu, _ = model.encode_deformation(feats, b["delta"][:, 0])

            def error(z, tokens=tokens, queries=queries, mu_cond=mu_cond, target=target):
                moved = model.deformed(model.decode(z, tokens, queries, z_rest=mu_cond), queries)
                return ((moved - queries - target) ** 2).sum(-1).mean(-1)  # (B,)

            row = {"rest": (target**2).sum(-1).mean(-1), "full latent": error(mu)}
            for k in ks:
                row[f"learned k={k}"] = error(model.project(model.reduced_basis(tokens, k), mu, mu_cond)[0])
            if active:  # the post-hoc active subspace of each shape (the ablation), the same projection
                w = torch.stack([reduction.active_subspace(model, mu_cond[i : i + 1], tokens[i : i + 1],
                                                           queries[i : i + 1], k=active, samples=max(48, 4 * active),
                                                           seed=0).basis for i in range(len(mu))])
                row[f"active k={active}"] = error(model.project(w, mu, mu_cond)[0])
        for name, value in row.items():
            rows.setdefault(name, []).append(value)
    per = {name: torch.cat(v) for name, v in rows.items()}
    out = {f"median {name}": float(v.median()) for name, v in per.items()}
    gain = per["rest"] - per["full latent"]
    for k in [*ks, *(["active"] if active else [])]:
        name = f"active k={active}" if k == "active" else f"learned k={k}"
        out[f"kept, {name}"] = float(((per["rest"] - per[name]) / gain)[gain > 0].median())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--data", nargs="+", default=["datasets/d400"])
    p.add_argument("--splits", nargs="+", default=["train", "val", "test"])
    p.add_argument("--ks", nargs="+", type=int, default=[8, 16, 32])
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--active", type=int, default=0, help="also each shape's post-hoc active subspace with this k")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    model, _ = checkpoint.load(args.ckpt)
    if model.config.reduced_k < max(args.ks):
        p.error(f"{args.ckpt} has {model.config.reduced_k} learned directions; --ks asks for {max(args.ks)}")
    results = {split: measure(model, args.data, split, args.ks, args.batches, args.seed, args.active) for split in args.splits}
    names = list(next(iter(results.values())))
    print("| split | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for split, row in results.items():
        print(f"| {split} | " + " | ".join(f"{row[n]:.4f}" for n in names) + " |")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
