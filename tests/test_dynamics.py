"""Latent Euler–Lagrange dynamics: energies, Coriolis term, integrators on analytic systems, and the
engine on the shipped model (pins, gravity, wind, ground, point clouds, seeds, divergence)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.errors import InputError, SimulationDiverged  # noqa: E402
from neurok_blender.runtime.dynamics import energies, integrators  # noqa: E402
from neurok_blender.runtime.dynamics.cubature import Cubature, from_mesh, from_points, knn_graph, two_hop  # noqa: E402
from neurok_blender.runtime.dynamics.material import Material  # noqa: E402
from neurok_blender.runtime.dynamics.simulate import Options, Simulation  # noqa: E402
from neurok_blender.runtime.dynamics.system import LatentSystem, Scene  # noqa: E402
from neurok_blender.runtime.engine import DEFAULT_CHECKPOINT_DIR  # noqa: E402

D = torch.float64
ZERO = {"stiffness": 0.0, "bending": 0.0, "pin": 0.0, "ground": 0.0, "plausibility": 0.0, "damping_mass": 0.0,
        "damping_stiffness": 0.0, "drag": 0.0}


def analytic_system(mapping, points, masses, edges=(), constants=None, gravity=(0, 0, 0), ground=None, k=1,
                    pins=None):
    n = len(points)
    cub = Cubature(points=np.asarray(points, float), normals=np.tile([0.0, 1.0, 0.0], (n, 1)),
                   masses=np.asarray(masses, float), areas=np.ones(n), pins=np.zeros(n) if pins is None else pins,
                   edges=np.asarray(edges, np.int64).reshape(-1, 2), bends=np.zeros((0, 2), np.int64), solid=False)
    scene = Scene(torch.tensor(gravity, dtype=D), torch.zeros(3, dtype=D),
                  None if ground is None else torch.tensor([0.0, 0.0, 1.0], dtype=D), 0.0 if ground is None else ground)
    return LatentSystem(mapping, cub, dict(ZERO, **(constants or {})), scene, k, dtype=D)


# -- energies ----------------------------------------------------------------------------------------
def test_energies_pass_gradcheck():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, dtype=D, generator=gen, requires_grad=True)
    rest = torch.randn(6, 3, dtype=D, generator=gen)
    pairs = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [0, 5]])
    length = (rest[pairs[:, 1]] - rest[pairs[:, 0]]).norm(dim=-1)
    m, w = torch.rand(6, dtype=D, generator=gen) + 0.5, torch.rand(6, dtype=D, generator=gen)
    normal = torch.tensor([0.0, 0.6, 0.8], dtype=D)
    q = torch.randn(5, dtype=D, generator=gen, requires_grad=True)
    terms = [lambda x: energies.energy(energies.spring_residual(x, pairs, length, 3.0)),
             lambda x: energies.energy(energies.pin_residual(x, rest, w, m, 7.0)),
             lambda x: energies.energy(energies.ground_residual(x + 0.3, m, normal, 0.1, 5.0)),
             lambda x: energies.gravity_energy(x, m, torch.tensor([0.0, 0.0, -9.81], dtype=D))]
    for term in terms:
        assert torch.autograd.gradcheck(term, (x,))
    assert torch.autograd.gradcheck(lambda q: energies.energy(energies.plausibility_residual(q, 0.5)), (q,))
    xdot = torch.randn(6, 3, dtype=D, generator=gen)
    # the Rayleigh force is minus the gradient of a dissipation that is quadratic in velocity
    f = energies.rayleigh_force(x.detach(), xdot, m, pairs, length, 0.3, 2.0)
    assert float((f * xdot).sum()) < 0


def test_energy_values_match_their_definitions():
    x = torch.tensor([[0.0, 0, 0], [2.0, 0, 0]], dtype=D)
    pairs = torch.tensor([[0, 1]])
    assert float(energies.energy(energies.spring_residual(x, pairs, torch.tensor([1.0], dtype=D), 4.0))) == pytest.approx(2.0)
    below = torch.tensor([[0.0, 0, -0.5]], dtype=D)
    up = torch.tensor([0.0, 0, 1], dtype=D)
    assert float(energies.energy(energies.ground_residual(below, torch.ones(1, dtype=D), up, 0.0, 8.0))) == pytest.approx(1.0)
    above = below + 1
    assert float(energies.energy(energies.ground_residual(above, torch.ones(1, dtype=D), up, 0.0, 8.0))) == 0.0


def test_wind_drag_acts_along_the_normal_on_the_relative_velocity():
    n = torch.tensor([[0.0, 1.0, 0.0]], dtype=D)
    f = energies.wind_force(torch.zeros(1, 3, dtype=D), n, torch.ones(1, dtype=D), torch.tensor([5.0, 2.0, 0], dtype=D), 1.5)
    assert torch.allclose(f, torch.tensor([[0.0, 3.0, 0.0]], dtype=D))
    moving_with_air = energies.wind_force(torch.tensor([[0.0, 2.0, 0.0]], dtype=D), n, torch.ones(1, dtype=D),
                                          torch.tensor([5.0, 2.0, 0], dtype=D), 1.5)
    assert torch.allclose(moving_with_air, torch.zeros(1, 3, dtype=D))


# -- kinematics ------------------------------------------------------------------------------------------
def curved_map(q):
    """A smooth nonlinear map R^2 → 3 points, to check derivatives."""
    a, b = q[..., 0], q[..., 1]
    pts = [torch.stack([torch.sin(a), torch.cos(b) * a, a * b], -1),
           torch.stack([a**2, torch.tanh(b), torch.exp(0.3 * a)], -1),
           torch.stack([a + b, a - b, torch.sin(a * b)], -1)]
    return torch.stack(pts, -2)


def test_coriolis_term_matches_finite_differences():
    sys_ = analytic_system(curved_map, np.zeros((3, 3)), [1.0, 2.0, 0.5], k=2)
    q, qdot = torch.tensor([0.3, -0.7], dtype=D), torch.tensor([1.1, 0.4], dtype=D)
    J, x = sys_.jacobian(q)
    eps = 1e-4
    second = (curved_map(q + eps * qdot) - 2 * curved_map(q) + curved_map(q - eps * qdot)) / eps**2
    expected = torch.einsum("nik,n,ni->k", J, sys_.masses, second)
    assert torch.allclose(sys_.coriolis(q, qdot, J), expected, rtol=1e-5, atol=1e-6)
    # forward-mode J against central differences, and the difference Jacobian against forward mode
    cols = [(curved_map(q + eps * e) - curved_map(q - eps * e)) / (2 * eps) for e in torch.eye(2, dtype=D)]
    assert torch.allclose(J, torch.stack(cols, -1), atol=1e-7)
    J_diff, _ = sys_.jacobian(q, "difference")
    assert torch.allclose(J_diff, J, atol=5e-2)
    M = sys_.mass_matrix(J)
    assert torch.allclose(M, M.T) and bool((torch.linalg.eigvalsh(M) > 0).all())


def test_residual_jacobian_matches_forward_mode():
    from torch.func import jacfwd

    gen = torch.Generator().manual_seed(3)
    pts = torch.randn(6, 3, dtype=D, generator=gen).numpy()
    cub = Cubature(points=pts, normals=np.tile([0.0, 0.0, 1.0], (6, 1)), masses=np.linspace(0.5, 1.5, 6),
                   areas=np.ones(6), pins=np.array([1.0, 0.5, 0, 0, 0, 0]), edges=knn_graph(pts, 3),
                   bends=two_hop(knn_graph(pts, 3), 6), solid=False)
    scene = Scene(torch.zeros(3, dtype=D), torch.zeros(3, dtype=D), torch.tensor([0.0, 0.0, 1.0], dtype=D), 0.2)
    constants = dict(ZERO, stiffness=3.0, bending=0.7, pin=5.0, ground=11.0)
    sys_ = LatentSystem(lambda q: q, cub, constants, scene, 1, dtype=D)
    x = torch.tensor(pts, dtype=D) + 0.1 * torch.randn(6, 3, dtype=D, generator=gen)
    J = torch.randn(6, 3, 4, dtype=D, generator=gen)
    reference = torch.einsum("rnc,nck->rk", jacfwd(sys_.residuals)(x), J)
    assert torch.allclose(sys_.residual_jacobian(x, J), reference, atol=1e-10)


# -- integrators on systems with known motion --------------------------------------------------------------
def oscillator(stiffness=4.0, mass=1.0):
    """Point 0 fixed at the origin, point 1 at (1 + q, 0, 0), a spring of rest length 1 between them."""
    def mapping(q):
        zero = torch.zeros_like(q[..., 0])
        return torch.stack([torch.stack([zero, zero, zero], -1), torch.stack([1 + q[..., 0], zero, zero], -1)], -2)
    return analytic_system(mapping, [[0, 0, 0], [1, 0, 0]], [1.0, mass], edges=[[0, 1]],
                           constants={"stiffness": stiffness})


def pendulum(length=1.0, g=9.81):
    def mapping(q):
        th = q[..., 0]
        return torch.stack([length * torch.sin(th), torch.zeros_like(th), -length * torch.cos(th)], -1)[..., None, :]
    return analytic_system(mapping, [[0, 0, -length]], [1.0], gravity=(0.0, 0.0, -g))


def run(sys_, q0, qdot0, h, steps, integrator="verlet", order=1):
    s = integrators.initial_state(sys_, torch.tensor([q0], dtype=D), torch.tensor([qdot0], dtype=D))
    qs = [float(s.q[0])]
    for _ in range(steps):
        if integrator == "verlet":
            s = integrators.verlet_step(sys_, s, h)
        else:
            s = integrators.implicit_step(sys_, s, h, 4, order=order)
        qs.append(float(s.q[0]))
    return np.array(qs), s


def test_harmonic_oscillator_follows_the_analytic_solution():
    k, m, amp, h = 4.0, 1.0, 0.1, 1e-3
    qs, _ = run(oscillator(k, m), amp, 0.0, h, 2000)
    t = np.arange(len(qs)) * h
    assert np.abs(qs - amp * np.cos(math.sqrt(k / m) * t)).max() < 1e-3 * amp * 10


def rk4_pendulum(theta0, h, steps, g=9.81, length=1.0):
    def f(y):
        return np.array([y[1], -g / length * math.sin(y[0])])
    y, out = np.array([theta0, 0.0]), [theta0]
    for _ in range(steps):
        a = f(y)
        b = f(y + h / 2 * a)
        c = f(y + h / 2 * b)
        d = f(y + h * c)
        y = y + h / 6 * (a + 2 * b + 2 * c + d)
        out.append(y[0])
    return np.array(out)


def test_pendulum_reproduces_its_nonlinear_motion_and_conserves_energy():
    sys_, h, steps = pendulum(), 2e-3, 1500  # 3 s: about two periods at a 1.2 rad amplitude
    qs, end = run(sys_, 1.2, 0.0, h, steps)
    assert np.abs(qs - rk4_pendulum(1.2, h, steps)).max() < 5e-3
    e0 = sys_.energy(torch.tensor([1.2], dtype=D), torch.tensor([0.0], dtype=D))
    e1 = sys_.energy(end.q, end.qdot)
    assert abs(e1 - e0) / abs(e0) < 1e-4


def test_implicit_integrator_is_stable_and_dissipative_at_large_steps():
    sys_ = oscillator(stiffness=400.0)  # ω = 20 rad/s: one step per 24 fps frame is far beyond explicit stability
    qs, end = run(sys_, 0.1, 0.0, 1 / 24, 200, "implicit")
    energy = [0.5 * 400 * q**2 for q in qs]
    assert np.isfinite(qs).all() and abs(qs[-1]) < 0.1 and max(energy[1:]) <= energy[0] * 1.001


def test_a_free_particle_in_polar_coordinates_moves_in_a_straight_line():
    """x(q) = (r cos θ, r sin θ, 0): without forces the Euler–Lagrange equations (with the Coriolis and
    centrifugal terms Jᵀ m H[q̇, q̇]) must give uniform straight-line motion in x."""
    def polar(q):
        r, th = q[..., 0], q[..., 1]
        return torch.stack([r * torch.cos(th), r * torch.sin(th), torch.zeros_like(r)], -1)[..., None, :]

    sys_ = analytic_system(polar, [[1, 0, 0]], [1.0], k=2)
    s = integrators.initial_state(sys_, torch.tensor([1.0, 0.0], dtype=D), torch.tensor([0.0, 1.0], dtype=D))
    for _ in range(500):
        s = integrators.verlet_step(sys_, s, 2e-3, conservative=True)
    assert torch.allclose(polar(s.q)[0], torch.tensor([1.0, 1.0, 0.0], dtype=D), atol=2e-3)


def test_bdf2_damps_far_less_than_backward_euler_and_stays_stable():
    def energy_left(order, steps=48):
        sys_ = oscillator(stiffness=40.0)  # ω ≈ 6.3 rad/s, one step per 24 fps frame
        qs, end = run(sys_, 0.1, 0.0, 1 / 24, steps, "implicit", order)
        return sys_.energy(end.q, end.qdot) / sys_.energy(torch.tensor([0.1], dtype=D), torch.tensor([0.0], dtype=D)), qs

    euler, _ = energy_left(1)
    bdf2, qs = energy_left(2)
    assert np.isfinite(qs).all() and bdf2 <= 1.0 + 1e-6
    assert bdf2 > 3 * euler  # second order: much less numerical damping over two seconds


def test_ground_contact_keeps_points_above_the_plane():
    def fall(q):  # a rigid square that can translate vertically
        base = torch.tensor([[0.0, 0, 1], [1, 0, 1], [0, 1, 1], [1, 1, 1]], dtype=D)
        return base + torch.stack([torch.zeros_like(q[..., 0])] * 2 + [q[..., 0]], -1)[..., None, :]
    sys_ = analytic_system(fall, np.zeros((4, 3)), [1, 1, 1, 1], constants={"ground": 1e4, "damping_mass": 1.0},
                           gravity=(0, 0, -9.81), ground=0.0)
    qs, end = run(sys_, 0.0, 0.0, 1 / 48, 200, "implicit")
    assert qs.min() > -1.0 - 0.02  # the points start 1 above the plane and may sink at most 2 % into it
    assert qs[-1] < -0.9  # and they did fall down to it


def test_divergence_guard_raises():
    guard = integrators.Guard(1.0, torch.zeros(3, dtype=D))
    ok = integrators.State(torch.zeros(2, dtype=D), torch.zeros(2, dtype=D), torch.zeros(4, 3, dtype=D), torch.zeros(4, 3, dtype=D))
    guard.check(ok, 1)
    for bad in (integrators.State(torch.tensor([float("nan"), 0.0], dtype=D), ok.qdot, ok.x, ok.xdot),
                integrators.State(torch.tensor([100.0, 0.0], dtype=D), ok.qdot, ok.x, ok.xdot),
                integrators.State(ok.q, ok.qdot, ok.x + 1e3, ok.xdot)):
        with pytest.raises(SimulationDiverged, match="nothing was written"):
            guard.check(bad, 7)


def test_substeps_follow_the_frame_rate():
    assert integrators.substeps(24, "implicit") == 1 and integrators.substeps(12, "implicit") == 2
    assert integrators.substeps(24, "verlet") == 10 and integrators.substeps(240, "verlet") == 1


# -- cubature and material -----------------------------------------------------------------------------------
def grid_sheet(nx=14, ny=10, width=2.0, height=1.4):
    xs, zs = np.meshgrid(np.linspace(0, width, nx), np.linspace(0, height, ny))
    v = np.stack([xs.ravel(), np.zeros(xs.size), zs.ravel()], 1)
    tris = []
    for j in range(ny - 1):
        for i in range(nx - 1):
            a = j * nx + i
            tris += [[a, a + 1, a + nx + 1], [a, a + nx + 1, a + nx]]
    return v, np.array(tris)


def test_cubature_masses_pins_and_graph():
    v, t = grid_sheet()
    pins = (v[:, 0] < 1e-6).astype(float)  # the left edge
    cub = from_mesh(v, t, pins, 120, np.random.default_rng(0))
    assert len(cub.points) == 120 and not cub.solid
    assert cub.total_mass == pytest.approx(2.0 * 1.4, rel=1e-6)  # density 1 per unit area
    assert (cub.pins[cub.points[:, 0] < 1e-6] == 1).any() and (cub.pins[cub.points[:, 0] > 0.5] == 0).all()
    assert len(cub.edges) >= 120 and len(cub.bends) > 0
    assert not set(map(tuple, cub.edges.tolist())) & set(map(tuple, cub.bends.tolist()))
    cloud = from_points(v, pins, 60, np.random.default_rng(0))
    assert len(cloud.points) == 60 and np.allclose(np.abs(cloud.normals[:, 1]), 1.0, atol=1e-6)
    assert knn_graph(np.zeros((1, 3)), 4).shape == (0, 2) and two_hop(np.array([[0, 1], [1, 2]]), 3).tolist() == [[0, 2]]


def test_material_multipliers_overrides_and_validation():
    m = Material().with_multipliers(stiffness=2.0, damping=0.5)
    assert m.stiffness == 2 * Material().stiffness and m.damping_mass == 0.5 * Material().damping_mass
    assert Material().updated({"drag": 3}).drag == 3.0
    with pytest.raises(InputError, match="unknown material keys"):
        Material().updated({"stifness": 1})
    with pytest.raises(InputError):
        Material(stiffness=-1)


# -- the engine on the shipped model ----------------------------------------------------------------------------
needs_model = pytest.mark.skipif(not (DEFAULT_CHECKPOINT_DIR / "config.json").exists(), reason="no shipped checkpoint")


def simulate_sheet(frames=16, **options):
    v, t = grid_sheet()
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)  # the top edge
    opts = Options(frames=frames, variation=0.0, **options)
    sim = Simulation(v, t, pins, opts, str(DEFAULT_CHECKPOINT_DIR))
    return v, pins, sim.run(), sim


@needs_model
def test_engine_streams_frames_and_pins_hold():
    v, pins, out, sim = simulate_sheet(gravity=(0, 0, -9.81), wind=(0, 4, 0))
    assert out.shape == (16, len(v), 3) and np.isfinite(out).all()
    assert np.array_equal(out[0], v)  # frame 0 is the input snapshot exactly (q0 = 0 decodes to it)
    diag = np.linalg.norm(v.max(0) - v.min(0))
    pinned_motion = np.linalg.norm(out[:, pins > 0] - v[pins > 0], axis=-1).max()
    free_motion = np.linalg.norm(out[:, pins == 0] - v[pins == 0], axis=-1).max()
    assert pinned_motion < 0.03 * diag and free_motion > 3 * pinned_motion
    assert len(sim.energy) == 16 and sim.timing["dynamics_s"] > 0


@needs_model
@pytest.mark.parametrize("axis", [1, -1])
def test_wind_pushes_along_its_direction(axis):
    v, pins, out, _ = simulate_sheet(gravity=(0, 0, 0), wind=(0, 6.0 * axis, 0))
    shift = (out[-1, pins == 0] - v[pins == 0]).mean(0)
    assert shift[1] * axis > 0 and abs(shift[1]) > abs(shift[0])


@needs_model
def test_gravity_pulls_along_its_direction_in_local_space():
    v, pins, out, _ = simulate_sheet(gravity=(0, -9.81, 0))  # "down" is -y in this object's local frame
    shift = (out[-1, pins == 0] - v[pins == 0]).mean(0)
    assert shift[1] < 0 and abs(shift[1]) > abs(shift[0])


@needs_model
def test_seeds_draw_different_motions_deterministically():
    v, t = grid_sheet(8, 6)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    runs = [Simulation(v, t, pins, Options(frames=6, seed=s, gravity=(0, 0, 0)), str(DEFAULT_CHECKPOINT_DIR)).run()
            for s in (1, 1, 2)]
    assert np.array_equal(runs[0], runs[1]) and not np.allclose(runs[0], runs[2])


@needs_model
def test_point_clouds_simulate_through_a_knn_graph():
    v, _ = grid_sheet(10, 8)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    out = Simulation(v, None, pins, Options(frames=6, variation=0.0), str(DEFAULT_CHECKPOINT_DIR)).run()
    assert out.shape == (6, len(v), 3) and np.isfinite(out).all() and not np.allclose(out[-1], v)


@needs_model
def test_poke_and_initial_velocity_move_the_shape_that_way():
    v, t = grid_sheet(10, 8)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    corner = int(np.argmin(v[:, 2] - v[:, 0]))  # bottom right
    opts = Options(frames=4, variation=0.0, gravity=(0, 0, 0), damping=0.0, poke={"vertices": [corner], "velocity": [0, 3.0, 0]})
    out = Simulation(v, t, pins, opts, str(DEFAULT_CHECKPOINT_DIR)).run()
    assert out[2, corner, 1] > v[corner, 1]


@needs_model
@pytest.mark.parametrize("poke", [{"vertices": [10_000], "velocity": [0, 1, 0]}, {"vertices": [0]},
                                  {"vertices": [0], "velocity": [0, float("nan"), 0]}])
def test_a_bad_poke_is_an_input_error(poke):
    v, t = grid_sheet(6, 5)
    with pytest.raises(InputError, match="poke"):
        Simulation(v, t, None, Options(frames=2, poke=poke), str(DEFAULT_CHECKPOINT_DIR))


def test_bad_pin_files_are_input_errors(tmp_path):
    from neurok_blender.runtime import api

    np.save(tmp_path / "short.npy", np.ones(3))
    with pytest.raises(InputError, match="4 finite weights"):
        api.load_pins(str(tmp_path / "short.npy"), 4)
    (tmp_path / "words.txt").write_text("left edge\n")
    with pytest.raises(InputError, match="vertex indices"):
        api.load_pins(str(tmp_path / "words.txt"), 4)
    with pytest.raises(InputError, match="no pins file"):
        api.load_pins(str(tmp_path / "missing.txt"), 4)


def test_options_reject_bad_extras_and_values():
    from neurok_blender.bridge.request import SimulationRequest

    with pytest.raises(InputError, match="unknown request extras"):
        Options.from_request(SimulationRequest(output_path="x.pc2", extras={"integrater": "verlet"}))
    with pytest.raises(InputError, match="integrator"):
        Options(integrator="rk4")
    assert Options.from_request(SimulationRequest(output_path="x.pc2", extras={"ground": 0.5})).ground == 0.5


# -- the command line ---------------------------------------------------------------------------------------------
def run_cli(*args, cwd):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    return subprocess.run([sys.executable, "-m", "neurok_blender.runtime", "simulate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))


@needs_model
def test_cli_simulates_a_mesh_file_into_npz_and_pc2(tmp_path):
    import trimesh

    from neurok_blender.pc2 import read_pc2

    v, t = grid_sheet(9, 7)
    order = np.random.default_rng(0).permutation(len(v))  # a vertex order trimesh must not change
    inverse = np.argsort(order)
    trimesh.Trimesh(v[order], inverse[t], process=False).export(tmp_path / "sheet.obj")
    top = np.flatnonzero(v[order][:, 2] > 1.4 - 1e-6)
    (tmp_path / "pins.txt").write_text("# the top edge\n" + "\n".join(map(str, top)) + "\n")
    done = run_cli("sheet.obj", "--frames", "5", "--fps", "24", "--wind", "0", "3", "0", "--pins", "pins.txt",
                   "--ground", "-1", "--seed", "2", "--device", "cpu", "--out", "out.npz", "--energy", "e.json",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    frames = np.load(tmp_path / "out.npz")["frames"]
    assert frames.shape == (5, len(v), 3) and np.allclose(frames[0], v[order], atol=1e-6)
    assert np.abs(frames[-1][top] - v[order][top]).max() < 0.05  # pins hold, in the file's own vertex order
    weights = np.zeros(len(v))
    weights[top] = 1.0
    np.save(tmp_path / "pins.npy", weights)
    done = run_cli("sheet.obj", "--frames", "3", "--pins", "pins.npy", "--out", "out.pc2", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pc2, start, _ = read_pc2(str(tmp_path / "out.pc2"))
    assert pc2.shape == (3, len(v), 3) and start == 1


def test_cli_errors_are_one_clear_line_and_write_nothing(tmp_path):
    done = run_cli("missing.obj", "--out", "x.npz", cwd=tmp_path)
    assert done.returncode == 2 and "no mesh file" in done.stderr
    (tmp_path / "a.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    done = run_cli("a.obj", "--out", "x.abc", cwd=tmp_path)
    assert done.returncode == 2 and ".pc2 or .npz" in done.stderr
    (tmp_path / "pins.txt").write_text("7\n")
    done = run_cli("a.obj", "--pins", "pins.txt", "--out", "x.npz", cwd=tmp_path)
    assert done.returncode == 2 and "outside" in done.stderr
    assert not list(tmp_path.glob("x.*"))


@needs_model
def test_python_api_simulates_and_streams():
    from neurok_blender.runtime import api

    v, t = grid_sheet(8, 6)
    pins = (v[:, 2] > 1.4 - 1e-6).astype(float)
    result = api.simulate(v, t, pins=pins, frames=4, wind=(0, 2, 0), device="cpu", seed=1)
    assert result.frames.shape == (4, len(v), 3) and len(result.energy) == 4 and result.device == "cpu"
    streamed = list(api.stream(v, t, pins=pins, frames=4, wind=(0, 2, 0), device="cpu", seed=1))
    np.testing.assert_array_equal(np.stack(streamed), result.frames)  # deterministic, frame by frame
    with pytest.raises(TypeError):
        api.simulate(v, t, frames=2, wnid=(1, 0, 0))  # a misspelt option is an error, not ignored
