"""The IK evaluation's fit in the simulation's coordinates (pipeline/eval.py)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from neurok_blender.pipeline.eval import handle_fit  # noqa: E402


def test_handle_fit_reproduces_rigid_motion_exactly_and_only_what_the_handles_span():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(200, 3, generator=gen) * 2 - 1
    centre = x.mean(0)
    c, s = math.cos(1.2), math.sin(1.2)
    rotation = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    rigid = (x - centre) @ rotation.T + centre + torch.tensor([0.3, -2.0, 0.5])
    one = torch.ones(len(x), 1)
    torch.testing.assert_close(handle_fit(x, rigid, one, centre), rigid, atol=1e-4, rtol=1e-4)

    # a bend is not affine: the whole-object handle alone misses it, a second handle whose weight varies along
    # the bend's axis gets closer, and the fit never does worse than the rest shape
    bent = x.clone()
    bent[:, 2] += 0.5 * x[:, 0] ** 2
    err = lambda fit: float((fit - bent).norm(dim=-1).mean())  # noqa: E731
    alone = err(handle_fit(x, bent, one, centre))
    two = err(handle_fit(x, bent, torch.cat([one, x[:, :1]], 1), centre))
    assert 0.02 < alone < err(x)
    assert two < 0.1 * alone


def test_handle_fit_of_a_flat_shape_is_finite():
    """A flat sheet's handle features along its normal are all zero: the ridge keeps the solve regular."""
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(100, 3, generator=gen)
    x[:, 2] = 0.0
    target = x + torch.tensor([0.0, 0.0, 0.2]) * x[:, :1]
    weights = torch.cat([torch.ones(100, 1), x[:, :1] - 0.5], 1)
    fit = handle_fit(x, target, weights, x.mean(0))
    assert torch.isfinite(fit).all() and fit.dtype == x.dtype
    torch.testing.assert_close(fit, target, atol=1e-4, rtol=1e-4)


def test_ik_rows_fit_only_what_is_asked_and_the_same_fit_either_way():
    """``eval ik --rows full``: only the full latent is fitted, and it is the very fit the all-rows run makes (an
    ML engineer fitting it longer gets the table's row, not a different experiment)."""
    import numpy as np

    from neurok_blender.pipeline.eval import neurok_fits
    from neurok_blender.runtime.model.config import PRESETS
    from neurok_blender.runtime.model.network import NeurokModel

    torch.manual_seed(0)
    model = NeurokModel(PRESETS["neurok-xs"]).eval()
    rng = np.random.default_rng(0)
    rest_all = rng.uniform(-1, 1, (30, 3))
    triangles = np.array([[i, i + 1, i + 2] for i in range(0, 27, 3)], np.int64)
    pins = np.zeros(30)
    targets = [rest_all + 0.05 * rng.standard_normal((30, 3))]
    every = neurok_fits(model, rest_all, rest_all, triangles, pins, targets, 2, 5, 0)
    only = neurok_fits(model, rest_all, rest_all, triangles, pins, targets, 2, 5, 0, ("full",))
    assert set(only) == {"neurok_full"} and {"neurok_reduced", "neurok_full"} <= set(every)
    np.testing.assert_allclose(only["neurok_full"][0], every["neurok_full"][0], atol=1e-6)
