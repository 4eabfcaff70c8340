"""Unit dual quaternions (w, x, y, z | dual w, x, y, z): normalization, blending, applying to points. No bpy use."""

from __future__ import annotations

import torch

IDENTITY = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def qmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def qconj(q: torch.Tensor) -> torch.Tensor:
    return q * q.new_tensor([1.0, -1.0, -1.0, -1.0])


def normalize(dq: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Project onto unit dual quaternions: |real| = 1 and real · dual = 0."""
    real, dual = dq[..., :4], dq[..., 4:]
    norm = real.norm(dim=-1, keepdim=True).clamp_min(eps)
    real, dual = real / norm, dual / norm
    dual = dual - (real * dual).sum(-1, keepdim=True) * real
    return torch.cat([real, dual], -1)


def mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Compose: apply b, then a."""
    ar, ad, br, bd = a[..., :4], a[..., 4:], b[..., :4], b[..., 4:]
    return torch.cat([qmul(ar, br), qmul(ar, bd) + qmul(ad, br)], -1)


def inverse(dq: torch.Tensor) -> torch.Tensor:
    """Inverse of a unit dual quaternion (its quaternion conjugate, part by part)."""
    return torch.cat([qconj(dq[..., :4]), qconj(dq[..., 4:])], -1)


def translation(dq: torch.Tensor) -> torch.Tensor:
    return 2.0 * qmul(dq[..., 4:], qconj(dq[..., :4]))[..., 1:]


def apply(dq: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Rotate then translate ``points`` (…, 3) by unit dual quaternions (…, 8): r p r* and 2 d r*, written out
    in vector form — (w² − u·u) p + 2 (u·p) u + 2 w u × p, and 2 (w d⃗ − d_w u + u × d⃗) for r = (w, u),
    d = (d_w, d⃗) — the same products as the quaternion sandwich in a third of the operations."""
    w, u, dw, dv = dq[..., :1], dq[..., 1:4], dq[..., 4:5], dq[..., 5:]
    return rotate(dq, points) + 2 * (w * dv - dw * u + torch.linalg.cross(u, dv, dim=-1))


def rotate(dq: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """Rotate ``vectors`` (…, 3) by the real parts of unit dual quaternions (…, 8): r v r* in vector form."""
    w, u = dq[..., :1], dq[..., 1:4]
    ub, vb = torch.broadcast_tensors(u, vectors)
    return ((w * w - (u * u).sum(-1, keepdim=True)) * vectors + 2 * (u * vectors).sum(-1, keepdim=True) * u
            + 2 * w * torch.linalg.cross(ub, vb, dim=-1))


def blend(dqs: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Dual-quaternion linear blending over the second-to-last axis: (…, K, 8), (…, K) → (…, 8); no weights:
    equal ones (the normalization makes their scale irrelevant, so none are multiplied in)."""
    pivot = dqs[..., :1, :4]
    sign = torch.where((dqs[..., :4] * pivot).sum(-1, keepdim=True) < 0, -1.0, 1.0)  # same hemisphere
    return normalize((dqs * (sign if weights is None else sign * weights[..., None])).sum(-2))
