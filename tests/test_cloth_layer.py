"""The full-resolution cloth layer (runtime/dynamics/cloth/): what physics and geometry fix about it, on its own and
through the SDK — free fall, pins, tethers, contact, the bending operator, the edge colouring — and the settings and
meshes it refuses or works around."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.bridge.request import SimulationRequest  # noqa: E402
from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.runtime.dynamics.cloth import contact, topology  # noqa: E402
from neurok_blender.runtime.dynamics.cloth.layer import ClothLayer, LayerMaterial, Loads  # noqa: E402
from tests.conftest import grid_sheet, needs_model  # noqa: E402

G = torch.tensor([0.0, 0.0, -9.81])


def flat(n: int = 12, size: float = 1.0, height: float = 1.0):
    v, f = grid_sheet(n, n, size, size)
    return v[:, [0, 2, 1]] + [0.0, 0.0, height], f  # horizontal, at ``height``


def layer(v, f, pins=None, bending=0.0, substeps=10, drag=0.0, damping=0.0):
    pins = np.zeros(len(v)) if pins is None else pins
    return ClothLayer(v, f, pins, LayerMaterial(bending, damping, drag), substeps, torch.float64)


def advance(lay: ClothLayer, frames: int, loads: Loads | None = None, fps: float = 24.0) -> np.ndarray:
    out = []
    with torch.inference_mode():
        for i in range(1, frames + 1):
            step = loads or Loads(G.double())
            step.span = (i - 1.0, float(i))
            out.append(lay.advance(1 / fps, step).numpy().copy())
    return np.asarray(out)


# -- physics ----------------------------------------------------------------------------------------------------
def test_a_free_sheet_falls_exactly_half_g_t_squared_and_keeps_its_shape():
    v, f = flat()
    frames = advance(layer(v, f), 24)  # one second
    drop = v[:, 2].mean() - frames[-1][:, 2].mean()
    assert drop == pytest.approx(0.5 * 9.81 * 1.0**2, rel=1e-6)
    assert np.abs(frames[-1] - frames[-1].mean(0) - (v - v.mean(0))).max() < 1e-9  # nothing but the fall


def test_pinned_vertices_hold_and_a_hanging_sheet_keeps_its_length():
    v, f = flat(30, 2.0)
    pins = (v[:, 0] < 1e-9).astype(float)
    lay = layer(v, f, pins, substeps=10)  # few sweeps for 30 rows: the tethers, not the sweeps, hold the length
    frames = advance(lay, 48)
    assert np.abs(frames[:, pins > 0] - v[pins > 0]).max() == 0.0
    ratios = lay.edge_ratios().numpy()
    assert ratios.mean() == pytest.approx(1.0, abs=0.02) and np.percentile(ratios, 99) < 1.1
    assert frames[-1][:, 2].min() < v[:, 2].min() - 1.8  # it swung down, about its 2 m length


def test_a_sheet_dropped_on_a_ball_rests_on_it_in_folds():
    import trimesh

    v, f = flat(24, 1.0, 0.8)
    v[:, :2] -= 0.5
    ball = trimesh.creation.icosphere(3, radius=0.3)
    bv, bf = np.asarray(ball.vertices) + [0, 0, 0.3], np.asarray(ball.faces)
    grid = contact.GridSDF(bv, bf, 0.1, torch.float64, "cpu")
    rest = 0.03
    collider = contact.RigidCollider(grid, np.tile(np.eye(4), (49, 1, 1)), rest, 0.5, np.inf, torch.float64, "cpu")
    frames = advance(layer(v, f, substeps=20, damping=0.8), 48, Loads(G.double(), surfaces=(collider,)))
    inner = float(np.linalg.norm(ball.triangles_center, axis=1).min())  # the faces' nearest approach to the centre
    assert np.linalg.norm(frames - [0, 0, 0.3], axis=-1).min() > inner + 0.5 * rest
    top = frames[-1][np.linalg.norm(v[:, :2], axis=1) < 0.05, 2].mean()
    assert top == pytest.approx(0.6 + rest, abs=0.01)  # the middle rests on the ball's top, at the contact distance
    tri = frames[-1][f]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    edges = topology.build(v, f)
    assert edges.diagonal.any()
    assert np.degrees(np.arccos(np.clip(np.abs((n[::2] * n[1::2]).sum(1)), 0, 1))).mean() > 5.0  # not a smooth dome


# -- geometry ---------------------------------------------------------------------------------------------------
def test_the_edge_colours_cover_every_edge_once_and_share_no_vertex_within_a_set():
    v, f = flat(40)
    t = topology.build(v, f)
    every = np.sort(np.concatenate(t.colours))
    assert np.array_equal(every, np.arange(len(t.edges)))
    for c in t.colours[:-1]:  # the last may be the small sets joined (shares halved where they meet)
        ends = t.edges[c].reshape(-1)
        assert len(np.unique(ends)) == len(ends)
    assert len(t.colours) <= 9


def test_tethers_are_the_shortest_paths_along_the_edges_to_the_nearest_pin():
    rng = np.random.default_rng(0)
    v, f = flat(9)
    v[:, :2] += rng.normal(0, 0.02, (len(v), 2))
    t = topology.build(v, f)
    pinned = np.array([0, 5, 40])
    anchor, length = topology.tethers(t.edges, t.rest, len(v), pinned)
    best = np.full(len(v), np.inf)  # Dijkstra from every pin at once, the textbook way
    best[pinned] = 0.0
    heap = [(0.0, int(p)) for p in pinned]
    while heap:
        d, a = heapq.heappop(heap)
        if d > best[a]:
            continue
        for (i, j), w in zip(t.edges, t.rest):
            if a in (i, j):
                b = j if a == i else i
                if d + w < best[b]:
                    best[b] = d + w
                    heapq.heappush(heap, (d + w, int(b)))
    assert np.allclose(length, best)
    assert (np.linalg.norm(v - v[anchor], axis=1) <= length + 1e-12).all()  # never tighter than the rest shape


def test_the_bending_operator_leaves_any_flat_or_affine_shape_at_rest():
    v, f = flat(10)
    lay = layer(v, f, bending=1.0)
    a = np.array([[1.1, 0.2, 0.0], [-0.3, 0.9, 0.1], [0.2, 0.4, 1.3]])
    moved = torch.as_tensor(v @ a.T + [0.3, -0.2, 0.5])
    assert float(lay._bend(moved.T).abs().max()) < 1e-9
    folded = moved.clone()
    folded[v[:, 0] > 0.5, 2] += 0.2 * (v[v[:, 0] > 0.5, 0] - 0.5)[:, None].squeeze(1) * 5
    assert float(lay._bend(folded.T).abs().max()) > 1e-3


def test_the_collider_grid_matches_exact_closest_points_near_the_surface():
    import trimesh

    from neurok_blender.runtime.dynamics.scene import MeshSDF

    box = trimesh.creation.box(extents=(0.6, 0.4, 0.2)).subdivide()
    bv, bf = np.asarray(box.vertices), np.asarray(box.faces)
    grid = contact.GridSDF(bv, bf, 0.1, torch.float64, "cpu")
    points = torch.as_tensor(np.random.default_rng(1).uniform(-0.4, 0.4, (3000, 3)))
    exact = MeshSDF(bf, len(bv), "cpu")
    exact.update(torch.as_tensor(bv))
    d_exact, _ = exact.query(points, exact.candidates(points))
    d_grid, _ = grid.query(points.T)
    near = d_exact.abs() < 0.05
    assert bool(((d_grid < 0) == (d_exact < 0))[near].all())
    assert float((d_grid - d_exact)[near].abs().max()) < grid.cell


def test_a_rigid_collider_is_told_from_a_deforming_one():
    pts = np.random.default_rng(2).normal(size=(30, 3))
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    moving = np.stack([pts, pts + [0.1, 0, 0], pts @ turn.T + [0, 0, 1]])
    transforms = contact.rigid_motion(moving)
    assert transforms is not None and np.allclose(pts @ transforms[2, :3, :3].T + transforms[2, :3, 3], moving[2])
    squashed = moving.copy()
    squashed[2, :, 2] *= 0.5
    assert contact.rigid_motion(squashed) is None


# -- refusals and workarounds ------------------------------------------------------------------------------------
@pytest.mark.parametrize("solver, message", [
    ({"detail_sweeps": 0}, "detail_sweeps must be between 1 and 200, got 0"),
    ({"detail_sweeps": -3}, "detail_sweeps must be between 1 and 200, got -3"),
    ({"detail_sweeps": 5000}, "detail_sweeps must be between 1 and 200, got 5000"),
    ({"detail_sweeps": 2.5}, "detail_sweeps must be a whole number, got 2.5"),
    ({"detail": "yes"}, "detail must be true or false, got 'yes'"),
])
def test_bad_detail_settings_are_refused_in_one_line(solver, message):
    with pytest.raises(InputError) as error:
        SimulationRequest.from_dict({"solver": solver})
    assert str(error.value) == message and "\n" not in str(error.value)


def test_degenerate_triangles_are_dropped_and_non_manifold_edges_bend_freely():
    v, f = flat(6)
    extra = np.array([[0, 0, 1], [3, 3, 3], [1, 2, 3]])  # repeated corners, a point, and a sliver along a row
    t = topology.build(v, np.concatenate([f, extra]))
    assert len(t.triangles) == len(f)
    wing = np.concatenate([v, [[0.1, 0.05, 1.5]]])  # a third face on the first quad's diagonal: non-manifold
    t = topology.build(wing, np.concatenate([f, [[f[0, 0], f[0, 2], len(v)]]]))
    edge = np.sort(f[0, [0, 2]])
    assert not any(set(edge) <= set(b[:2]) for b in t.bends)  # that edge has no hinge, as in Blender Cloth
    with pytest.raises(InputError, match="degenerate"):
        topology.build(v, np.array([[0, 0, 1], [2, 2, 2]]))


@needs_model
def test_detail_runs_the_layer_and_off_the_reduced_motion():
    from neurok_blender.runtime import api

    v, f = flat(10)
    pins = (v[:, 0] < 1e-9).astype(float)
    on = api.prepare(v, f, pins=pins, frame_count=4, device="cpu", solver={"detail_sweeps": 7})
    off = api.prepare(v, f, pins=pins, frame_count=4, device="cpu", solver={"detail": False})
    frames = on.run()
    assert on.stats()["detail"] == {"substeps": 7, "guide": "none"} and off.stats()["detail"] is None
    assert np.isfinite(frames).all() and np.array_equal(frames[0], v)
    assert len(on.energy) == 4 and on.timing["dynamics_s"] > 0


@needs_model
def test_through_the_sdk_a_free_sheet_falls_exactly_half_g_t_squared_with_the_air_off():
    from neurok_blender.runtime import api

    v, f = flat(10)
    frames = api.simulate(v, f, frame_count=13, fps=24, device="cpu", solver={"variation": 0.0}, damping=0.0,
                          material={"drag": 0.0}).frames
    assert v[:, 2].mean() - frames[-1][:, 2].mean() == pytest.approx(0.5 * 9.81 * 0.5**2, rel=1e-3)  # float32
