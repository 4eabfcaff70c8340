"""Material parameters: dimensionless defaults predicted from the shape (nearest fitted training
sequences, see ``fit_material``), the artist's multipliers on top, and their scaling to physical units.
No bpy use; no torch either."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import CheckpointError, InputError

G_REF = 9.81
CLOTH_PRESET_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cloth_presets.json")
AUTO_CLOTH = "cotton"  # Blender Cloth's default settings are its Cotton preset
JOINT_STOP = 100.0  # a joint limit's spring, in M·g·ℓ per unit of ‖F_child − F_parent‖ past the limit, squared
MATERIAL_FILE = "material.json"


@dataclass(frozen=True)
class Constants:
    """A material in the object's own units, as the energies use it (``Material.scaled``): stiffness, bending,
    plausibility, joint and joint_stop in energy per unit strain²; pin and ground springs per unit mass;
    damping_mass α (1/s), damping_stiffness β times the stretch stiffness; drag (1/s); joint_limit (rad, 0: none)."""

    stiffness: float
    bending: float
    pin: float
    ground: float
    plausibility: float
    damping_mass: float
    damping_stiffness: float
    drag: float
    joint: float = 0.0
    joint_limit: float = 0.0
    joint_stop: float = 0.0
    joint_damping: float = 0.0
    compression: float = 1.0  # an open surface's stiffness against in-plane compression, relative to stretch
    spring_compression: float = 1.0  # the same for the stretch springs between cubature points (what folds relieve)


@dataclass(frozen=True)
class Material:
    """Dimensionless, so one set of numbers means the same on a 10 cm toy and a 10 m banner.

    stiffness, bending: strain energy per unit strain² in units of M·g·ℓ (M mass, ℓ bounding-box diagonal);
    pin, ground: spring constants in units of g/ℓ; plausibility, joint: prior weight and the joints' rotational
    spring (an assembly of loose pieces, joints.py) in units of M·g·ℓ;
    damping_mass: α in 1/s; damping_stiffness: β in s; drag: wind drag per unit area and mass-per-area, 1/s;
    gust: relative amplitude and frequency (Hz) of wind gusts."""

    stiffness: float = 1.0
    bending: float = 0.1
    pin: float = 1e5  # stiff: with rigid motion in the space, soft pins let a clamped plate or lamp pivot
    ground: float = 3000.0
    plausibility: float = 1e-4
    damping_mass: float = 0.4
    damping_stiffness: float = 0.005
    drag: float = 1.5
    gust_amplitude: float = 0.3
    gust_frequency: float = 0.6
    joint: float = 0.3  # a jointed assembly's rotational spring per joint, in M·g·ℓ per ‖F_child − F_parent‖²
    joint_limit: float = 3.2  # rad: how far a joint turns before a stiff stop holds it (π or more: no stop)
    # a jointed assembly's damping of each joint's motion, in M·g·ℓ·s per ‖Ḟ_child − Ḟ_parent‖² (a slide's per
    # 2 (ṡ/ℓ)²), as the joint spring is per ‖F_child − F_parent‖²: a door's hinge friction, a drawer's runners
    joint_damping: float = 0.0
    # an open surface's in-plane compression stiffness relative to its stretch: below 1 a sheet squeezed in its
    # plane gives way as cloth does (it buckles into folds finer than the coordinates), 1 resists both alike
    compression: float = 1.0
    # the same for the stretch springs between cubature points, which measure the decoded surface: where the latent
    # can fold, stiff springs make compression buckle into folds while the handles' own strain gives way
    spring_compression: float = 1.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise InputError(f"material {f.name} must be a finite number >= 0, got {value!r}")

    def with_multipliers(self, stiffness: float = 1.0, damping: float = 1.0, joint: float = 1.0) -> Material:
        """The artist's knobs: stiffness scales stretch and bending, damping scales both Rayleigh terms, joint the
        joints' rotational spring (an assembly's; stiffness leaves it alone, so stiffer parts do not stiffen the
        hinges)."""
        return dataclasses.replace(self, stiffness=self.stiffness * stiffness, bending=self.bending * stiffness,
                                   damping_mass=self.damping_mass * damping,
                                   damping_stiffness=self.damping_stiffness * damping, joint=self.joint * joint)

    def updated(self, overrides: dict[str, Any]) -> Material:
        valid = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise InputError(f"unknown material keys {unknown}; valid keys are {sorted(valid)}")
        values = {k: float(v) for k, v in overrides.items()}
        if "compression" in values:  # the springs give way with the handles unless told otherwise
            values.setdefault("spring_compression", values["compression"])
        return dataclasses.replace(self, **values)

    def scaled(self, total_mass: float, diagonal: float) -> Constants:
        """The constants in the object's units for the energies module."""
        energy, spring = total_mass * G_REF * diagonal, G_REF / diagonal
        return Constants(stiffness=self.stiffness * energy, bending=self.bending * energy, pin=self.pin * spring,
                         ground=self.ground * spring, plausibility=self.plausibility * energy,
                         damping_mass=self.damping_mass,
                         damping_stiffness=self.damping_stiffness * self.stiffness * energy, drag=self.drag,
                         joint=self.joint * energy, joint_limit=self.joint_limit, joint_stop=JOINT_STOP * energy,
                         joint_damping=self.joint_damping * energy,
                         compression=self.compression, spring_compression=self.spring_compression)

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def cloth_material(name: str) -> dict[str, float]:
    """The calibrated open-surface material of a Blender cloth preset (``name``: a preset, or "auto" for Blender
    Cloth's default), as Material fields; how it was fitted is recorded in the file."""
    with open(CLOTH_PRESET_FILE) as fh:
        presets = json.load(fh)["presets"]
    entry = presets[AUTO_CLOTH if name == "auto" else name]
    out = {k: float(v) for k, v in entry.items() if k in {f.name for f in dataclasses.fields(Material)}}
    out.setdefault("spring_compression", out.get("compression", 1.0))  # springs give way as the handles do
    return out


@dataclass(frozen=True)
class PhysicalLaw:
    """A closed solid's dimensionless stiffness from its physical material: stiffness = scale · P^exponent with
    P = E / (ρ g_ref ℓ) (Young's modulus, density, the bounding-box diagonal in metres) — the strain energy
    E V ε² in the units of ``Material.stiffness``, M g_ref ℓ = ρ V g_ref ℓ. The constant and the exponent are
    fitted on the training split's FE solids, each at the stiffness that best matched its simulator
    (docs/decisions.md#physical-law); the exponent absorbs what the cubature springs (on the surface, not through
    the volume) make of a material's stiffness."""

    scale: float
    exponent: float
    fitted_on: int = 0  # sequences
    spread: float = 0.0  # the fit's residual standard deviation, in natural-log units

    def number(self, young: float, density: float, diagonal_m: float) -> float:
        return young / (density * G_REF * max(diagonal_m, 1e-9))

    def stiffness(self, young: float, density: float, diagonal_m: float) -> float:
        return float(self.scale * self.number(young, density, diagonal_m) ** self.exponent)

    @classmethod
    def fit(cls, numbers: np.ndarray, stiffness: np.ndarray) -> PhysicalLaw:
        """Least squares in log–log space over (P, best stiffness) pairs."""
        x, y = np.log(np.asarray(numbers, float)), np.log(np.asarray(stiffness, float))
        if len(x) < 2 or np.ptp(x) <= 0:
            raise ValueError(f"a physical law needs at least two distinct materials, got {len(x)}")
        exponent, intercept = np.polyfit(x, y, 1)
        spread = float(np.std(y - (intercept + exponent * x)))
        return cls(float(np.exp(intercept)), float(exponent), len(x), spread)


def with_physical(material: Material, law: PhysicalLaw | None, young: float, density: float, diagonal_m: float,
                  solid: bool) -> Material:
    """``material`` with the stiffness its physical material gives (bending kept in the same ratio to it)."""
    if law is None:
        raise InputError("young_modulus: this checkpoint has no calibrated physical-material law (its material.json "
                         "lacks 'physical'; docs/decisions.md#physical-law says how one is fitted); set the stiffness "
                         "multiplier instead")
    if not solid:
        raise InputError("young_modulus is calibrated for closed solids (watertight meshes); this mesh is open — a "
                         "sheet or a shell — so set the stiffness multiplier instead")
    stiffness = law.stiffness(young, density, diagonal_m)
    return dataclasses.replace(material, stiffness=stiffness,
                               bending=material.bending * stiffness / max(material.stiffness, 1e-12))


def shape_features(points: np.ndarray, pins: np.ndarray, solid: bool, parts: int = 1) -> np.ndarray:
    """What the material predictor looks at: flatness, elongation, closedness, the pinned share, and whether the
    mesh is made of separate pieces (an assembly of parts, such as a lamp or a laptop, moves at its joints)."""
    extent = np.sort(points.max(0) - points.min(0))[::-1] + 1e-9
    return np.array([extent[2] / extent[0], extent[1] / extent[0], float(solid), float((pins > 0.5).mean()),
                     float(parts > 1)])


@dataclass(frozen=True)
class MaterialPredictor:
    """k-nearest fitted training sequences in shape-feature space; each parameter the median of theirs
    (``average="median"``, the default) or their log-mean (``"log-mean"``).

    The fits of one family can disagree by orders of magnitude, and a log-mean of those is a material no fitted
    sequence had; the median is one that some sequence had (docs/decisions.md#material-median)."""

    features: np.ndarray  # (S, F)
    params: list[dict[str, float]]
    k: int = 3
    average: str = "median"  # or "log-mean": see above
    physical: PhysicalLaw | None = None  # closed solids' stiffness from Young's modulus and density, if calibrated
    families: tuple[str, ...] = ()  # each fitted sequence's family
    # the training solids' typical materials: {"category_of": {family: category}, "young": {category: Pa},
    # "density": kg/m³} (``typical_material``); None: the table has none
    typical: dict | None = None

    def typical_material(self, feats: np.ndarray) -> tuple[float, float] | None:
        """(Young's modulus, density) typical of the solids the shape is nearest to — the category (soft toy or
        elastic solid) most of its nearest fitted solids belong to, at the middle of that category's materials —
        or None without the table's typical materials or solid neighbours."""
        if not self.typical or not self.families:
            return None
        category_of, young = self.typical["category_of"], self.typical["young"]
        d = np.linalg.norm(self.features - feats[: self.features.shape[1]], axis=1)
        solid = [i for i in np.argsort(d) if category_of.get(self.families[i]) in young][: self.k]
        if not solid:
            return None
        categories = [category_of[self.families[i]] for i in solid]
        best = max(sorted(set(categories)), key=categories.count)
        return float(young[best]), float(self.typical["density"])

    def predict(self, feats: np.ndarray) -> Material:
        if not self.params:
            return Material()
        d = np.linalg.norm(self.features - feats[: self.features.shape[1]], axis=1)  # a 4-feature table: no parts
        near = np.argsort(d)[: self.k]
        base = Material().to_dict()
        # a field the table has no value for and whose default is 0 (off: joint_damping) stays off
        fitted = {name for name in base if base[name] > 0 or any(name in self.params[i] for i in near)}
        values = {name: [max(self.params[i].get(name, base[name]), 1e-12) for i in near] for name in fitted}
        if self.average == "log-mean":
            return Material(**dict(base, **{name: float(np.exp(np.mean(np.log(v)))) for name, v in values.items()}))
        return Material(**dict(base, **{name: float(np.median(v)) for name, v in values.items()}))

    @classmethod
    def load(cls, directory: str) -> MaterialPredictor:
        path = os.path.join(directory, MATERIAL_FILE)
        if not os.path.isfile(path):
            return cls(np.zeros((0, 5)), [])
        try:
            with open(path) as fh:
                doc = json.load(fh)
            entries = doc["sequences"]
            width = len(entries[0]["features"]) if entries else 5
            law = doc.get("physical")
            return cls(np.array([e["features"] for e in entries], float).reshape(-1, width),
                       [e["params"] for e in entries],
                       physical=None if law is None else PhysicalLaw(**{k: law[k] for k in
                                                                        ("scale", "exponent", "fitted_on", "spread")}),
                       families=tuple(str(e.get("family", "")) for e in entries), typical=doc.get("typical"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"the material table {path!r} is unreadable: {exc}") from exc
