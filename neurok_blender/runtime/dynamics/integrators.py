"""Time integrators for the latent system, and the divergence guard. No bpy use.

- ``verlet``: velocity Verlet on the Euler–Lagrange equations (symplectic for a constant mass matrix,
  time-reversible, second order); use it undamped to check energy conservation.
- ``implicit``: backward Euler as incremental-potential minimization over q, by Gauss–Newton with a
  backtracking line search: stable for stiff pins and one step per frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...bridge.request import Solver
from ...errors import SimulationDiverged
from ..research import PRODUCT, Research
from . import energies
from .system import JacobianCache, LatentSystem

FULL_ITERATIONS = 2  # Gauss–Newton iterations over all coordinates per implicit step; the rest: handles only
LATER_LATENT_TRIES = 2  # line-search tries of the full iterations after the first (each one a decode)


@dataclass
class State:
    q: torch.Tensor  # (k,)
    qdot: torch.Tensor  # (k,)
    x: torch.Tensor  # (N, 3) cubature positions
    xdot: torch.Tensor  # (N, 3) cubature velocities
    t: float = 0.0
    previous: State | None = None  # the state one step back (BDF2 needs it)


def initial_state(system: LatentSystem, q0: torch.Tensor, qdot0: torch.Tensor) -> State:
    J, x = system.jacobian(q0)
    return State(q0, qdot0, x, torch.einsum("nik,k->ni", J, qdot0))


class Verlet:
    """Velocity Verlet; ``conservative`` drops wind and damping (for energy checks)."""

    max_step = 1 / 240  # seconds; substeps per frame follow from the fps

    def __init__(self, conservative: bool = False) -> None:
        self.conservative = conservative

    def step(self, system: LatentSystem, s: State, h: float) -> State:
        with torch.no_grad():
            return verlet_step(system, s, h, self.conservative)


class Implicit:
    """Backward Euler or BDF2 as incremental-potential minimization (see ``implicit_step``), its settings
    those of the one ``Solver`` (and the research switches, the product's unless an ablation asks). It carries
    the Levenberg–Marquardt damping and the latent trust penalty from step to step, adapted as it goes."""

    max_step = 1 / 24

    def __init__(self, solver: Solver, research: Research = PRODUCT) -> None:
        self.iterations, self.order = solver.iterations, solver.order
        self.jacobian, self.latent, self.chord_check = research.jacobian, research.latent, research.chord_check
        self.trust = TRUST[1]  # the linearized step's latent trust penalty, adapted across steps
        self.lm = 1e-2
        self.cache = JacobianCache(solver.refresh)  # the latent Jacobian, reused for ``refresh`` steps

    def step(self, system: LatentSystem, s: State, h: float) -> State:
        step = linearized_step if self.latent == "linearized" else implicit_step
        return step(system, s, h, self)


def from_solver(solver: Solver, research: Research = PRODUCT) -> Verlet | Implicit:
    if solver.integrator == "verlet":
        return Verlet()
    return Implicit(solver, research)


def substeps(fps: float, integrator: Verlet | Implicit) -> int:
    return max(1, math.ceil((1.0 / fps) / integrator.max_step - 1e-9))


def verlet_step(system: LatentSystem, s: State, h: float, conservative: bool = False) -> State:
    a0 = system.acceleration(s.q, s.qdot, s.t, conservative)
    half = s.qdot + 0.5 * h * a0
    q1 = s.q + h * half
    a1 = system.acceleration(q1, half, s.t + h, conservative)
    qdot1 = half + 0.5 * h * a1
    J, x1 = system.jacobian(q1)
    return State(q1, qdot1, x1, torch.einsum("nik,k->ni", J, qdot1), s.t + h)


@dataclass
class IncrementalPotential:
    """One implicit step's objective over cubature positions x and coordinates q (see ``implicit_step``):
    ½‖residual(x)‖² + linear · x + ½‖q_residual(q)‖², with ``residual_jacobian(x, J)`` the residual's
    derivative along the position directions J (N, 3, k)."""

    residual: Callable[[torch.Tensor], torch.Tensor]
    residual_jacobian: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    linear: torch.Tensor  # (N, 3): the gradient of gravity's energy minus the external force's work
    q_residual: Callable[[torch.Tensor], torch.Tensor]
    bdf2: bool
    # the residual's rows split: the first ones linear in x (their derivative along J does not depend on x),
    # then the rest; residual_jacobian(x, J) = cat(fixed_jacobian(J), varying_jacobian(x, J))
    fixed_jacobian: Callable[[torch.Tensor], torch.Tensor]
    varying_jacobian: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    free: bool = False  # nothing holds the body (no pins, no contact): its solves go to FREE_TOLERANCE

    def objective(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return self._value(x, self.residual(x), self.q_residual(q))

    def evaluate(self, x: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(residual, q residual, objective) at (x, q): the parts a Gauss–Newton iteration goes on with."""
        r, rq = self.residual(x), self.q_residual(q)
        return r, rq, float(self._value(x, r, rq))

    def _value(self, x: torch.Tensor, r: torch.Tensor, rq: torch.Tensor) -> torch.Tensor:
        return energies.energy(r) + (self.linear * x).sum() + energies.energy(rq)


def _inertial_target(system: LatentSystem, s: State, h: float, order: int) -> tuple[bool, bool, torch.Tensor, float]:
    """(BDF2 or not, free points touching, the inertial target x̃, ĥ) of the step from s. BDF2 restarts as
    backward Euler while free points touch: its low damping makes the stiff contact penalty ring (a sheet landing
    on a ball flicked its corners above the height it fell from)."""
    may_bdf2 = order == 2 and s.previous is not None
    touching = system.touching(s.x) if may_bdf2 or not system.pinned else False  # a free body's tolerance reads it
    bdf2 = may_bdf2 and not touching
    if bdf2:
        p = s.previous
        return True, touching, (4 * s.x - p.x) / 3 + (2 * h / 3) * (4 * s.xdot - p.xdot) / 3, 2 * h / 3
    return False, touching, s.x + h * s.xdot, h


def incremental_potential(system: LatentSystem, s: State, h: float, order: int = 1) -> IncrementalPotential:
    """argmin_q  1/(2ĥ²)‖x(q) − x̃‖²_m + V(x(q), q) − f·x(q) + damping: an incremental potential.

    ``order`` 1 is backward Euler (x̃ = x_n + h ẋ_n, ĥ = h), strongly dissipative at large steps (a jelly's
    wobble is gone in a few frames); ``order`` 2 (Simulate's default, once a previous step exists and while no
    free point touches the ground or a collider) is BDF2 (x̃ = (4x_n − x_{n−1})/3 +
    (2h/3)(4ẋ_n − ẋ_{n−1})/3, ĥ = 2h/3), second order and far less numerically damped, still stable."""
    c, m = system.c, system.masses
    system.set_time(s.t + h)  # pin targets and colliders where the animation has them at the step's end
    bdf2, touching, target, h_eff = _inertial_target(system, s, h, order)
    system.begin_step(s.q, h_eff)
    force = system.external_force(s.q, s.xdot, s.t + h, s.x)
    friction = system.friction(s.x, s.xdot, h)
    strain_n = system.edge_strain(s.x)
    e_count = max(len(system.edges), 1)
    inertia_w = (m / h_eff**2).sqrt()[:, None]
    damp_w = (c.damping_mass * m / h_eff).sqrt()[:, None]
    # A free body's mass damping acts on its deformation only, so it falls and spins like a rigid body; a
    # pinned one keeps it on everything (the air around a swinging cape).
    deform = rigid_complement(s.x, m) if system.free_rigid_motion and not system.pinned else (lambda d: d)
    beta_w = (c.damping_stiffness / (h_eff * e_count)) ** 0.5

    # the rows are ordered fixed, then varying: the fixed ones (inertia, mass damping, pins) are linear in x, so
    # their derivative along a chord solve's constant J is constant and is taken once per solve
    def fixed_residual(x: torch.Tensor) -> torch.Tensor:
        parts = [(inertia_w * (x - target)).reshape(-1)]
        if c.damping_mass:
            parts.append((damp_w * deform(x - s.x)).reshape(-1))
        parts.append(system.linear_residuals(x))
        return torch.cat(parts)

    def fixed_jacobian(J: torch.Tensor) -> torch.Tensor:
        k = J.shape[-1]
        parts = [(inertia_w[:, :, None] * J).reshape(-1, k)]
        if c.damping_mass:
            parts.append((damp_w[:, :, None] * deform(J.permute(2, 0, 1)).permute(1, 2, 0)).reshape(-1, k))
        parts.append(system.linear_residual_jacobian(J))
        return torch.cat(parts)

    def varying_residual(x: torch.Tensor) -> torch.Tensor:
        parts = [system.nonlinear_residuals(x)]
        if c.damping_stiffness:
            parts.append(beta_w * (system.edge_strain(x) - strain_n))
        if friction is not None:
            parts.append(friction[0](x))
        return torch.cat(parts)

    def varying_jacobian(x: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        parts = [system.nonlinear_residual_jacobian(x, J)]
        if c.damping_stiffness:
            parts.append(beta_w * system.edge_strain_jvp(x, J))
        if friction is not None:
            parts.append(friction[1](J))
        return torch.cat(parts)

    linear = -(m[:, None] * system.scene.gravity) - force  # ∂/∂x of gravity_energy(x) − f·x
    return IncrementalPotential(lambda x: torch.cat([fixed_residual(x), varying_residual(x)]),
                                lambda x, J: torch.cat([fixed_jacobian(J), varying_jacobian(x, J)]),
                                linear, system.q_residual, bdf2, fixed_jacobian, varying_jacobian,
                                free=not system.pinned and not touching)


def implicit_step(system: LatentSystem, s: State, h: float, state: Implicit) -> State:
    """The step of ``incremental_potential``, with the decoder exact at every evaluation ("latent": "exact").
    Gauss–Newton on the stacked residuals with a backtracking line search. The decoder's latent Jacobian
    (``jacobian``: 'difference' or 'forward') is decoded afresh every ``refresh`` steps and reused in between
    (``JacobianCache``; the handle columns are exact every time); later iterations of a step update J with
    Broyden's rank-one secant from the accepted step, which costs no extra decoding."""
    potential = incremental_potential(system, s, h, state.order)
    bdf2, objective, jacobian = potential.bdf2, potential.objective, state.jacobian

    # start from the better of "keep going" and "stay": the decoder is nonlinear, so q + h q̇ can overshoot
    q = s.q + h * s.qdot
    with torch.no_grad():
        if float(objective(s.x, s.q)) < float(objective(system.positions(q), q)):
            q = s.q
    J, x = system.jacobian(q, jacobian, reuse=state.cache)
    first_slope, secant = 0.0, False  # secant: J carries Broyden updates since its last linearization
    for it in range(state.iterations):
        grad, step, value = _gauss_newton_direction(system, potential, state, q, x, J, it)
        slope, current = float(grad @ step), float(value.detach())
        if it == 0:
            first_slope = slope
        if it and -slope <= 1e-6 * -first_slope:
            break  # converged: the predicted decrease is a millionth of the first iteration's
        # a later full iteration's direction comes from a secant-updated J: when its first halvings fail it is a
        # poor direction, and each try costs a decode, so it gets few before the handle-only iterations go on
        limited = 0 < it < FULL_ITERATIONS
        accepted, tries, q_try, x_try = _backtrack(system, objective, q, step, current, slope,
                                                   LATER_LATENT_TRIES if limited else 8)
        if accepted or not limited:  # a cut-short secant search says nothing about the damping or the cache
            state.lm = max(state.lm / 3, 1e-4) if accepted and tries == 0 else min(state.lm * 3, 1e2)
            if (not accepted and it == 0) or tries > 1:
                state.cache.invalidate()  # a stale Jacobian may be why: the next step decodes a fresh one
        if not accepted and secant:
            # Broyden's updates blur the exact handle columns (stiff pins make that fatal): relinearize at q
            # with the step's latent columns (no decode) and go on, instead of stopping short
            J, x = system.jacobian(q, jacobian, reuse=state.cache, relinearize=True)
            secant = False
            continue
        if not accepted:
            break  # no decrease along the Gauss–Newton direction: converged as far as it goes
        dq, dx = q_try - q, x_try - x
        q, x = q_try, x_try
        if it + 1 < state.iterations:  # Broyden: J ← J + (Δx − J Δq) Δqᵀ / ‖Δq‖²
            denom = float(dq @ dq)
            if denom > 0:
                J = J + torch.einsum("ni,k->nik", dx - torch.einsum("nik,k->ni", J, dq), dq) / denom
                secant = True
    return finish(s, q, x, h, bdf2)


def _gauss_newton_direction(system: LatentSystem, potential: IncrementalPotential, state: Implicit, q: torch.Tensor,
                            x: torch.Tensor, J: torch.Tensor, it: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(gradient, Gauss–Newton step, objective) of an exact implicit step's iteration ``it`` at (q, x) along J."""
    with torch.enable_grad():
        xr, qr = x.detach().requires_grad_(True), q.detach().requires_grad_(True)
        value = potential.objective(xr, qr)
        gx, gq = torch.autograd.grad(value, (xr, qr))
    grad = torch.einsum("nik,ni->k", J, gx) + gq
    JR = potential.residual_jacobian(x, J)  # (R, k)
    JQ = system.q_residual_jacobian(q)  # (R_q, k)
    hess = JR.T @ JR + JQ.T @ JQ
    # Levenberg–Marquardt damping, adapted across steps, keeps most steps inside the line search's first try
    hess = hess + (state.lm * hess.diagonal() + 1e-9 * (hess.diagonal().mean() + 1e-12)).diag()
    if it >= FULL_ITERATIONS and system.k_latent_coords < system.k:
        # later iterations move the handle coordinates only: their positions need no decoder pass,
        # so a stiff material's strain converges at almost no cost
        lat = system.k_latent_coords
        step = torch.zeros_like(grad)
        step[lat:] = -torch.linalg.solve(hess[lat:, lat:], grad[lat:])
    else:
        step = -torch.linalg.solve(hess, grad)
    return grad, step, value


def _backtrack(system: LatentSystem, objective, q: torch.Tensor, step: torch.Tensor, current: float, slope: float,
               budget: int) -> tuple[bool, int, torch.Tensor, torch.Tensor]:
    """Armijo backtracking along ``step`` with at most ``budget`` tries, each an exact decode:
    (accepted, the last try's index, its q and x)."""
    alpha, tries = 1.0, 0
    for tries in range(budget):  # noqa: B007 (read after the loop)
        q_try = q + alpha * step
        x_try = system.positions(q_try)
        if float(objective(x_try, q_try)) <= current + 1e-4 * alpha * slope:
            return True, tries, q_try, x_try
        alpha *= 0.5
    return False, tries, q_try, x_try


def finish(s: State, q: torch.Tensor, x: torch.Tensor, h: float, bdf2: bool) -> State:
    """The state after a step from s to (q, x), its velocities by the step's own difference formula."""
    here = State(s.q, s.qdot, s.x, s.xdot, s.t)  # history one step deep only
    if bdf2:
        p = s.previous
        return State(q, (3 * q - 4 * s.q + p.q) / (2 * h), x, (3 * x - 4 * s.x + p.x) / (2 * h), s.t + h, here)
    return State(q, (q - s.q) / h, x, (x - s.x) / h, s.t + h, here)


RELINEARIZE_MISS = 2.0  # the linearized model missed the decode by twice the latent motion: refresh J̄ next step
# a model solve stops when its predicted decrease is this share of its first's; a free body's first decrease is
# mostly its fall, so it converges further (docs/decisions.md#model-tolerance)
MODEL_TOLERANCE = 1e-3
FREE_TOLERANCE = 1e-4
SETTLED_MISS = 0.2  # an accepted latent step whose model missed its decode by less than this share is final
TRUST = (1e-3, 1.0, 1e3)  # the latent trust penalty λ (in units of the inertia 1/ĥ²): least, first, most


def linearized_step(system: LatentSystem, s: State, h: float, state: Implicit) -> State:
    """The step of ``incremental_potential`` solved on ``LatentSystem.linearization`` ("latent":
    "linearized", Simulate's default): the handles exact, the latent decode replaced by its first-order model
    at the step's start, so a Gauss–Newton iteration or a line-search try is a few small products instead of
    a decoder pass. A trust region keeps the latent where the model holds: the model's solve carries a
    penalty ½ λ/ĥ² ‖Δq_latent‖², the solution is decoded once and accepted when the exact objective falls by
    at least a quarter of what the model predicted (λ adapts across steps from that ratio); then — unless
    the model missed that decode by under ``SETTLED_MISS`` of the latent motion, when the step is final — or
    on rejection at the start, the handles are solved again with the latent held (exact: the model is exact
    where the latent has not moved). So a step costs one decode — two with the re-anchoring at an accepted
    point — and x is always an exact decode's. The model's miss goes back into the cached latent Jacobian (a
    secant update); a large miss refreshes it next step. Gradients are written out (Jᵀ of the residuals)."""
    potential = incremental_potential(system, s, h, state.order)
    iterations = state.iterations
    h_eff = 2 * h / 3 if potential.bdf2 else h
    lat = system.k_latent_coords if system.k_latent_coords < system.k else system.k
    model = system.linearization(s.q, state.jacobian, state.cache)
    q = predictor(s, h, potential.bdf2)  # the better of "keep going" and "stay"
    with torch.no_grad():
        anchor = potential.evaluate(s.x, s.q)
        ahead = potential.evaluate(model.positions(q), q)
    start = ahead
    if anchor[2] < ahead[2]:
        q, start = s.q, anchor
    anchor_value = anchor[2]
    mu = state.trust / h_eff**2
    q_model, model_value = _model_solve(potential, system, model, q, s.q, lat, mu, iterations, state, start,
                                        1 / h_eff**2)
    start = None
    if lat and not torch.equal(q_model[:lat], s.q[:lat]):
        predicted = anchor_value - model_value
        x_model = system.positions(q_model)  # the step's exact decode
        exact = potential.evaluate(x_model, q_model)
        actual = anchor_value - exact[2]
        miss = model.correct(q_model, model.latent_positions(q_model))
        if miss > RELINEARIZE_MISS:
            state.cache.invalidate()
        ratio = actual / predicted if predicted > 0 else (1.0 if actual >= 0 else -1.0)
        state.trust = min(state.trust * 4, TRUST[2]) if ratio < 0.25 else \
            max(state.trust / 2, TRUST[0]) if ratio > 0.75 else state.trust
        if ratio >= 0.25:
            q, x = q_model, x_model
            if miss < SETTLED_MISS:
                return finish(s, q, x, h, potential.bdf2)  # the model held: its handles are already the solution's
            model, start = model.moved(q), exact  # anchored at q, the model is exact there
        else:
            q = torch.cat([s.q[:lat], q_model[lat:]])  # the latent stays; the handles start from the model's
    else:
        q = q_model
    q, _ = _model_solve(potential, system, model, q, q, lat, float("inf"), iterations, state, start,
                        1 / h_eff**2)  # latent held
    x = model.positions(q)
    return finish(s, q, x, h, potential.bdf2)


def predictor(s: State, h: float, bdf2: bool) -> torch.Tensor:
    """Where the step's inertia points in q: the coordinates' own counterpart of the potential's target x̃
    (exactly x̃ where x is linear in q, as for the handles). Under BDF2, q_n + h q̇_n is not that target, and a
    solve started there first spends its work, and its tolerance, on the gap between the two predictors."""
    if not bdf2:
        return s.q + h * s.qdot
    p = s.previous
    return (4 * s.q - p.q) / 3 + (2 * h / 3) * (4 * s.qdot - p.qdot) / 3


def _model_solve(potential: IncrementalPotential, system: LatentSystem, model, q: torch.Tensor, anchor: torch.Tensor,
                 lat: int, mu: float, iterations: int, state: Implicit,
                 start: tuple[torch.Tensor, torch.Tensor, float] | None = None,
                 inertia: float = 1.0) -> tuple[torch.Tensor, float]:
    """Gauss–Newton with backtracking on the model's objective plus ½ mu ‖(q − anchor)[:lat]‖²; mu = inf
    holds the latent coordinates (the first ``lat``) where they are. The model's Jacobian is taken once, at
    the start (a chord method: exact where the latent is held, whose positions are then linear in q; the
    objective is always the model's own), and the residuals of an accepted try are those of the next
    iteration. ``start``: ``potential.evaluate`` at q on the model, when the caller has it. Returns q and the
    model's objective there (without the penalty). ``inertia``: 1/ĥ², the scale of a jointed assembly's damping."""
    held = mu == float("inf")
    tolerance = FREE_TOLERANCE if potential.free else MODEL_TOLERANCE
    # no Levenberg–Marquardt damping on a free body: damping by the Hessian's diagonal is not rotation-invariant
    # and stops its fall and spin short (docs/decisions.md#free-body-damping)
    damping = 0.0 if potential.free else state.lm
    # a jointed assembly is damped in the kinetic metric (λ/ĥ²) JᵀMJ, which no rigid turn of a piece escapes
    # (docs/decisions.md#joint-damping)
    if held and lat >= len(q):
        return q, (start[2] if start is not None else float("nan"))  # only a held solve gets here: unread

    def penalty(qq: torch.Tensor) -> float:
        return 0.0 if held or not lat else 0.5 * mu * float(((qq - anchor)[:lat] ** 2).sum())

    def evaluate(qq: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        r, rq, value = potential.evaluate(x, qq)
        return r, rq, value + penalty(qq)

    J, x = model.jacobian(q)
    if held and lat:
        J = J[..., lat:]
    metric = inertia * torch.einsum("nik,n,nil->kl", J, system.masses, J) if damping and system.jointed else None
    r, rq, current = evaluate(q, x) if start is None else (start[0], start[1], start[2] + penalty(q))
    gradient, fixed_hess = _chord_gradient(potential, J, anchor, lat, None if held else mu)

    for it in range(iterations):
        JV, JQ = potential.varying_jacobian(x, J), system.q_residual_jacobian(q)
        if held and lat:
            JQ = JQ[:, lat:]
        grad = gradient(JV, JQ, r, rq, q)
        hess = _damped(fixed_hess + JV.T @ JV + JQ.T @ JQ, damping, metric, None if held else mu, lat)
        factor = torch.linalg.lu_factor(hess)
        step = -torch.linalg.lu_solve(*factor, grad[:, None])[:, 0]
        slope = float(grad @ step)  # over the coordinates that move
        if held and lat:
            step = torch.cat([step.new_zeros(lat), step])
        if it == 0:
            first_slope = slope
        if it and -slope <= tolerance * -first_slope:
            break
        accepted, tries, q_try, x_try, (r_try, rq_try, value) = _model_backtrack(model, evaluate, q, step, current, slope)
        state.lm = max(state.lm / 3, 1e-4) if accepted and tries == 0 else min(state.lm * 3, 1e2)
        if not accepted:
            break
        q, x, r, rq, current = q_try, x_try, r_try, rq_try, value
        if state.chord_check and it + 1 < iterations:
            # the next predicted decrease from this iteration's Jacobians and factorization: no Jacobian work
            g = gradient(JV, JQ, r, rq, q)
            if float(g @ torch.linalg.lu_solve(*factor, g[:, None])[:, 0]) <= tolerance * -first_slope:
                break
    return q, current - penalty(q)


def _chord_gradient(potential: IncrementalPotential, J: torch.Tensor, anchor: torch.Tensor, lat: int,
                    mu: float | None):
    """A chord solve's gradient function (JV, JQ, r, rq, q) ↦ g at the constant J, and the Gauss–Newton block of
    the rows linear in x (constant over the solve, as J is); ``mu``: the latent's trust penalty (None: held)."""
    JF = potential.fixed_jacobian(J)
    fixed = len(JF)
    linear_grad = potential.linear.reshape(-1) @ J.reshape(-1, J.shape[-1])  # Jᵀ ∂/∂x (an einsum is 5× slower)

    def gradient(JV: torch.Tensor, JQ: torch.Tensor, r: torch.Tensor, rq: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        g = JF.T @ r[:fixed] + JV.T @ r[fixed:] + linear_grad + JQ.T @ rq
        if mu is not None and lat:
            g = g + torch.cat([mu * (q - anchor)[:lat], g.new_zeros(len(g) - lat)])
        return g

    return gradient, JF.T @ JF


def _damped(hess: torch.Tensor, damping: float, metric: torch.Tensor | None, mu: float | None,
            lat: int) -> torch.Tensor:
    """The Gauss–Newton block with its Levenberg–Marquardt damping (by the diagonal, or by the kinetic
    ``metric`` of a jointed assembly), a tiny regularization, and the latent's trust penalty ``mu`` (None: held)."""
    tiny = 1e-9 * (hess.diagonal().mean() + 1e-12)
    hess = hess + (damping * hess.diagonal() + tiny).diag() if metric is None else \
        hess + damping * metric + tiny * torch.eye(len(hess), dtype=hess.dtype, device=hess.device)
    if mu is not None and lat:
        hess = hess + torch.diag(torch.cat([hess.new_full((lat,), mu), hess.new_zeros(len(hess) - lat)]))
    return hess


def _model_backtrack(model, evaluate, q: torch.Tensor, step: torch.Tensor, current: float, slope: float):
    """Armijo backtracking on the linearized model, 8 tries at most: (accepted, the last try's index, its q, x and
    ``evaluate`` there)."""
    alpha, tries = 1.0, 0
    for tries in range(8):  # noqa: B007 (read after the loop)
        q_try = q + alpha * step
        x_try = model.positions(q_try)
        evaluated = evaluate(q_try, x_try)
        if evaluated[2] <= current + 1e-4 * alpha * slope:
            return True, tries, q_try, x_try, evaluated
        alpha *= 0.5
    return False, tries, q_try, x_try, evaluated


def rigid_complement(x: torch.Tensor, masses: torch.Tensor):
    """d ↦ d − P d, with P the mass-orthogonal projection onto the rigid motions (3 translations, 3 rotations)
    of the points ``x`` (N, 3); works on (…, N, 3) fields."""
    r = x - (masses @ x) / masses.sum()
    eye = torch.eye(3, dtype=x.dtype, device=x.device)
    rotations = torch.stack([torch.linalg.cross(eye[a].expand_as(r), r) for a in range(3)], -1)  # (N, 3, 3)
    basis = torch.cat([eye.expand(len(x), 3, 3), rotations], -1)  # (N, 3, 6)
    gram = torch.einsum("nik,n,nil->kl", basis, masses, basis)
    basis = basis @ torch.linalg.inv(torch.linalg.cholesky(gram + 1e-12 * gram.diagonal().mean() * torch.eye(6,
                                     dtype=x.dtype, device=x.device))).T  # mass-orthonormal columns

    def complement(d: torch.Tensor) -> torch.Tensor:
        coeff = torch.einsum("nik,n,...ni->...k", basis, masses, d)
        return d - torch.einsum("nik,...k->...ni", basis, coeff)

    return complement


@dataclass
class Guard:
    """Raises SimulationDiverged on a non-finite state, a latent far outside the prior, or a shape blown up."""

    diagonal: float
    latent: int | None = None  # how many leading coordinates are the learned latent (None: all of them)
    full: Callable[[torch.Tensor], torch.Tensor] | None = None  # q ↦ the mapping's coordinates (orthonormal q)
    max_latent: float = 60.0
    max_extent: float = 50.0

    def check(self, s: State, frame: int) -> None:
        if not (torch.isfinite(s.q).all() and torch.isfinite(s.x).all() and torch.isfinite(s.qdot).all()):
            raise SimulationDiverged(f"the simulation diverged at frame {frame} (non-finite state); "
                                     "nothing was written. Lower the stiffness multiplier or raise damping.")
        latent = float((s.q if self.full is None else self.full(s.q))[: self.latent].norm())  # rigid and handle motion may go anywhere
        if latent > self.max_latent:
            raise SimulationDiverged(f"the simulation diverged at frame {frame}: the latent left the model's "
                                     f"plausible region (|q| = {latent:.1f}); nothing was written. "
                                     "Lower the forces or raise damping.")
        if float((s.x - s.x.mean(0)).norm(dim=-1).max()) > self.max_extent * self.diagonal:  # size, not place
            raise SimulationDiverged(f"the simulation diverged at frame {frame}: the shape blew up; nothing was written.")
