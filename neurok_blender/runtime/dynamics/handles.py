"""Skinning handles: affine generalized coordinates with shape-derived weights, on top of the learned latent, so
that rigid motion and large rotations of parts are exact points of the reduced space. No bpy use.

After Simplicits (Kaolin) and Fast Complementary Dynamics via skinning eigenmodes, in our own words: handle h
moves point i by w_ih (A_h (x̄_i − c) + t_h), with x̄ the latent decode and c the rest centre of mass. Handle 0
has weight 1 everywhere, so its 12 numbers are the whole object's affine motion — any rotation R is A_0 = R − I —
and the rest follow the smoothest vibration modes of the object's spring graph (a cape's lower half swinging on
its own). Positions are linear in the handle coordinates, so their Jacobian columns are exact and cost no
decoder pass.
"""

from __future__ import annotations

import numpy as np
import torch

from ..geometry import unique_edges
from ..sparse import csr

DOF = 12  # per handle: A (3×3, row-major) and t (3)


def handle_weights(points: np.ndarray, masses: np.ndarray, edges: np.ndarray, count: int,
                   pins: np.ndarray | None = None) -> np.ndarray:
    """(N, count) weights: a column of ones, then the smoothest mass-weighted Laplacian eigenvectors of the
    spring graph (orthogonal to the constant, each scaled to max |w| = 1).

    With ``pins`` (weights in [0, 1]) and some point pinned (> 0.5), the eigenvectors after the constant are the
    Dirichlet ones — the Laplacian's on the free points, zero on the pinned (the skinning eigenmodes of Fast
    Complementary Dynamics, which hold their boundary): each handle then moves the free parts about the pinned ones
    (a plate's tip about its clamp, a star's arms about its hook) instead of fighting the pins."""
    n = len(points)
    weights = [np.ones(n)]
    if count < 2 or not len(edges):
        return np.stack(weights, 1)
    adj = np.zeros((n, n))
    adj[edges[:, 0], edges[:, 1]] = adj[edges[:, 1], edges[:, 0]] = 1.0
    laplacian = np.diag(adj.sum(1)) - adj
    if pins is not None and (pins > 0.5).any():  # Dirichlet: only the free points' rows and columns (a pinned
        free = pins <= 0.5  # neighbour stays on the diagonal), zero on the pinned
        for v in _smoothest_modes(laplacian[np.ix_(free, free)], masses[free])[: count - 1]:
            w = np.zeros(n)
            w[free] = v
            weights.append(w / max(np.abs(w).max(), 1e-12))
    elif n > count:
        for v in _smoothest_modes(laplacian, masses):
            v = v - (masses @ v) / masses.sum()  # orthogonal to the constant in the mass metric
            if np.abs(v).max() > 1e-9 and len(weights) < count:
                weights.append(v / np.abs(v).max())
    return np.stack(weights, 1)


def _smoothest_modes(laplacian: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """The solutions of L v = λ M v (lumped M), smoothest first, one per row."""
    inv_sqrt = 1.0 / np.sqrt(np.maximum(masses, 1e-12))
    _, vectors = np.linalg.eigh(inv_sqrt[:, None] * laplacian * inv_sqrt[None])  # symmetrized
    return (inv_sqrt[:, None] * vectors).T


def weight_gradients(points: np.ndarray, edges: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(N, H, 3): each point's least-squares gradient of every handle weight over its spring-graph neighbours
    (minimum norm where the neighbourhood is flat, so a sheet gets no gradient along its normal)."""
    n = len(points)
    out = np.zeros((n, weights.shape[1], 3))
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for i, j in edges:
        neighbours[i].append(j)
        neighbours[j].append(i)
    for i, nb in enumerate(neighbours):
        if nb:
            d = points[nb] - points[i]  # (K, 3)
            out[i] = (np.linalg.pinv(d, rcond=1e-6) @ (weights[nb] - weights[i])).T
    return out


def smooth_on_mesh(values: torch.Tensor, triangles: np.ndarray, strength: float, iterations: int = 100,
                   tolerance: float = 1e-3) -> torch.Tensor:
    """``values`` (V, C) per vertex, smoothed along the mesh: the solution w of (D + s (D − A)) w = D w₀ for the
    mesh graph's adjacency A and degrees D, by conjugate gradients on all columns at once (s the ``strength``:
    about the square of the smoothing radius in edges). Constants are kept exactly, and a vertex no edge reaches
    keeps its value.

    Why: a vertex takes its handle weights from the few cubature points nearest to it, and neighbouring vertices
    that draw on different points get visibly different weights: under a large handle motion (a jelly sheared by
    half its height) the surface shows the cubature points' pattern as ridges and lumps. Smoothing over about one
    cubature spacing removes them without changing the motion's large scale. The adjacency is a CSR matrix: a
    product costs about 2.5 ms at 200k vertices (an index_add scatter took 42)."""
    n = values.shape[0]
    if strength <= 0 or triangles is None or not len(triangles):
        return values
    edges = unique_edges(triangles)
    dtype, device = torch.float64, values.device
    pairs = np.concatenate([edges, edges[:, ::-1]])  # both directions, in row order: the adjacency's CSR
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    counts = np.bincount(pairs[:, 0], minlength=n)
    crow = torch.as_tensor(np.concatenate([[0], np.cumsum(counts)]), device=device)
    adjacency = csr(crow, torch.as_tensor(pairs[:, 1], device=device), torch.ones(len(pairs), dtype=dtype, device=device),
                    (n, n))
    degree = torch.as_tensor(counts, dtype=dtype, device=device)[:, None]

    def operator(x: torch.Tensor) -> torch.Tensor:  # (1 + s) D x − s A x
        return (1.0 + strength) * degree * x - strength * (adjacency @ x)

    w0 = values.to(dtype)
    b = degree * w0
    x, r = w0.clone(), b - operator(w0)
    p, rs = r.clone(), (r * r).sum(0)
    goal = (tolerance * b.norm(dim=0)) ** 2
    for _ in range(iterations):
        if bool((rs <= goal).all()):
            break
        ap = operator(p)
        alpha = rs / (p * ap).sum(0).clamp_min(1e-300)
        x, r = x + alpha * p, r - alpha * ap
        fresh = (r * r).sum(0)
        p, rs = r + (fresh / rs.clamp_min(1e-300)) * p, fresh
    return x.to(values.dtype)


def tangent_frames(normals: torch.Tensor) -> torch.Tensor:
    """(N, 3, 2) orthonormal tangent pairs (t1, t2) with t1 × t2 = n at each unit normal n (N, 3)."""
    x_axis = torch.tensor([1.0, 0.0, 0.0], dtype=normals.dtype, device=normals.device)
    helper = torch.where(normals[:, :1].abs() < 0.9, x_axis, x_axis.roll(1))
    t1 = torch.linalg.cross(helper, normals)
    t1 = t1 / t1.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return torch.stack([t1, torch.linalg.cross(normals, t1)], -1)


def mass_orthonormal_basis(jacobian: torch.Tensor, masses: torch.Tensor, tolerance: float = 1e-6,
                           split: int = 0, constraints: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
    """(B (k, k'), k'_latent) with (J B)ᵀ diag(m) (J B) = I for the rest Jacobian J (N, 3, k), dropping
    directions that move no mass (a flat sheet's handle columns along its normal) or that repeat others.
    Each coordinate is judged on its own scale (the Gram matrix is Jacobi-scaled first), so the learned
    latent, whose unit moves far less mass than a unit of handle translation, is kept.

    With ``split`` (the number of leading latent coordinates) it is built block by block: the handle
    columns are orthonormalized among themselves, then the latent columns against them and among
    themselves. B's first k'_latent columns come from the latent (they may touch handle rows too); the
    rest touch handle rows only, so moving them leaves the latent — and its decode — unchanged.

    ``constraints`` (R, k − split), linear equations C q_handles = 0 that every state must keep (a jointed
    assembly's shared anchors, joints.py): the handle columns are taken in C's null space, so they hold exactly."""
    j, m = jacobian.double(), masses.double()
    k = j.shape[-1]

    def gram(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.einsum("nic,n,nid->cd", torch.einsum("nik,kc->nic", j, a), m, torch.einsum("nik,kc->nic", j, b))

    def orthonormal(columns: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        """Orthonormal combinations of ``columns`` (k, c); a column whose mass is below ``tolerance`` × its
        ``reference`` (its own before any projection) moves nothing new and is dropped."""
        g = gram(columns, columns)
        d = g.diagonal()
        live = d > tolerance * reference.clamp_min(1e-300)
        columns, g, d = columns[:, live], g[live][:, live], d[live]
        if not len(d):
            return columns
        scale = d.rsqrt()
        lam, vectors = torch.linalg.eigh(scale[:, None] * g * scale[None])
        keep = lam > tolerance
        basis = columns @ (scale[:, None] * vectors[:, keep] / lam[keep].sqrt())
        order = torch.argsort(basis.abs().argmax(0), stable=True)  # roughly the coordinates' own order
        basis = basis[:, order]
        return basis * torch.sign(basis.gather(0, basis.abs().argmax(0, keepdim=True)))

    eye = torch.eye(k, dtype=j.dtype, device=j.device)
    own = gram(eye, eye).diagonal()
    largest = own.max().clamp_min(1e-300)
    free = eye[:, split:]
    if constraints is not None and len(constraints) and split < k:
        _, sv, vt = torch.linalg.svd(constraints.to(j), full_matrices=True)
        rank = int((sv > 1e-9 * sv.max().clamp_min(1e-300)).sum())
        free = torch.cat([eye.new_zeros(split, k - split - rank), vt[rank:].T])  # (k, the null space's size)
    handles = orthonormal(free, largest.expand(free.shape[1])) if free.shape[1] else eye[:, :0]
    latent = eye[:, :split]
    if split and handles.shape[1]:  # remove the handle span from the latent columns, in the mass metric
        latent = latent - handles @ gram(handles, latent)
    latent = orthonormal(latent, own[:split]) if split else latent
    return torch.cat([latent, handles], 1).to(jacobian.dtype), latent.shape[1]


def mixed_affine(a: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Σ_h w_h A_h per point (…, N, 3, 3) for handle matrices A (…, H, 3, 3) and weights (N, H): one product."""
    return (weights @ a.flatten(-2)).unflatten(-1, (3, 3))


class HandleMap:
    """q = [latent (k_latent) | handle 0 (12) | handle 1 (12) | …] ↦ positions (…, N, 3): a coordinate map
    (``maps.py``) whose ``decoder`` maps the latent coordinates to the latent-decoded positions x̄."""

    holds_rigid_motion = True  # the whole-object handle is rigid motion exactly: it is not damped

    def __init__(self, decoder, k_latent: int, weights: torch.Tensor,
                 centre: torch.Tensor, gradients: torch.Tensor | None = None, anchors: torch.Tensor | None = None,
                 turns: torch.Tensor | None = None, slides=None) -> None:
        self.decoder, self.k_latent, self.weights, self.centre = decoder, k_latent, weights, centre  # weights (N, H)
        # a jointed assembly's (joints.py): the gap at each joint's anchor and the pieces' relative turn, each a
        # constant matrix on the handle coordinates (None: one piece); its joints' own limits (joints.JointLimits)
        self.anchors, self.turns, self.slides = anchors, turns, slides
        self.gradients = torch.zeros(*weights.shape, 3, dtype=weights.dtype, device=weights.device) if gradients is None else gradients
        self.handles = weights.shape[1]
        self.k = k_latent + DOF * self.handles

    def split(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(latent (…, k_latent), A (…, H, 3, 3), t (…, H, 3))."""
        h = q[..., self.k_latent:].reshape(*q.shape[:-1], self.handles, DOF)
        return q[..., : self.k_latent], h[..., :9].reshape(*q.shape[:-1], self.handles, 3, 3), h[..., 9:]

    def blend(self, xbar: torch.Tensor, a: torch.Tensor, t: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """x̄ + Σ_h w_h (A_h (x̄ − c) + t_h) for points x̄ (…, N, 3) with their weights (N, H)."""
        r = xbar - self.centre
        # a batched 3×3 product of the mixed A (an einsum of weights, A and r costs twice as much)
        return xbar + (mixed_affine(a, weights) @ r[..., None])[..., 0] + weights @ t

    def linear(self, a: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Per-point linear part I + Σ_h w_h A_h (N, 3, 3) of one state."""
        return torch.eye(3, dtype=a.dtype, device=a.device) + mixed_affine(a, weights)

    def gradient_basis(self, rest: torch.Tensor) -> torch.Tensor:
        """G (N, 3, 3, 12 H) with F = I + G · q_handles, the handle motion's deformation gradient at the rest
        points: F = I + Σ_h w_h A_h + (A_h (x − c) + t_h) ∇w_hᵀ is linear in the handle coordinates."""
        n, eye = len(rest), torch.eye(3, dtype=rest.dtype, device=rest.device)
        r = rest - self.centre
        blocks = []
        for h in range(self.handles):
            w, grad = self.weights[:, h], self.gradients[:, h]  # (N,), (N, 3)
            row = w[:, None, None] * eye + r[:, :, None] * grad[:, None, :]  # ∂F[a, :]/∂A[a, b] for each b: (N, 3, 3)
            d_a = torch.einsum("ac,nbd->nadcb", eye, row).reshape(n, 3, 3, 9)  # ∂F[a, d]/∂A[c, b]
            d_t = torch.einsum("ac,nd->nadc", eye, grad)  # ∂F[a, d]/∂t[c]
            blocks += [d_a, d_t]
        return torch.cat(blocks, -1)

    def latent(self, q: torch.Tensor) -> torch.Tensor:
        return q[..., : self.k_latent]

    def compose(self, xbar: torch.Tensor, q: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """Positions of the latent-decoded points x̄ at q, with their handle ``weights`` (the cubature's: None)."""
        _, a, t = self.split(q)
        return self.blend(xbar, a, t, self.weights if weights is None else weights)

    def strain_basis(self, rest: torch.Tensor) -> torch.Tensor:
        return self.gradient_basis(rest)

    def carry_normals(self, deformation: torch.Tensor, q: torch.Tensor, normals: torch.Tensor,
                      tangents: torch.Tensor) -> torch.Tensor:
        """The cofactor of the handles' linear part: (L t1) × (L t2) for the rest tangents (t1, t2) (N, 3, 2)
        carried along by the latent's rotation (a rotation keeps them an orthonormal pair about the normal)."""
        tangents = self.decoder.rotate(deformation[:, None], tangents.transpose(1, 2)).transpose(1, 2)
        _, a, _ = self.split(q)
        moved = self.linear(a, self.weights) @ tangents
        turned = torch.linalg.cross(moved[..., 0], moved[..., 1])
        return turned / turned.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def __call__(self, q: torch.Tensor) -> torch.Tensor:
        latent, a, t = self.split(q)
        return self.blend(self.decoder(latent), a, t, self.weights)

    def jacobian(self, q: torch.Tensor, decoder_jacobian) -> tuple[torch.Tensor, torch.Tensor]:
        """(J (N, 3, k), x (N, 3)) at one state: latent columns through the decoder's Jacobian, handle columns
        exact."""
        latent, a, t = self.split(q)
        j_latent, xbar = decoder_jacobian(latent)  # (N, 3, k_latent), (N, 3)
        r, eye = xbar - self.centre, torch.eye(3, dtype=q.dtype, device=q.device)
        n, w = len(r), self.weights  # (N, H)
        # ∂x_a/∂A_h[b, c] = w_h δ_ab r_c and ∂x_a/∂t_h[b] = w_h δ_ab, all handles at once: (N, 3, H, 12)
        d_a = (w[:, None, :, None, None] * eye[None, :, None, :, None] * r[:, None, None, None, :]).reshape(n, 3, -1, 9)
        d_t = w[:, None, :, None] * eye[None, :, None, :]
        handles = torch.cat([d_a, d_t], -1).reshape(n, 3, -1)
        columns = [self.linear(a, w) @ j_latent, handles]
        return torch.cat(columns, -1), self.blend(xbar, a, t, self.weights)
