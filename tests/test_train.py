"""Training: a few steps lower the loss on a tiny dataset; DDP replicas stay identical; resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")

from neurok_blender.pipeline import train  # noqa: E402
from neurok_blender.pipeline.data.dataset import FramePairDataset  # noqa: E402
from neurok_blender.pipeline.data.generate import generate  # noqa: E402
from neurok_blender.pipeline.eval import handle_fit  # noqa: E402
from neurok_blender.runtime.model import checkpoint  # noqa: E402
from neurok_blender.runtime.model.config import PRESETS  # noqa: E402
from neurok_blender.runtime.model.network import NeurokModel  # noqa: E402
from tests.conftest import ROOT  # noqa: E402


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tiny"))
    # a closed solid among them: the tower (the smoke draw's beam collapsed in its simulator: rejected since 1.4.0)
    generate(root, "smoke", families=["flag", "tower", "door", "cape"], progress=False)
    return root


def fixed_batch(root):
    data = FramePairDataset(root, "train", points=96, queries=96, seed=0)
    batch = torch.utils.data.default_collate([data[i] for i in range(len(data))])
    return train.normalize_batch({k: v for k, v in batch.items() if torch.is_tensor(v)})


def test_normalized_shapes_fit_the_unit_cube(tiny_dataset):
    batch = fixed_batch(tiny_dataset)
    pos = batch["features"][..., :3]
    assert pos.abs().max() <= 1.0 + 1e-5
    assert torch.allclose(pos.abs().amax((1, 2)), torch.ones(pos.shape[0]), atol=1e-5)


def test_a_few_steps_lower_the_loss(tiny_dataset):
    torch.manual_seed(0)
    batch = fixed_batch(tiny_dataset)
    model = NeurokModel(PRESETS["neurok-xs"])
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def loss():
        torch.manual_seed(1)  # the same posterior noise each time, so losses compare
        return train.loss_terms(model, batch, 0.01)["loss"]

    before = loss().item()
    for _ in range(60):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < 0.7 * before


@pytest.mark.slow
def test_cli_trains_checkpoints_and_resumes(tiny_dataset, tmp_path):
    out = str(tmp_path / "run")
    common = ["--data", tiny_dataset, "--preset", "neurok-xs", "--out", out, "--batch", "2", "--points", "64",
              "--queries", "64", "--no-progress", "--ckpt-every", "3", "--log-every", "1"]
    assert train.main([*common, "--steps", "4"]) == 0
    model, meta = checkpoint.load(os.path.join(out, "checkpoint"))
    assert meta["step"] == 4 and meta["preset"] == "neurok-xs"
    assert train.main([*common, "--steps", "6", "--resume"]) == 0
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert [r["step"] for r in rows][-2:] == [5, 6]
    assert checkpoint.load(os.path.join(out, "checkpoint"))[1]["step"] == 6


@pytest.mark.slow
def test_ddp_two_cpu_processes_keep_replicas_identical(tiny_dataset, tmp_path):
    report = str(tmp_path / "rank{rank}.json")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517",
           "-m", "neurok_blender.pipeline.train", "--data", tiny_dataset, "--preset", "neurok-xs",
           "--out", str(tmp_path / "ddp"), "--steps", "3", "--batch", "1", "--points", "64", "--queries", "64",
           "--no-progress", "--report", report]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    r0, r1 = (json.load(open(report.replace("{rank}", str(r)))) for r in (0, 1))
    assert r0["step"] == r1["step"] == 3
    assert r0["param_sum"] == r1["param_sum"]


@pytest.mark.slow
def test_ik_evaluation_writes_table_json_and_picture(tiny_dataset, tmp_path):
    from neurok_blender.pipeline import eval as evaluation

    model = NeurokModel(PRESETS["neurok-xs"])
    with torch.no_grad():
        for p in model.head.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # an untrained but non-trivial decoder
    checkpoint.save(model, str(tmp_path / "ckpt"))
    out = str(tmp_path / "eval")
    assert evaluation.main(["ik", "--ckpt", str(tmp_path / "ckpt"), "--data", tiny_dataset, "--split", "train",
                            "--sequences", "1", "--frames", "1", "--kq", "2", "--steps", "3", "--max-points", "60",
                            "--out", out]) == 0
    result = json.load(open(os.path.join(out, "ik.json")))
    assert set(result["results"]) == {"rest", "pca", "neurok_reduced", "neurok_full",  # and the simulation's coordinates:
                                      "pca_handles", "neurok_handles", "pca_coords", "neurok_coords"}
    assert result["handles"] == 4 and "the simulation's coordinates" in open(os.path.join(out, "ik_table.md")).read()
    assert "[-1, 1]^3" in result["convention"]
    assert result["results"]["rest"]["vertex_error"] > 0
    assert os.path.getsize(os.path.join(out, "ik_fits.png")) > 5000
    assert "Chamfer-L1" in open(os.path.join(out, "ik_table.md")).read()


def test_training_the_learned_reduction_alone_moves_only_its_head_and_lowers_its_loss(tiny_dataset):
    """--train reduction: the rest of the model is frozen (a fine-tune cannot spoil the full latent), and the
    reduced reconstruction through z = μ_cond + W Wᵀ(μ − μ_cond) improves on a fixed batch."""
    torch.manual_seed(0)
    batch = fixed_batch(tiny_dataset)
    base = NeurokModel(PRESETS["neurok-xs"])
    opt = torch.optim.AdamW(base.parameters(), lr=2e-3)
    for _ in range(80):  # a decoder whose output depends on the latent, so the reduction has something to reach
        opt.zero_grad()
        train.loss_terms(base, batch, 0.01)["loss"].backward()
        opt.step()
    import dataclasses

    model = NeurokModel(dataclasses.replace(base.config, reduced_k=4))
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and set(missing) == {"basis_head.weight", "basis_head.bias"}
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not n.startswith("basis_head.")}
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith("basis_head."))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)

    def loss(k=4):
        return train.loss_terms(model, batch, 0.01, reduced_k=k, full=False)

    first = loss()
    assert set(first) == {"loss", "mse_reduced"}  # no VAE terms when the rest is frozen
    before = first["loss"].item()
    for step in range(60):
        opt.zero_grad()
        loss(2 if step % 2 else 4)["loss"].backward()  # nested: k = 2 and 4 alternately
        opt.step()
    after = loss()["loss"].item()
    floor = train.loss_terms(model, batch, 0.01, reduced_k=4)["mse"].item()  # the full latent's: the best any k reaches
    assert floor < after < before
    assert after - floor < 0.5 * (before - floor)  # more than half the way to the full latent (60 % here)
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    full = train.loss_terms(model, batch, 0.01, reduced_k=4)  # both paths in one batched decode
    assert {"mse", "kl", "mse_reduced"} <= set(full)


@pytest.mark.slow
def test_cli_fine_tunes_a_reduction_from_a_checkpoint(tiny_dataset, tmp_path):
    base = NeurokModel(PRESETS["neurok-xs"])
    checkpoint.save(base, str(tmp_path / "base"))
    out = str(tmp_path / "run")
    assert train.main(["--data", tiny_dataset, tiny_dataset, "--init", str(tmp_path / "base"), "--reduced-k", "6",
                       "--nested", "3,6", "--train", "reduction", "--out", out, "--steps", "3", "--batch", "2",
                       "--points", "64", "--queries", "64", "--no-progress", "--log-every", "1"]) == 0
    model, meta = checkpoint.load(os.path.join(out, "checkpoint"))
    assert model.config.reduced_k == 6 and meta["nested_k"] == [3, 6] and meta["train"] == "reduction"
    assert all(torch.equal(p, base.state_dict()[n]) for n, p in model.state_dict().items()
               if not n.startswith("basis_head."))
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert all("mse_reduced" in r and "kl" not in r for r in rows)
    with pytest.raises(SystemExit, match="--nested values must lie in 1..6"):
        train.main(["--data", tiny_dataset, "--init", str(tmp_path / "base"), "--reduced-k", "6", "--nested", "3,9",
                    "--train", "reduction", "--out", str(tmp_path / "bad"), "--steps", "1", "--no-progress"])
    with pytest.raises(SystemExit, match="needs a learned reduction"):
        train.main(["--data", tiny_dataset, "--init", str(tmp_path / "base"), "--train", "reduction",
                    "--out", str(tmp_path / "bad2"), "--steps", "1", "--no-progress"])


def test_the_residual_target_is_what_the_handles_cannot_reach_and_handles_plus_it_reach_every_frame():
    """data.dataset.handle_residual: a frame the handles can make exactly leaves the latent nothing; a fold on top
    leaves the fold (carried back into the rest frame), and the handles fitted to the frame carry x̄ onto it."""
    from neurok_blender.pipeline.data.dataset import handle_residual, vertex_masses
    from neurok_blender.runtime.dynamics.handles import handle_weights
    from neurok_blender.runtime.geometry import unique_edges

    xs, ys = np.meshgrid(np.linspace(0, 1, 12), np.linspace(0, 1, 12), indexing="ij")
    rest = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], 1)
    idx = np.arange(144).reshape(12, 12)
    tris = np.concatenate([np.stack([idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()], 1),
                           np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()], 1)])
    w = handle_weights(rest, vertex_masses(rest, tris), unique_edges(tris), 4)
    rng = np.random.default_rng(0)
    a, t = 0.3 * rng.standard_normal((4, 3, 3)), 0.3 * rng.standard_normal((4, 3))
    c = rest.mean(0)
    handles_only = rest + np.einsum("vh,hab,vb->va", w, a, rest - c) + w @ t
    fold = np.zeros_like(rest)
    fold[:, 2] = 0.05 * np.sin(6 * np.pi * rest[:, 0])  # a wrinkle no smooth handle makes
    frames = np.stack([handles_only, rest + fold])
    xbar = handle_residual(rest, frames, w)
    assert np.abs(xbar[0] - rest).max() < 1e-6  # the handles held it all
    moved = np.linalg.norm(xbar[1] - rest, axis=1)
    assert moved.mean() > 0.5 * np.abs(fold[:, 2]).mean()  # the wrinkle is left for the latent
    r = rest - c
    phi = np.concatenate([w[:, :, None] * r[:, None, :], w[:, :, None]], -1).reshape(len(rest), -1)
    coeff = np.linalg.lstsq(phi, frames[1] - rest, rcond=None)[0].reshape(4, 4, 3)  # (H, 4, out)
    m, shift = np.einsum("vh,hba->vab", w, coeff[:, :3]), np.einsum("vh,ha->va", w, coeff[:, 3])
    recomposed = xbar[1] + np.einsum("vab,vb->va", m, xbar[1] - c) + shift
    assert np.abs(recomposed - frames[1]).max() < 1e-6  # handles + latent reach the frame exactly


def test_the_loader_serves_the_residual_target_under_handles(tiny_dataset):
    plain = FramePairDataset(tiny_dataset, "train", points=64, queries=64)
    residual = FramePairDataset(tiny_dataset, "train", points=64, queries=64, residual_handles=4)
    a, b = plain[0], residual[0]
    assert np.array_equal(a["queries"], b["queries"]) and np.array_equal(a["features"], b["features"])
    assert np.abs(b["query_delta"]).mean() < np.abs(a["query_delta"]).mean()  # the handles hold most of it


def test_the_handle_fit_reaches_affine_motion_exactly_so_the_reduced_loss_trains_only_what_handles_miss(tiny_dataset):
    """``--fit-handles``: the reduced decode is judged after the handles' closed-form fit, so a frame the handles
    make alone costs nothing (and its gradient asks nothing of the latent); the loader serves the queries' weights."""
    data = FramePairDataset(tiny_dataset, "train", points=64, queries=64, fit_handles=4)
    item = data[0]
    assert item["query_weights"].shape == (64, 4) and np.allclose(item["query_weights"][:, 0], 1.0)
    q = torch.as_tensor(item["queries"])[None]
    w = torch.as_tensor(item["query_weights"])[None]
    gen = torch.Generator().manual_seed(0)
    a, t = 0.2 * torch.randn(4, 3, 3, generator=gen), 0.2 * torch.randn(4, 3, generator=gen)
    c = q.mean(1, keepdim=True)
    affine = q + torch.einsum("bqh,hij,bqj->bqi", w, a, q - c) + w @ t
    assert torch.allclose(handle_fit(q, affine, w, c), affine, atol=1e-5)
    wrinkle = affine.clone()
    wrinkle[..., 2] += 0.05 * torch.sin(20 * q[..., 0])
    left = handle_fit(q, wrinkle, w, c) - wrinkle
    assert left.norm(dim=-1).mean() > 0.01  # a wrinkle is left for the latent


def test_training_refuses_handle_counts_it_cannot_use(tiny_dataset, tmp_path):
    common = ["--data", tiny_dataset, "--preset", "neurok-xs", "--out", str(tmp_path / "run"), "--steps", "1",
              "--no-progress"]
    for bad, says in ((["--fit-handles", "-1", "--reduced-k", "4"], "handle count"),
                      (["--fit-handles", "4", "--residual-handles", "4", "--reduced-k", "4"], "only one"),
                      (["--fit-handles", "4"], "reduced-k")):
        with pytest.raises(SystemExit, match=says):
            train.main([*common, *bad])
    assert not os.path.exists(tmp_path / "run" / "checkpoint")  # nothing written
