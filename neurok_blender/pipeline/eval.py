"""Evaluation: ``python -m neurok_blender.pipeline.eval ik --ckpt C --data DIR --split test``. No bpy use.

Inverse kinematics on held-out families: fit the model's latent to target frames and compare shapes.
Convention: every shape is normalized by its rest shape's bounding box into the cube [-1, 1]^3
(centre at the origin, largest half-extent 1). Chamfer-L1 is the mean Euclidean distance to the nearest
point (averaged both ways), Chamfer-L2 the mean squared distance (both ways), over mesh vertices;
the per-vertex error is the mean distance to the corresponding target vertex over the bounding-box diagonal.
Baselines: the rest shape, and a linear PCA of deformation fields (sampled on an 8^3 grid over the
normalized cube) with the same k_q, fitted on the training split.
The simulation's own coordinates are fitted too: the k_q latent directions plus the affine skinning handles
(12 numbers each) through the product's vertex decode, beside a PCA with the same count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

from ..runtime.dynamics.handles import DOF
from ..runtime.geometry import bbox_normalizer, features, sample_surface
from ..runtime.model import checkpoint, reduction
from ..runtime.model.network import NeurokModel
from .data.dataset import index_sequences, load_sequence, sound

GRID = 8


def chamfer(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    d = torch.cdist(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32))
    ab, ba = d.min(1).values, d.min(0).values
    return float((ab.mean() + ba.mean()) / 2), float(((ab**2).mean() + (ba**2).mean()) / 2)


def face_angle_change(rest: np.ndarray, frames: np.ndarray, triangles: np.ndarray) -> float:
    """Mean change, in degrees over frames and interior edges, of the angle between the normals of the two faces
    that share an edge: near 0 for a rigid or smoothly bending motion, large where the surface shows ridges and
    lumps (the pattern of the points a deformation was computed at)."""
    tris = np.asarray(triangles, np.int64)
    edges = np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), 1)
    faces = np.tile(np.arange(len(tris)), 3)
    order = np.lexsort((edges[:, 1], edges[:, 0]))
    edges, faces = edges[order], faces[order]
    same = np.flatnonzero((edges[1:] == edges[:-1]).all(1))  # an interior edge: two consecutive equal rows
    pairs = np.stack([faces[same], faces[same + 1]], 1)

    def angles(x: np.ndarray) -> np.ndarray:
        n = np.cross(x[tris[:, 1]] - x[tris[:, 0]], x[tris[:, 2]] - x[tris[:, 0]])
        n /= np.linalg.norm(n, axis=1, keepdims=True).clip(1e-12)
        return np.arccos(np.clip((n[pairs[:, 0]] * n[pairs[:, 1]]).sum(1), -1.0, 1.0))

    at_rest = angles(np.asarray(rest, float))
    return float(np.degrees(np.mean([np.abs(angles(np.asarray(f, float)) - at_rest).mean() for f in frames])))


def trilinear(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Corner indices (P, 8) and weights (P, 8) of points in the GRID^3 lattice over [-1, 1]^3."""
    rel = np.clip((points + 1) / 2 * (GRID - 1), 0, GRID - 1 - 1e-6)
    base = np.floor(rel).astype(int)
    frac = rel - base
    idx, wts = [], []
    for c in range(8):
        off = np.array([(c >> 2) & 1, (c >> 1) & 1, c & 1])
        node = base + off
        idx.append((node[:, 0] * GRID + node[:, 1]) * GRID + node[:, 2])
        wts.append(np.prod(np.where(off == 1, frac, 1 - frac), axis=1))
    return np.stack(idx, 1), np.stack(wts, 1)


def grid_field(points: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Least-squares deformation field on the lattice that best explains δ at the points (GRID^3 * 3,)."""
    idx, wts = trilinear(points)
    n = GRID**3
    A = np.zeros((len(points), n))
    np.put_along_axis(A, idx, wts, axis=1)
    reg = 1e-3 * np.eye(n)
    field = np.linalg.solve(A.T @ A + reg, A.T @ delta)  # (n, 3)
    return field.ravel()


class PCABaseline:
    """Linear PCA of normalized deformation fields from the training split (``fit`` takes the leading k)."""

    def __init__(self, data: str, k: int, max_frames: int = 600, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        fields = []
        refs = sound(index_sequences(data, "train"))  # no collapsed solids in the baseline's modes
        for ref in rng.permutation(refs)[: max_frames // 4]:
            seq = load_sequence(ref)
            centre, scale = bbox_normalizer(seq["rest"])
            rest = (seq["rest"] - centre) / scale
            for t in rng.choice(np.arange(1, len(seq["frames"])), size=4, replace=False):
                fields.append(grid_field(rest, (seq["frames"][t] - seq["rest"]) / scale))
        X = np.asarray(fields)
        self.mean = X.mean(0)
        _, _, vt = np.linalg.svd(X - self.mean, full_matrices=False)
        self.vectors, self.k = vt, k  # (samples, n*3): the principal directions, leading first

    def fit(self, rest: np.ndarray, target: np.ndarray, k: int | None = None) -> np.ndarray:
        idx, wts = trilinear(rest)
        def at_points(field):  # (n*3,) → (P, 3)
            f = field.reshape(-1, 3)
            return np.einsum("pk,pkc->pc", wts, f[idx])
        basis = self.vectors[: self.k if k is None else k]  # (k, n*3)
        B = np.stack([at_points(b).ravel() for b in basis], 1)  # (P*3, k)
        resid = (target - rest - at_points(self.mean)).ravel()
        coef, *_ = np.linalg.lstsq(B, resid, rcond=None)
        return rest + at_points(self.mean) + (B @ coef).reshape(-1, 3)


NEUROK_ROWS = ("reduced", "learned", "full")  # the pure-latent fits ``eval ik`` makes (``--rows``)


def neurok_fits(model: NeurokModel, rest_all: np.ndarray, rest: np.ndarray, triangles: np.ndarray, pins: np.ndarray,
                targets: list[np.ndarray], k: int, steps: int, seed: int,
                rows: tuple[str, ...] = NEUROK_ROWS) -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    tri, bary = sample_surface(rest_all, triangles, 1024, rng)
    feats = torch.as_tensor(features(rest_all, triangles, pins, tri, bary), dtype=torch.float32)[None]
    queries = torch.as_tensor(rest, dtype=torch.float32)[None]
    with torch.no_grad():
        mu_cond, tokens = model.encode_prior(feats)
    sub = (reduction.active_subspace(model, mu_cond, tokens, queries, k=k, samples=max(48, 4 * k), seed=seed)
           if "reduced" in rows else None)
    learned = (reduction.learned_subspace(model, mu_cond, tokens, k)
               if "learned" in rows and model.config.reduced_k >= k else None)
    out: dict[str, list[np.ndarray]] = {f"neurok_{r}": [] for r in rows if r != "learned" or learned is not None}

    def decoded(z: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return reduction.positions(model, z, tokens, queries, mu_cond)[0].numpy()

    for target in targets:
        tgt = torch.as_tensor(target, dtype=torch.float32)
        if sub is not None:
            q, _ = reduction.fit_q(model, sub, tokens, queries, tgt, steps=steps, lr=0.15)  # |q| reaches ~30: larger steps
            out["neurok_reduced"].append(decoded(sub.z(q)))
        if learned is not None:
            ql, _ = reduction.fit_q(model, learned, tokens, queries, tgt, steps=steps, lr=0.15)
            out["neurok_learned"].append(decoded(learned.z(ql)))
        if "full" in rows:
            z, _ = reduction.fit_latent(model, mu_cond, tokens, queries, tgt, steps=steps)
            out["neurok_full"].append(decoded(z))
    return out


def handle_fit(xbar: torch.Tensor, target: torch.Tensor, weights: torch.Tensor, centre: torch.Tensor,
               ridge: float = 1e-9) -> torch.Tensor:
    """The handles' best positions for latent-decoded points ``xbar`` (…, P, 3) with their ``weights`` (…, P, H):
    x = x̄ + Σ_h w_h (A_h (x̄ − c) + t_h) is linear in every handle's A and t, so they are solved for exactly (least
    squares, each output axis on the same features w_h (x̄ − c), w_h); differentiable in x̄ (variable projection:
    only the latent is iterated; in training, a loss on the result trains only what the handles miss). ``ridge``
    is relative to the normal matrix's mean diagonal."""
    r = (xbar - centre).double()  # float64: a flat shape's features along its normal are zero (a ridge holds them)
    w = weights.double()
    phi = torch.cat([w[..., :, None] * r[..., None, :], w[..., None]], -1).flatten(-2)  # (…, P, 4H)
    gram = phi.transpose(-1, -2) @ phi  # (…, 4H, 4H)
    scale = gram.diagonal(dim1=-2, dim2=-1).mean(-1)[..., None, None]
    gram = gram + ridge * (scale + 1e-12) * torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    coeff = torch.linalg.solve(gram, phi.transpose(-1, -2) @ (target - xbar).double())  # (…, 4H, 3)
    return xbar + (phi @ coeff).to(xbar.dtype)


def simulation_fits(ckpt: str, seq: dict[str, np.ndarray], keep: np.ndarray, targets: list[np.ndarray], k: int,
                    handles: int, steps: int, how: str = "auto") -> dict[str, list[np.ndarray]]:
    """IK in the coordinates the simulation integrates (issue 14): the k latent directions of the product's own
    reduction and ``handles`` affine handles, through its vertex decode (K-nearest dual-quaternion drive of
    the cubature points' deformation, then the handle blend with the vertices' weights). Targets and fits are
    normalized as in ``evaluate_ik``; ``how`` is the solver's reduction. Also the handles alone (the latent at rest)."""
    from ..runtime import api
    from ..runtime.model import knn

    sim = api.prepare(seq["rest"], seq["triangles"], pins=seq["pins"], checkpoint=ckpt, device="cpu", frame_count=2,
                      solver={"variation": 0.0, "subspace": k, "handles": max(handles, 1)},
                      research={"handles": handles > 0, "reduction": how})
    centre, scale = bbox_normalizer(seq["rest"])
    to_norm = lambda x: (x - torch.as_tensor(centre, dtype=x.dtype)) / float(scale[0, 0])  # noqa: E731
    idx = torch.as_tensor(keep)
    verts, drive, blend = sim.vertices_norm[idx], sim.drive_index[idx], sim.drive_weights[idx]
    weights, hub = sim.vertex_weights[idx], to_norm(sim.handles.centre[None])[0]

    def xbar(latent: torch.Tensor) -> torch.Tensor:  # the latent decode at the kept vertices, normalized
        moved = knn.drive(verts, sim.map.deformation(latent), drive, sim.model.kind, blend)
        return to_norm(moved * sim.scale + sim.map.centre)

    out: dict[str, list] = {"neurok_coords": [], "neurok_handles": [], "handle_count": sim.handles.handles}
    zero = torch.zeros(sim.subspace.k)
    with torch.no_grad():
        rest = xbar(zero)
    for target in targets:
        tgt = torch.as_tensor(target, dtype=torch.float32)
        with torch.no_grad():
            out["neurok_handles"].append(handle_fit(rest, tgt, weights, hub).numpy())
        loss = lambda latent: ((handle_fit(xbar(latent), tgt, weights, hub) - tgt) ** 2).sum(-1).mean()  # noqa: B023, E731
        latent, _ = reduction.fit(loss, zero, steps, lr=0.15)
        with torch.no_grad():
            out["neurok_coords"].append(handle_fit(xbar(latent), tgt, weights, hub).numpy())
    return out


def evaluate_ik(args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    model, meta = checkpoint.load(args.ckpt)
    refs = sound(index_sequences(args.data, args.split))  # a collapsed solid is no target (generator 1.4.0)
    rng = np.random.default_rng(args.seed)
    refs = [refs[i] for i in rng.permutation(len(refs))[: args.sequences]]
    coords = args.kq + DOF * args.handles  # the simulation's coordinates: latent directions and affine handles
    pca = PCABaseline(args.data, args.kq, seed=args.seed)
    methods = ["rest", "pca"] + [f"neurok_{r}" for r in NEUROK_ROWS if r in args.rows
                                 and (r != "learned" or model.config.reduced_k >= args.kq)]
    if args.handles:
        methods += ["pca_handles", "neurok_handles", "pca_coords", "neurok_coords"]
    scores = {m: {"chamfer_l1": [], "chamfer_l2": [], "vertex_error": []} for m in methods}
    examples, handle_counts = [], {}
    started = time.time()
    for n, ref in enumerate(refs):
        seq = load_sequence(ref)
        centre, scale = bbox_normalizer(seq["rest"])
        rest_all = (seq["rest"] - centre) / scale
        keep = np.sort(rng.permutation(len(rest_all))[: args.max_points])  # fits and metrics on these vertices
        rest = rest_all[keep]
        frames = rng.choice(np.arange(1, len(seq["frames"])), size=args.frames, replace=False)
        targets = [((seq["frames"][t] - centre) / scale)[keep] for t in frames]
        fits = neurok_fits(model, rest_all, rest, seq["triangles"].astype(np.int64), seq["pins"], targets, args.kq,
                           args.steps, args.seed, tuple(args.rows))
        fits["rest"] = [rest for _ in targets]
        fits["pca"] = [pca.fit(rest, t) for t in targets]
        if args.handles:
            fits.update(simulation_fits(args.ckpt, seq, keep, targets, args.kq, args.handles, args.steps,
                                        args.reduction))
            # what the simulation really gave it: Solver.handles on an open surface, solid_handles on a closed
            # solid, one per piece of an assembly — the table's labels say so
            handle_counts.setdefault(ref.meta["family"], fits.pop("handle_count"))
            fits["pca_handles"] = [pca.fit(rest, t, DOF * args.handles) for t in targets]
            fits["pca_coords"] = [pca.fit(rest, t, coords) for t in targets]
        diag = float(np.linalg.norm(np.ptp(rest, axis=0)))
        for m in methods:
            for fit, target in zip(fits[m], targets):
                c1, c2 = chamfer(fit, target)
                scores[m]["chamfer_l1"].append(c1)
                scores[m]["chamfer_l2"].append(c2)
                scores[m]["vertex_error"].append(float(np.linalg.norm(fit - target, axis=1).mean() / diag))
        if len(examples) < 4:
            examples.append({"family": ref.meta["family"], "target": targets[0], **{m: fits[m][0] for m in methods}})
        print(f"[{n + 1}/{len(refs)}] {ref.meta['family']}", file=sys.stderr, flush=True)
    summary = {m: {k: float(np.mean(v)) for k, v in s.items()} for m, s in scores.items()}
    result = {"convention": __doc__.split("\n\n")[1].strip(), "split": args.split, "max_points": args.max_points, "sequences": len(refs),
              "frames_per_sequence": args.frames, "k_q": args.kq, "handles": args.handles,
              "handle_counts": handle_counts,
              "reduction": args.reduction,
              "pca_samples": len(pca.vectors), "fit_steps": args.steps, "rows": list(args.rows), "checkpoint": meta,
              "families": sorted({r.meta["family"] for r in refs}), "results": summary,
              "seconds": time.time() - started}
    write_outputs(args.out, result, examples, args.results)
    return result


IK_MARKS = ("<!-- eval.ik: begin (generated) -->", "<!-- eval.ik: end -->")


def write_outputs(out: str, result: dict, examples: list[dict], results: str | None = None) -> None:
    """ik.json, ik_table.md and ik_fits.png in ``out``; with ``results``, that page's generated IK section too."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ik.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    kq, h = result["k_q"], result.get("handles", 0)
    kh = DOF * h
    counts = handle_label(result.get("handle_counts") or {})
    names = {"rest": "rest shape (baseline)", "pca": f"linear PCA, k={kq} (baseline)",
             "neurok_reduced": f"NeuROK, reduced q, post-hoc active subspace (k={kq})",
             "neurok_learned": f"NeuROK, reduced q, the model's learned reduction (k={kq})",
             "neurok_full": "NeuROK, full latent",
             "pca_handles": f"linear PCA, k={kh} (baseline for the handles)",
             "neurok_handles": f"affine handles alone ({counts or h}; k = 12 per handle)",
             "pca_coords": f"linear PCA, k={kq + kh} (baseline for the simulation's coordinates)",
             "neurok_coords": f"NeuROK, the simulation's coordinates: {kq} latent ({result.get('reduction', 'auto')}) + "
                              f"the handles ({counts or h})"}
    lines = [f"IK on the {result['split']} split ({', '.join(result['families'])}): {result['sequences']} sequences x "
             f"{result['frames_per_sequence']} frames. {result['convention']}", "",
             "| method | Chamfer-L1 | Chamfer-L2 | vertex error / diag |", "| --- | --- | --- | --- |"]
    for m, s in result["results"].items():
        lines.append(f"| {names[m]} | {s['chamfer_l1']:.4f} | {s['chamfer_l2']:.5f} | {s['vertex_error']:.4f} |")
    with open(os.path.join(out, "ik_table.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    if results:  # the results page's generated IK section
        from .validate.report import replace_marked

        command = "python -m neurok_blender.pipeline.eval " + " ".join(sys.argv[1:])
        replace_marked(results, IK_MARKS, "\n".join(["## Inverse kinematics on held-out families", "",
                                                     f"`{command}`", "", *lines]))
    draw_examples(os.path.join(out, "ik_fits.png"), examples)


def handle_label(counts: dict[str, int]) -> str:
    """"4 on ribbon; 8 on plate, star_toy": each family's real handle count, grouped."""
    by_count: dict[int, list[str]] = {}
    for fam, n in sorted(counts.items()):
        by_count.setdefault(int(n), []).append(fam)
    return "; ".join(f"{n} on {', '.join(fams)}" for n, fams in sorted(by_count.items()))


def draw_examples(path: str, examples: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = ["target", "rest", "pca"] + [c for c in ("neurok_reduced", "neurok_learned", "neurok_full", "pca_coords",
                                                    "neurok_coords") if examples and c in examples[0]]
    fig = plt.figure(figsize=(3 * len(cols), 3 * max(1, len(examples))))
    for r, ex in enumerate(examples):
        for c, name in enumerate(cols):
            ax = fig.add_subplot(len(examples), len(cols), r * len(cols) + c + 1, projection="3d")
            v = ex[name]
            ax.scatter(v[:, 0], v[:, 1], v[:, 2], s=1.5, color="#3a6ea5" if name != "target" else "#e07b28")
            for set_lim in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
                set_lim(-1.3, 1.3)
            ax.set_axis_off()
            ax.set_title(f"{ex['family']}: {name}" if c == 0 else name, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neurok_blender.pipeline.eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ik = sub.add_parser("ik", help="inverse kinematics on held-out families")
    ik.add_argument("--ckpt", required=True)
    ik.add_argument("--data", required=True)
    ik.add_argument("--split", default="test")
    ik.add_argument("--sequences", type=int, default=24)
    ik.add_argument("--frames", type=int, default=3)
    ik.add_argument("--kq", type=int, default=16)
    ik.add_argument("--handles", type=int, default=4, help="affine handles of the simulation's coordinates (0: skip those rows)")
    ik.add_argument("--steps", type=int, default=400,
                    help="Adam steps per fit; Adam moves a coordinate about its rate per step, and large held-out "
                         "deformations need |q| up to ~35, so 100-150 steps understate the space's reach "
                         "(docs/decisions.md#ik-steps)")
    ik.add_argument("--reduction", choices=["auto", "learned", "active"], default="auto",
                    help="the latent directions of the simulation's coordinates (as the solver's reduction)")
    ik.add_argument("--seed", type=int, default=0)
    ik.add_argument("--max-points", type=int, default=600, help="vertices per shape used for fits and metrics")
    ik.add_argument("--rows", nargs="+", choices=NEUROK_ROWS, default=list(NEUROK_ROWS),
                    help="the pure-latent fits to make: the post-hoc reduction, the learned one, the full latent "
                         "(e.g. --rows full: only the full latent)")
    ik.add_argument("--out", default="eval")
    ik.add_argument("--results", help="also rewrite the generated IK section of this page (docs/results.md)")
    args = parser.parse_args(argv)
    result = evaluate_ik(args)
    print(open(os.path.join(args.out, "ik_table.md")).read())
    return 0 if result else 1


if __name__ == "__main__":
    sys.exit(main())
