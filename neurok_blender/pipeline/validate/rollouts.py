"""Rolling the product's simulation out on dataset sequences under their recorded conditions, and scoring it
against the simulator that made them. No bpy use."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import SimulationDiverged
from ...runtime import api
from ...runtime.dynamics.material import G_REF, Material, shape_features
from ...runtime.dynamics.simulation import Simulation
from ...runtime.geometry import unique_edges
from ..data.dataset import sound


@dataclass(frozen=True)
class Rollouts:
    """What every rollout is given besides the sequence's recorded conditions. ``material``: "shape" (predicted,
    what a click gets) or "recorded" (the simulator's own: ``recorded_material``, ``recorded_joints``); ``pins``:
    "stored" (what was painted) or "held" (what an FE-grid simulator held: whole cells, ``held_pins``);
    ``solver``: Solver overrides; ``research``: ablation switches (runtime/research.py); ``cloth``: an open surface's
    material (``SimulationRequest.cloth_preset``: "auto" is Blender Cloth's default, "shape" the prediction)."""

    material: str = "shape"
    pins: str = "stored"
    cloth: str = "auto"
    solver: dict[str, Any] = field(default_factory=dict)
    research: dict[str, Any] = field(default_factory=dict)


DEFAULT = Rollouts()

def mean_strain(frames: np.ndarray, rest: np.ndarray, triangles: np.ndarray) -> float:
    """Mean relative edge-length change over the mesh's edges and the frames after the first."""
    e = unique_edges(triangles)
    rest_len = np.maximum(np.linalg.norm(rest[e[:, 0]] - rest[e[:, 1]], axis=1), 1e-12)
    length = np.linalg.norm(frames[1:, e[:, 0]] - frames[1:, e[:, 1]], axis=-1)
    return float(np.abs(length / rest_len - 1).mean())


def simulation(seq: dict[str, np.ndarray], ckpt: str, setup: Rollouts = DEFAULT, **settings: Any) -> Simulation:
    """The product's simulation of a dataset sequence's rest shape and pins, on the CPU, with ``setup``'s research
    switches."""
    pins = seq.get("held", seq["pins"]) if setup.pins == "held" else seq["pins"]
    return api.prepare(seq["rest"], seq["triangles"], pins=pins, checkpoint=ckpt, device="cpu",
                       research=setup.research, **settings)


def held_pins(seq: dict[str, np.ndarray], meta: dict[str, Any]) -> np.ndarray | None:
    """(V,) what an FE-grid simulator held of each vertex (it pins whole cells: ``grid_held_share``), rebuilt from
    the seeded spec; None for other simulators or when the spec no longer matches the stored mesh."""
    if meta.get("simulator") != "mujoco_grid":
        return None
    from ..data.mujoco_backend import grid_held_share

    spec = rebuilt_spec(seq, meta, "the simulator's clamp (the stored pins stand)",
                        lambda spec: np.array_equal(spec.pin_weights, seq["pins"]))
    return None if spec is None else grid_held_share(spec)


def conditions_settings(meta: dict[str, Any], frames: int, setup: Rollouts = DEFAULT) -> dict[str, Any]:
    """The sequence's recorded conditions as request settings, without the seed's variation."""
    c = meta["conditions"]
    settings = {"frame_count": frames, "fps": float(c["fps"]), "gravity": tuple(c["gravity"]), "wind": tuple(c["wind"]),
                "solver": dict({"variation": 0.0}, **setup.solver), "cloth_preset": setup.cloth}
    if c.get("ground") is not None:  # the floor it was dropped on (the drop family)
        settings["ground"] = float(c["ground"])
    return dict(settings, **recorded_material(meta)) if setup.material == "recorded" else settings


def recorded_material(meta: dict[str, Any]) -> dict[str, float]:
    """The simulator's own Young's modulus and density as request settings, where it recorded them (the FE solids:
    what a user who knows the material sets); nothing for the rest, which keep the shape's prediction (an
    assembly's recorded joints are material overrides instead: ``recorded_joints``)."""
    m = meta.get("material", {})
    return {"young_modulus": float(m["young"]), "density": float(m["density"])} if "young" in m and "density" in m else {}


MIN_RECORDED_TURN = 0.2  # rad: a simulator's joint that turns less than this either way is a fixture (a lamp's head)


def recorded_joints(seq: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, float]:
    """An articulated sequence's joint springs and limits as (dimensionless) material overrides, from its seeded
    spec: what a user who knows the assembly's springs sets. The simulator gives each joint its own spring and
    range and each part the same mass; NeuROK has one spring per object (each joint's own range comes as a joint
    override: ``recorded_joint_overrides``), so this takes the mean over the slides and the hinges that turn at
    least MIN_RECORDED_TURN either way. A hinge's ½ k θ² is NeuROK's joint · M g ℓ θ², so joint = k / (2 M g ℓ);
    a slide's ½ k s² is joint · M g ℓ (s/ℓ)², so joint = k ℓ / (2 M g) — M the parts' total mass (kg), ℓ the
    diagonal (m); each joint's damping the same way. Nothing for other simulators, or when the spec no longer
    matches."""
    spec = _articulated_spec(seq, meta, "the joints' springs and limits")
    if spec is None:
        return {}
    turning = [j for j in spec.joints if j.kind == "slide" or min(-j.range[0], j.range[1]) >= MIN_RECORDED_TURN]
    if not turning:
        return {}
    mass = float(spec.material["mass"]) * len(np.unique(spec.parts))
    diagonal = float(np.linalg.norm(np.ptp(seq["rest"], axis=0)))
    per_unit = [(diagonal if j.kind == "slide" else 1 / diagonal) / (2 * mass * G_REF) for j in turning]
    out = {"joint": float(np.mean([j.stiffness * u for j, u in zip(turning, per_unit)])),
           "joint_damping": float(np.mean([j.damping * u for j, u in zip(turning, per_unit)]))}
    hinges = [max(-j.range[0], j.range[1]) for j in turning if j.kind == "hinge"]
    return dict(out, joint_limit=float(np.mean(hinges))) if hinges else out


def recorded_joint_overrides(seq: dict[str, np.ndarray], meta: dict[str, Any], found: list, parts: np.ndarray) -> list:
    """The simulator's joints as the artist's joint overrides (``JointOverride`` dicts): each joint NeuROK found
    (``found``: its joints, ``parts``: each vertex's piece) that joins the pieces a simulator joint joins gets that
    joint's type, axis and range from the rest pose (the simulator starts at its initial position, which the mesh
    shows) — what a user who knows the assembly sets where its shape is ambiguous. Nothing for other simulators."""
    spec = _articulated_spec(seq, meta, "the joints' types, axes and ranges")
    if spec is None:
        return []
    own = lambda piece: int(np.bincount(spec.parts[parts == piece]).argmax())  # noqa: E731
    out = []
    for number, joint in enumerate(found, 1):
        parent, child = own(joint.parent), own(joint.child)
        for j in spec.joints:
            if {j.parent, j.child} != {parent, child}:
                continue
            start = float(np.clip(j.qpos0, *j.range))
            lower, upper = j.range[0] - start, j.range[1] - start
            if j.child != child:  # NeuROK's child is the simulator's parent: the same joint read the other way
                lower, upper = -upper, -lower
            out.append({"joint": number, "type": j.kind, "axis": [float(v) for v in j.axis],
                        "range": [min(lower, 0.0), max(upper, 0.0)]})
    return out


def recorded_drag(seq: dict[str, np.ndarray], meta: dict[str, Any], sim: Simulation) -> dict[str, float]:
    """An articulated sequence's wind drag as the material's ``drag``: its simulator pushes each part with
    ρ c_d 0.1 |u| u whatever its size and facing (mujoco_backend.simulate_articulated), NeuROK each surface point
    with drag · a (u·n) n. The drag that gives the moving pieces the simulator's acceleration at the sequence's
    relative air speed U (the wind's, or in still air the moving pieces' initial speed: its drag is quadratic),
    on the area the wind faces, Σ a (û·n)², but at least the average over directions Σ a / 3 (a wind along a thin
    lid's edge faces almost nothing, and matched there the drag would be huge on its faces): drag =
    (ρ c_d 0.1 / m_part) U M / exposed area, over the pieces that move (NeuROK's masses M and drag areas a). What a
    user who knows the simulator's air sets; nothing for other simulators."""
    from ..data.mujoco_backend import AIR_DENSITY

    spec = _articulated_spec(seq, meta, "the simulator's drag")
    if spec is None or sim.assembly is None:
        return {}
    c = sim.cubature
    moving = c.labels != sim.assembly.root
    start = float(np.linalg.norm(sim.initial.xdot.cpu().numpy()[moving], axis=1).mean())
    speed = max(float(np.linalg.norm(meta["conditions"].get("wind", (0.0, 0.0, 0.0)))), start, 0.05)
    wind = np.asarray(meta["conditions"].get("wind", (0.0, 0.0, 0.0)), float)
    facing = (c.normals[moving] @ (wind / np.linalg.norm(wind))) ** 2 if np.linalg.norm(wind) > 1e-6 else 0.0
    exposed = max(float((c.drag_areas[moving] * facing).sum()), float(c.drag_areas[moving].sum()) / 3)
    per_kg = AIR_DENSITY * float(spec.material["drag"]) * 0.1 / float(spec.material["mass"])
    return {"drag": per_kg * speed * float(c.masses[moving].sum()) / max(exposed, 1e-12)}


def _seeded_spec(family: str, seed: int):
    """The sequence's spec, rebuilt from its family and seed (the generator is seeded); one per sequence, however
    many rollouts a fit or an oracle sweep makes of it. Read only."""
    from ..data.families import make_spec

    return make_spec(family, seed)


def rebuilt_spec(seq: dict[str, np.ndarray], meta: dict[str, Any], what: str, matches=lambda spec: True):
    """The sequence's seeded spec, or None (with a warning naming ``what`` is left out) when it no longer describes
    the stored mesh — data from another generator version: other vertices, or ``matches(spec)`` false."""
    spec = _seeded_spec(meta["family"], int(meta["seed"]))
    if len(spec.vertices) != len(seq["rest"]) or not matches(spec):
        print(f"warning: {meta['family']} seed {meta['seed']}: {what} cannot be rebuilt from its spec; rolled out "
              "without it", file=sys.stderr)
        return None
    return spec


def recorded_poke(seq: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, Any] | None:
    """The simulator's initial push, a known condition like the wind: its velocity is in the sequence's
    conditions (world axes, as the frames are), the poked vertices come from the sequence's own spec (the
    generator is seeded, so ``make_spec(family, seed)`` rebuilds it). None when there was no push, or when the
    spec no longer matches the stored mesh (data from another generator version)."""
    velocity = meta["conditions"].get("poke_velocity")
    if not velocity or not any(velocity):
        return None
    spec = rebuilt_spec(seq, meta, "the poke",
                        lambda spec: bool(spec.poke) and np.allclose(spec.poke["velocity"], velocity))
    if spec is None:
        return None
    return {"vertices": [int(i) for i in spec.poke["vertices"]], "velocity": tuple(float(v) for v in velocity)}


def recorded_initial_velocities(seq: dict[str, np.ndarray], meta: dict[str, Any]) -> np.ndarray | None:
    """(V, 3) an articulated sequence's vertex velocities at its first frame, from its joints' initial velocities:
    a known condition like the poke, rebuilt from the seeded spec. None for other simulators, or when the spec no
    longer matches the stored mesh."""
    from ..data.mujoco_backend import articulated_initial_velocities

    spec = _articulated_spec(seq, meta, "the joints' initial velocities")
    return None if spec is None else articulated_initial_velocities(spec)


def _articulated_spec(seq: dict[str, np.ndarray], meta: dict[str, Any], what: str):
    """An articulated sequence's seeded spec (its joints), or None for other simulators or when it no longer
    describes the stored mesh."""
    if meta.get("simulator") != "mujoco_articulated":
        return None
    return rebuilt_spec(seq, meta, what, lambda spec: np.allclose(spec.vertices, seq["rest"], atol=1e-6))


def rollout(seq: dict[str, np.ndarray], meta: dict[str, Any], ckpt: str, frames: int,
            material: dict[str, float] | None = None, details: dict[str, Any] | None = None,
            setup: Rollouts = DEFAULT) -> tuple[np.ndarray, float]:
    """Per-frame vertex error / diagonal of a NeuROK rollout under the sequence's conditions (inf if it
    diverged), and the rollout's stretch beyond the simulator's (mean relative edge-length change).
    ``details``, when given, receives the rollout's own motion per frame (mean displacement from rest /
    diagonal) and its milliseconds per frame."""
    frames = min(frames, len(seq["frames"]))
    if setup.pins == "held" and "held" not in seq:
        held = held_pins(seq, meta)
        seq = seq if held is None else dict(seq, held=held)
    gust = meta["conditions"].get("gust")  # the sequence's own gusts: a known condition, like its wind
    overrides = {"gust_amplitude": float(gust[0]), "gust_frequency": float(gust[1])} if gust else {}
    if material is None and setup.material == "recorded":  # an assembly's recorded springs and limits
        overrides.update(recorded_joints(seq, meta))
    if material is not None:
        material = dict(material, **overrides)
    diag = float(np.linalg.norm(seq["rest"].max(0) - seq["rest"].min(0)))
    settings = dict(material=overrides if material is None else material, poke=recorded_poke(seq, meta),
                    initial_velocities=recorded_initial_velocities(seq, meta), **conditions_settings(meta, frames, setup))
    sim = simulation(seq, ckpt, setup, **settings)
    if setup.material == "recorded" and sim.assembly is not None:  # the simulator's joints and air
        found = recorded_joint_overrides(seq, meta, sim.assembly.joints, sim.vertex_parts)
        settings["material"] = dict(recorded_drag(seq, meta, sim), **settings["material"])
        sim = simulation(seq, ckpt, setup, joints=found, **settings)
    if material is not None:  # the fit sets every parameter itself, not relative to a previous table
        sim.material = Material().updated(material)
        sim.system.c = sim.material.scaled(sim.cubature.total_mass, sim.cubature.diagonal)
    try:
        out = sim.run()
    except SimulationDiverged:
        return np.full(frames, np.inf), float("inf")
    if details is not None:
        details["motion"] = np.linalg.norm(out - seq["rest"][None], axis=-1).mean(-1) / diag
        details["frames"] = out
        details["ms_per_frame"] = 1000 * (sim.timing["dynamics_s"] + sim.timing["decode_s"]) / max(frames - 1, 1)
    excess = mean_strain(out, seq["rest"], seq["triangles"]) - mean_strain(seq["frames"][:frames], seq["rest"], seq["triangles"])
    return np.linalg.norm(out - seq["frames"][:frames], axis=-1).mean(-1) / diag, max(excess, 0.0)


def rest_error(seq: dict[str, np.ndarray], frames: int) -> np.ndarray:
    frames = min(frames, len(seq["frames"]))
    diag = float(np.linalg.norm(seq["rest"].max(0) - seq["rest"].min(0)))
    return np.linalg.norm(seq["rest"][None] - seq["frames"][:frames], axis=-1).mean(-1) / diag


def only_families(refs: list, families: list[str] | None) -> list:
    """The sequences of the named families (all of them when ``families`` is empty); a name that matches no
    sequence is an error, so a typo cannot fit or score nothing."""
    if not families:
        return refs
    found = {r.meta["family"] for r in refs}
    missing = sorted(set(families) - found)
    if missing:
        raise SystemExit(f"--families: no sequences of {', '.join(missing)} in this split (it has "
                         f"{', '.join(sorted(found)) or 'none'})")
    return [r for r in refs if r.meta["family"] in families]


def pick(refs: list, per_family: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    by_family: dict[str, list] = {}
    for r in refs:
        by_family.setdefault(r.meta["family"], []).append(r)
    chosen = []
    for fam in sorted(by_family):
        group = by_family[fam]
        chosen += [group[i] for i in rng.permutation(len(group))[:per_family]]
    return chosen


def current(refs: list, keep_stale: bool = False, keep_collapsed: bool = False) -> list:
    """The sequences whose family's data is current (``Family.current_since``): a lamp from before generator 1.2.0
    moved by a joint bug, not by its physics, and says nothing about it; and that today's curation keeps (an FE solid
    that collapsed, ``dataset.sound``). Says what it leaves out."""
    refs = sound(refs, keep_collapsed)
    from ..data.families import FAMILIES

    stale = [r for r in refs if r.meta["family"] in FAMILIES
             and not FAMILIES[r.meta["family"]].is_current(r.meta.get("generator_version", "1.0.0"))]
    if stale and not keep_stale:
        fams = sorted({r.meta["family"] for r in stale})
        print(f"left out {len(stale)} sequences made before their family's current generator ({', '.join(fams)}; "
              "--keep-stale keeps them)", file=sys.stderr)
        left_out = {id(r) for r in stale}
        return [r for r in refs if id(r) not in left_out]
    return refs


def shape_features_of(seq: dict[str, np.ndarray]) -> np.ndarray:
    from ...runtime.dynamics.cubature import count_parts, enclosed_volume, is_closed

    tris = seq["triangles"].astype(np.int64)
    solid = is_closed(tris) and enclosed_volume(seq["rest"], tris) > 0
    return shape_features(seq["rest"], seq["pins"], solid, count_parts(seq["rest"], tris))
