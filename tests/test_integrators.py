"""Integrators on systems with known motion: oscillator, pendulum, polar free particle, ground, guard."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.bridge.request import Solver  # noqa: E402
from neurok_blender.errors import SimulationDiverged  # noqa: E402
from neurok_blender.runtime.dynamics import integrators  # noqa: E402
from neurok_blender.runtime.research import Research  # noqa: E402
from tests.support.analytic_systems import D, analytic_system, oscillator, pendulum, run  # noqa: E402


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
    guard = integrators.Guard(1.0, latent=2)
    ok = integrators.State(torch.zeros(2, dtype=D), torch.zeros(2, dtype=D), torch.zeros(4, 3, dtype=D), torch.zeros(4, 3, dtype=D))
    guard.check(ok, 1)
    for bad in (integrators.State(torch.tensor([float("nan"), 0.0], dtype=D), ok.qdot, ok.x, ok.xdot),
                integrators.State(torch.tensor([100.0, 0.0], dtype=D), ok.qdot, ok.x, ok.xdot),
                integrators.State(ok.q, ok.qdot, ok.x + torch.linspace(0, 1e3, 4, dtype=D)[:, None], ok.xdot)):
        with pytest.raises(SimulationDiverged, match="nothing was written"):
            guard.check(bad, 7)
    far = integrators.State(torch.tensor([0.0, 0.0, 500.0], dtype=D), ok.qdot, ok.x + 1e3, ok.xdot)
    guard.check(far, 8)  # a body far away (a long fall, a large rigid coordinate) has not diverged


def test_substeps_follow_the_frame_rate():
    implicit, verlet = integrators.Implicit(Solver()), integrators.Verlet()
    assert integrators.substeps(24, implicit) == 1 and integrators.substeps(12, implicit) == 2
    assert integrators.substeps(24, verlet) == 10 and integrators.substeps(240, verlet) == 1


def test_a_reused_decoder_jacobian_costs_fewer_jacobians_and_follows_the_same_motion(monkeypatch):
    """An implicit step with refresh 4 evaluates the mapping's Jacobian on one step in four (more where a step stalls)
    and, since the objective is always exact, lands close to where a fresh Jacobian every step does (a large,
    fast swing: the angle moves up to 0.1 rad per step, so the stale Jacobian slows convergence a little)."""
    from neurok_blender.runtime.dynamics import system as system_mod

    calls = []
    original = system_mod.jacobian
    monkeypatch.setattr(system_mod, "jacobian", lambda *a, **kw: calls.append(1) or original(*a, **kw))
    trajectories = {}
    for refresh in (1, 4):
        sys_ = pendulum()
        s = integrators.initial_state(sys_, torch.tensor([1.0], dtype=D), torch.tensor([0.0], dtype=D))
        stepper = integrators.Implicit(Solver(iterations=4, order=1, refresh=refresh),
                                       Research(jacobian="forward", latent="exact"))
        calls.clear()
        qs = []
        for _ in range(48):
            s = stepper.step(sys_, s, 1 / 24)
            qs.append(float(s.q[0]))
        trajectories[refresh] = (np.array(qs), len(calls))
    (fresh, fresh_calls), (reused, reused_calls) = trajectories[1], trajectories[4]
    # one per step, plus a fresh one where a secant (Broyden) iteration failed after a stalled line search
    assert 48 <= fresh_calls <= 52 and reused_calls <= 24
    assert np.abs(fresh).max() > 0.5  # it swings
    assert np.abs(reused - fresh).max() < 0.03 * np.abs(fresh).max()


def test_explicit_verlet_keeps_only_the_modes_its_step_can_follow():
    """Two masses on springs, one soft and one 10⁵ times stiffer: truncate_modes(1/h) drops the
    stiff mode and keeps the soft one, with M = I still, so Verlet at that h conserves energy."""
    def mapping(q):
        zero = torch.zeros_like(q[..., 0])
        return torch.stack([torch.stack([zero, zero, zero], -1), torch.stack([1 + q[..., 0], zero, zero], -1),
                            torch.stack([zero, 1 + q[..., 1], zero], -1)], -2)

    sys_ = analytic_system(mapping, [[0, 0, 0], [1, 0, 0], [0, 1, 0]], [1.0, 1.0, 1.0], edges=[[0, 1], [0, 2]],
                           constants={"stiffness": 4.0}, k=2, orthonormal=True)
    stiff = [1.0, 1e5]  # per spring: ω ≈ 2 and ≈ 630 rad/s, against 1/h = 240

    def residuals(x):
        lengths = (x[sys_.edges[:, 1]] - x[sys_.edges[:, 0]]).norm(dim=-1) - 1
        return torch.sqrt(torch.tensor(stiff, dtype=D)) * lengths * 2

    sys_.residuals = residuals
    sys_.residual_jacobian = lambda x, J: torch.stack([
        torch.sqrt(torch.tensor(stiff[e], dtype=D)) * 2 * torch.einsum(
            "a,ak->k", (x[sys_.edges[e, 1]] - x[sys_.edges[e, 0]]) / (x[sys_.edges[e, 1]] - x[sys_.edges[e, 0]]).norm(),
            J[sys_.edges[e, 1]] - J[sys_.edges[e, 0]]) for e in range(2)])
    h = 1 / 240
    assert sys_.truncate_modes(1 / h) == 1 and sys_.k == 1
    J, _ = sys_.jacobian(torch.zeros(1, dtype=D))
    assert torch.allclose(torch.einsum("nik,n,nil->kl", J, sys_.masses, J), torch.eye(1, dtype=D))
    assert abs(float(sys_.full(torch.ones(1, dtype=D))[1])) < 1e-9  # the stiff spring's coordinate is gone
    s = integrators.initial_state(sys_, torch.tensor([0.1], dtype=D), torch.zeros(1, dtype=D))
    e0 = sys_.energy(s.q, s.qdot)
    for _ in range(480):
        s = integrators.verlet_step(sys_, s, h)
    assert abs(sys_.energy(s.q, s.qdot) - e0) < 1e-3 * abs(e0)
