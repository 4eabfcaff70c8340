"""MuJoCo backends: flex cloth shells, FE grids with embedded surfaces, jointed bodies. No bpy use.

Every backend returns frames (T, V, 3) of the spec's surface vertices, frame 0 being the rest
shape. Wind acts as per-triangle (cloth) or per-node (grids, bodies) drag on the relative air
velocity, applied through ``xfrc_applied``.
"""

from __future__ import annotations

import numpy as np

from .spec import SequenceSpec

AIR_DENSITY = 1.2
CLOTH_DT = 0.005


_warnings: list[str] = []


def quiet() -> None:
    """Collect MuJoCo's warnings instead of letting it write MUJOCO_LOG.TXT into the working folder."""
    import mujoco

    mujoco.set_mju_user_warning(_warnings.append)


def _floats(a: np.ndarray) -> str:
    return " ".join(f"{v:.6g}" for v in np.asarray(a, dtype=float).ravel())


def _ints(a: np.ndarray) -> str:
    return " ".join(str(int(v)) for v in np.asarray(a).ravel())


def _option(spec: SequenceSpec, dt: float) -> str:
    return f'<option timestep="{dt}" integrator="discrete" gravity="{_floats(spec.gravity)}"/>'


def _substeps(spec: SequenceSpec, dt: float) -> int:
    return max(1, int(round(1.0 / (spec.fps * dt))))


def _apply_poke(model, data, spec: SequenceSpec, vertex_bodies: np.ndarray) -> None:
    if not spec.poke:
        return
    for body in np.unique(vertex_bodies[spec.poke["vertices"]]):
        if body > 0 and model.body_dofnum[body] >= 3:
            adr = model.body_dofadr[body]
            data.qvel[adr : adr + 3] = spec.poke["velocity"]


def _run(model, data, spec: SequenceSpec, dt: float, read, force) -> np.ndarray:
    import mujoco

    steps = _substeps(spec, dt)
    mujoco.mj_forward(model, data)
    frames = [read()]
    prev = None
    for _frame in range(1, spec.frames):
        for _ in range(steps):
            data.xfrc_applied[:] = 0.0
            force(data.time, prev)
            prev = read()
            mujoco.mj_step(model, data)
        frames.append(read())
        if not np.isfinite(frames[-1]).all():
            break
    return np.asarray(frames, dtype=np.float64)


# -- cloth: flexcomp shell, one body per free vertex ----------------------------------------
def cloth_xml(spec: SequenceSpec) -> str:
    m = spec.material
    pins = np.flatnonzero(spec.pin_weights > 0.5)
    pin = f'<pin id="{_ints(pins)}"/>' if len(pins) else ""
    return f"""<mujoco>{_option(spec, CLOTH_DT)}<worldbody>
<flexcomp name="cloth" type="direct" dim="2" radius="0.002" mass="{m['mass']}"
 point="{_floats(spec.vertices)}" element="{_ints(spec.triangles)}">
<edge equality="false"/>
<elasticity young="{m['young']}" poisson="{m['poisson']}" thickness="{m['thickness']}" elastic2d="both" damping="{m['damping']}"/>
<contact selfcollide="none" contype="0" conaffinity="0"/>{pin}
</flexcomp></worldbody></mujoco>"""


def simulate_cloth(spec: SequenceSpec) -> np.ndarray:
    import mujoco

    model = mujoco.MjModel.from_xml_string(cloth_xml(spec))
    data = mujoco.MjData(model)
    bodies = np.asarray(model.flex_vertbodyid)
    tris, dt = spec.triangles, CLOTH_DT
    coef = 0.5 * AIR_DENSITY * spec.material["drag"]

    def read():
        return np.array(data.flexvert_xpos)

    def force(t, prev):
        x = read()
        vel = np.zeros_like(x) if prev is None else (x - prev) / dt
        a, b, c = x[tris[:, 0]], x[tris[:, 1]], x[tris[:, 2]]
        cross = np.cross(b - a, c - a)
        area = 0.5 * np.linalg.norm(cross, axis=1)
        normal = cross / np.maximum(2 * area, 1e-12)[:, None]
        rel = spec.wind_at(t) - vel[tris].mean(1)
        un = np.einsum("ij,ij->i", normal, rel)
        f_tri = (coef * area * un * np.abs(un))[:, None] * normal / 3.0
        flat = tris.ravel()
        per_corner = np.repeat(f_tri, 3, axis=0)
        f_vert = np.stack([np.bincount(flat, per_corner[:, k], minlength=len(x)) for k in range(3)], 1)
        data.xfrc_applied[bodies, :3] += f_vert  # free vertices own distinct bodies
        data.xfrc_applied[0] = 0.0

    _apply_poke(model, data, spec, bodies)
    return _run(model, data, spec, dt, read, force)


# -- solids and soft toys: an FE grid with the surface embedded trilinearly -------------------
def grid_nodes(lo: np.ndarray, hi: np.ndarray, counts: tuple[int, int, int]) -> np.ndarray:
    """Node positions in MuJoCo's grid order (z fastest), spanning [lo, hi]."""
    axes = [np.linspace(lo[i], hi[i], counts[i]) for i in range(3)]
    gx, gy, gz = np.meshgrid(*axes, indexing="ij")
    return np.stack([gx.ravel(), gy.ravel(), gz.ravel()], 1)


def trilinear_embedding(points: np.ndarray, lo: np.ndarray, hi: np.ndarray, counts) -> tuple[np.ndarray, np.ndarray]:
    """(node indices (P, 8), weights (P, 8)) of each point's cell corners."""
    counts = np.asarray(counts)
    cell = (hi - lo) / (counts - 1)
    rel = (points - lo) / cell
    base = np.clip(np.floor(rel).astype(int), 0, counts - 2)
    frac = np.clip(rel - base, 0.0, 1.0)
    idx, wts = [], []
    for corner in range(8):
        off = np.array([(corner >> 2) & 1, (corner >> 1) & 1, corner & 1])
        node = base + off
        idx.append((node[:, 0] * counts[1] + node[:, 1]) * counts[2] + node[:, 2])
        wts.append(np.prod(np.where(off == 1, frac, 1 - frac), axis=1))
    return np.stack(idx, 1), np.stack(wts, 1)


def _grid_layout(spec: SequenceSpec):
    local = spec.vertices @ spec.rotation  # rows: world = local @ R.T
    pad = 1e-3
    lo, hi = local.min(0) - pad, local.max(0) + pad
    counts = tuple(max(2, c) for c in spec.grid)
    return local, lo, hi, counts


def grid_xml(spec: SequenceSpec, lo, hi, counts, pinned_nodes) -> str:
    m = spec.material
    spacing = (hi - lo) / (np.asarray(counts) - 1)
    centre = spec.rotation @ ((lo + hi) / 2)
    yaw = np.arctan2(spec.rotation[1, 0], spec.rotation[0, 0])
    pin = f'<pin id="{_ints(pinned_nodes)}"/>' if len(pinned_nodes) else ""
    # a floor (the drop family): a plane the grid's nodes collide with; no floor, no contacts at all
    floor = "" if spec.ground is None else \
        f'<geom type="plane" size="0 0 1" pos="0 0 {spec.ground}" contype="1" conaffinity="1" friction="0.8"/>'
    collide = 'contype="0" conaffinity="0"' if spec.ground is None else 'contype="1" conaffinity="1"'
    return f"""<mujoco>{_option(spec, 0.004)}<worldbody>{floor}
<flexcomp name="solid" type="grid" dim="3" count="{_ints(counts)}" spacing="{_floats(spacing)}" radius="0.002"
 pos="{_floats(centre)}" axisangle="0 0 1 {yaw:.9f}" mass="{m['mass']}">
<edge equality="false"/>
<elasticity young="{m['young']}" poisson="{m['poisson']}" damping="{m['damping']}"/>
<contact selfcollide="none" {collide}/>{pin}
</flexcomp></worldbody></mujoco>"""


def _grid_pins(spec: SequenceSpec):
    """(layout, embedding, each node's pin): a pinned vertex pins its whole cell."""
    local, lo, hi, counts = _grid_layout(spec)
    idx, wts = trilinear_embedding(local, lo, hi, counts)
    node_pin = np.zeros(int(np.prod(counts)))
    np.maximum.at(node_pin, idx.ravel(), np.repeat(spec.pin_weights, 8))
    return (local, lo, hi, counts), (idx, wts), node_pin


def grid_held_share(spec: SequenceSpec) -> np.ndarray:
    """(V,) how much of each vertex the grid simulator holds: the share of its embedding on pinned nodes. Every
    vertex in a cell with a pinned vertex is held (1), its neighbours in part — 2-3x what ``pin_weights`` names."""
    _, (idx, wts), node_pin = _grid_pins(spec)
    return np.clip((wts * (node_pin[idx] > 0.0)).sum(1), 0.0, 1.0)


def simulate_grid(spec: SequenceSpec) -> np.ndarray:
    import mujoco

    (local, lo, hi, counts), (idx, wts), node_pin = _grid_pins(spec)
    model = mujoco.MjModel.from_xml_string(grid_xml(spec, lo, hi, counts, np.flatnonzero(node_pin > 0.0)))
    data = mujoco.MjData(model)
    bodies = np.asarray(model.flex_vertbodyid)
    dt = 0.004
    coef = AIR_DENSITY * spec.material["drag"] * float(np.prod(hi - lo)) ** (2 / 3) / len(bodies)

    def nodes():
        return np.array(data.flexvert_xpos)

    def read():
        return np.einsum("pk,pkj->pj", wts, nodes()[idx])

    def force(t, prev):
        x = nodes()
        vel = np.zeros_like(x) if prev is None else (x - prev) / dt
        rel = spec.wind_at(t) - vel
        f = coef * rel * np.linalg.norm(rel, axis=1, keepdims=True)
        data.xfrc_applied[bodies, :3] += f
        data.xfrc_applied[0] = 0.0

    if spec.poke:
        _apply_poke(model, data, _with_poke(spec, np.unique(idx[spec.poke["vertices"]].ravel())), bodies)
    frames_nodes = _run(model, data, spec, dt, nodes, force)
    return np.einsum("pk,tpkj->tpj", wts, frames_nodes[:, idx])


def _with_poke(spec: SequenceSpec, vertices: np.ndarray) -> SequenceSpec:
    import dataclasses

    return dataclasses.replace(spec, poke={"vertices": vertices, "velocity": spec.poke["velocity"]})


# -- articulated: rigid parts on hinges and slides ------------------------------------------
def articulated_xml(spec: SequenceSpec) -> str:
    parts = spec.parts
    children = {j.child: j for j in spec.joints}
    mass = spec.material["mass"]

    def body(part: int) -> str:
        pts = spec.vertices[parts == part]
        centre, half = (pts.max(0) + pts.min(0)) / 2, np.maximum((pts.max(0) - pts.min(0)) / 2, 0.005)
        geom = f'<geom type="box" pos="{_floats(centre)}" size="{_floats(half)}" mass="{mass}" contype="0" conaffinity="0"/>'
        j = children[part]
        kind = "hinge" if j.kind == "hinge" else "slide"
        # the spring's reference is the joint's initial position (generator 1.2.0): the mesh as given is the
        # assembly at rest, and it moves from its initial joint velocity, gravity and wind. Before, the reference
        # was 0 while the mesh showed the joints at their initial position, outside their (degree-read) limits — a
        # hidden snap that made >90 % of a held-out lamp's motion (docs/journal/validation.md, 2026-12-06 fourth section) and
        # that nothing given the mesh could know
        ref = float(np.clip(j.qpos0, *j.range))
        joint = (f'<joint name="j{part}" type="{kind}" axis="{_floats(j.axis)}" pos="{_floats(j.anchor)}" '
                 f'stiffness="{j.stiffness}" springref="{ref}" damping="{j.damping}" range="{_floats(j.range)}" '
                 f'limited="true"/>')
        inner = "".join(body(c.child) for c in spec.joints if c.parent == part)
        return f'<body name="p{part}">{joint}{geom}{inner}</body>'

    roots = "".join(body(j.child) for j in spec.joints if j.parent == 0)
    # angles in radians, as the families give them (1.2.0; MJCF reads degrees by default, so before, the ranges
    # were ±1° and an initial angle of 0.2 rad sat far outside its limit, which snapped it back at the start)
    return f"""<mujoco><compiler angle="radian"/>{_option(spec, 0.002)}<worldbody>{roots}</worldbody></mujoco>"""


def _articulated_model(spec: SequenceSpec):
    """(model, data at the joints' initial state, the body of each vertex, each vertex in its body's frame)."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(articulated_xml(spec))
    data = mujoco.MjData(model)
    parts = spec.parts
    for j in spec.joints:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"j{j.child}")
        data.qpos[model.jnt_qposadr[jid]] = np.clip(j.qpos0, *j.range)
        data.qvel[model.jnt_dofadr[jid]] = j.qvel0
    mujoco.mj_forward(model, data)
    body_of = np.zeros(len(spec.vertices), dtype=int)
    for part in np.unique(parts):
        if part > 0:
            body_of[parts == part] = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"p{part}")
    rest_pos, rest_rot = np.array(data.xpos), np.array(data.xmat).reshape(-1, 3, 3)
    local = np.einsum("vji,vj->vi", rest_rot[body_of], spec.vertices - rest_pos[body_of])
    return model, data, body_of, local


def _vertex_positions(data, body_of: np.ndarray, local: np.ndarray) -> np.ndarray:
    rot = np.array(data.xmat).reshape(-1, 3, 3)
    return np.array(data.xpos)[body_of] + np.einsum("vij,vj->vi", rot[body_of], local)


def articulated_initial_velocities(spec: SequenceSpec, step: float = 1e-6) -> np.ndarray:
    """(V, 3) each vertex's velocity at the first frame, from the joints' initial velocities: the known initial
    condition a rollout is given (like a poke), by a central difference of the joints' kinematics."""
    import mujoco

    model, data, body_of, local = _articulated_model(spec)
    start, velocity = np.array(data.qpos), np.array(data.qvel)

    def positions(t: float) -> np.ndarray:
        data.qpos[:] = start
        mujoco.mj_integratePos(model, data.qpos, velocity, t)
        mujoco.mj_kinematics(model, data)
        return _vertex_positions(data, body_of, local)

    return (positions(step) - positions(-step)) / (2 * step)


def simulate_articulated(spec: SequenceSpec) -> np.ndarray:
    import mujoco

    model, data, body_of, local = _articulated_model(spec)
    coef = AIR_DENSITY * spec.material["drag"] * 0.1

    def read():
        return _vertex_positions(data, body_of, local)

    def force(t, prev):
        for b in range(1, model.nbody):
            vel = np.zeros(6)
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, b, vel, 0)
            rel = spec.wind_at(t) - vel[3:]
            data.xfrc_applied[b, :3] = coef * rel * np.linalg.norm(rel)

    frames = _run(model, data, spec, 0.002, read, force)
    frames[0] = spec.vertices  # the rest pose is the joints' initial pose
    return frames


BACKENDS = {"mujoco_cloth": simulate_cloth, "mujoco_grid": simulate_grid, "mujoco_articulated": simulate_articulated}
