"""The reduced system's coordinate maps, behind one interface. No bpy use.

A *decoder* maps latent coordinates to positions x̄ at the cubature points through a deformation:
``deformation(latent)``, ``positions(deformation)``, ``rotate(deformation, vectors)`` and ``__call__(latent)``
(the learned ``system.NeurokMap``, or ``PlainDecoder`` for any smooth function).

A *coordinate map* turns the generalized coordinates q = [latent (k_latent) | the map's own (k − k_latent)]
into positions, given its decoder's x̄. ``LatentMap`` (the latent alone) and ``handles.HandleMap`` (affine
skinning handles on top) implement it; ``LatentSystem`` takes any map that has these members:

    k, k_latent, decoder, anchors, turns, holds_rigid_motion
    latent(q)                              the decoder's coordinates of q
    compose(xbar, q, weights=None)         positions from the decoder's x̄ (weights: other points' own)
    jacobian(q, decoder_jacobian)          (J (N, 3, k), x) from the decoder's (∂x̄/∂latent, x̄)
    carry_normals(deformation, q, normals, tangents)   rest normals carried to the state q
    strain_basis(rest)                     ∂(deformation gradient)/∂q of the map's own coordinates, or None
    __call__(q)                            positions, differentiable (forward mode)
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class PlainDecoder:
    """Any smooth function latent ↦ positions (…, N, 3) as a decoder: its deformation is its positions, and it
    does not turn normals."""

    def __init__(self, function: Callable[[torch.Tensor], torch.Tensor], k: int) -> None:
        self.function, self.k = function, k

    def deformation(self, latent: torch.Tensor) -> torch.Tensor:
        return self.function(latent)

    def positions(self, deformation: torch.Tensor) -> torch.Tensor:
        return deformation

    def rotate(self, deformation: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        return vectors

    def __call__(self, latent: torch.Tensor) -> torch.Tensor:
        return self.function(latent)


class LatentMap:
    """The decoder's latent as the only coordinates: x(q) = x̄(q)."""

    anchors = turns = None
    holds_rigid_motion = False  # rigid motion is whatever the latent makes of it: damped like any motion

    def __init__(self, decoder) -> None:
        self.decoder, self.k = decoder, decoder.k
        self.k_latent = self.k

    def latent(self, q: torch.Tensor) -> torch.Tensor:
        return q[..., : self.k_latent]

    def compose(self, xbar: torch.Tensor, q: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        return xbar

    def jacobian(self, q: torch.Tensor, decoder_jacobian) -> tuple[torch.Tensor, torch.Tensor]:
        return decoder_jacobian(q)

    def carry_normals(self, deformation: torch.Tensor, q: torch.Tensor, normals: torch.Tensor,
                      tangents: torch.Tensor) -> torch.Tensor:
        return self.decoder.rotate(deformation, normals)

    def strain_basis(self, rest: torch.Tensor) -> None:
        return None

    def __call__(self, q: torch.Tensor) -> torch.Tensor:
        return self.decoder(q)
