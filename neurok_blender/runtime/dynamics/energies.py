"""The energies and forces of the latent mechanics, as small pure functions of cubature positions.

Every conservative term but gravity is a sum of squares, written as a residual r with V = ½‖r‖², so the
implicit integrator can use Gauss–Newton; ``energy(r) = ½ Σ r²``. Units are the object's local units;
stiffnesses are already scaled (see ``material.Material.scaled``). No bpy use.
"""

from __future__ import annotations

import torch


def energy(residual: torch.Tensor) -> torch.Tensor:
    return 0.5 * (residual**2).sum()


def strain(x: torch.Tensor, pairs: torch.Tensor, rest_length: torch.Tensor) -> torch.Tensor:
    """Relative length change of each spring (E,)."""
    d = pair_difference(x, pairs, -2)
    return (torch.linalg.vector_norm(d, dim=-1) - rest_length) / rest_length


def pair_difference(x: torch.Tensor, pairs: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """x[pairs[:, 1]] − x[pairs[:, 0]] along ``dim`` (index_select: several times cheaper than fancy indexing)."""
    return x.index_select(dim, pairs[:, 1]) - x.index_select(dim, pairs[:, 0])


def spring_weight(k: float, count: int) -> float:
    """The residual weight of each of ``count`` springs of stiffness k: V = ½ k Σ_e ε_e² / E."""
    return (k / max(count, 1)) ** 0.5


def spring_residual(x: torch.Tensor, pairs: torch.Tensor, rest_length: torch.Tensor, k: float) -> torch.Tensor:
    """Edge-length springs relative to rest, each weighted equally: V = ½ k Σ_e ε_e² / E."""
    return spring_weight(k, len(pairs)) * strain(x, pairs, rest_length)


def strain_jvp(x: torch.Tensor, pairs: torch.Tensor, rest_length: torch.Tensor, dx: torch.Tensor,
               dx_pairs: torch.Tensor | None = None) -> torch.Tensor:
    """The derivative of ``strain`` along displacement directions dx (N, 3, k): (E, k). ``dx_pairs``, when
    given, is dx[pairs[:, 1]] − dx[pairs[:, 0]] already taken (the same directions at several x)."""
    d = pair_difference(x, pairs)
    w = d / (torch.linalg.vector_norm(d, dim=-1, keepdim=True).clamp_min(1e-12) * rest_length[:, None])
    if dx_pairs is None:
        dx_pairs = pair_difference(dx, pairs)
    out = dx_pairs[:, 0] * w[:, 0:1]  # Σ_c w_c dx_c as three fused multiply-adds (an einsum here is a slow bmm)
    out.addcmul_(dx_pairs[:, 1], w[:, 1:2])
    return out.addcmul_(dx_pairs[:, 2], w[:, 2:3])


def pin_residual(x: torch.Tensor, target: torch.Tensor, weights: torch.Tensor, masses: torch.Tensor,
                 k: float) -> torch.Tensor:
    """Pin springs: V = ½ k Σ w_i m_i ‖x_i − X_i‖² (k in 1/s², so it scales like gravity)."""
    return ((k * weights * masses) ** 0.5)[:, None] * (x - target)


def ground_residual(x: torch.Tensor, masses: torch.Tensor, normal: torch.Tensor, offset: float, k: float) -> torch.Tensor:
    """Penalty contact with the plane n·x = offset: only points below it are pushed back."""
    depth = (x @ normal - offset).clamp(max=0.0)
    return (k * masses) ** 0.5 * depth


def ground_residual_jvp(x: torch.Tensor, masses: torch.Tensor, normal: torch.Tensor, offset: float, k: float,
                        dx: torch.Tensor) -> torch.Tensor:
    inside = ((x @ normal - offset) < 0).to(x.dtype)
    return ((k * masses) ** 0.5 * inside)[:, None] * (normal @ dx)


def plausibility_residual(q: torch.Tensor, k: float) -> torch.Tensor:
    """The negative log prior of z(q) = μ_cond + W q (W orthonormal): ½ k ‖q‖²."""
    return k**0.5 * q


def gravity_energy(x: torch.Tensor, masses: torch.Tensor, gravity: torch.Tensor) -> torch.Tensor:
    return -(masses[:, None] * x * gravity).sum()


def kinetic_energy(xdot: torch.Tensor, masses: torch.Tensor) -> torch.Tensor:
    return 0.5 * (masses[:, None] * xdot**2).sum()


def wind_force(xdot: torch.Tensor, normals: torch.Tensor, areas: torch.Tensor, wind: torch.Tensor,
               drag: float) -> torch.Tensor:
    """Drag on the relative air velocity along each surface normal: f_i = c a_i ((w − ẋ_i)·n_i) n_i."""
    relative = ((wind - xdot) * normals).sum(-1, keepdim=True)
    return drag * areas[:, None] * relative * normals


def gust(wind: torch.Tensor, t: float, amplitude: float, frequency: float, phase: float = 0.0) -> torch.Tensor:
    """The wind at time t: the mean wind modulated by a smooth gust, never reversing."""
    import math

    factor = 1.0 + amplitude * (0.6 * math.sin(2 * math.pi * frequency * t + phase)
                                + 0.4 * math.sin(2 * math.pi * 2.3 * frequency * t + 1.7 * phase))
    return wind * max(factor, 0.0)


def rayleigh_force(x: torch.Tensor, xdot: torch.Tensor, masses: torch.Tensor, pairs: torch.Tensor,
                   rest_length: torch.Tensor, alpha: float, beta_k: float) -> torch.Tensor:
    """Rayleigh damping −∂D/∂ẋ with D = ½ α Σ m ‖ẋ‖² + ½ β k Σ_e ε̇_e² / E (mass- and stiffness-proportional)."""
    xdot = xdot.detach().requires_grad_(True)
    d = x[pairs[:, 1]] - x[pairs[:, 0]]
    rate = ((d / d.norm(dim=-1, keepdim=True)) * (xdot[pairs[:, 1]] - xdot[pairs[:, 0]])).sum(-1) / rest_length
    dissipation = 0.5 * alpha * (masses[:, None] * xdot**2).sum() + 0.5 * beta_k * (rate**2).sum() / max(len(pairs), 1)
    (grad,) = torch.autograd.grad(dissipation, xdot)
    return -grad
