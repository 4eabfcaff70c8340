"""NeuROK's three transformers as one module: prior encoder, deformation encoder, decoder. No bpy use."""

from __future__ import annotations

import torch
from torch import nn

from .config import ModelConfig
from .heads import HEADS
from .layers import Block, FourierEmbed, LayerNorm, PerceiverEncoder


class NeurokModel(nn.Module):
    """E_cond(M0) → N(μ_cond, I); E_def(δ, M0) → N(μ, σ); D(z, M0) → a deformation per query point."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = self.config = config
        extra = c.point_features - 3
        self.prior_embed = FourierEmbed(c.fourier_freqs, extra, c.width)
        self.prior = PerceiverEncoder(c.width, c.heads, c.latent_tokens, c.encoder_layers)
        self.prior_mu = nn.Linear(c.width, c.latent_dim)
        self.def_embed = FourierEmbed(c.fourier_freqs, extra + 3, c.width)
        self.deform = PerceiverEncoder(c.width, c.heads, c.latent_tokens, c.encoder_layers)
        self.def_stats = nn.Linear(c.width, 2 * c.latent_dim)
        self.z_in = nn.Linear(c.latent_dim, c.width)
        self.decoder = nn.ModuleList(Block(c.width, c.heads) for _ in range(c.decoder_layers))
        self.query_embed = FourierEmbed(c.fourier_freqs, 0, c.width)
        self.query_cross = Block(c.width, c.heads, cross=True)
        self.kind = HEADS[c.head]  # what the per-point output means (dual quaternion or displacement)
        self.head = nn.Sequential(LayerNorm(c.width), nn.Linear(c.width, self.kind.channels))
        nn.init.zeros_(self.head[1].weight)  # start at the identity deformation
        with torch.no_grad():
            self.head[1].bias.copy_(torch.tensor(self.kind.identity))
        # the learned reduction: each latent token's shape token gives that token's rows of W (C × k)
        self.basis_head = nn.Linear(c.width, c.latent_dim * c.reduced_k) if c.reduced_k else None

    # -- encoders ---------------------------------------------------------------------------
    def encode_prior(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ_cond (B, L, C), shape tokens (B, L, W)) from static-shape samples (B, N, 7)."""
        h = self.prior(self.prior_embed(features[..., :3], features[..., 3:]))  # (B, L, W)
        return self.prior_mu(h), h

    def encode_deformation(self, features: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, log σ²), each (B, L, C), from the static features and the deformation δ (B, N, 3)."""
        extra = torch.cat([features[..., 3:], delta], -1)
        stats = self.def_stats(self.deform(self.def_embed(features[..., :3], extra)))  # (B, L, 2C)
        mu, logvar = stats.chunk(2, dim=-1)
        return mu, logvar.clamp(-10.0, 10.0)

    def reduced_basis(self, shape_tokens: torch.Tensor, k: int | None = None) -> torch.Tensor:
        """The object's learned latent directions W (B, L·C, k), orthonormal columns; nested, so the leading k of
        the model's ``reduced_k`` are the columns of W trained with k (Gram–Schmidt order of the head's output)."""
        if self.basis_head is None:
            raise ValueError("this model has no learned reduction (its config's reduced_k is 0)")
        b, n = shape_tokens.shape[:2]
        raw = self.basis_head(shape_tokens).view(b, n, self.config.latent_dim, self.config.reduced_k)
        raw = raw.reshape(b, n * self.config.latent_dim, self.config.reduced_k)[..., : k or self.config.reduced_k]
        q, r = torch.linalg.qr(raw.float())  # (B, L·C, k); signs fixed so the diagonal of R is positive
        sign = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)) + (torch.diagonal(r, dim1=-2, dim2=-1) == 0)
        return (q * sign[:, None, :]).to(shape_tokens.dtype)

    @staticmethod
    def project(basis: torch.Tensor, z: torch.Tensor, mu_cond: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Latents z (B, L, C) projected on per-sample directions W (B, L·C, k): (μ_cond + W q, q = Wᵀ(z − μ_cond))."""
        q = torch.einsum("bdk,bd->bk", basis, (z - mu_cond).flatten(1))
        return mu_cond + torch.einsum("bdk,bk->bd", basis, q).view_as(z), q

    # -- decoder ----------------------------------------------------------------------------
    def prepare_queries(self, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The decoder's work that depends on the query points (1 or B, M, 3) alone — their embedding and the query
        cross block's projected queries — done once for ``decode_absolute(..., prepared=)`` (the dynamics decode
        the same cubature points every iteration)."""
        return self.query_cross.prepare(self.query_embed(queries))

    def decode_absolute(self, z: torch.Tensor, shape_tokens: torch.Tensor, queries: torch.Tensor | None,
                        prepared: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The decoder's per-query output for latent ``z``, not yet taken relative to any rest latent; with
        ``prepared`` (from ``prepare_queries``) the queries' own work is reused and ``queries`` is not read."""
        x = shape_tokens + self.z_in(z)  # (B, L, W)
        for layer in self.decoder:
            x = layer(x)
        q = self.query_cross.forward_prepared(prepared or self.prepare_queries(queries), x)  # (B, M, W)
        out = self.head(q)  # (B, M, 8 | 3)
        return self.kind.finish(out)

    def decode(self, z: torch.Tensor, shape_tokens: torch.Tensor, queries: torch.Tensor,
               z_rest: torch.Tensor | None = None) -> torch.Tensor:
        """Per-query deformation: unit dual quaternions (B, M, 8) or displacements (B, M, 3).

        With ``z_rest`` the output is taken relative to the rest latent, so decoding ``z_rest``
        gives exactly the identity (the rest shape)."""
        out = self.decode_absolute(z, shape_tokens, queries)
        if z_rest is None:
            return out
        return self.kind.relative(out, self.decode_absolute(z_rest.expand_as(z), shape_tokens, queries))

    def deformed(self, deformation: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        """Positions of ``points`` (B, M, 3) under their per-point deformation."""
        return self.kind.apply(deformation, points)

    def forward(self, features: torch.Tensor, delta: torch.Tensor, queries: torch.Tensor, reduced_k: int = 0,
                full: bool = True) -> dict[str, torch.Tensor]:
        """The training pass (through here so DDP can synchronize gradients): encode both ways,
        sample z from the posterior, decode δ̂ at the queries relative to the prior mean. With ``reduced_k`` also
        δ̂ through the learned reduction: the posterior mean projected on the first ``reduced_k`` learned
        directions, z = μ_cond + W Wᵀ (μ − μ_cond), so every training deformation must be reachable in q = Wᵀ(μ − μ_cond);
        ``full=False`` leaves out the unreduced decode (training the reduction alone)."""
        mu_cond, tokens = self.encode_prior(features)  # (B, L, C), (B, L, W)
        mu, logvar = self.encode_deformation(features, delta)  # (B, L, C) each
        out = {"mu": mu, "logvar": logvar, "mu_cond": mu_cond}
        latents = [self.sample(mu, logvar)] if full else []
        if reduced_k:
            z, out["q"] = self.project(self.reduced_basis(tokens, reduced_k), mu, mu_cond)
            latents.append(z)
        n = len(latents)
        rep = lambda x: x.repeat(n, *([1] * (x.dim() - 1)))  # noqa: E731  (one batched decode for both paths)
        moved = self.deformed(self.decode(torch.cat(latents), rep(tokens), rep(queries), z_rest=rep(mu_cond)),
                              rep(queries))  # (n·B, M, 3)
        parts = (moved - rep(queries)).chunk(n)
        if full:
            out["delta"] = parts[0]
        if reduced_k:
            out["delta_reduced"] = parts[-1]
        return out

    @staticmethod
    def sample(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        return mu + torch.randn_like(mu) * (0.5 * logvar).exp()

    @staticmethod
    def kl_to_prior(mu: torch.Tensor, logvar: torch.Tensor, mu_cond: torch.Tensor) -> torch.Tensor:
        """KL(N(μ, σ²) ‖ N(μ_cond, I)) per batch element, summed over the latent."""
        return 0.5 * (logvar.exp() + (mu - mu_cond) ** 2 - 1.0 - logvar).flatten(1).sum(-1)
