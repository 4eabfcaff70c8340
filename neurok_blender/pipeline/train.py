"""Training NeuROK as a conditional VAE: ``python -m neurok_blender.pipeline.train --data DIR --preset neurok-s --out RUN``.
Runs on CPU or CUDA (bf16 autocast), single process or DDP under torchrun (gloo on CPU, nccl on GPU). No bpy use.

Loss per sample: mean ‖δ − δ̂‖² over query points + λ · KL(posterior ‖ prior) per latent number. With
``--residual-handles H`` δ is what H affine handles fitted in closed form cannot reach (the latent's part of the
simulation's coordinates), not the whole deformation.
Shapes are normalized to [-1, 1]^3 (bounding-box centre and half the largest extent) before the model sees them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from typing import Any

import numpy as np
import torch
from torch import nn

from ..runtime.geometry import bbox_normalizer
from ..runtime.model import checkpoint
from ..runtime.model.config import PRESETS
from ..runtime.model.network import NeurokModel
from .data.dataset import FramePairDataset
from .eval import handle_fit


def normalize_batch(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Centre each sample's shape and scale it into [-1, 1]^3; deltas scale with it."""
    pos = batch["features"][..., :3]
    centre, scale = bbox_normalizer(pos)  # (B, 1, 3), (B, 1, 1)
    out = dict(batch)
    out["features"] = torch.cat([(pos - centre) / scale, batch["features"][..., 3:]], -1)
    out["queries"] = (batch["queries"] - centre) / scale
    out["delta"] = batch["delta"] / scale[:, None]
    out["query_delta"] = batch["query_delta"] / scale[:, None]
    return out


def augment(batch: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Random rotation about the up axis and a random scale, the same for everything in a sample."""
    b = batch["features"].shape[0]
    angle = torch.rand(b, generator=gen) * 2 * math.pi
    c, s = angle.cos(), angle.sin()
    rot = torch.zeros(b, 3, 3)
    rot[:, 0, 0], rot[:, 0, 1], rot[:, 1, 0], rot[:, 1, 1], rot[:, 2, 2] = c, -s, s, c, 1.0
    scale = (0.8 + 0.4 * torch.rand(b, generator=gen))[:, None, None]
    turn = lambda x: x @ rot.transpose(1, 2)  # noqa: E731
    feats = batch["features"]
    out = dict(batch)
    out["features"] = torch.cat([turn(feats[..., :3]) * scale, turn(feats[..., 3:6]), feats[..., 6:]], -1)
    out["queries"] = turn(batch["queries"]) * scale
    out["delta"] = torch.stack([turn(d) for d in batch["delta"].unbind(1)], 1) * scale[:, None]
    out["query_delta"] = torch.stack([turn(d) for d in batch["query_delta"].unbind(1)], 1) * scale[:, None]
    return out


def loss_terms(model: NeurokModel, batch: dict[str, torch.Tensor], kl_weight: float, reduced_k: int = 0,
               reduced_weight: float = 1.0, full: bool = True) -> dict[str, torch.Tensor]:
    """One frame of the pair per sample is encoded and reconstructed at the query points; with ``reduced_k`` also
    through the learned reduction (``mse_reduced``), and ``full=False`` trains that alone (no VAE terms)."""
    out = model(batch["features"], batch["delta"][:, 0], batch["queries"], reduced_k=reduced_k, full=full)
    target = batch["query_delta"][:, 0]
    terms: dict[str, torch.Tensor] = {}
    loss = torch.zeros((), device=target.device)
    if full:
        terms["mse"] = ((out["delta"] - target) ** 2).sum(-1).mean()
        terms["kl"] = NeurokModel.kl_to_prior(out["mu"], out["logvar"], out["mu_cond"]).mean() / out["mu"][0].numel()
        loss = terms["mse"] + kl_weight * terms["kl"]
    if reduced_k:
        if "query_weights" in batch:  # through the simulation's coordinates: handles fitted, the latent the rest
            queries = batch["queries"]
            moved = handle_fit(queries + out["delta_reduced"], queries + target, batch["query_weights"],
                               queries.mean(1, keepdim=True), ridge=1e-6)
            terms["mse_reduced"] = ((moved - queries - target) ** 2).sum(-1).mean()
        else:
            terms["mse_reduced"] = ((out["delta_reduced"] - target) ** 2).sum(-1).mean()
        loss = loss + reduced_weight * terms["mse_reduced"]
    return {"loss": loss, **terms}


class EMA:
    """Exponential moving average of the weights; the EMA model is what checkpoints ship."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.frozen = {k for k, p in model.named_parameters() if not p.requires_grad}  # copied, never averaged

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        for k, v in model.state_dict().items():
            if v.dtype.is_floating_point and k not in self.frozen:
                self.shadow[k].mul_(self.decay).add_(v.detach(), alpha=1 - self.decay)
            else:
                self.shadow[k].copy_(v)


def lr_at(step: int, total: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def _nested(args: argparse.Namespace, reduced_k: int) -> list[int]:
    """The k trained each step (one drawn per step, so the learned directions are ordered: the leading k of W are
    a reduction of their own); empty without a learned reduction."""
    if not reduced_k:
        return []
    ks = sorted({int(k) for k in args.nested.split(",")}) if args.nested else [reduced_k]
    if ks[0] < 1 or ks[-1] > reduced_k:
        raise SystemExit(f"--nested values must lie in 1..{reduced_k}, got {args.nested!r}")
    return ks


def _dist() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend)
    rank = torch.distributed.get_rank() if world > 1 else 0
    return rank, world


def _loader(args, rank: int, world: int) -> tuple[FramePairDataset, Any]:
    data = FramePairDataset(args.data, "train", points=args.points, queries=args.queries, seed=args.seed,
                            residual_handles=args.residual_handles, fit_handles=args.fit_handles, cache=args.cache)
    sampler = torch.utils.data.DistributedSampler(data, world, rank, seed=args.seed) if world > 1 else None
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=sampler is None, sampler=sampler,
                                         num_workers=args.loader_workers, drop_last=True,
                                         generator=torch.Generator().manual_seed(args.seed),
                                         persistent_workers=args.loader_workers > 0)
    return data, loader


def _save(args, model: NeurokModel, ema: EMA, opt, step: int, meta: dict[str, Any]) -> None:
    ema_model = NeurokModel(model.config)
    ema_model.load_state_dict(ema.shadow)
    checkpoint.save(ema_model, os.path.join(args.out, "checkpoint"), {**meta, "step": step})
    state = {"step": step, "model": model.state_dict(), "ema": ema.shadow, "opt": opt.state_dict()}
    tmp = os.path.join(args.out, "resume.pt.tmp")
    torch.save(state, tmp)
    os.replace(tmp, os.path.join(args.out, "resume.pt"))


def train(args: argparse.Namespace) -> dict[str, Any]:
    rank, world = _dist()
    torch.manual_seed(args.seed)
    device = "cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu"
    if device == "cuda" and world > 1:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    config = PRESETS[args.preset]
    initial: dict[str, torch.Tensor] | None = None
    if args.init:  # warm start: the architecture and weights of a checkpoint (a new reduction head starts fresh)
        base, _ = checkpoint.load(args.init)
        config, initial = base.config, base.state_dict()
    if args.reduced_k is not None:
        config = dataclasses.replace(config, reduced_k=args.reduced_k)

    nested = _nested(args, config.reduced_k)
    if min(args.fit_handles, args.residual_handles) < 0 or (args.fit_handles and args.residual_handles):
        raise SystemExit("--fit-handles and --residual-handles take a handle count >= 1, and only one of them")
    if args.fit_handles and not nested:
        raise SystemExit("--fit-handles judges the learned reduction: it needs --reduced-k K > 0")
    model = NeurokModel(config).to(device)
    if initial is not None:
        missing, unexpected = model.load_state_dict(initial, strict=False)
        if unexpected or any(not name.startswith("basis_head.") for name in missing):
            raise SystemExit(f"--init {args.init}: weights do not fit ({missing=}, {unexpected=})")
    full = args.train == "all"
    if not full:  # the reduction alone: everything else is frozen
        if not nested:
            raise SystemExit("--train reduction needs a learned reduction (--reduced-k K > 0)")
        for name, p in model.named_parameters():
            p.requires_grad_(name.startswith("basis_head."))
    ema = EMA(model, args.ema)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.01)
    step = 0
    resume = os.path.join(args.out, "resume.pt")
    if args.resume and os.path.exists(resume):
        state = torch.load(resume, map_location=device, weights_only=True)  # tensors only, no code
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        ema.shadow = state["ema"]
        step = int(state["step"])
    wrapped = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    data, loader = _loader(args, rank, world)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "metrics.jsonl"), "a") if rank == 0 else None
    gen = torch.Generator().manual_seed(args.seed + 1000 * rank + step)
    started, epoch = time.time(), 0
    meta = {"preset": args.preset, "data": [os.path.abspath(d) for d in args.data], "world_size": world,
            "device": device, "train_sequences": len(data), "kl_weight": args.kl, "batch": args.batch * world,
            "init": args.init and os.path.abspath(args.init), "train": args.train, "reduced_k": config.reduced_k,
            "nested_k": nested, "reduced_weight": args.reduced_weight, "residual_handles": args.residual_handles,
            "fit_handles": args.fit_handles, "torch_threads": torch.get_num_threads()}
    from tqdm import tqdm

    bar = tqdm(total=args.steps, initial=step, disable=rank != 0 or not args.progress, file=sys.stderr, unit="step")
    while step < args.steps:
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        data.epoch = epoch
        for batch in loader:
            if step >= args.steps or (args.max_minutes and time.time() - started > 60 * args.max_minutes):
                break
            batch = augment(normalize_batch({k: v for k, v in batch.items() if torch.is_tensor(v)}), gen)
            batch = {k: v.to(device) for k, v in batch.items()}
            for group in opt.param_groups:
                group["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
            k = nested[int(torch.randint(len(nested), (1,), generator=gen))] if nested else 0  # nested reduction
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
                terms = loss_terms(wrapped, batch, args.kl, k, args.reduced_weight, full)
            opt.zero_grad(set_to_none=True)
            terms["loss"].backward()
            grad = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], args.clip)
            opt.step()
            ema.update(model)
            step += 1
            bar.update(1)
            if log and (step % args.log_every == 0 or step == 1):
                row = {"step": step, "time": round(time.time() - started, 2), "lr": opt.param_groups[0]["lr"],
                       "grad_norm": grad.item(), **{k: v.item() for k, v in terms.items()}}
                log.write(json.dumps(row) + "\n")
                log.flush()
                bar.set_postfix({name: f"{row[name]:.4g}" for name in ("mse", "kl", "mse_reduced") if name in row})
            if rank == 0 and step % args.ckpt_every == 0:
                _save(args, model, ema, opt, step, {**meta, "wall_seconds": time.time() - started})
        else:
            epoch += 1
            continue
        break
    bar.close()
    if rank == 0:
        _save(args, model, ema, opt, step, {**meta, "wall_seconds": time.time() - started})
    digest = float(sum(p.detach().double().sum() for p in model.parameters()))
    if world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return {"step": step, "rank": rank, "param_sum": digest}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m neurok_blender.pipeline.train", description=__doc__)
    p.add_argument("--data", required=True, nargs="+", help="one or more dataset roots (their train splits)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="neurok-s")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--batch", type=int, default=16, help="per process")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--kl", type=float, default=0.01)
    p.add_argument("--ema", type=float, default=0.999)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--points", type=int, default=512)
    p.add_argument("--queries", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", help="start from this checkpoint's architecture and weights (fine-tuning)")
    p.add_argument("--reduced-k", type=int, help="learn a per-object reduction with this many latent directions")
    p.add_argument("--nested", help="comma-separated k trained for the reduction, one drawn per step (default: K)")
    p.add_argument("--reduced-weight", type=float, default=1.0, help="weight of the reduced reconstruction loss")
    p.add_argument("--train", choices=["all", "reduction"], default="all",
                   help="'reduction': train only the reduction head, everything else frozen")
    p.add_argument("--residual-handles", type=int, default=0,
                   help="train the latent on what this many affine handles cannot reach (the simulation's own "
                        "coordinates; data.dataset.handle_residual); 0: on the whole deformation")
    p.add_argument("--fit-handles", type=int, default=0,
                   help="the reduced decode is judged through this many affine handles fitted in closed form per "
                        "frame (the simulation's own coordinates): the learned directions learn what they miss")
    p.add_argument("--cache", type=int, default=64,
                   help="sequences kept in memory (with --residual-handles, their targets too: hold them all if RAM allows)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--loader-workers", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--ckpt-every", type=int, default=500)
    p.add_argument("--max-minutes", type=float, default=0.0, help="stop (and checkpoint) after this wall time")
    p.add_argument("--resume", action="store_true", help="continue from OUT/resume.pt if it exists")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--report", help="write this process's final step and weight digest here (JSON)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    np.random.seed(args.seed)
    result = train(args)
    if args.report:
        path = args.report.replace("{rank}", str(result["rank"]))
        with open(path, "w") as fh:
            json.dump(result, fh)
    if result["rank"] == 0:
        print(f"trained to step {result['step']}; checkpoint in {os.path.join(args.out, 'checkpoint')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
