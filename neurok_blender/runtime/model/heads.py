"""What the decoder's per-point output means: a unit dual quaternion (locally rigid, the paper's choice) or a
displacement. One small strategy object per kind, so no caller tests the head's name. No bpy use."""

from __future__ import annotations

import torch

from . import dualquat


class DualQuaternionHead:
    name, channels, identity = "dualquat", 8, dualquat.IDENTITY

    def finish(self, raw: torch.Tensor) -> torch.Tensor:
        return dualquat.normalize(raw)

    def relative(self, out: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
        """The deformation that takes the rest decode to ``out``."""
        return dualquat.mul(out, dualquat.inverse(rest))

    def apply(self, deformation: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        return dualquat.apply(deformation, points)

    def rotate(self, deformation: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """Directions (normals) carried along by each point's rotation."""
        return dualquat.rotate(deformation, vectors)

    def blend(self, neighbours: torch.Tensor) -> torch.Tensor:
        """The equal-weight blend of (…, K, 8) deformations."""
        return dualquat.blend(neighbours)


class DisplacementHead:
    name, channels, identity = "displacement", 3, (0.0, 0.0, 0.0)

    def finish(self, raw: torch.Tensor) -> torch.Tensor:
        return raw

    def relative(self, out: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
        return out - rest

    def apply(self, deformation: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        return points + deformation

    def rotate(self, deformation: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        return vectors  # a displacement carries no rotation

    def blend(self, neighbours: torch.Tensor) -> torch.Tensor:
        return neighbours.mean(-2)


HEADS = {head.name: head for head in (DualQuaternionHead(), DisplacementHead())}
