"""Research switches: the ablations of the reduced dynamics, kept out of the product's settings. Only the SDK
(``research=``) and the validation tools accept them; a bake from the panel, the batch or the CLI always runs
the defaults, which are the product's behaviour. No bpy use."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

CHOICES = {
    "latent": ("linearized", "exact"),  # the implicit step on the decoder's first-order model, or exact decodes
    "jacobian": ("difference", "forward"),  # the decoder's latent Jacobian: batched differences, or forward mode
    "reduction": ("auto", "learned", "active"),  # the checkpoint's learned directions, or an active subspace
    "handle_modes": ("free", "pinned"),  # handle weights: the spring graph's smoothest modes, or those held at pins
    # loose closed pieces as jointed parts — what moves at each joint read by the product's default (auto), the
    # hand-written rules or the learned reading (runtime/dynamics/kinematics.py) — or one body glued where they touch
    "joints": ("auto", "rules", "learned", "off"),
    "cloth_latent": ("cloth", "shape"),  # an open surface's latent: the checkpoint's cloth model, or the shape model's
    # what guides an open surface's cloth layer: nothing (the layer alone, the product's), or the reduced motion as its
    # coarse level (two scales: docs/decisions.md#cloth-layer)
    "detail_guide": ("none", "reduced"),
    # a closed solid's material when none is given: the fitted table's nearest sequences (table), or the calibrated
    # law at the material typical of the solids it is nearest to, at its own size (law: MaterialPredictor.typical;
    # it slumps an artist's metre-sized jelly cube flat: docs/decisions.md#solid-default)
    "solid_default": ("table", "law"),
}


@dataclass(frozen=True)
class Research:
    """What an ablation turns off or swaps; every default is what Simulate does."""

    latent: str = "linearized"
    jacobian: str = "difference"
    reduction: str = "auto"  # "auto": learned where the checkpoint has at least ``Solver.subspace`` directions
    handle_modes: str = "free"
    joints: str = "auto"
    cloth_latent: str = "cloth"
    detail_guide: str = "none"
    solid_default: str = "table"
    handles: bool = True  # False: the learned latent alone (the pure-latent ablation)
    no_latent: bool = False  # True: the latent's directions decode nothing (handles and springs alone)
    orthonormal: bool = True  # mass-orthonormal coordinates at rest (JᵀMJ = I), massless directions dropped
    chord_check: bool = True  # a model solve tests convergence with its own iteration's Jacobians

    def __post_init__(self) -> None:
        for name, choices in CHOICES.items():
            if getattr(self, name) not in choices:
                raise InputError(f"research {name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        for name in ("handles", "no_latent", "orthonormal", "chord_check"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"research {name} must be true or false, got {getattr(self, name)!r}")

    @classmethod
    def of(cls, value: Research | dict[str, Any] | None) -> Research:
        """A Research from itself, a dict of its fields (unknown keys name the valid ones), or None (the product)."""
        if value is None:
            return PRODUCT
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise InputError(f"research must be a dict of switches, got {value!r}")
        valid = sorted(f.name for f in dataclasses.fields(cls))
        unknown = sorted(set(value) - set(valid))
        if unknown:
            raise InputError(f"unknown research keys {unknown}; valid keys are {valid}")
        return cls(**value)


PRODUCT = Research()
