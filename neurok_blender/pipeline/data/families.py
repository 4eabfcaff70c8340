"""The procedural shape families: each draws a randomized SequenceSpec from a seed. numpy only.

Categories: cloth, elastic solid, soft toy/blob, articulated. The split is by family, so whole
families are held out for validation and testing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...runtime.dynamics.material import G_REF
from . import shapes
from .spec import Joint, SequenceSpec

MIN_VERTICES = 300
SPLITS = {"ribbon": "test", "plate": "test", "star_toy": "test", "lamp": "test", "banner": "val", "drawer": "val",
          "drape": "test", "shroud": "val", "twirl": "test"}


@dataclass(frozen=True)
class Family:
    name: str
    category: str
    backend: str
    make: Callable[[np.random.Generator, int], SequenceSpec]
    # the generator version whose sequences of this family are current: older ones were made by a backend since
    # fixed (the articulated joints, 1.2.0) and no longer say what the family is
    current_since: str = "1.0.0"

    def is_current(self, version: str) -> bool:
        """Whether a sequence made by generator ``version`` is current for this family."""
        as_tuple = lambda v: tuple(int(p) for p in v.split("."))  # noqa: E731
        return as_tuple(version) >= as_tuple(self.current_since)

    @property
    def split(self) -> str:
        return SPLITS.get(self.name, "train")


def _yaw(rng: np.random.Generator) -> np.ndarray:
    a = rng.uniform(0, 2 * np.pi)
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _wind(rng: np.random.Generator, lo: float, hi: float) -> np.ndarray:
    a = rng.uniform(0, 2 * np.pi)
    speed = rng.uniform(lo, hi) if rng.random() < 0.8 else 0.0
    return np.array([np.cos(a), np.sin(a), rng.uniform(-0.1, 0.1)]) * speed


def _gravity(rng: np.random.Generator) -> np.ndarray:
    return np.array([0.0, 0.0, -rng.uniform(6.0, 12.0)]) if rng.random() < 0.9 else np.zeros(3)


def _common(rng, family, category, backend, seed, verts, tris, pins, **kw) -> SequenceSpec:
    rot = _yaw(rng)
    return SequenceSpec(rotation=rot,
        family=family, category=category, backend=backend, seed=seed,
        vertices=(verts - verts.mean(0) * np.array([1, 1, 0])) @ rot.T, triangles=tris.astype(np.int64),
        pin_weights=pins.astype(np.float64), fps=kw.pop("fps", 24.0), frames=kw.pop("frames", 60),
        gravity=kw.pop("gravity", _gravity(rng)), wind=kw.pop("wind", _wind(rng, 1.0, 12.0)),
        gust=kw.pop("gust", (rng.uniform(0, 0.5), rng.uniform(0.3, 2.0))), **kw,
    )


def _res(rng, lo, hi, aspect) -> tuple[int, int]:
    """Grid counts with about lo..hi vertices for a sheet of the given aspect (width / height)."""
    n = np.exp(rng.uniform(np.log(lo), np.log(hi)))
    ny = max(4, int(np.sqrt(n / aspect)))
    return max(4, int(n / ny)), ny


def _cloth_material(rng) -> dict[str, float]:
    return {"young": float(np.exp(rng.uniform(np.log(2e4), np.log(3e5)))), "poisson": 0.2,
            "thickness": 2e-3, "mass": float(rng.uniform(0.1, 0.5)), "damping": float(rng.uniform(5e-4, 3e-3)),
            "drag": float(rng.uniform(0.5, 1.5))}


def _cloth(name: str, pin_fn, holes_fn=None, size=((0.8, 1.6), (0.5, 1.0))):
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        w, h = rng.uniform(*size[0]), rng.uniform(*size[1])
        nx, ny = _res(rng, 300, 1000, w / h)
        holes = holes_fn(rng) if holes_fn else ()
        verts, tris = shapes.sheet(w, h, nx, ny, holes)
        verts[:, 2] += 1.5 + h
        pins = pin_fn(verts, w, h)
        return _common(rng, name, "cloth", "mujoco_cloth", seed, verts, tris, pins, material=_cloth_material(rng))
    return make


def _edge_pin(verts, w, h):
    return (verts[:, 0] < 1e-6).astype(float)


def _top_pin(verts, w, h):
    return (verts[:, 2] > verts[:, 2].max() - 1e-6).astype(float)


def _shoulder_pin(verts, w, h):
    top = verts[:, 2] > verts[:, 2].max() - 1e-6
    x = verts[:, 0] / w
    return (top & (((x > 0.15) & (x < 0.35)) | ((x > 0.65) & (x < 0.85)))).astype(float)


def _ribbon_pin(verts, w, h):
    return (verts[:, 2] > verts[:, 2].max() - 1e-6).astype(float)


def _holes(rng):
    return [(x, x + rng.uniform(0.08, 0.2), z, z + rng.uniform(0.08, 0.2))
            for x, z in rng.uniform(0.2, 0.65, size=(rng.integers(1, 4), 2))]


# the FE solids' materials, drawn log-uniform (Young's modulus, Pa) and uniform (density, kg/m³)
SOLID_YOUNG = {"soft_toy": (1e3, 2e4), "elastic_solid": (1e5, 3e6)}
SOLID_DENSITY = (300.0, 1200.0)


def _solid_material(rng, soft: bool, volume: float) -> dict[str, float]:
    young = np.exp(rng.uniform(*np.log(SOLID_YOUNG["soft_toy" if soft else "elastic_solid"])))
    density = rng.uniform(*SOLID_DENSITY)
    return {"young": float(young), "poisson": float(rng.uniform(0.2, 0.4)), "density": float(density),
            "mass": float(density * volume), "damping": float(rng.uniform(1e-3, 1e-2)), "drag": float(rng.uniform(0.2, 1.0))}


def bending_number(spec: SequenceSpec) -> float:
    """B = E / (ρ g ℓ) · (t / ℓ)² of an FE solid as drawn (ℓ its diagonal, t its thinnest extent): its stiffness in
    bending against its own weight. Every closed solid that the FE grid simulator (MuJoCo's Saint Venant–Kirchhoff
    flex) collapsed on this machine had B ≤ 1.2 (docs/dataset/DATASET_CARD.md, experiments/fe_floor_check.py)."""
    extent = np.sort(np.ptp(spec.vertices, axis=0))
    diagonal = float(np.linalg.norm(extent))
    m = spec.material
    return float(m["young"] / (m["density"] * G_REF * diagonal) * (extent[0] / diagonal) ** 2)


def with_bending_floor(spec: SequenceSpec, floor: float) -> SequenceSpec:
    """``spec`` with its Young's modulus raised so that its bending number is at least ``floor`` (unchanged when it
    is already, or for anything but an FE solid); everything else as drawn."""
    if spec.backend != "mujoco_grid" or floor <= 0:
        return spec
    number = bending_number(spec)
    if number >= floor:
        return spec
    return dataclasses.replace(spec, material=dict(spec.material, young=spec.material["young"] * floor / number))


def _grid_for(verts: np.ndarray, cell: float) -> tuple[int, int, int]:
    ext = verts.max(0) - verts.min(0)
    return tuple(int(np.clip(np.ceil(e / cell) + 1, 2, 9)) for e in ext)


def _poke(rng, verts, strength) -> dict:
    if rng.random() < 0.3:
        return {}
    centre = verts[rng.integers(len(verts))]
    near = np.argsort(np.linalg.norm(verts - centre, axis=1))[: max(3, len(verts) // 20)]
    direction = rng.normal(size=3)
    return {"vertices": near, "velocity": direction / np.linalg.norm(direction) * rng.uniform(0.5, strength)}


def _solid(name: str, category: str, mesh_fn, pin_fn, soft: bool):
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        verts, tris = shapes.subdivide_to(*mesh_fn(rng), MIN_VERTICES)
        verts = verts - verts.min(0) * np.array([0, 0, 1]) + np.array([0, 0, 0.05])
        pins = pin_fn(verts)
        volume = 0.5 * float(np.prod(np.ptp(verts, axis=0)))  # about half the box is filled
        spec = _common(rng, name, category, "mujoco_grid", seed, verts, tris, pins,
                       material=_solid_material(rng, soft, volume), wind=_wind(rng, 0.0, 8.0))
        spec.grid = _grid_for(verts, float(rng.uniform(0.08, 0.15)))
        spec.poke = _poke(rng, spec.vertices, 3.0 if soft else 1.5)
        return spec
    return make


def _beam_mesh(rng):
    L, a, b = rng.uniform(0.6, 1.4), rng.uniform(0.08, 0.2), rng.uniform(0.08, 0.2)
    n = int(rng.uniform(8, 30))
    return shapes.box_surface((L, a, b), (n, max(3, n // 4), max(3, n // 4)))


def _tower_mesh(rng):
    H, a = rng.uniform(0.6, 1.4), rng.uniform(0.1, 0.25)
    n = int(rng.uniform(8, 30))
    return shapes.box_surface((a, a, H), (max(3, n // 4), max(3, n // 4), n))


def _plate_mesh(rng):
    L, W, T = rng.uniform(0.6, 1.2), rng.uniform(0.3, 0.6), rng.uniform(0.03, 0.06)
    n = int(rng.uniform(10, 28))
    return shapes.box_surface((L, W, T), (n, max(4, n // 2), 3))


def _min_x(verts, frac=0.04):
    lo, ext = verts[:, 0].min(), np.ptp(verts[:, 0])
    return (verts[:, 0] < lo + frac * ext).astype(float)


def _bottom(verts, frac=0.05):
    lo, ext = verts[:, 2].min(), np.ptp(verts[:, 2])
    return (verts[:, 2] < lo + frac * ext).astype(float)


def _top_centre(verts):
    top = verts[:, 2] > verts[:, 2].max() - 0.08 * np.ptp(verts[:, 2])
    return (top & (np.abs(verts[:, 0] - verts[:, 0].mean()) < 0.2 * np.ptp(verts[:, 0]))).astype(float)


def _blob_mesh(rng):
    rings = int(rng.uniform(12, 36))
    return shapes.blob(rng.uniform(0.2, 0.45), rings, 2 * rings, rng)


def _jelly_mesh(rng):
    s = rng.uniform(0.25, 0.6, size=3)
    n = int(rng.uniform(6, 18))
    return shapes.box_surface(tuple(s), (n, n, n))


def _star_mesh(rng):
    r = rng.uniform(0.25, 0.5)
    return shapes.star_prism(r, r * rng.uniform(0.35, 0.6), int(rng.integers(4, 7)), rng.uniform(0.08, 0.2),
                             rings=int(rng.integers(3, 10)))


def _box(size, res):
    return shapes.box_surface(size, res)


def _articulated(name: str, build):
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        parts, joints = build(rng)
        verts, tris, owner = shapes.merge(*parts)
        while len(verts) < MIN_VERTICES:
            verts, tris, owner = shapes.subdivide(verts, tris, owner)
        spec = _common(rng, name, "articulated", "mujoco_articulated", seed, verts, tris,
                       (owner == 0).astype(float), material={"mass": float(rng.uniform(0.5, 5.0)),
                                                             "drag": float(rng.uniform(0.2, 1.0))},
                       parts=owner, wind=_wind(rng, 0.0, 10.0))
        rot = spec.rotation
        spec.joints = [Joint(j.kind, j.child, j.parent, tuple(rot @ np.array(j.axis)),
                             tuple(rot @ (np.array(j.anchor) - verts.mean(0) * np.array([1, 1, 0]))),
                             j.stiffness, j.damping, j.range, j.qpos0, j.qvel0) for j in joints]
        return spec
    return make


def _res_for(rng, size, target):
    n = int(np.clip(np.sqrt(target / 6), 3, 20))
    return tuple(max(2, int(n * s / max(size)) + 2) for s in size)


def _door(rng):
    w, h, t = rng.uniform(0.6, 1.0), rng.uniform(1.6, 2.2), 0.04
    frame = _box((0.08, 0.12, h), _res_for(rng, (0.08, 0.12, h), 150))
    frame = (frame[0] + np.array([-0.04, 0, h / 2]), frame[1])
    door = _box((w, t, h - 0.02), _res_for(rng, (w, t, h), 600))
    door = (door[0] + np.array([w / 2 + 0.01, 0, h / 2]), door[1])
    joint = Joint("hinge", 1, 0, (0, 0, 1), (0.0, 0.0, 0.0), rng.uniform(0, 2), rng.uniform(0.05, 1.0), (-1.9, 1.9),
                  qpos0=rng.uniform(-0.5, 0.5), qvel0=rng.uniform(-3, 3))
    return [frame, door], [joint]


def _laptop(rng):
    w, d = rng.uniform(0.3, 0.45), rng.uniform(0.2, 0.3)
    base = _box((w, d, 0.02), _res_for(rng, (w, d, 0.02), 400))
    base = (base[0] + np.array([0, 0, 0.01]), base[1])
    lid = _box((w, 0.012, d), _res_for(rng, (w, 0.012, d), 400))
    lid = (lid[0] + np.array([0, d / 2, 0.02 + d / 2]), lid[1])
    joint = Joint("hinge", 1, 0, (1, 0, 0), (0, d / 2, 0.02), rng.uniform(0, 0.5), rng.uniform(0.01, 0.2), (-1.6, 0.3),
                  qpos0=rng.uniform(-0.2, 0.2), qvel0=rng.uniform(-2, 2))
    return [base, lid], [joint]


def _drawer(rng):
    w, d, h = rng.uniform(0.4, 0.7), rng.uniform(0.4, 0.6), rng.uniform(0.15, 0.3)
    cab = _box((w, d, 0.03), _res_for(rng, (w, d, 0.03), 300))
    cab = (cab[0] + np.array([0, 0, 0.015]), cab[1])
    drawer = _box((w * 0.9, d * 0.9, h), _res_for(rng, (w, d, h), 600))
    drawer = (drawer[0] + np.array([0, 0, 0.03 + h / 2]), drawer[1])
    joint = Joint("slide", 1, 0, (0, 1, 0), (0, 0, 0), rng.uniform(0, 20), rng.uniform(0.5, 5), (-0.05, d * 0.8),
                  qpos0=rng.uniform(0, 0.2), qvel0=rng.uniform(-1.5, 1.5))
    return [cab, drawer], [joint]


def _slider(rng):
    """A carriage on a rail (a slide along the rail's length): the articulated families' one slide for training (the
    drawer, the other, is a validation family)."""
    length, width = rng.uniform(0.6, 1.2), rng.uniform(0.05, 0.1)
    rail = _box((length, width, 0.03), _res_for(rng, (length, width, 0.03), 300))
    rail = (rail[0] + np.array([0, 0, 0.015]), rail[1])
    size = (rng.uniform(0.1, 0.2), width * rng.uniform(1.0, 1.6), rng.uniform(0.04, 0.1))
    carriage = _box(size, _res_for(rng, size, 500))
    carriage = (carriage[0] + np.array([0, 0, 0.03 + size[2] / 2]), carriage[1])
    travel = length / 2 - size[0] / 2
    joint = Joint("slide", 1, 0, (1, 0, 0), (0, 0, 0), rng.uniform(0, 10), rng.uniform(0.2, 3), (-travel, travel),
                  qpos0=rng.uniform(-0.3, 0.3) * travel, qvel0=rng.uniform(-1.5, 1.5))
    return [rail, carriage], [joint]


def _lamp(rng):
    l1, l2 = rng.uniform(0.3, 0.5), rng.uniform(0.25, 0.45)
    base = _box((0.25, 0.25, 0.04), _res_for(rng, (0.25, 0.25, 0.04), 200))
    base = (base[0] + np.array([0, 0, 0.02]), base[1])
    arm1 = _box((0.04, 0.04, l1), _res_for(rng, (0.04, 0.04, l1), 200))
    arm1 = (arm1[0] + np.array([0, 0, 0.04 + l1 / 2]), arm1[1])
    arm2 = _box((l2, 0.04, 0.04), _res_for(rng, (l2, 0.04, 0.04), 200))
    arm2 = (arm2[0] + np.array([l2 / 2, 0, 0.04 + l1]), arm2[1])
    head = shapes.uv_sphere(0.08, 8, 16)
    head = (head[0] + np.array([l2, 0, 0.04 + l1 - 0.06]), head[1])
    j1 = Joint("hinge", 1, 0, (0, 1, 0), (0, 0, 0.04), rng.uniform(2, 8), rng.uniform(0.05, 0.5), (-1.0, 1.0),
               qpos0=rng.uniform(-0.3, 0.3), qvel0=rng.uniform(-2, 2))
    j2 = Joint("hinge", 2, 1, (0, 1, 0), (0, 0, 0.04 + l1), rng.uniform(1, 5), rng.uniform(0.02, 0.3), (-1.2, 1.2),
               qpos0=rng.uniform(-0.3, 0.3), qvel0=rng.uniform(-2, 2))
    j3 = Joint("hinge", 3, 2, (0, 1, 0), (l2, 0, 0.04 + l1), 0.5, 0.05, (-0.1, 0.1))
    return [base, arm1, arm2, head], [j1, j2, j3]


def _blender_sheet(name: str, backend: str):
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        w = rng.uniform(0.8, 1.5)
        nx, ny = _res(rng, 300, 1200, 1.0)
        verts, tris = shapes.sheet(w, w, nx, ny)
        verts = verts[:, [0, 2, 1]] * np.array([1, -1, 1])  # horizontal, like a kerchief held at two corners
        verts[:, 2] = 1.5
        corner = np.linalg.norm(verts[:, :2] - verts[:, :2].min(0), axis=1) < 1e-6
        other = np.linalg.norm(verts[:, :2] - np.array([verts[:, 0].max(), verts[:, 1].min()]), axis=1) < 1e-6
        pins = (corner | other).astype(float)
        return _common(rng, name, "cloth", backend, seed, verts, tris, pins, material=_cloth_material(rng))
    return make


def _drape(name: str):
    """Large-motion cloth (issue 14): a sheet released flat, held along one edge, at one corner or at the two
    corners of one edge, so it swings down through 90° (or more) under gravity and hangs — the motion artists try
    first. Always under gravity, in at most a light breeze."""
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        w, h = rng.uniform(0.6, 1.2), rng.uniform(0.6, 1.2)
        nx, ny = _res(rng, 300, 900, w / h)
        verts, tris = shapes.sheet(w, h, nx, ny)
        verts = verts[:, [0, 2, 1]] * np.array([1, -1, 1])  # flat: x along the held edge side, y from 0 to h
        verts[:, 2] = 1.6 + float(np.hypot(w, h))  # high enough to hang from a corner without touching the ground
        edge = verts[:, 0] < 1e-6
        corner = edge & (verts[:, 1] < 1e-6)
        far = edge & (verts[:, 1] > verts[:, 1].max() - 1e-6)
        pins = [edge, corner, corner | far][int(rng.integers(3))].astype(float)
        return _common(rng, name, "cloth", "mujoco_cloth", seed, verts, tris, pins, material=_cloth_material(rng),
                       gravity=np.array([0.0, 0.0, -rng.uniform(8.0, 11.0)]), wind=_wind(rng, 0.0, 3.0))
    return make


def _gale(name: str):
    """A flag in a strong, gusty wind (issue 14): held along its pole edge, 10-20 m/s, gusts of half to nine tenths
    of it, always blowing — the flag artists expect to whip, not the calm-to-breeze of the flag family."""
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        w, h = rng.uniform(0.8, 1.6), rng.uniform(0.5, 1.0)
        nx, ny = _res(rng, 300, 1000, w / h)
        verts, tris = shapes.sheet(w, h, nx, ny)
        verts[:, 2] += 1.5 + h
        a = rng.uniform(0, 2 * np.pi)
        wind = np.array([np.cos(a), np.sin(a), rng.uniform(-0.1, 0.1)]) * rng.uniform(10.0, 20.0)
        return _common(rng, name, "cloth", "mujoco_cloth", seed, verts, tris, _edge_pin(verts, w, h),
                       material=_cloth_material(rng), wind=wind,
                       gust=(float(rng.uniform(0.5, 0.9)), float(rng.uniform(0.5, 2.0))))
    return make


def _drop(name: str):
    """A soft solid dropped onto the ground (issue 14): a blob or jelly released 0.1-0.6 m above a floor, unpinned,
    falling, landing and squashing, sometimes pushed sideways as it goes."""
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        mesh = _blob_mesh(rng) if rng.random() < 0.5 else _jelly_mesh(rng)
        verts, tris = shapes.subdivide_to(*mesh, MIN_VERTICES)
        height = float(rng.uniform(0.1, 0.6))
        verts = verts - verts.min(0) * np.array([0, 0, 1]) + np.array([0, 0, height])
        volume = 0.5 * float(np.prod(np.ptp(verts, axis=0)))
        spec = _common(rng, name, "soft_toy", "mujoco_grid", seed, verts, tris, np.zeros(len(verts)),
                       material=_solid_material(rng, True, volume), wind=_wind(rng, 0.0, 4.0),
                       gravity=np.array([0.0, 0.0, -rng.uniform(8.0, 11.0)]), ground=0.0)
        spec.grid = _grid_for(verts, float(rng.uniform(0.08, 0.15)))
        spec.poke = _poke(rng, spec.vertices, 2.0)
        return spec
    return make


def _blender_ball(name: str):
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        rings = int(rng.uniform(12, 30))
        verts, tris = shapes.blob(rng.uniform(0.25, 0.5), rings, 2 * rings, rng, amount=0.15)
        verts, tris = shapes.subdivide_to(verts, tris, MIN_VERTICES)
        verts[:, 2] += 1.0
        material = _solid_material(rng, True, 0.5 * float(np.prod(np.ptp(verts, axis=0))))
        material["goal"] = float(rng.uniform(0.3, 0.8))  # Soft Body goal strength towards the rest shape
        return _common(rng, name, "soft_toy", "blender_softbody", seed, verts, tris, np.zeros(len(verts)),
                       material=material, wind=_wind(rng, 0.0, 6.0))
    return make


# -- cloth meeting things (generator 1.5.0): Blender Cloth dropped on colliders and carried by its object --------
def _blender_cloth_settings(rng) -> dict[str, float]:
    """Blender Cloth's own numbers, drawn between its silk and denim presets (log-uniform): per-vertex mass, stretch
    and bending stiffness, air damping."""
    log = lambda lo, hi: float(np.exp(rng.uniform(np.log(lo), np.log(hi))))  # noqa: E731
    return {"mass": log(0.15, 1.0), "tension": log(5.0, 40.0), "bending": log(0.05, 10.0),
            "drag": float(rng.uniform(0.5, 2.0)), "young": 0.0, "thickness": 0.0}


def _flat_sheet(rng, lo: float, hi: float, vertices=(300, 600)) -> tuple[np.ndarray, np.ndarray, float]:
    """A square-ish horizontal sheet centred on the z axis at height 0: (vertices, triangles, width)."""
    w = rng.uniform(lo, hi)
    h = w * rng.uniform(0.8, 1.25)
    nx, ny = _res(rng, *vertices, w / h)
    verts, tris = shapes.sheet(w, h, nx, ny)
    verts = verts[:, [0, 2, 1]] * np.array([1, -1, 1])
    verts[:, :2] -= verts[:, :2].mean(0)
    return verts, tris, w


def _draped(name: str, kinds: tuple[str, ...]):
    """A sheet dropped flat onto a primitive collider standing on the floor (a ball, a post, a box: ``kinds``) of
    random size, off-centre by up to a quarter of the sheet: it lands, slides and hangs in folds."""
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        verts, tris, w = _flat_sheet(rng, 0.8, 1.6)
        kind = kinds[int(rng.integers(len(kinds)))]
        if kind == "sphere":
            r = rng.uniform(0.18, 0.45)
            size, top = (2 * r, 2 * r, 2 * r), 2 * r
        elif kind == "cylinder":
            r, height = rng.uniform(0.12, 0.4), rng.uniform(0.3, 0.9)
            size, top = (2 * r, 2 * r, height), height
        else:
            size = (rng.uniform(0.3, 0.9), rng.uniform(0.3, 0.9), rng.uniform(0.2, 0.9))
            top = size[2]
        offset = rng.uniform(-0.25, 0.25, size=2) * w
        verts[:, 2] = top + rng.uniform(0.05, 0.3)
        spec = _common(rng, name, "cloth", "blender_cloth", seed, verts, tris, np.zeros(len(verts)),
                       material=_blender_cloth_settings(rng), gravity=np.array([0.0, 0.0, -9.81]),
                       wind=np.zeros(3), gust=(0.0, 1.0), ground=0.0)
        centre = spec.rotation @ np.array([*offset, top / 2])
        spec.colliders = [{"kind": kind, "size": size, "centre": centre, "yaw": float(rng.uniform(0, np.pi))}]
        return spec
    return make


def _hanging(rng, pin: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A cape hanging in the xz-plane from z = 0, pinned along its top edge or at its shoulders."""
    w, h = rng.uniform(0.6, 1.2), rng.uniform(0.7, 1.3)
    nx, ny = _res(rng, 300, 600, w / h)
    verts, tris = shapes.sheet(w, h, nx, ny)
    verts[:, 0] -= w / 2
    pins = (_top_pin if pin == "top" else _shoulder_pin)(verts + np.array([w / 2, 0, 0]), w, h)
    return verts + np.array([0.0, 0.0, 2.0]), tris, pins


def _carried(name: str, spin: bool):
    """A cape carried by its animated object (its pins follow it): moved 0.5-1.5 m along a random horizontal
    direction in 0.3-1 s and held, turning up to a quarter turn on the way (``spin``: turned about the vertical by a
    quarter to three quarters of a turn where it stands, as a skirt twirls)."""
    def make(rng: np.random.Generator, seed: int) -> SequenceSpec:
        verts, tris, pins = _hanging(rng, "top" if rng.random() < 0.6 else "shoulders")
        spec = _common(rng, name, "cloth", "blender_cloth", seed, verts, tris, pins,
                       material=_blender_cloth_settings(rng), gravity=np.array([0.0, 0.0, -9.81]),
                       wind=np.zeros(3), gust=(0.0, 1.0))
        a = rng.uniform(0, 2 * np.pi)
        distance, seconds = (0.0, rng.uniform(0.4, 1.0)) if spin else (rng.uniform(0.5, 1.5), rng.uniform(0.3, 1.0))
        turn = rng.choice([-1, 1]) * (rng.uniform(0.5, 1.5) * np.pi if spin else rng.uniform(0, 0.5) * np.pi)
        spec.drive = [{"time": float(t), "location": np.array([np.cos(a), np.sin(a), 0.0]) * distance * s,
                       "yaw": float(turn * s)} for t, s in ((0.0, 0.0), (seconds, 1.0))]
        return spec
    return make


FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("flag", "cloth", "mujoco_cloth", _cloth("flag", _edge_pin)),
    Family("cape", "cloth", "mujoco_cloth", _cloth("cape", _shoulder_pin)),
    Family("banner", "cloth", "mujoco_cloth", _cloth("banner", _top_pin, _holes)),
    Family("ribbon", "cloth", "mujoco_cloth", _cloth("ribbon", _ribbon_pin, size=((0.08, 0.2), (0.8, 1.6)))),
    Family("kerchief", "cloth", "blender_cloth", _blender_sheet("kerchief", "blender_cloth")),
    Family("beam", "elastic_solid", "mujoco_grid", _solid("beam", "elastic_solid", _beam_mesh, _min_x, False)),
    Family("tower", "elastic_solid", "mujoco_grid", _solid("tower", "elastic_solid", _tower_mesh, _bottom, False)),
    Family("plate", "elastic_solid", "mujoco_grid", _solid("plate", "elastic_solid", _plate_mesh, _min_x, False)),
    Family("blob", "soft_toy", "mujoco_grid", _solid("blob", "soft_toy", _blob_mesh, _bottom, True)),
    Family("jelly", "soft_toy", "mujoco_grid", _solid("jelly", "soft_toy", _jelly_mesh, _bottom, True)),
    Family("star_toy", "soft_toy", "mujoco_grid", _solid("star_toy", "soft_toy", _star_mesh, _top_centre, True)),
    Family("softball", "soft_toy", "blender_softbody", _blender_ball("softball")),
    Family("door", "articulated", "mujoco_articulated", _articulated("door", _door), "1.2.0"),
    Family("laptop", "articulated", "mujoco_articulated", _articulated("laptop", _laptop), "1.2.0"),
    Family("drawer", "articulated", "mujoco_articulated", _articulated("drawer", _drawer), "1.2.0"),
    Family("lamp", "articulated", "mujoco_articulated", _articulated("lamp", _lamp), "1.2.0"),
    Family("slider", "articulated", "mujoco_articulated", _articulated("slider", _slider), "1.6.0"),
    Family("drape", "cloth", "mujoco_cloth", _drape("drape")),
    Family("gale", "cloth", "mujoco_cloth", _gale("gale")),
    Family("drop", "soft_toy", "mujoco_grid", _drop("drop")),
    Family("cover", "cloth", "blender_cloth", _draped("cover", ("sphere", "cylinder")), "1.5.0"),
    Family("carry", "cloth", "blender_cloth", _carried("carry", spin=False), "1.5.0"),
    Family("shroud", "cloth", "blender_cloth", _draped("shroud", ("box",)), "1.5.0"),
    Family("twirl", "cloth", "blender_cloth", _carried("twirl", spin=True), "1.5.0"),
]}


def make_spec(family: str, seed: int) -> SequenceSpec:
    return FAMILIES[family].make(np.random.default_rng(seed), seed)
