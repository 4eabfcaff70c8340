"""The reduced motion as the cloth layer's coarse level (two scales): each frame the reduced state is fitted to the
layer, the reduced dynamics take the frame from there with their large steps, and the layer's smooth part is moved
to where they went, its detail kept. No bpy use."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import integrators

FIT_VERTICES = 2048  # the fit reads the layer at this many vertices (evenly spread), whatever the mesh's size
# the latent's directions lie almost inside the handles' span: without a ridge the fit splits a motion between them in
# huge opposite amounts, which the reduced dynamics cannot start from
RIDGE = 1e-3
DIFFERENCE = 1e-3  # the coordinates' step for the vertices' Jacobian (mass-orthonormal units: small motions)


class ReducedGuide:
    """``system`` and ``step`` integrate the reduced coordinates (``n_sub`` steps of ``h`` a frame); ``vertices``
    maps reduced coordinates q to the mesh's vertices (V, 3) in the simulation frame; ``masses`` (V,) weigh the
    fit."""

    def __init__(self, system, step: Callable, h: float, n_sub: int, vertices: Callable[[torch.Tensor], torch.Tensor],
                 masses: torch.Tensor) -> None:
        self.system, self.step, self.h, self.n_sub, self.vertices = system, step, h, n_sub, vertices
        k, device = system.k, masses.device
        count = len(masses)
        self.sample = torch.linspace(0, count - 1, min(FIT_VERTICES, count), device=device).round().long().unique()
        with torch.no_grad():
            zero = torch.zeros(k, dtype=system.dtype, device=device)
            self.rest = vertices(zero)
            self.first = system.k_latent_coords  # q's leading coordinates move the latent: the fit leaves them at 0
            basis = torch.eye(k, dtype=system.dtype, device=device)[self.first:]
            columns = [(vertices(DIFFERENCE * e)[self.sample] - self.rest[self.sample]).reshape(-1) / DIFFERENCE
                       for e in basis]
            J = torch.stack(columns, 1)  # (3S, k_handles)
            k = J.shape[1]
            w = masses[self.sample].repeat_interleave(3)[:, None]
            gram = (J * w).T @ J
            ridge = RIDGE * gram.diagonal().mean() * torch.eye(k, dtype=J.dtype, device=device)
            self.project = torch.linalg.solve(gram + ridge, (J * w).T)  # (k, 3S): mass-weighted, ridge-damped

    def fit(self, field: torch.Tensor) -> torch.Tensor:
        """Reduced coordinates (or their rates) nearest to a vertex displacement (or velocity) field (V, 3), through
        the handles alone (the latent's decode is no linear map to fit through)."""
        out = torch.zeros(self.system.k, dtype=field.dtype, device=field.device)
        out[self.first:] = self.project @ field[self.sample].reshape(-1)
        return out

    def correction(self, x0: torch.Tensor, v0: torch.Tensor, x1: torch.Tensor, t0: float) -> torch.Tensor:
        """What moves the layer's smooth part at the frame's end (x1) to where the reduced motion takes it from the
        frame's start (x0, v0): (V, 3)."""
        with torch.no_grad():
            s = integrators.initial_state(self.system, self.fit(x0 - self.rest), self.fit(v0))
            s.t = t0
            for _ in range(self.n_sub):
                s = self.step(self.system, s, self.h)
            return self.vertices(s.q) - self.vertices(self.fit(x1 - self.rest))
