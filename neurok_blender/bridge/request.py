"""SimulationRequest: the one typed settings object of a bake, from the panel, the batch, the SDK and the CLI
to the engine. Validated here, once, with one set of defaults. Standard library only.

Forces and velocities are given in world space (m/s, m/s²) and checked there against physical limits;
``world_matrix`` (the object's local-to-world transform, identity for the SDK) turns them into the mesh's own
frame, where the engine works (``local_gravity`` and friends).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError

DEVICES = ("auto", "cpu", "cuda")
INTEGRATORS = ("implicit", "verlet")
# an open surface's material: "auto" is Blender Cloth's default (cotton); "shape" predicts it from the shape as a
# closed one's is; the rest are Blender's cloth presets, calibrated against Cloth (runtime/dynamics/cloth_presets.json)
CLOTH_PRESETS = ("cotton", "denim", "leather", "rubber", "silk")
CLOTH_CHOICES = ("auto", "shape", *CLOTH_PRESETS)
# a closed solid's material by name: Young's modulus (Pa) and density (kg/m³), through the checkpoint's calibrated
# law as a given modulus is (handbook values: gelatin, soft rubber, ABS, pine along the grain, steel)
SOLID_MATERIALS = {"jelly": (5e3, 1050.0), "rubber": (5e6, 1100.0), "plastic": (2e9, 1050.0), "wood": (1e10, 600.0),
                   "metal": (2e11, 7850.0)}
# the method's ablations are not solver settings: only the SDK and the validation tools take them
SOLVER_HINT = ("; ablations (latent, jacobian, reduction, handle_modes, joints, orthonormal, no handles) are research "
               "switches: the SDK's research= (runtime/research.py)")
INTERNAL_FIELDS = frozenset({"output_path", "track", "animated_pins"})  # what the add-on fills in; never listed to users
MAX_FRAMES = 100_000
MAX_THREADS = 256  # a bake's CPU threads: more is a typo, not a machine
MAX_SWEEPS = 200  # the cloth layer's sweeps per frame: beyond this a bake costs more than Blender Cloth's
DETAIL_SWEEPS = 20  # the default (docs/decisions.md#cloth-layer)
# Ranges of the artist's multipliers; the panel's properties use the same numbers.
STIFFNESS_RANGE = (0.01, 100.0)
DAMPING_RANGE = (0.0, 100.0)
# Beyond these a setting is a typo or a unit mix-up, not physics: refused before any work (see the README).
MAX_WIND = 200.0  # m/s, past the strongest gust ever measured
MAX_GRAVITY = 1000.0  # m/s², about 100 g
MAX_SPEED = 500.0  # m/s, an initial push
MAX_SPIN = 1000.0  # rad/s, an initial spin
MAX_FIELD = 10_000.0  # a force field's strength (m/s² or m/s): beyond it, a typo
YOUNG_RANGE = (1.0, 1e12)  # Pa: softer than a soap film or stiffer than diamond is a unit mix-up
DENSITY_RANGE = (1.0, 1e5)  # kg/m³: lighter than air foam, heavier than osmium
JOINT_LIMIT_RANGE = (0.01, 6.3)  # rad: a stop under half a degree is a weld; 2π never stops
DEFAULT_DENSITY = 1000.0  # kg/m³, when a Young's modulus comes without one (rubber, gels, wood are near it)
FIELD_KINDS = ("wind", "force", "vortex", "turbulence")
FIELD_SHAPES = ("point", "line", "plane")
MATERIAL_KEYS = ("stiffness", "bending", "pin", "ground", "plausibility", "damping_mass", "damping_stiffness",
                 "drag", "gust_amplitude", "gust_frequency", "joint", "joint_damping",
                 "joint_limit", "compression", "spring_compression")
IDENTITY = (1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0)

Vec3 = tuple[float, float, float]


def _number(name: str, value: Any, cast: type = float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{name} must be a number, got {value!r}")
    if cast is int and value != int(value):
        raise InputError(f"{name} must be a whole number, got {value!r}")
    out = cast(value)
    if not math.isfinite(out):
        raise InputError(f"{name} must be a finite number, got {value!r}")
    return out


def _in_range(name: str, value: Any, lo: float, hi: float, cast: type = float) -> Any:
    out = _number(name, value, cast)
    if not lo <= out <= hi:
        raise InputError(f"{name} must be between {lo:g} and {hi:g}, got {value!r}")
    return out


def _optional_range(name: str, value: Any, bounds: tuple[float, float]) -> float:
    """0 (not given) or a number within ``bounds``."""
    out = _number(name, value)
    return 0.0 if out == 0 else _in_range(name + " (0: not given)", out, *bounds)


def joint_limit_from_degrees(degrees: float) -> float:
    """The command lines' ``--joint-limit`` (degrees) as the request's ``joint_limit`` (radians), where 0 reads
    "predicted": a given 0 is refused here rather than silently meaning the opposite. The range is the request's."""
    if degrees == 0:
        raise InputError("--joint-limit must be above 0 degrees (leave it out for the predicted stop)")
    return math.radians(degrees)


def _vec(name: str, value: Any, size: int = 3) -> tuple[float, ...]:
    try:
        vec = tuple(float(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be {size} numbers, got {value!r}") from exc
    if len(vec) != size or not all(math.isfinite(v) for v in vec):
        raise InputError(f"{name} must be {size} finite numbers, got {value!r}")
    return vec


def _bounded_vec(name: str, value: Any, limit: float, unit: str) -> Vec3:
    vec = _vec(name, value)
    size = math.sqrt(sum(v * v for v in vec))
    if size > limit:
        raise InputError(f"{name} of {size:.4g} {unit} is beyond the physical limit of {limit:g} {unit}; "
                         "check the value and its units")
    return vec  # type: ignore[return-value]


def _choice(name: str, value: Any, choices: tuple) -> Any:
    if value not in choices:
        raise InputError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _from_dict(cls: type, data: Any, what: str, hint: str = "") -> Any:
    """``cls(**data)`` for a frozen settings dataclass; unknown keys name the valid ones."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise InputError(f"{what} must be an object with keys {sorted(f.name for f in dataclasses.fields(cls))}, "
                         f"got {data!r}")
    valid = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - valid)
    if unknown:
        raise InputError(f"unknown {what} keys {unknown}; valid keys are {sorted(valid - INTERNAL_FIELDS)}{hint}")
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise InputError(f"{what} needs {', '.join(missing)}; got {data!r}")
    return cls(**data)


@dataclass(frozen=True)
class Ground:
    """The plane n·x = offset (world space) that the object cannot pass; by default the floor z = 0."""

    normal: Vec3 = (0.0, 0.0, 1.0)
    offset: float = 0.0

    def __post_init__(self) -> None:
        normal = _vec("ground normal", self.normal)
        length = math.sqrt(sum(v * v for v in normal))
        if length < 1e-12:
            raise InputError("the ground plane needs a non-zero normal")
        _set(self, "normal", tuple(v / length for v in normal))
        _set(self, "offset", _number("ground offset", self.offset))


@dataclass(frozen=True)
class Poke:
    """An initial push: these vertices start moving with this world-space velocity (it fades with distance)."""

    vertices: tuple[int, ...]
    velocity: Vec3

    def __post_init__(self) -> None:
        try:
            idx = tuple(int(i) for i in self.vertices)
        except (TypeError, ValueError) as exc:
            raise InputError(f"poke vertices must be vertex indices, got {self.vertices!r}") from exc
        if not idx or min(idx) < 0:
            raise InputError("poke must name at least one vertex, by non-negative index")
        _set(self, "vertices", idx)
        _set(self, "velocity", _bounded_vec("poke velocity", self.velocity, MAX_SPEED, "m/s"))


@dataclass(frozen=True)
class Collider:
    """A scene obstacle (Blender: an object with a Collision modifier). Its triangles travel as an array
    beside the request and its world-space vertices, frame by frame, in the scene track (``track.py``);
    ``vertex_count`` says how many. ``thickness`` is the outer distance kept from its surface (world units),
    ``friction`` a dimensionless tangential drag (0 slides freely; Blender's Friction / 10)."""

    name: str = ""
    vertex_count: int = 0
    thickness: float = 0.02
    friction: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InputError(f"collider name must be a string, got {self.name!r}")
        who = f"collider {self.name!r}" if self.name else "a collider"
        _set(self, "vertex_count", _in_range(f"{who} vertex count", self.vertex_count, 3, 10_000_000, int))
        _set(self, "thickness", _in_range(f"{who} thickness", self.thickness, 0.0, 1e3))
        _set(self, "friction", _in_range(f"{who} friction", self.friction, 0.0, 100.0))


@dataclass(frozen=True)
class ForceField:
    """A scene force field (Blender's Wind, Force, Vortex and Turbulence field objects), in world space.

    ``kind``: ``wind`` is moving air (``strength`` in m/s along the field's +Z, acting through drag on the
    surface), ``force`` a push away from the field's origin (negative: a pull), ``vortex`` a swirl about its Z
    axis, ``turbulence`` a smooth noise of size ``size`` (these three in m/s², like gravity). ``shape`` says
    how distance to the field is measured (from its origin, its Z axis or its XY plane); the strength falls off
    as (1 + r − r_min)^−power past ``distance_min`` and is zero past ``distance_max`` (0: no limit).
    ``weight`` is the object's effector weight for this kind (times its "all" weight). ``matrix`` is the field
    object's world transform (row-major 4×4) and ``strength`` its strength, at the first frame; an animated
    field carries both per frame in the scene track."""

    kind: str = "wind"
    strength: float = 1.0
    matrix: tuple[float, ...] = IDENTITY
    shape: str = "point"
    falloff_power: float = 0.0
    distance_min: float = 0.0
    distance_max: float = 0.0
    size: float = 1.0
    noise: float = 0.0
    seed: int = 0
    weight: float = 1.0
    name: str = ""

    def __post_init__(self) -> None:
        _choice("field kind", self.kind, FIELD_KINDS)
        _choice("field shape", self.shape, FIELD_SHAPES)
        _set(self, "strength", _in_range("field strength", self.strength, -MAX_FIELD, MAX_FIELD))
        _set(self, "matrix", _vec("field matrix", self.matrix, 16))
        _set(self, "falloff_power", _in_range("field falloff power", self.falloff_power, 0.0, 10.0))
        _set(self, "distance_min", _in_range("field distance_min", self.distance_min, 0.0, 1e6))
        _set(self, "distance_max", _in_range("field distance_max", self.distance_max, 0.0, 1e6))
        _set(self, "size", _in_range("field size", self.size, 1e-4, 1e6))
        _set(self, "noise", _in_range("field noise", self.noise, 0.0, 10.0))
        _set(self, "seed", _number("field seed", self.seed, int))
        _set(self, "weight", _in_range("field weight", self.weight, 0.0, 100.0))
        if not isinstance(self.name, str):
            raise InputError(f"field name must be a string, got {self.name!r}")


JOINT_TYPES = ("auto", "hinge", "slide", "ball", "weld")
MAX_JOINTS = 8  # an assembly has at most this many pieces, so fewer joints (runtime/dynamics/joints.py MAX_PARTS)


@dataclass(frozen=True)
class JointOverride:
    """The artist's word on an assembly's joint where its shape is ambiguous (a drawer's slide, a hinge's axis).
    ``joint``: which one, 1, 2, … in the order a bake's report lists them; 0: every joint. ``type`` (JOINT_TYPES;
    auto keeps the one found), ``axis`` in the object's local axes (a hinge turns about it, a slide moves along
    it; None keeps the one found) and ``range`` (lower, upper) from the rest pose: radians for a hinge, the
    object's local units for a slide (None: a hinge stops at joint_limit, a slide where its piece would leave the
    one it rests on). Checked against the mesh's joints when the bake starts, before anything is written."""

    joint: int = 0
    type: str = "auto"
    axis: Vec3 | None = None
    range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        _set(self, "joint", _in_range("joint override's joint (0: every joint)", self.joint, 0, MAX_JOINTS, int))
        _choice("joint override's type", self.type, JOINT_TYPES)
        if self.axis is not None:
            axis = _vec("joint override's axis", self.axis)
            length = math.sqrt(sum(v * v for v in axis))
            if length < 1e-9:
                raise InputError("joint override's axis must be a non-zero direction, got (0, 0, 0)")
            _set(self, "axis", tuple(v / length for v in axis))
        if self.range is not None:
            lower, upper = _vec("joint override's range", self.range, 2)
            if not lower <= 0.0 <= upper or lower == upper:
                raise InputError(f"joint override's range must go from at most 0 to at least 0 (the rest pose) and "
                                 f"not be empty, got ({lower:g}, {upper:g})")
            _set(self, "range", (lower, upper))
        if self.type in ("ball", "weld") and (self.axis is not None or self.range is not None):
            raise InputError(f"a {self.type} joint has no axis or range to override; give them with a hinge or a slide")


@dataclass(frozen=True)
class Solver:
    """How the latent dynamics are resolved and integrated: what an artist or a TD tunes. The defaults are what
    the material was fitted with (docs/decisions.md#solver-defaults). The ablations of the method are not here:
    the SDK and the validation tools take them as ``research=`` (runtime/research.py)."""

    integrator: str = "implicit"  # or "verlet" (explicit, for energy checks)
    iterations: int = 6  # Gauss–Newton iterations per implicit step (stiff materials need them: a spin brakes at 2)
    order: int = 2  # implicit order: 1 backward Euler (damps a wobble out in a few frames), 2 BDF2
    variation: float = 0.5  # size of the seed's random initial latent velocity; 0 turns it off
    cubature: int = 160  # cubature points
    subspace: int = 16  # learned latent coordinates k_q
    handles: int = 4  # affine skinning handles on top of the latent (12 coordinates each)
    solid_handles: int = 8  # a closed solid's handles (docs/decisions.md#solid-handles)
    # an open surface's handles where it meets colliders or the ground or its pins move (decisions#cloth-handles)
    contact_handles: int = 8
    refresh: int = 16  # implicit steps between fresh latent Jacobians (secant-updated between; 1: every step)
    # an open surface's full-resolution cloth layer (the folds): on or off (a faster preview), and its substeps per
    # frame, each one constraint sweep (docs/decisions.md#cloth-layer)
    detail: bool = True
    detail_sweeps: int = DETAIL_SWEEPS

    def __post_init__(self) -> None:
        _choice("integrator", self.integrator, INTEGRATORS)
        _set(self, "order", _choice("order", _number("order", self.order, int), (1, 2)))
        _set(self, "iterations", _in_range("iterations", self.iterations, 1, 20, int))
        _set(self, "variation", _in_range("variation", self.variation, 0.0, 100.0))
        _set(self, "cubature", _in_range("cubature", self.cubature, 8, 4096, int))
        _set(self, "subspace", _in_range("subspace", self.subspace, 1, 64, int))
        _set(self, "handles", _in_range("handles", self.handles, 1, 16, int))
        _set(self, "solid_handles", _in_range("solid_handles", self.solid_handles, 1, 16, int))
        _set(self, "contact_handles", _in_range("contact_handles", self.contact_handles, 1, 16, int))
        _set(self, "refresh", _in_range("refresh", self.refresh, 1, 100, int))
        if not isinstance(self.detail, bool):
            raise InputError(f"detail must be true or false, got {self.detail!r}")
        _set(self, "detail_sweeps", _in_range("detail_sweeps", self.detail_sweeps, 1, MAX_SWEEPS, int))


@dataclass(frozen=True)
class LocalScene:
    """A request's loads in the mesh's own frame, converted once before the dynamics start
    (``SimulationRequest.local_scene``): vectors with rotation and scale undone, the ground as n·x = offset."""

    gravity: Vec3
    wind: Vec3
    initial_velocity: Vec3
    ground: tuple[Vec3, float] | None
    poke_velocity: Vec3 | None
    linear: tuple[tuple[float, float, float], ...]  # the object's local-to-world linear part, row by row
    world_matrix: tuple[float, ...]  # local-to-world 4×4, row-major


@dataclass(frozen=True)
class SimulationRequest:
    """Everything one bake needs besides the mesh arrays."""

    output_path: str = ""  # the worker's PC2 file; the SDK streams instead
    object_name: str = ""
    frame_start: int = 1
    frame_count: int = 120
    fps: float = 24.0
    gravity: Vec3 = (0.0, 0.0, -9.81)  # world space, m/s²
    wind: Vec3 = (0.0, 0.0, 0.0)  # world space, m/s
    initial_velocity: Vec3 = (0.0, 0.0, 0.0)  # world space, m/s; pinned parts are held back
    initial_spin: Vec3 = (0.0, 0.0, 0.0)  # world space angular velocity about the centre of mass, rad/s
    poke: Poke | None = None
    ground: Ground | None = None
    world_matrix: tuple[float, ...] = IDENTITY  # the object's local-to-world 4×4, row-major
    stiffness: float = 1.0  # multiplier on the predicted material
    damping: float = 1.0  # multiplier on the predicted material
    material: dict[str, float] = field(default_factory=dict)  # overrides of the predicted (dimensionless) material
    # a closed solid's physical material: Young's modulus (Pa) and density (kg/m³; 0: DEFAULT_DENSITY) set its
    # stiffness through the checkpoint's calibrated law instead of the shape's prediction; 0: predicted
    young_modulus: float = 0.0
    density: float = 0.0
    solid_material: str = ""  # a SOLID_MATERIALS name: sets young_modulus and density; empty: none
    # an assembly's joints (a mesh of loose closed pieces, such as a desk lamp): a multiplier on the predicted
    # rotational spring, and how far each joint turns before it stops (rad; 0: predicted)
    joint_stiffness: float = 1.0
    joint_limit: float = 0.0
    joints: tuple[JointOverride, ...] = ()  # the artist's overrides of the joints found (JointOverride)
    # an open surface's material (CLOTH_CHOICES): "auto" behaves as Blender Cloth's default; closed meshes ignore it
    cloth_preset: str = "auto"
    seed: int = 0
    device: str = "auto"
    threads: int = 0  # CPU threads (torch's); 0: the cores other processes leave free when the bake starts
    checkpoint: str = ""  # empty: the shipped model
    solver: Solver = field(default_factory=Solver)
    colliders: tuple[Collider, ...] = ()
    fields: tuple[ForceField, ...] = ()
    # the scene track: a file of per-frame world-space data (the object's transform, pin targets, collider
    # vertices, animated fields; layout in ``neurok_blender/track.py``); empty: a static scene
    track: str = ""
    animated_pins: bool = False  # the track carries pin targets: pinned vertices follow the animation

    def __post_init__(self) -> None:
        for name in ("output_path", "object_name", "device", "checkpoint"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"{name} must be a string, got {getattr(self, name)!r}")
        _set(self, "frame_start", _number("frame_start", self.frame_start, int))
        _set(self, "frame_count", _in_range("frame_count", self.frame_count, 1, MAX_FRAMES, int))
        _set(self, "fps", _in_range("fps", self.fps, 1e-3, 10_000.0))
        _set(self, "seed", _number("seed", self.seed, int))
        _set(self, "stiffness", _in_range("stiffness multiplier", self.stiffness, *STIFFNESS_RANGE))
        _set(self, "damping", _in_range("damping multiplier", self.damping, *DAMPING_RANGE))
        _set(self, "joint_stiffness", _in_range("joint stiffness multiplier", self.joint_stiffness, *STIFFNESS_RANGE))
        _set(self, "joint_limit", _optional_range("joint_limit (rad)", self.joint_limit, JOINT_LIMIT_RANGE))
        _choice("cloth_preset", self.cloth_preset, CLOTH_CHOICES)
        _set(self, "young_modulus", _optional_range("young_modulus (Pa)", self.young_modulus, YOUNG_RANGE))
        _set(self, "density", _optional_range("density (kg/m³)", self.density, DENSITY_RANGE))
        if self.solid_material:
            self._solid_material()
        if self.density and not self.young_modulus:
            raise InputError("density is used only with young_modulus (it turns the Young's modulus into a "
                             "stiffness); set young_modulus too, or leave density at 0")
        _choice("device", self.device, DEVICES)
        _set(self, "threads", _in_range("threads (0: the free cores)", self.threads, 0, MAX_THREADS, int))
        _set(self, "gravity", _bounded_vec("gravity", self.gravity, MAX_GRAVITY, "m/s²"))
        _set(self, "wind", _bounded_vec("wind", self.wind, MAX_WIND, "m/s"))
        _set(self, "initial_velocity", _bounded_vec("initial velocity", self.initial_velocity, MAX_SPEED, "m/s"))
        _set(self, "initial_spin", _bounded_vec("initial spin", self.initial_spin, MAX_SPIN, "rad/s"))
        _set(self, "world_matrix", _vec("world_matrix", self.world_matrix, 16))
        if abs(_det3(self.linear)) < 1e-12:
            raise InputError(f"{self.object_name or 'the object'!r} has zero scale on some axis, so it has no local frame")
        _set(self, "material", self._material(self.material))
        if self.poke is not None:
            _set(self, "poke", _from_dict(Poke, self.poke, "poke"))
        if self.ground is not None:
            ground = Ground(offset=self.ground) if isinstance(self.ground, (int, float)) else self.ground
            _set(self, "ground", _from_dict(Ground, ground, "ground"))
        _set(self, "solver", _from_dict(Solver, self.solver, "solver", SOLVER_HINT))
        _set(self, "colliders", self._parts(Collider, self.colliders, "collider"))
        _set(self, "fields", self._parts(ForceField, self.fields, "field"))
        _set(self, "joints", self._parts(JointOverride, self.joints, "joint override"))
        if not isinstance(self.track, str):
            raise InputError(f"track must be a file path, got {self.track!r}")
        if not isinstance(self.animated_pins, bool):
            raise InputError(f"animated_pins must be true or false, got {self.animated_pins!r}")

    def _solid_material(self) -> None:
        """A named solid material fills in its Young's modulus and density; given ones must agree with it."""
        _choice("solid_material", self.solid_material, tuple(SOLID_MATERIALS))
        young, density = SOLID_MATERIALS[self.solid_material]
        if (self.young_modulus, self.density) not in ((0.0, 0.0), (young, density)):
            raise InputError(f"solid_material {self.solid_material!r} sets young_modulus {young:g} Pa and density "
                             f"{density:g} kg/m³; give the material's name or its numbers, not both")
        _set(self, "young_modulus", young)
        _set(self, "density", density)

    @staticmethod
    def _parts(cls: type, items: Any, what: str) -> tuple:
        if isinstance(items, (str, bytes, dict)) or not hasattr(items, "__iter__"):
            raise InputError(f"{what}s must be a list, got {items!r}")
        return tuple(_from_dict(cls, item, what) for item in items)

    @staticmethod
    def _material(overrides: Any) -> dict[str, float]:
        if not isinstance(overrides, dict):
            raise InputError(f"material must be an object of overrides, got {overrides!r}")
        unknown = sorted(set(overrides) - set(MATERIAL_KEYS))
        if unknown:
            raise InputError(f"unknown material keys {unknown}; valid keys are {sorted(MATERIAL_KEYS)}")
        out = {k: _number(f"material {k}", v) for k, v in overrides.items()}
        negative = [k for k, v in out.items() if v < 0]
        if negative:
            raise InputError(f"material {negative[0]} must be >= 0, got {out[negative[0]]}")
        return out

    # -- serialization ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any) -> SimulationRequest:
        """Build from a decoded header or keyword settings; nested parts may be dicts; unknown keys are an
        error that names the valid ones. A number for ``ground`` is the height of the floor z = h."""
        if not isinstance(data, dict):
            raise InputError("a simulation request must be a JSON object")
        return _from_dict(cls, data, "request")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # -- the mesh's own frame ----------------------------------------------------------------------
    def local_scene(self) -> LocalScene:
        """Every load of the request in the mesh's frame, for the engine to hand to the dynamics."""
        return LocalScene(self.local_gravity, self.local_wind, self.local_initial_velocity, self.local_ground(),
                          None if self.poke is None else self.to_local(self.poke.velocity), self.linear,
                          self.world_matrix)

    @property
    def linear(self) -> tuple[tuple[float, float, float], ...]:
        m = self.world_matrix
        return tuple(tuple(m[4 * r + c] for c in range(3)) for r in range(3))  # type: ignore[return-value]

    def to_local(self, vector: Vec3) -> Vec3:
        """A world-space vector (acceleration, velocity) in the mesh's frame (rotation and scale undone)."""
        return _solve3(self.linear, vector)

    @property
    def local_gravity(self) -> Vec3:
        return self.to_local(self.gravity)

    @property
    def local_wind(self) -> Vec3:
        return self.to_local(self.wind)

    @property
    def local_initial_velocity(self) -> Vec3:
        return self.to_local(self.initial_velocity)

    def to_world_point(self, point: Vec3) -> Vec3:
        m = self.world_matrix
        return tuple(sum(m[4 * r + c] * point[c] for c in range(3)) + m[4 * r + 3] for r in range(3))  # type: ignore

    def local_ground(self) -> tuple[Vec3, float] | None:
        """The ground plane in the mesh's frame as (unit normal, offset) with n·x = offset, or None."""
        if self.ground is None:
            return None
        n, m = self.ground.normal, self.world_matrix
        lin = self.linear
        normal = tuple(sum(lin[r][c] * n[r] for r in range(3)) for c in range(3))  # Lᵀ n: normals map by M⁻ᵀ
        length = math.sqrt(sum(v * v for v in normal))
        normal = tuple(v / length for v in normal)
        world_point = tuple(self.ground.offset * v for v in n)
        shifted = tuple(world_point[r] - m[4 * r + 3] for r in range(3))
        point = _solve3(lin, shifted)
        return normal, sum(a * b for a, b in zip(normal, point))  # type: ignore[return-value]


def _det3(a: tuple[tuple[float, ...], ...]) -> float:
    return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))


def _solve3(a: tuple[tuple[float, ...], ...], b: Vec3) -> Vec3:
    """x with a x = b, by Cramer's rule (a is checked non-singular on construction)."""
    det = _det3(a)
    out = []
    for col in range(3):
        swapped = tuple(tuple(b[r] if c == col else a[r][c] for c in range(3)) for r in range(3))
        out.append(_det3(swapped) / det)
    return tuple(out)  # type: ignore[return-value]
