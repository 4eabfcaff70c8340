"""Per-object model reduction: an active subspace of the latent, z(q) = z_rest + W q, and fits of
q (or the full latent) to a target shape. No bpy use."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .network import NeurokModel


@dataclass
class Subspace:
    """Generalized coordinates of one object: z(q) = z_rest + W q."""

    z_rest: torch.Tensor  # (1, L, C)
    basis: torch.Tensor  # (L*C, k), orthonormal columns
    eigenvalues: torch.Tensor  # (k,)
    kind: str = "active"  # "active" (fitted at set-up) or "learned" (predicted by the model)

    @property
    def k(self) -> int:
        return self.basis.shape[1]

    def z(self, q: torch.Tensor) -> torch.Tensor:
        """q (k,) or (B, k) → latents (B, L, C)."""
        q = q.reshape(-1, self.k)
        return self.z_rest + (q @ self.basis.T).view(-1, *self.z_rest.shape[1:])


def positions(model: NeurokModel, z: torch.Tensor, shape_tokens: torch.Tensor, queries: torch.Tensor,
              z_rest: torch.Tensor) -> torch.Tensor:
    """Decoded positions of the query points (B, M, 3) for latents z (B, L, C)."""
    b = z.shape[0]
    deformation = model.decode(z, shape_tokens.expand(b, -1, -1), queries.expand(b, -1, -1), z_rest)
    return model.deformed(deformation, queries.expand(b, -1, -1))


def active_subspace(model: NeurokModel, mu_cond: torch.Tensor, shape_tokens: torch.Tensor, queries: torch.Tensor,
                    k: int = 12, samples: int = 64, seed: int = 0, proxy: str = "jacobian",
                    spread: float = 2.0) -> Subspace:
    """Top-k eigenvectors of E[g gᵀ] over z ~ N(μ_cond, spread² I).

    ``proxy="norm"`` is the paper's G = ‖δ(z)‖, g = ∇_z G. ``proxy="jacobian"`` (the default) uses
    g = ∇_z (r · δ(z)) with a random r ~ N(0, I) over every output, so E[g gᵀ] = E[Jᵀ J]: the latent
    directions that move the decoded points the most, which is what the mechanics needs. The spread
    matches where the posteriors of real deformations lie (about two prior deviations out)."""
    if proxy not in ("norm", "jacobian"):
        raise ValueError(f"unknown proxy {proxy!r}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dim = mu_cond[0].numel()
    cov = torch.zeros(dim, dim, dtype=torch.float64, device=mu_cond.device)
    for _ in range(samples):
        noise = torch.randn(mu_cond.shape, generator=gen).to(mu_cond)
        z = (mu_cond + spread * noise).requires_grad_(True)
        with torch.enable_grad():
            delta = positions(model, z, shape_tokens, queries, mu_cond) - queries
            if proxy == "norm":
                out = delta.norm()
            else:
                out = (delta * torch.randn(delta.shape, generator=gen).to(delta)).sum()
            (grad,) = torch.autograd.grad(out, z)
        g = grad.reshape(-1).double()
        cov += torch.outer(g, g)
    values, vectors = torch.linalg.eigh(cov / samples)
    order = values.argsort(descending=True)[: min(k, dim)]
    return Subspace(mu_cond.detach(), vectors[:, order].to(mu_cond.dtype), values[order].to(mu_cond.dtype))


def learned_subspace(model: NeurokModel, mu_cond: torch.Tensor, shape_tokens: torch.Tensor, k: int) -> Subspace:
    """The model's own reduction (``config.reduced_k`` > 0): the leading k of the directions its prior encoder
    predicts for this shape, trained so that the training deformations are reachable in them."""
    if not 0 < k <= model.config.reduced_k:
        raise ValueError(f"the model's learned reduction has {model.config.reduced_k} directions; {k} were asked for")
    with torch.no_grad():
        basis = model.reduced_basis(shape_tokens, k)[0]
    return Subspace(mu_cond.detach(), basis, torch.ones(k, dtype=basis.dtype, device=basis.device), "learned")


def object_subspace(model: NeurokModel, mu_cond: torch.Tensor, shape_tokens: torch.Tensor, queries: torch.Tensor,
                    k: int, how: str = "auto", seed: int = 0) -> Subspace:
    """One object's latent coordinates: ``how`` is "learned" (the model's reduction), "active" (an active
    subspace fitted now: the ablation) or "auto" (learned where the model has at least k learned directions)."""
    if how == "learned" or (how == "auto" and model.config.reduced_k >= k):
        return learned_subspace(model, mu_cond, shape_tokens, k)
    if how not in ("auto", "active"):
        raise ValueError(f"unknown reduction {how!r}")
    return active_subspace(model, mu_cond, shape_tokens, queries, k=k, samples=max(48, 4 * k), seed=seed)


def fit(loss_of, init: torch.Tensor, steps: int = 150, lr: float = 0.05) -> tuple[torch.Tensor, float]:
    """Adam on one tensor; returns (best value, best loss)."""
    x = init.clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr)
    best, best_loss = x.detach().clone(), float("inf")
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(x)
        if loss.item() < best_loss:
            best, best_loss = x.detach().clone(), loss.item()
        loss.backward()
        opt.step()
    return best, best_loss


def fit_q(model: NeurokModel, sub: Subspace, shape_tokens: torch.Tensor, queries: torch.Tensor, target: torch.Tensor,
          steps: int = 150, lr: float = 0.05) -> tuple[torch.Tensor, float]:
    """q minimizing the mean squared distance between decoded and target query positions (M, 3)."""
    def loss(q):
        return ((positions(model, sub.z(q), shape_tokens, queries, sub.z_rest)[0] - target) ** 2).sum(-1).mean()
    return fit(loss, torch.zeros(sub.k, dtype=queries.dtype, device=queries.device), steps, lr)


def fit_latent(model: NeurokModel, z_rest: torch.Tensor, shape_tokens: torch.Tensor, queries: torch.Tensor,
               target: torch.Tensor, steps: int = 150, lr: float = 0.05) -> tuple[torch.Tensor, float]:
    """The full latent (no reduction) fitted to a target, for the ablation."""
    def loss(z):
        return ((positions(model, z, shape_tokens, queries, z_rest)[0] - target) ** 2).sum(-1).mean()
    return fit(loss, z_rest.clone(), steps, lr)
