"""ModelConfig and the named presets. No bpy use; no torch either (configs travel as JSON)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ...errors import CheckpointError

MODEL_FORMAT_VERSION = 1

HEAD_NAMES = ("dualquat", "displacement")  # model/heads.py has one strategy object for each


@dataclass(frozen=True)
class ModelConfig:
    width: int = 128  # transformer width
    heads: int = 4
    latent_tokens: int = 16  # the latent token set
    latent_dim: int = 8  # numbers per latent token: 16 x 8 = 128 latent numbers
    encoder_layers: int = 2  # self-attention layers after the cross-attention
    decoder_layers: int = 2
    fourier_freqs: int = 8
    point_features: int = 7  # position (3), normal (3), pinned flag (1)
    head: str = "dualquat"  # or "displacement" (the ablation)
    # unused: the simulation blends each vertex's nearest points smoothly (simulation.DRIVE_NEIGHBOURS); kept so
    # that stored configurations load
    knn: int = 4
    # a learned per-object reduction: the prior encoder's tokens also predict k latent directions W,
    # z(q) = μ_cond + W q, trained through the decoder; 0: none (the dynamics fit an active subspace post hoc)
    reduced_k: int = 0

    def __post_init__(self) -> None:
        if self.head not in HEAD_NAMES:
            raise CheckpointError(f"unknown decoder head {self.head!r}; use one of {', '.join(HEAD_NAMES)}")
        if self.width % self.heads:
            raise CheckpointError(f"width {self.width} must be a multiple of heads {self.heads}")
        if not isinstance(self.reduced_k, int) or not 0 <= self.reduced_k <= self.latent_tokens * self.latent_dim:
            raise CheckpointError(f"reduced_k must be a whole number from 0 to the latent size "
                                  f"{self.latent_tokens * self.latent_dim}, got {self.reduced_k!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        valid = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - valid)
        if unknown:
            raise CheckpointError(f"unknown model config keys {unknown}; valid keys are {sorted(valid)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PRESETS: dict[str, ModelConfig] = {
    "neurok-xs": ModelConfig(width=32, heads=2, latent_tokens=8, latent_dim=4, encoder_layers=1, decoder_layers=1,
                             fourier_freqs=4),
    "neurok-s": ModelConfig(width=128, heads=4, latent_tokens=32, latent_dim=8, encoder_layers=2, decoder_layers=3),
    "neurok-b": ModelConfig(width=384, heads=8, latent_tokens=64, latent_dim=8, encoder_layers=4, decoder_layers=6,
                            fourier_freqs=12),
}
