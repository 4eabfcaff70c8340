"""Energies, their residual Jacobians and the Coriolis term of the latent system, on analytic maps."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.runtime.dynamics import energies  # noqa: E402
from neurok_blender.runtime.dynamics.cubature import Cubature, knn_graph, two_hop  # noqa: E402
from neurok_blender.runtime.dynamics.maps import LatentMap, PlainDecoder  # noqa: E402
from neurok_blender.runtime.dynamics.material import Constants  # noqa: E402
from neurok_blender.runtime.dynamics.system import LatentSystem, Scene  # noqa: E402
from tests.support.analytic_systems import ZERO, D, analytic_system  # noqa: E402


def test_energies_pass_gradcheck():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, dtype=D, generator=gen, requires_grad=True)
    rest = torch.randn(6, 3, dtype=D, generator=gen)
    pairs = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [0, 5]])
    length = (rest[pairs[:, 1]] - rest[pairs[:, 0]]).norm(dim=-1)
    m, w = torch.rand(6, dtype=D, generator=gen) + 0.5, torch.rand(6, dtype=D, generator=gen)
    normal = torch.tensor([0.0, 0.6, 0.8], dtype=D)
    q = torch.randn(5, dtype=D, generator=gen, requires_grad=True)
    terms = [lambda x: energies.energy(energies.spring_residual(x, pairs, length, 3.0)),
             lambda x: energies.energy(energies.pin_residual(x, rest, w, m, 7.0)),
             lambda x: energies.energy(energies.ground_residual(x + 0.3, m, normal, 0.1, 5.0)),
             lambda x: energies.gravity_energy(x, m, torch.tensor([0.0, 0.0, -9.81], dtype=D))]
    for term in terms:
        assert torch.autograd.gradcheck(term, (x,))
    assert torch.autograd.gradcheck(lambda q: energies.energy(energies.plausibility_residual(q, 0.5)), (q,))
    xdot = torch.randn(6, 3, dtype=D, generator=gen)
    # the Rayleigh force is minus the gradient of a dissipation that is quadratic in velocity
    f = energies.rayleigh_force(x.detach(), xdot, m, pairs, length, 0.3, 2.0)
    assert float((f * xdot).sum()) < 0


def test_energy_values_match_their_definitions():
    x = torch.tensor([[0.0, 0, 0], [2.0, 0, 0]], dtype=D)
    pairs = torch.tensor([[0, 1]])
    assert float(energies.energy(energies.spring_residual(x, pairs, torch.tensor([1.0], dtype=D), 4.0))) == pytest.approx(2.0)
    below = torch.tensor([[0.0, 0, -0.5]], dtype=D)
    up = torch.tensor([0.0, 0, 1], dtype=D)
    assert float(energies.energy(energies.ground_residual(below, torch.ones(1, dtype=D), up, 0.0, 8.0))) == pytest.approx(1.0)
    above = below + 1
    assert float(energies.energy(energies.ground_residual(above, torch.ones(1, dtype=D), up, 0.0, 8.0))) == 0.0


def test_wind_drag_acts_along_the_normal_on_the_relative_velocity():
    n = torch.tensor([[0.0, 1.0, 0.0]], dtype=D)
    f = energies.wind_force(torch.zeros(1, 3, dtype=D), n, torch.ones(1, dtype=D), torch.tensor([5.0, 2.0, 0], dtype=D), 1.5)
    assert torch.allclose(f, torch.tensor([[0.0, 3.0, 0.0]], dtype=D))
    moving_with_air = energies.wind_force(torch.tensor([[0.0, 2.0, 0.0]], dtype=D), n, torch.ones(1, dtype=D),
                                          torch.tensor([5.0, 2.0, 0], dtype=D), 1.5)
    assert torch.allclose(moving_with_air, torch.zeros(1, 3, dtype=D))


# -- kinematics ------------------------------------------------------------------------------------------
def curved_map(q):
    """A smooth nonlinear map R^2 → 3 points, to check derivatives."""
    a, b = q[..., 0], q[..., 1]
    pts = [torch.stack([torch.sin(a), torch.cos(b) * a, a * b], -1),
           torch.stack([a**2, torch.tanh(b), torch.exp(0.3 * a)], -1),
           torch.stack([a + b, a - b, torch.sin(a * b)], -1)]
    return torch.stack(pts, -2)


def test_coriolis_term_matches_finite_differences():
    sys_ = analytic_system(curved_map, np.zeros((3, 3)), [1.0, 2.0, 0.5], k=2)
    q, qdot = torch.tensor([0.3, -0.7], dtype=D), torch.tensor([1.1, 0.4], dtype=D)
    J, x = sys_.jacobian(q)
    eps = 1e-4
    second = (curved_map(q + eps * qdot) - 2 * curved_map(q) + curved_map(q - eps * qdot)) / eps**2
    expected = torch.einsum("nik,n,ni->k", J, sys_.masses, second)
    assert torch.allclose(sys_.coriolis(q, qdot, J), expected, rtol=1e-5, atol=1e-6)
    # forward-mode J against central differences, and the difference Jacobian against forward mode
    cols = [(curved_map(q + eps * e) - curved_map(q - eps * e)) / (2 * eps) for e in torch.eye(2, dtype=D)]
    assert torch.allclose(J, torch.stack(cols, -1), atol=1e-7)
    J_diff, _ = sys_.jacobian(q, "difference")
    assert torch.allclose(J_diff, J, atol=5e-2)
    M = sys_.mass_matrix(J)
    assert torch.allclose(M, M.T) and bool((torch.linalg.eigvalsh(M) > 0).all())


def test_residual_jacobian_matches_forward_mode():
    from torch.func import jacfwd

    gen = torch.Generator().manual_seed(3)
    pts = torch.randn(6, 3, dtype=D, generator=gen).numpy()
    cub = Cubature(points=pts, normals=np.tile([0.0, 0.0, 1.0], (6, 1)), masses=np.linspace(0.5, 1.5, 6),
                   areas=np.ones(6), pins=np.array([1.0, 0.5, 0, 0, 0, 0]), edges=knn_graph(pts, 3),
                   bends=two_hop(knn_graph(pts, 3), 6), solid=False)
    scene = Scene(torch.zeros(3, dtype=D), torch.zeros(3, dtype=D), torch.tensor([0.0, 0.0, 1.0], dtype=D), 0.2)
    constants = Constants(**dict(ZERO, stiffness=3.0, bending=0.7, pin=5.0, ground=11.0))
    sys_ = LatentSystem(LatentMap(PlainDecoder(lambda q: q, 1)), cub, constants, scene, 1, dtype=D)
    x = torch.tensor(pts, dtype=D) + 0.1 * torch.randn(6, 3, dtype=D, generator=gen)
    J = torch.randn(6, 3, 4, dtype=D, generator=gen)
    reference = torch.einsum("rnc,nck->rk", jacfwd(sys_.residuals)(x), J)
    assert torch.allclose(sys_.residual_jacobian(x, J), reference, atol=1e-10)
