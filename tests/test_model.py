"""The NeuROK model on the xs preset: shapes, dual quaternions, K-nearest driving, rest latent,
checkpoints, model reduction."""

from __future__ import annotations

import contextlib
import json
import math
import os

import pytest

torch = pytest.importorskip("torch")

from neurok_blender.errors import CheckpointError  # noqa: E402
from neurok_blender.runtime.model import checkpoint, dualquat, knn, reduction  # noqa: E402
from neurok_blender.runtime.model.config import PRESETS, ModelConfig  # noqa: E402
from neurok_blender.runtime.model.heads import HEADS  # noqa: E402
from neurok_blender.runtime.model.network import NeurokModel  # noqa: E402

XS = PRESETS["neurok-xs"]


def model_and_inputs(config=XS, seed=0, n=64, m=40):
    torch.manual_seed(seed)
    model = NeurokModel(config).eval()
    features = torch.randn(2, n, 7)
    return model, features, torch.rand(2, m, 3) * 2 - 1


def perturb(model):
    with torch.no_grad():
        for p in model.head.parameters():
            p.add_(torch.randn_like(p) * 0.1)


def test_presets_scale_up_and_reject_unknown_keys():
    assert PRESETS["neurok-xs"].width < PRESETS["neurok-s"].width < PRESETS["neurok-b"].width
    with pytest.raises(CheckpointError, match="valid keys"):
        ModelConfig.from_dict({"width": 8, "depth": 3})


def test_tensor_shapes():
    model, features, queries = model_and_inputs()
    mu_cond, tokens = model.encode_prior(features)
    assert mu_cond.shape == (2, XS.latent_tokens, XS.latent_dim) and tokens.shape == (2, XS.latent_tokens, XS.width)
    mu, logvar = model.encode_deformation(features, torch.randn(2, 64, 3))
    assert mu.shape == logvar.shape == mu_cond.shape
    out = model.decode(model.sample(mu, logvar), tokens, queries)
    assert out.shape == (2, 40, 8)
    assert model.kl_to_prior(mu, logvar, mu_cond).shape == (2,)


def test_encoders_accept_any_number_of_points():
    model, features, _ = model_and_inputs()
    a, _ = model.encode_prior(features[:, :10])
    b, _ = model.encode_prior(torch.randn(2, 500, 7))
    assert a.shape == b.shape


def test_decoder_outputs_unit_dual_quaternions():
    model, features, queries = model_and_inputs()
    perturb(model)
    mu_cond, tokens = model.encode_prior(features)
    dq = model.decode(mu_cond + torch.randn_like(mu_cond), tokens, queries)
    assert torch.allclose(dq[..., :4].norm(dim=-1), torch.ones(2, 40), atol=1e-5)
    assert torch.allclose((dq[..., :4] * dq[..., 4:]).sum(-1), torch.zeros(2, 40), atol=1e-5)


def test_prepared_queries_decode_the_same_numbers():
    """The dynamics decode fixed cubature points many times; their query-side work is done once."""
    from neurok_blender.runtime.model.layers import explicit_attention

    model, features, queries = model_and_inputs()
    perturb(model)
    mu_cond, tokens = model.encode_prior(features[:1])
    z = mu_cond + torch.randn(5, *mu_cond.shape[1:])  # five latents share the one set of queries
    prepared = model.prepare_queries(queries[:1])
    with torch.no_grad():
        for explicit in (False, True):
            with explicit_attention() if explicit else contextlib.nullcontext():
                plain = model.decode_absolute(z, tokens.expand(5, -1, -1), queries[:1].expand(5, -1, -1))
                fast = model.decode_absolute(z, tokens.expand(5, -1, -1), None, prepared=prepared)
            assert torch.allclose(plain, fast, atol=1e-6)
            assert not torch.allclose(fast[0], fast[1], atol=1e-3)  # the latents do differ


def test_dual_quaternion_rigid_motion_roundtrip():
    angle, axis, t = 0.7, torch.tensor([0.0, 0.0, 1.0]), torch.tensor([1.0, -2.0, 0.5])
    real = torch.cat([torch.tensor([math.cos(angle / 2)]), axis * math.sin(angle / 2)])
    dual = 0.5 * dualquat.qmul(torch.cat([torch.zeros(1), t]), real)
    dq = torch.cat([real, dual])
    p = torch.tensor([[1.0, 0.0, 0.0]])
    moved = dualquat.apply(dq, p)
    assert torch.allclose(moved, torch.tensor([[math.cos(angle), math.sin(angle), 0.0]]) + t, atol=1e-6)
    assert torch.allclose(dualquat.apply(dualquat.inverse(dq), moved), p, atol=1e-6)


def test_k_nearest_driving_averages_neighbours():
    queries = torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [10.0, 0, 0]])
    vertices = torch.tensor([[0.4, 0, 0]])
    index = knn.nearest(vertices, queries, k=2)
    assert sorted(index[0].tolist()) == [0, 1]
    disp = torch.tensor([[0.0, 0, 1], [0.0, 0, 3], [5.0, 5, 5]])
    assert torch.allclose(knn.drive(vertices, disp, index, HEADS["displacement"]), torch.tensor([[0.4, 0, 2]]))
    shift = torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 0]).repeat(3, 1)
    shift[:, 5:] = 0.5 * torch.tensor([0.0, 0.0, 2.0])  # translate by (0, 0, 2)
    assert torch.allclose(knn.drive(vertices, dualquat.normalize(shift), index), torch.tensor([[0.4, 0, 2]]), atol=1e-6)


def test_smooth_neighbours_sum_to_one_favour_the_nearest_and_change_continuously():
    gen = torch.Generator().manual_seed(0)
    queries = torch.rand(60, 3, generator=gen, dtype=torch.float64)
    path = torch.linspace(0, 1, 2001, dtype=torch.float64)[:, None] * torch.tensor([1.0, 0.7, 0.4], dtype=torch.float64)
    index, weights = knn.smooth_neighbours(path, queries, 8)
    assert index.shape == weights.shape == (2001, 8)
    assert torch.allclose(weights.sum(1), torch.ones(2001, dtype=torch.float64))
    assert bool((weights[:, :-1] >= weights[:, 1:] - 1e-12).all())  # nearer, heavier
    dense = torch.zeros(2001, 60, dtype=torch.float64).scatter_(1, index, weights)  # each step's weight per point
    changes = (dense[1:] - dense[:-1]).abs().sum(1)
    assert len(set(map(tuple, index.sort(1).values.tolist()))) > 10  # the set of points changes along the path
    assert float(changes.max()) < 0.05  # but the weights never jump (an equal average of 8 jumps by 1/4)
    disp = torch.tensor([[0.0, 0, 1.0]]).repeat(60, 1).double()
    moved = knn.drive(path, disp, index, HEADS["displacement"], weights)
    assert torch.allclose(moved, path + disp[0])  # a uniform deformation moves every vertex by it
    one_index, one_weight = knn.smooth_neighbours(path[:3], queries[:1], 8)
    assert one_index.tolist() == [[0]] * 3 and one_weight.tolist() == [[1.0]] * 3


def test_the_weighted_drive_is_the_weighted_blend_of_each_vertex_s_neighbours():
    gen = torch.Generator().manual_seed(1)
    dq = dualquat.normalize(torch.randn(30, 8, generator=gen, dtype=torch.float64))
    dq[::3] = -dq[::3]  # the same rotations, the other hemisphere: the blend must align them
    vertices = torch.rand(50, 3, generator=gen, dtype=torch.float64)
    index, weights = knn.smooth_neighbours(vertices, torch.rand(30, 3, generator=gen, dtype=torch.float64), 6)
    gathered = dualquat.blend(dq[index], weights)
    assert torch.allclose(knn.drive(vertices, dq, index, weights=weights), dualquat.apply(gathered, vertices))
    disp = torch.randn(30, 3, generator=gen, dtype=torch.float64)
    assert torch.allclose(knn.drive(vertices, disp, index, HEADS["displacement"], weights),
                          vertices + (disp[index] * weights[..., None]).sum(1))


@pytest.mark.parametrize("head", ["dualquat", "displacement"])
def test_decoder_returns_the_rest_shape_at_the_rest_latent(head):
    config = ModelConfig(**{**XS.to_dict(), "head": head})
    model, features, queries = model_and_inputs(config)
    perturb(model)
    mu_cond, tokens = model.encode_prior(features)
    rest = model.deformed(model.decode(mu_cond, tokens, queries, z_rest=mu_cond), queries)
    assert torch.allclose(rest, queries, atol=1e-5)
    moved = model.deformed(model.decode(mu_cond + 1.0, tokens, queries, z_rest=mu_cond), queries)
    assert not torch.allclose(moved, queries, atol=1e-4)


def test_checkpoint_roundtrip(tmp_path):
    model, features, queries = model_and_inputs()
    perturb(model)
    checkpoint.save(model, str(tmp_path / "ckpt"), {"steps": 3})
    loaded, meta = checkpoint.load(str(tmp_path / "ckpt"))
    assert meta == {"steps": 3} and loaded.config == model.config
    mu, tokens = model.encode_prior(features)
    mu2, tokens2 = loaded.encode_prior(features)
    assert torch.equal(mu, mu2) and torch.equal(model.decode(mu, tokens, queries), loaded.decode(mu2, tokens2, queries))


def test_corrupt_missing_and_mismatched_checkpoints_raise_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        checkpoint.load(str(tmp_path / "nothing"))
    model, _, _ = model_and_inputs()
    path = str(tmp_path / "ckpt")
    checkpoint.save(model, path)
    with open(os.path.join(path, "model.safetensors"), "r+b") as fh:
        fh.write(b"\xff" * 64)
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load(path)
    checkpoint.save(model, path)
    doc = json.load(open(os.path.join(path, "config.json")))
    doc["model"]["width"] = 64
    json.dump(doc, open(os.path.join(path, "config.json"), "w"))
    with pytest.raises(CheckpointError, match="do not fit"):
        checkpoint.load(path)
    doc["format_version"] = 99
    json.dump(doc, open(os.path.join(path, "config.json"), "w"))
    with pytest.raises(CheckpointError, match="format 99"):
        checkpoint.load(path)


def test_checkpoints_never_unpickle(tmp_path):
    model, _, _ = model_and_inputs()
    checkpoint.save(model, str(tmp_path / "c"))
    assert sorted(os.listdir(tmp_path / "c")) == ["config.json", "model.safetensors"]
    import ast

    tree = ast.parse(open(checkpoint.__file__).read())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "pickle" not in imported and "torch.load" not in calls


def test_active_subspace_and_fit_recover_a_reachable_target():
    model, features, queries = model_and_inputs()
    perturb(model)
    mu_cond, tokens = model.encode_prior(features[:1])
    q_pts = queries[:1]
    sub = reduction.active_subspace(model, mu_cond.detach(), tokens.detach(), q_pts, k=4, samples=16)
    assert sub.basis.shape == (XS.latent_tokens * XS.latent_dim, 4)
    assert torch.allclose(sub.basis.T @ sub.basis, torch.eye(4), atol=1e-4)
    assert (sub.eigenvalues[:-1] >= sub.eigenvalues[1:]).all()
    with torch.no_grad():
        target = reduction.positions(model, sub.z(torch.tensor([0.8, -0.5, 0.3, 0.1])), tokens, q_pts, sub.z_rest)[0]
    rest_error = ((q_pts[0] - target) ** 2).sum(-1).mean().item()
    _, loss = reduction.fit_q(model, sub, tokens.detach(), q_pts, target, steps=200, lr=0.05)
    assert loss < 0.05 * rest_error


def test_the_learned_reduction_is_orthonormal_nested_and_per_shape():
    import dataclasses

    config = dataclasses.replace(XS, reduced_k=6)
    model, features, queries = model_and_inputs(config)
    with torch.no_grad():
        model.basis_head.bias.add_(torch.randn_like(model.basis_head.bias))  # shapes get different directions
    _, tokens = model.encode_prior(features)
    w = model.reduced_basis(tokens)
    assert w.shape == (2, XS.latent_tokens * XS.latent_dim, 6)
    assert torch.allclose(w.transpose(1, 2) @ w, torch.eye(6).expand(2, 6, 6), atol=1e-5)
    assert torch.allclose(model.reduced_basis(tokens, 3), w[..., :3], atol=1e-5)  # the leading 3 are k = 3's basis
    assert not torch.allclose(w[0], w[1], atol=1e-3)  # predicted from each shape's tokens
    mu_cond, _ = model.encode_prior(features[:1])
    sub = reduction.object_subspace(model, mu_cond, tokens[:1], queries[:1], 4)
    assert sub.kind == "learned" and sub.k == 4 and torch.allclose(sub.basis, w[0, :, :4], atol=1e-5)
    assert reduction.object_subspace(model, mu_cond, tokens[:1], queries[:1], 4, "active", ).kind == "active"
    assert reduction.object_subspace(model, mu_cond, tokens[:1], queries[:1], 8).kind == "active"  # more than it has
    with pytest.raises(ValueError, match="learned reduction has 6 directions; 8 were asked for"):
        reduction.object_subspace(model, mu_cond, tokens[:1], queries[:1], 8, "learned")
    with pytest.raises(ValueError, match="no learned reduction"):
        NeurokModel(XS).reduced_basis(tokens)
    with pytest.raises(CheckpointError, match="reduced_k must be"):
        ModelConfig.from_dict({**XS.to_dict(), "reduced_k": 10_000})


def test_traced_decoder_serves_plain_evaluations_and_the_module_serves_derivatives():
    """The dynamics' plain decodes go through a traced, frozen copy of the decoder (issue 15: Python dispatch
    was a quarter of a decode); it must agree with the module at every batch size, and forward-mode
    derivatives (jacfwd, jvp: explicit Verlet, the 'forward' Jacobian) must still go through the module."""
    from torch.func import jacfwd

    from neurok_blender.runtime.dynamics import system as system_mod

    model, features, queries = model_and_inputs()
    perturb(model)
    mu_cond, tokens = model.encode_prior(features[:1])
    k = 5
    sub = reduction.Subspace(mu_cond.detach(), torch.linalg.qr(torch.randn(mu_cond.numel(), k))[0], torch.ones(k))
    mapping = system_mod.NeurokMap(model, tokens.detach(), sub, queries[:1], torch.zeros(3), 1.0)
    assert mapping.traced is not None
    calls = []
    traced = mapping.traced
    mapping.traced = lambda z: calls.append(z.shape[0]) or traced(z)
    q = torch.randn(4, k)
    with torch.no_grad():
        fast = mapping(q)
        mapping.traced, keep = None, mapping.traced
        slow = mapping(q)
        mapping.traced = keep
        torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)
        assert calls == [4]
        J = jacfwd(mapping)(q[0])  # under no_grad too: the transform's wrapped tensors must not reach the trace
    assert calls == [4]
    with torch.enable_grad():
        expected = torch.autograd.functional.jacobian(mapping, q[0])
    torch.testing.assert_close(J, expected, rtol=1e-4, atol=1e-5)
    assert calls == [4]  # a decode with gradients on used the module as well


def test_decoder_second_order_forward_derivative_matches_differences_of_the_first():
    """The Coriolis term is a nested JVP through the decoder; torch's fused layer_norm gets it wrong
    (pytorch/pytorch#196700: 9 % off in float64), so inside explicit_attention a transformed input takes the
    written-out normalization. Checked against central differences of the first JVP, in float64."""
    from torch.func import jvp

    from neurok_blender.runtime.model.layers import LayerNorm, explicit_attention

    model, features, queries = model_and_inputs()
    perturb(model)
    model = model.double()
    with torch.no_grad():
        for p in model.parameters():  # non-trivial norms: the bug is in their derivative
            p.add_(torch.randn_like(p) * 0.05)
        mu_cond, tokens = model.encode_prior(features[:1].double())
    z0, dz = mu_cond.clone(), torch.randn_like(mu_cond)

    def decode(z):
        return model.decode(z, tokens, queries[:1].double(), z_rest=mu_cond)

    with explicit_attention():
        second = jvp(lambda z: jvp(decode, (z,), (dz,))[1], (z0,), (dz,))[1]
        eps = 1e-4
        diff = (jvp(decode, (z0 + eps * dz,), (dz,))[1] - jvp(decode, (z0 - eps * dz,), (dz,))[1]) / (2 * eps)
    assert float((second - diff).norm() / diff.norm()) < 1e-5

    norm = LayerNorm(16).double()
    x, v = torch.randn(3, 16, dtype=torch.float64), torch.randn(3, 16, dtype=torch.float64)
    with explicit_attention():
        second = jvp(lambda a: jvp(norm, (a,), (v,))[1], (x,), (v,))[1]
        diff = (jvp(norm, (x + 1e-4 * v,), (v,))[1] - jvp(norm, (x - 1e-4 * v,), (v,))[1]) / 2e-4
        torch.testing.assert_close(norm(x), torch.nn.functional.layer_norm(x, (16,), norm.weight, norm.bias))
    assert float((second - diff).detach().norm() / diff.detach().norm()) < 1e-6
