"""Cloth against Blender Cloth on the same mesh and scene: tablecloths dropped on a ball, a box and a table top, a
cape carried sideways and one spun on an arm by their animated objects, sheets swinging from an edge or two corners.
For each scene, NeuROK and Blender Cloth (its default settings, or a named preset) side by side: the error over the
rest baseline, the mean drop, the fold angle (mean angle between neighbouring faces over the last half second), the
edges' length over rest, a moving cape's lag, flare and swing after its object stops, the deepest penetration into
the collider, and the cost per frame, with issue 44's targets met or missed. Writes the marked "cloth" section of
docs/results.md and a frame sheet.

    python scripts/cloth_check.py --out docs/results.md --sheet docs/results/cloth_sheet.png
    python scripts/cloth_check.py --scenes drape_ball --preset silk        # one scene, one preset, printed only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
START, END = "<!-- cloth:start -->", "<!-- cloth:end -->"
FPS = 24


def grid(nx: int, ny: int, width: float, height: float) -> tuple[np.ndarray, np.ndarray]:
    """A flat sheet in the xy-plane centred at the origin: vertices (nx·ny, 3) and triangles."""
    xs, ys = np.meshgrid(np.linspace(-width / 2, width / 2, nx), np.linspace(-height / 2, height / 2, ny), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], 1)
    idx = np.arange(nx * ny).reshape(nx, ny)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    return v, np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])


def ball(radius: float, centre) -> tuple[np.ndarray, np.ndarray, object]:
    """An icosphere collider (vertices, triangles) and its depth function (positive inside)."""
    import trimesh

    s = trimesh.creation.icosphere(3, radius=radius)
    c = np.asarray(centre, float)
    inner = float(np.linalg.norm(s.triangles_center, axis=1).min())  # the faces' nearest approach to the centre
    return np.asarray(s.vertices) + c, np.asarray(s.faces), lambda p: inner - np.linalg.norm(p - c, axis=-1)


def box(size, centre) -> tuple[np.ndarray, np.ndarray, object]:
    """A box collider (vertices, triangles) and its depth function (positive inside)."""
    import trimesh

    b = trimesh.creation.box(extents=size).subdivide().subdivide()
    c, half = np.asarray(centre, float), np.asarray(size, float) / 2
    return (np.asarray(b.vertices) + c, np.asarray(b.faces),
            lambda p: np.min(half - np.abs(p - c), axis=-1))


def drape(name: str, cloth: float, n: int, collider, height: float, frames: int = 48) -> dict:
    v, f = grid(n, n, cloth, cloth)
    v[:, 2] = height
    return {"name": name, "kind": "drape", "v": v, "f": f, "pins": np.zeros(len(v)), "collider": collider,
            "frames": frames, "matrices": None}


def carried_cape(name: str = "cape_carried", n: int = 24, distance: float = 1.0, seconds: float = 0.5,
                 frames: int = 36) -> dict:
    """A 0.8 × 1.0 m cape hanging in the xz-plane, pinned along its top edge, its object carried ``distance``
    along −y, across the cape's plane as a walking body carries it, in ``seconds`` (smooth start and stop), then held."""
    v, f = grid(n, int(n * 1.25), 0.8, 1.0)
    v = np.stack([v[:, 0], np.zeros(len(v)), v[:, 1]], 1)  # hanging: x across, z up
    pins = (v[:, 2] > 0.5 - 1e-6).astype(float)
    t = np.arange(frames) / FPS
    s = np.clip(t / seconds, 0, 1)
    x = distance * (3 * s**2 - 2 * s**3)
    matrices = np.tile(np.eye(4), (frames, 1, 1))
    matrices[:, 1, 3], matrices[:, 2, 3] = -x, 1.5
    return {"name": name, "kind": "carried", "v": v, "f": f, "pins": pins, "collider": None, "frames": frames,
            "matrices": matrices, "stop": int(np.ceil(seconds * FPS))}


def spun_cape(name: str = "cape_spun", n: int = 20, arm: float = 0.6, speed: float = 3.0, frames: int = 48) -> dict:
    """A 0.6 × 0.8 m cape hanging in the xz-plane at the end of an arm along +x, pinned along its top edge, its object
    turned about the vertical axis through the origin: up to ``speed`` rad/s over 0.5 s, held to 1.0 s, stopped by
    1.25 s, then still (the swing after the stop is measured)."""
    v, f = grid(n, int(n * 4 / 3), 0.6, 0.8)
    v = np.stack([v[:, 0] + arm, np.zeros(len(v)), v[:, 1]], 1)
    pins = (v[:, 2] > 0.4 - 1e-6).astype(float)
    t = np.arange(frames) / FPS
    rate = speed * np.interp(t, [0.0, 0.5, 1.0, 1.25], [0.0, 1.0, 1.0, 0.0])
    angle = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) / FPS)])
    matrices = np.tile(np.eye(4), (frames, 1, 1))
    matrices[:, 0, 0], matrices[:, 0, 1], matrices[:, 1, 0], matrices[:, 1, 1] = (np.cos(angle), -np.sin(angle),
                                                                                 np.sin(angle), np.cos(angle))
    matrices[:, 2, 3] = 1.5
    return {"name": name, "kind": "spun", "v": v, "f": f, "pins": pins, "collider": None, "frames": frames,
            "matrices": matrices, "stop": int(np.ceil(1.25 * FPS))}


def swinging(name: str, size: float, n: int, held: str, frames: int = 48) -> dict:
    """A horizontal square sheet at 1.5 m released to swing down: held along one edge ("edge") or at the two
    corners of one edge ("corners")."""
    v, f = grid(n, n, size, size)
    v[:, 2] = 1.5
    edge = v[:, 0] < -size / 2 + 1e-9
    pins = edge if held == "edge" else edge & (np.abs(v[:, 1]) > size / 2 - 1e-9)
    return {"name": name, "kind": "swing", "v": v, "f": f, "pins": pins.astype(float), "collider": None,
            "frames": frames, "matrices": None}


def scenes() -> dict[str, dict]:
    return {s["name"]: s for s in (
        drape("drape_ball", 1.6, 32, ball(0.45, (0, 0, 0.45)), 1.2),
        drape("drape_ball_small", 1.0, 24, ball(0.3, (0, 0, 0.3)), 0.8),
        drape("drape_box", 1.4, 28, box((0.6, 0.6, 0.6), (0, 0, 0.3)), 0.85),
        drape("drape_table", 1.6, 32, box((1.0, 1.0, 0.1), (0, 0, 0.7)), 0.95),
        carried_cape(),
        spun_cape(),
        swinging("sheet_edge", 1.0, 24, "edge"),
        swinging("sheet_two_corners", 1.0, 24, "corners"),
    )}


# -- the two simulators ---------------------------------------------------------------------------------------
def blender_cloth(scene: dict, preset: str | None = None) -> tuple[np.ndarray, float]:
    """Blender Cloth's frames (T, V, 3) in world space and its milliseconds per frame."""
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    bscene = bpy.context.scene
    bscene.render.fps, bscene.frame_start, bscene.frame_end = FPS, 1, scene["frames"]
    mesh = bpy.data.meshes.new("cloth")
    mesh.from_pydata(scene["v"].tolist(), [], scene["f"].tolist())
    obj = bpy.data.objects.new("cloth", mesh)
    bscene.collection.objects.link(obj)
    if scene["matrices"] is not None:
        import mathutils

        obj.rotation_mode = "QUATERNION"
        for frame, m in enumerate(scene["matrices"], start=1):
            obj.location = m[:3, 3]
            obj.rotation_quaternion = mathutils.Matrix(m[:3, :3].tolist()).to_quaternion()
            obj.keyframe_insert("location", frame=frame)
            obj.keyframe_insert("rotation_quaternion", frame=frame)
    mod = obj.modifiers.new("Cloth", "CLOTH")
    if preset:
        _apply_preset(mod.settings, preset)
    if scene["pins"].any():
        group = obj.vertex_groups.new(name="pin")
        group.add([int(i) for i in np.flatnonzero(scene["pins"] > 0)], 1.0, "REPLACE")
        mod.settings.vertex_group_mass = "pin"
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, scene["frames"]
    if scene["collider"] is not None:
        cv, cf, _ = scene["collider"]
        cmesh = bpy.data.meshes.new("collider")
        cmesh.from_pydata(cv.tolist(), [], cf.tolist())
        collider = bpy.data.objects.new("collider", cmesh)
        bscene.collection.objects.link(collider)
        collider.modifiers.new("Collision", "COLLISION")
    out, started = [], time.perf_counter()
    for frame in range(1, scene["frames"] + 1):
        bscene.frame_set(frame)
        ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        co = np.empty(len(scene["v"]) * 3)
        ev.data.vertices.foreach_get("co", co)
        m = np.array(obj.matrix_world)
        out.append(co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3])
    return np.asarray(out), 1000 * (time.perf_counter() - started) / scene["frames"]


def _apply_preset(settings, preset: str) -> None:
    """Blender's own cloth preset (scripts/presets/cloth/<Name>.py), applied to ``settings``."""
    for name, value in blender_preset(preset).items():
        setattr(settings, name, type(getattr(settings, name))(value))


def neurok(scene: dict, **settings) -> tuple[np.ndarray, float, object]:
    """NeuROK's frames (T, V, 3) in world space through the SDK, its milliseconds per frame (dynamics and decode),
    and the simulation (for its stats and coordinates)."""
    from neurok_blender.runtime import api

    kwargs = dict({"frame_count": scene["frames"], "fps": FPS, "device": "cpu", "solver": {"variation": 0.0}}, **settings)
    if scene["collider"] is not None:
        kwargs["colliders"] = [{"vertices": scene["collider"][0], "triangles": scene["collider"][1]}]
    if scene["matrices"] is not None:  # the object carried, its pins with it (as Blender's pin group follows it)
        kwargs["object_matrices"] = scene["matrices"]
        kwargs["pin_targets"] = carried(scene, scene["v"][scene["pins"] > 0])
    sim = api.prepare(scene["v"], scene["f"], pins=scene["pins"] if scene["pins"].any() else None, **kwargs)
    frames = sim.run()
    if scene["matrices"] is not None:  # the object's frame at each time, as Blender shows it
        m = scene["matrices"]
        frames = np.einsum("tab,tvb->tva", m[:, :3, :3], frames) + m[:, None, :3, 3]
    ms = 1000 * (sim.timing["dynamics_s"] + sim.timing["decode_s"]) / max(scene["frames"] - 1, 1)
    return frames, ms, sim


# -- measures -------------------------------------------------------------------------------------------------
def carried(scene: dict, points: np.ndarray) -> np.ndarray:
    """Points (P, 3) of the object's own frame at every frame of its animation (T, P, 3), in world space."""
    m = scene["matrices"]
    return np.einsum("tab,vb->tva", m[:, :3, :3], points) + m[:, None, :3, 3]


def rest_frames(scene: dict, reference: np.ndarray) -> np.ndarray:
    """The rest shape at every frame of ``reference`` (T, V, 3): carried with its object where it is animated."""
    if scene["matrices"] is not None:
        return carried(scene, scene["v"])
    return np.broadcast_to(reference[:1], reference.shape)



def fold_angle(frames: np.ndarray, tris: np.ndarray) -> float:
    """Mean angle (degrees) between the normals of neighbouring faces, over the given frames."""
    edges = {}
    for fi, t in enumerate(tris):
        for a, b in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0])):
            edges.setdefault((min(a, b), max(a, b)), []).append(fi)
    pairs = np.array([fs for fs in edges.values() if len(fs) == 2])
    angles = []
    for x in frames:
        tri = x[tris]
        n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
        angles.append(np.degrees(np.arccos(np.clip((n[pairs[:, 0]] * n[pairs[:, 1]]).sum(1), -1, 1))).mean())
    return float(np.mean(angles))


def penetration(frames: np.ndarray, scene: dict) -> float:
    """The deepest any vertex goes into the collider over the frames (m; 0 without one)."""
    if scene["collider"] is None:
        return 0.0
    return float(max(scene["collider"][2](frames.reshape(-1, 3)).max(), 0.0))


TRAVEL = {"carried": np.array([0.0, -1.0, 0.0]), "spun": np.array([0.0, 1.0, 0.0])}  # in the object's own frame


def local_frames(frames: np.ndarray, scene: dict) -> np.ndarray:
    """World-space frames (T, V, 3) in the object's own frame at each time (as they are where it is still)."""
    if scene["matrices"] is None:
        return frames
    m = scene["matrices"]
    return np.einsum("tba,tvb->tva", m[:, :3, :3], frames - m[:, None, :3, 3])


def _offset(frames: np.ndarray, scene: dict, axis: np.ndarray) -> np.ndarray:
    """Per frame, how far the free part's centre lies from the pins' centre along ``axis`` (object frame), beyond
    where it started."""
    local = local_frames(frames, scene)
    pinned, free = scene["pins"] > 0, scene["pins"] == 0
    along = (local[:, free].mean(1) - local[:, pinned].mean(1)) @ axis
    return along - along[0]


def lag(frames: np.ndarray, scene: dict) -> float:
    """A moving cape's largest trail: how far the free part's centre falls behind the pins' against the direction of
    travel (m)."""
    return float((-_offset(frames, scene, TRAVEL[scene["kind"]])).max())


def flare(frames: np.ndarray, scene: dict) -> float:
    """A spun cape's largest outward swing: the free part's centre past the pins', away from the axis (m)."""
    return float(_offset(frames, scene, np.array([1.0, 0.0, 0.0])).max())


def swing_energy(frames: np.ndarray, scene: dict) -> float:
    """Kinetic energy per unit mass (J/kg) of the free vertices over the half second after the object stops, from
    central differences of the world-space frames."""
    free, stop = scene["pins"] == 0, scene["stop"]
    span = frames[max(stop - 1, 0): min(stop + FPS // 2 + 1, len(frames))][:, free]
    velocity = (span[2:] - span[:-2]) * FPS / 2
    return float(0.5 * (velocity**2).sum(-1).mean())


def edge_ratios(frames: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Every mesh edge's length over its rest length (frame 0), in every given frame, flattened."""
    e = np.unique(np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1), axis=0)
    rest = np.linalg.norm(frames[0, e[:, 1]] - frames[0, e[:, 0]], axis=-1)
    return (np.linalg.norm(frames[:, e[:, 1]] - frames[:, e[:, 0]], axis=-1) / rest).reshape(-1)


def reach(sim, target: np.ndarray, tris: np.ndarray | None = None) -> dict[str, float]:
    """How close the simulation's coordinates can come to ``target`` (V, 3; world = local here): the affine handles
    alone (least squares, the latent at rest), and handles with the latent (Adam on the latent, handles in closed
    form at each step), at the mesh vertices; as the mean vertex distance. With ``tris`` also each fit's fold angle
    (what folds the coordinates can hold at all)."""
    import torch

    from neurok_blender.pipeline.eval import handle_fit
    from neurok_blender.runtime.model import reduction

    if sim.handles is None:
        return {}
    tgt = torch.as_tensor(target, dtype=torch.float32)
    weights, hub = sim.vertex_weights, sim.handles.centre
    xbar = sim.latent_vertices  # the latent's decode at the vertices, as the simulation makes it

    zero = torch.zeros(sim.subspace.k)
    with torch.no_grad():
        handles = handle_fit(xbar(zero), tgt, weights, hub)
    loss = lambda latent: ((handle_fit(xbar(latent), tgt, weights, hub) - tgt) ** 2).sum(-1).mean()  # noqa: E731
    latent, _ = reduction.fit(loss, zero, 100, lr=0.15)
    with torch.no_grad():
        both = handle_fit(xbar(latent), tgt, weights, hub)
    dist = lambda x: float((x - tgt).norm(dim=-1).mean())  # noqa: E731
    out = {"handles": dist(handles), "handles_latent": dist(both)}
    if tris is not None:
        out.update(fold_handles=fold_angle(handles.double().numpy()[None], tris),
                   fold_handles_latent=fold_angle(both.double().numpy()[None], tris))
    return out


def measure(scene: dict, preset: str | None, settings: dict) -> dict:
    cloth, cloth_ms = blender_cloth(scene, preset)
    ours, ours_ms, sim = neurok(scene, **settings)
    rest = rest_frames(scene, cloth)
    diag = float(np.linalg.norm(np.ptp(scene["v"], axis=0)))
    err = float(np.linalg.norm(ours - cloth, axis=-1).mean() / diag)
    base = float(np.linalg.norm(rest - cloth, axis=-1).mean() / diag)
    last = slice(-FPS // 2, None)
    row = {"scene": scene["name"], "kind": scene["kind"], "preset": preset or "default", "vertices": len(scene["v"]),
           "error": err, "baseline": base, "ratio": err / max(base, 1e-12),
           "drop_neurok": float(scene["v"][:, 2].mean() - ours[-1][:, 2].mean()),
           "drop_cloth": float(scene["v"][:, 2].mean() - cloth[-1][:, 2].mean()),
           "fold_neurok": fold_angle(ours[last], scene["f"]), "fold_cloth": fold_angle(cloth[last], scene["f"]),
           "penetration_neurok": penetration(ours, scene), "penetration_cloth": penetration(cloth, scene),
           "ms_neurok": ours_ms, "ms_cloth": cloth_ms, "settings": settings}
    for who, frames in (("neurok", ours), ("cloth", cloth)):
        ratios = _last_edges(frames, scene)
        row[f"edge_{who}"] = [float(ratios.mean()), float(np.percentile(ratios, 1)), float(np.percentile(ratios, 99))]
        if scene["kind"] in TRAVEL:
            row[f"lag_{who}"] = lag(frames, scene)
            row[f"swing_{who}"] = swing_energy(frames, scene)
        if scene["kind"] == "spun":
            row[f"flare_{who}"] = flare(frames, scene)
    row["frames_neurok"], row["frames_cloth"] = ours, cloth
    return row


def _last_edges(frames: np.ndarray, scene: dict) -> np.ndarray:
    """Edge length over rest length over the last half second, in the object's own frame (rest: the input mesh)."""
    return edge_ratios(np.concatenate([scene["v"][None], local_frames(frames, scene)[-FPS // 2:]]), scene["f"])[
        _edge_count(scene["f"]):]


def _edge_count(tris: np.ndarray) -> int:
    return len(np.unique(np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1), axis=0))


# -- calibration ----------------------------------------------------------------------------------------------
CALIBRATION_SCENES = ("drape_ball_small", "sheet_edge", "cape_carried")  # the rest are the test scenes
STIFFNESS_GRID = (10.0, 20.0, 30.0, 60.0)
BENDING_GRID = (0.01, 0.1, 1.0, 10.0, 30.0)
COMPRESSION = 0.01  # cloth gives way in compression (it buckles into folds finer than the coordinates)
TIE = 0.005  # calibration scores this close to the best are a tie: the grid's noise cannot tell them apart


def calibrate(out: str) -> dict:
    """The open-surface cloth materials: Blender's default (Cotton) fitted on a grid so NeuROK's rollouts best match
    Blender Cloth on the calibration scenes (the score: the mean error over the rest baseline plus the mean
    difference of the final mean drop over the diagonal; scores within TIE of the best are a tie, won by the softer
    stretch), then every other preset scaled from it by Blender's own
    ratios — stretch by tension / mass, bending by bending / mass, as both materials are per unit of mass."""
    every = scenes()
    cloth = {name: blender_cloth(every[name], "cotton")[0] for name in CALIBRATION_SCENES}
    scored = []
    for stiffness in STIFFNESS_GRID:
        for bending in BENDING_GRID:
            material = {"stiffness": stiffness, "bending": bending, "compression": COMPRESSION}
            score = float(np.mean([_score(every[name], cloth[name], material) for name in CALIBRATION_SCENES]))
            scored.append((score, material))
            print(f"cotton: {material} -> {score:.3f}", file=sys.stderr, flush=True)
    best = min(row[0] for row in scored)  # a tie goes to the softer stretch: too stiff a cloth cannot wrap
    score, cotton = min((row for row in scored if row[0] <= best + TIE), key=lambda row: (row[1]["stiffness"], row[0]))
    blender = {name: blender_preset(name) for name in PRESETS}
    base = blender["cotton"]
    table = {name: {"stiffness": cotton["stiffness"] * _per_mass(p, "tension_stiffness") / _per_mass(base, "tension_stiffness"),
                    "bending": cotton["bending"] * _per_mass(p, "bending_stiffness") / _per_mass(base, "bending_stiffness"),
                    "compression": COMPRESSION} for name, p in blender.items()}
    from neurok_blender.runtime.dynamics.cloth import stage

    doc = {**stage.preset_file(),  # the cloth layer's constants stay as they were fitted (--calibrate-layer)
           "command": "python scripts/cloth_check.py " + " ".join(sys.argv[1:]), "scenes": list(CALIBRATION_SCENES),
           "grid": {"stiffness": STIFFNESS_GRID, "bending": BENDING_GRID, "compression": COMPRESSION},
           "cotton_score": round(score, 4), "blender_presets": blender, "presets": table}
    with open(out + ".tmp", "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(out + ".tmp", out)
    return doc


PRESETS = ("cotton", "denim", "leather", "rubber", "silk")


def blender_preset(name: str) -> dict[str, float]:
    """The numbers of Blender's own cloth preset file."""
    import bpy

    path = next(os.path.join(d, name.capitalize() + ".py") for d in bpy.utils.preset_paths("cloth")
                if os.path.exists(os.path.join(d, name.capitalize() + ".py")))
    out = {}
    for line in open(path):
        if line.startswith("bpy.context.cloth.settings."):
            key, value = line.split("settings.", 1)[1].split("=")
            try:
                out[key.strip()] = float(value)
            except ValueError:
                pass
    return out


LAYER_SCENES = (("drape_ball_small", "cotton"), ("drape_ball_small", "denim"), ("drape_ball_small", "leather"),
                ("sheet_edge", "cotton"), ("cape_carried", "cotton"))
BENDING_SCALE_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
DAMPING_SCALE_GRID = (0.06, 0.24, 0.96)
SHEAR = 0.2  # a quad diagonal's give in compression, chosen on drape_ball_small (docs/decisions.md#cloth-layer)


def calibrate_layer(out: str) -> dict:
    """The cloth layer's two constants, fitted on a grid so its rollouts best match Blender Cloth on the calibration
    scenes with three of Blender's presets (bending matters only for the stiffer ones at these resolutions): the
    bending scale (Blender's bending / mass times the mean edge² times g) and the still-air damping scale (Blender's
    air damping / mass). Score: the error over the rest baseline plus a quarter of |log(folds / Cloth's folds)|."""
    from neurok_blender.runtime.dynamics.cloth import stage

    every = scenes()
    cloth = {(name, preset): blender_cloth(every[name], preset)[0] for name, preset in LAYER_SCENES}
    doc = stage.preset_file()
    scored = []
    for bending in BENDING_SCALE_GRID:
        for damping in DAMPING_SCALE_GRID:
            layer = {"bending_scale": bending, "damping_scale": damping, "shear": SHEAR}
            stage.preset_file = lambda layer=layer: dict(doc, layer=layer)
            score = float(np.mean([_layer_score(every[name], cloth[name, preset], preset) for name, preset in LAYER_SCENES]))
            scored.append((score, layer))
            print(f"layer: {layer} -> {score:.3f}", file=sys.stderr, flush=True)
    score, best = min(scored, key=lambda row: row[0])
    doc = dict(doc, layer=best, layer_calibration={
        "command": "python scripts/cloth_check.py " + " ".join(sys.argv[1:]), "scenes": [list(x) for x in LAYER_SCENES],
        "grid": {"bending_scale": BENDING_SCALE_GRID, "damping_scale": DAMPING_SCALE_GRID}, "score": round(score, 4)})
    with open(out + ".tmp", "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(out + ".tmp", out)
    return doc


def _layer_score(scene: dict, cloth: np.ndarray, preset: str) -> float:
    ours, _, _ = neurok(scene, cloth_preset=preset)
    rest = rest_frames(scene, cloth)
    ratio = np.linalg.norm(ours - cloth, axis=-1).mean() / np.linalg.norm(rest - cloth, axis=-1).mean()
    last = slice(-FPS // 2, None)
    folds = fold_angle(ours[last], scene["f"]) / max(fold_angle(cloth[last], scene["f"]), 1e-9)
    return float(ratio + 0.25 * abs(np.log(max(folds, 1e-9))))


def _per_mass(preset: dict[str, float], key: str) -> float:
    return preset[key] / preset["mass"]


def _score(scene: dict, cloth: np.ndarray, material: dict) -> float:
    from neurok_blender.errors import SimulationDiverged

    try:
        ours, _, _ = neurok(scene, material=material)
    except SimulationDiverged:
        return float("inf")
    rest = rest_frames(scene, cloth)
    ratio = np.linalg.norm(ours - cloth, axis=-1).mean() / np.linalg.norm(rest - cloth, axis=-1).mean()
    drop = abs(ours[-1][:, 2].mean() - cloth[-1][:, 2].mean()) / np.linalg.norm(np.ptp(scene["v"], axis=0))
    return float(ratio + drop)


# -- report ---------------------------------------------------------------------------------------------------
def sheet(path: str, rows: list[dict], scenes_by_name: dict) -> None:
    rows = [r for r in rows if r["preset"] == "default"] or rows  # one row a scene
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    picks = (0, 12, 24, -1)
    fig = plt.figure(figsize=(2.6 * len(picks) * 2, 2.6 * len(rows)))
    for r, row in enumerate(rows):
        scene = scenes_by_name[row["scene"]]
        both = np.concatenate([row["frames_cloth"], row["frames_neurok"]]).reshape(-1, 3)
        lo, hi = both.min(0), both.max(0)
        centre, half = (lo + hi) / 2, (hi - lo).max() / 2
        for c, (who, frames) in enumerate((("Blender Cloth", row["frames_cloth"]), ("NeuROK", row["frames_neurok"]))):
            for j, p in enumerate(picks):
                ax = fig.add_subplot(len(rows), 2 * len(picks), r * 2 * len(picks) + c * len(picks) + j + 1,
                                     projection="3d")
                tri = frames[p][scene["f"]]
                n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
                n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
                shade = 0.35 + 0.65 * np.abs(n @ np.array([0.3, -0.5, 0.8]))
                colour = np.array([0.85, 0.45, 0.2]) if c == 0 else np.array([0.25, 0.5, 0.85])
                ax.add_collection3d(Poly3DCollection(tri, facecolors=shade[:, None] * colour, edgecolors="none"))
                if scene["collider"] is not None:
                    cv, cf, _ = scene["collider"]
                    ax.add_collection3d(Poly3DCollection(cv[cf], facecolors=(0.6, 0.6, 0.6, 0.35), edgecolors="none"))
                for i, set_lim in enumerate((ax.set_xlim, ax.set_ylim, ax.set_zlim)):
                    set_lim(centre[i] - half, centre[i] + half)
                ax.view_init(elev=15, azim=-60)
                ax.set_axis_off()
                frame = p if p >= 0 else len(frames) - 1
                ax.set_title(f"{row['scene']}: {who}, frame {frame}" if j == 0 else f"frame {frame}", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


TARGETS = {  # issue 44's acceptance measures, per kind of scene
    "drape": "folds ≥ 0.7 × Cloth's; error ≤ 0.15 of the rest baseline; drop within 10 %; mean edge 0.97–1.03 with "
             "p1–p99 within 0.9–1.1; penetration ≤ 5 mm",
    "moving": "lag and flare ≥ 0.8 × Cloth's; error ≤ 0.4; swing energy after the stop within 25 % of Cloth's",
    "swing": "error ≤ 0.25 (aim 0.15)",
}


def verdict(r: dict) -> str:
    """Which of its kind's targets a row meets, in a few words."""
    misses = []
    folds = r["fold_neurok"] / max(r["fold_cloth"], 1e-9)
    mean, p1, p99 = r["edge_neurok"]
    if r["kind"] == "drape":
        drop = abs(r["drop_neurok"] - r["drop_cloth"]) / max(abs(r["drop_cloth"]), 1e-9)
        checks = {"folds": folds >= 0.7, "error": r["ratio"] <= 0.15, "drop": drop <= 0.1,
                  "edges": 0.97 <= mean <= 1.03 and p1 >= 0.9 and p99 <= 1.1,
                  "penetration": r["penetration_neurok"] <= 0.005}
    elif r["kind"] in TRAVEL:
        swing = r["swing_neurok"] / max(r["swing_cloth"], 1e-12)
        checks = {"lag": r["lag_neurok"] >= 0.8 * r["lag_cloth"], "error": r["ratio"] <= 0.4,
                  "swing": 0.75 <= swing <= 1.25}
        if "flare_neurok" in r:
            checks["flare"] = r["flare_neurok"] >= 0.8 * r["flare_cloth"]
    else:
        checks = {"error": r["ratio"] <= 0.25}
    misses = [name for name, ok in checks.items() if not ok]
    return "all met" if not misses else "misses " + ", ".join(misses)


def table(rows: list[dict], command: str, sheet_path: str | None, doc: str) -> str:
    lines = [START, "## Cloth against Blender Cloth", "",
             f"`{command}`: each scene baked by Blender Cloth (its default settings unless a preset is named) and by "
             "NeuROK (the SDK, default settings: the full-resolution cloth layer) on the same mesh, collider and "
             "animation at 24 fps. Error: mean vertex distance to Cloth over the diagonal; baseline: the same for the "
             "rest shape (carried with its object). Drop: mean fall of the vertices by the last frame. Folds: mean "
             "angle between neighbouring faces over the last half second. Edges: every edge's length over its rest "
             "length over the last half second, mean (1st–99th percentile). Lag and flare: a moving cape's largest "
             "trail behind its pins and (spun) outward swing. Swing: the free vertices' kinetic energy per kg over "
             "the half second after the object stops. Penetration: deepest vertex inside the collider. Blender Cloth "
             "counts its time in frames and its gravity as 0.001 of the scene's per frame², so at 24 fps it falls at "
             "5.65 m/s² where NeuROK falls at 9.81 (docs/decisions.md#cloth-layer): part of every error below is "
             "Cloth's slower fall. The layer's material was calibrated on drape_ball_small, sheet_edge and "
             "cape_carried; the other scenes are tests. Targets: drapes — " + TARGETS["drape"] + "; moving capes — "
             + TARGETS["moving"] + "; swinging sheets — " + TARGETS["swing"] + ".", "",
             "| scene | preset | vertices | error / baseline | drop (m) | lag / flare (m) | folds (°) "
             "| edges: mean (p1–p99) | swing after the stop (J/kg) | penetration (mm) | ms / frame | targets |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    pair = lambda r, key, f="{:.2f}": f"{f.format(r[key + '_neurok'])} / {f.format(r[key + '_cloth'])}"  # noqa: E731
    for r in rows:
        moving = "—"
        if "lag_neurok" in r:
            moving = pair(r, "lag") + (f"; {pair(r, 'flare')}" if "flare_neurok" in r else "")
        edges = lambda e: f"{e[0]:.3f} ({e[1]:.2f}–{e[2]:.2f})"  # noqa: E731
        swing = pair(r, "swing", "{:.2f}") if "swing_neurok" in r else "—"
        speed = r["ms_cloth"] / max(r["ms_neurok"], 1e-9)
        lines.append(f"| {r['scene']} | {r['preset']} | {r['vertices']:,} | {r['ratio']:.2f} | {pair(r, 'drop')} | "
                     f"{moving} | {pair(r, 'fold', '{:.1f}')} | {edges(r['edge_neurok'])} / {edges(r['edge_cloth'])} | "
                     f"{swing} | {1000 * r['penetration_neurok']:.0f} / {1000 * r['penetration_cloth']:.0f} | "
                     f"{r['ms_neurok']:.1f} / {r['ms_cloth']:.0f} ({speed:.1f}×) | {verdict(r)} |")
    lines.append("")
    lines.append("Each pair is NeuROK / Blender Cloth.")
    if sheet_path:
        rel = os.path.relpath(sheet_path, os.path.dirname(os.path.abspath(doc)))
        lines += ["", f"Blender Cloth (orange) beside NeuROK (blue), frames 0, 12, 24 and the last: "
                      f"![cloth scenes, Blender Cloth beside NeuROK]({rel})"]
    return "\n".join(lines + [END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenes", nargs="+", default=list(scenes()), choices=list(scenes()))
    parser.add_argument("--preset", help="a Blender cloth preset for both sides (cotton, denim, leather, rubber, silk)")
    parser.add_argument("--preset-scene", help="also this scene once per Blender preset, both sides with that preset")
    parser.add_argument("--settings", default="{}", help="extra NeuROK settings as JSON (SimulationRequest fields)")
    parser.add_argument("--out", help="the results page whose cloth section is rewritten (default: print only)")
    parser.add_argument("--sheet", help="write the side-by-side frame sheet here")
    parser.add_argument("--json", help="write the rows (without frames) here")
    parser.add_argument("--calibrate", action="store_true",
                        help="fit the cloth presets' materials against Blender Cloth on the calibration scenes and "
                             "write them to --presets")
    parser.add_argument("--calibrate-layer", action="store_true",
                        help="fit the cloth layer's bending and damping scales against Blender Cloth and write them to "
                             "--presets")
    parser.add_argument("--presets", default=os.path.join(ROOT, "neurok_blender", "runtime", "dynamics",
                                                          "cloth_presets.json"))
    args = parser.parse_args(argv)
    if args.calibrate:
        calibrate(args.presets)
        return 0
    if args.calibrate_layer:
        calibrate_layer(args.presets)
        return 0
    settings = json.loads(args.settings)
    if args.preset:
        settings.setdefault("cloth_preset", args.preset)
    every = scenes()
    rows = []
    for name in args.scenes:
        row = measure(every[name], args.preset, settings)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.startswith("frames")}), flush=True)
    for preset in PRESETS if args.preset_scene else ():
        row = measure(every[args.preset_scene], preset, dict(settings, cloth_preset=preset))
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.startswith("frames")}), flush=True)
    if args.sheet:
        sheet(args.sheet, rows, every)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{k: v for k, v in r.items() if not k.startswith("frames")} for r in rows], fh, indent=1)
    if args.out:
        write_section(args.out, (START, END), "cloth_check.py", argv,
                      lambda command: table(rows, command, args.sheet, args.out))
    return 0


def write_section(path: str, marks: tuple[str, str], script: str, argv: list[str] | None, make_block) -> None:
    """Rewrite a marked section of the results page with ``make_block(command)`` (the block with its marks), the
    command being this script's own invocation."""
    from neurok_blender.pipeline.validate.report import replace_marked

    command = f"python scripts/{script} " + " ".join(argv if argv is not None else sys.argv[1:])
    block = make_block(command)
    replace_marked(path, marks, block[len(marks[0]) + 1: -len(marks[1]) - 1])


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the bpy module can hang in its C++ exit handlers
