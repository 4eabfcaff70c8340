"""The reduced mechanical system: q ↦ cubature positions x(q) through a NeuROK decoder (or any smooth map),
its Jacobian and Coriolis term by forward-mode derivatives, the potential, the generalized forces. No bpy use."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.func import jacfwd, jvp

from ..model.layers import explicit_attention, is_transformed  # a transformed input must not reach the trace
from ..model.network import NeurokModel
from ..model.reduction import Subspace
from . import energies
from .cubature import Cubature
from .handles import mass_orthonormal_basis, tangent_frames
from .joints import JointLimits
from .material import Constants

DIFFERENCE_STEP = 5e-3  # in latent units (the prior has unit variance); small against its curvature, large against float32 noise


class NeurokMap:
    """x(q) = centre + scale · D(z_rest + W q, M0) at the cubature points (normalized coordinates inside).
    The rest decode is computed once, so each evaluation runs the decoder a single time."""

    def __init__(self, model: NeurokModel, tokens: torch.Tensor, subspace: Subspace, queries: torch.Tensor,
                 centre: torch.Tensor, scale: float) -> None:
        self.model, self.tokens, self.sub, self.queries = model, tokens, subspace, queries  # queries (1, N, 3)
        self.centre, self.scale = centre, scale
        self.head = model.kind
        self._positions_memo: tuple | None = None  # see positions
        with torch.no_grad(), explicit_attention():
            self.prepared = model.prepare_queries(queries)  # the query points' own decoder work, done once
            self.rest = model.decode_absolute(subspace.z_rest, tokens, None, prepared=self.prepared)
        self.traced = traced_decoder(model, tokens, self.prepared, subspace.z_rest, self.rest) \
            if queries.device.type == "cpu" else None  # z ↦ the deformation relative to rest, in one graph

    @property
    def k(self) -> int:
        return self.sub.k

    def deformation(self, q: torch.Tensor) -> torch.Tensor:
        """Per-cubature-point deformation relative to rest: (…, N, 8) dual quaternions or (…, N, 3)."""
        batch = q.shape[:-1]
        z = self.sub.z(q.reshape(-1, self.k))
        n = z.shape[0]
        if self.traced is not None and not torch.is_grad_enabled() and not is_transformed(z):
            relative = self.traced(z)  # a plain evaluation (the implicit step's decodes): no derivative goes through it
        else:
            with explicit_attention():
                raw = self.model.decode_absolute(z, self.tokens.expand(n, -1, -1), None, prepared=self.prepared)
            relative = self.head.relative(raw, self.rest)
        return relative.reshape(*batch, *self.rest.shape[1:])

    def positions(self, deformation: torch.Tensor) -> torch.Tensor:
        """The cubature positions of a deformation; the last one's are kept (a step's decode is read back
        several times: the step's end, the secant update, the re-anchored model)."""
        hit = self._positions_memo
        if hit is not None and hit[0] is deformation:
            return hit[1]
        value = self.centre + self.scale * self.head.apply(deformation, self.queries[0])
        self._positions_memo = (deformation, value)
        return value

    def __call__(self, q: torch.Tensor) -> torch.Tensor:
        return self.positions(self.deformation(q))

    def rotate(self, deformation: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """Rest normals carried along by each point's rotation (unchanged for the displacement head)."""
        return self.head.rotate(deformation, vectors)


class _Decoder(torch.nn.Module):
    """z (B, L, C) ↦ the per-query deformation relative to the rest decode, at fixed shape tokens and prepared
    queries (what ``NeurokMap.deformation`` computes)."""

    def __init__(self, model: NeurokModel, tokens: torch.Tensor, prepared: tuple[torch.Tensor, torch.Tensor],
                 rest: torch.Tensor) -> None:
        super().__init__()
        self.model, self.tokens, (self.x, self.projected), self.rest = model, tokens, prepared, rest

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        raw = self.model.decode_absolute(z, self.tokens.expand(z.shape[0], -1, -1), None,
                                         prepared=(self.x, self.projected))
        return self.model.kind.relative(raw, self.rest)  # the rest decode's inverse is folded into a constant


TRACE_TOLERANCE = 1e-5  # a traced decoder must agree with the module this closely (else the module is used)


def traced_decoder(model: NeurokModel, tokens: torch.Tensor, prepared: tuple[torch.Tensor, torch.Tensor],
                   z_rest: torch.Tensor, rest: torch.Tensor):
    """The decoder at fixed shape tokens and query points, traced and frozen (TorchScript) for plain
    evaluations: a decode at batch 1 is some 60 small operations, and on the CPU their Python dispatch is a large
    share of its time (docs/decisions.md#traced-decoder). Checked against the module at batch 1 and 3 when made;
    None (the module is used) if tracing fails or disagrees. The relative deformation is part of the graph:
    freezing folds the rest decode's inverse into a constant."""
    import warnings

    decoder = _Decoder(model, tokens, prepared, rest).eval()
    z1 = z_rest.reshape(1, *z_rest.shape[-2:])
    try:
        with torch.no_grad(), explicit_attention(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings about shapes: the batch size is checked below
            frozen = torch.jit.freeze(torch.jit.trace(decoder, (z1,), check_trace=False))
            gen = torch.Generator(device="cpu").manual_seed(0)
            for batch in (1, 3):
                z = z1 + torch.randn(batch, *z1.shape[1:], generator=gen).to(z1)
                want, got = decoder(z), frozen(z)
                if got.shape != want.shape or float((got - want).abs().max()) > TRACE_TOLERANCE * (1 + float(want.abs().max())):
                    return None
    except (RuntimeError, torch.jit.Error):  # an operator TorchScript cannot trace: keep the module
        return None
    return frozen


@dataclass
class Scene:
    """Loads in the object's local frame, as tensors."""

    gravity: torch.Tensor  # (3,)
    wind: torch.Tensor  # (3,)
    ground_normal: torch.Tensor | None = None  # (3,) unit, or None for no ground
    ground_offset: float = 0.0
    driver: Any = None  # a scene.SceneDriver: animated pins, colliders, force fields (None: a static scene)


class JacobianCache:
    """The decoder's latent Jacobian, reused across steps: the latent moves little per step, the Jacobian only
    shapes the Gauss–Newton direction (the objective is always evaluated exactly), so refreshing it every
    ``refresh`` steps — and whenever a step stalls — saves k_latent + 1 decodes per step."""

    def __init__(self, refresh: int = 1) -> None:
        self.refresh, self.age, self.latent = refresh, 0, None

    def fresh(self) -> bool:
        return self.latent is not None and self.age < self.refresh - 1

    def store(self, latent_jacobian: torch.Tensor) -> None:
        self.latent, self.age = latent_jacobian, 0

    def invalidate(self) -> None:
        self.latent = None


class Linearization:
    """The system's mapping with the latent decode x̄(z) replaced by its first-order model at an anchor z₀,
    x̄ ≈ x̄(z₀) + J̄ (z − z₀), and the handles kept exact: positions and Jacobian for any q at no decoder cost.
    The implicit step's ``"latent": "linearized"`` solves on it and decodes once, at the step's end; ``correct``
    then folds that decode back into the cached J̄ (Broyden's secant across steps)."""

    def __init__(self, system: LatentSystem, latent: torch.Tensor, xbar: torch.Tensor, j_latent: torch.Tensor,
                 reuse: JacobianCache | None) -> None:
        self.system, self.latent0, self.xbar0, self.j_latent, self.reuse = system, latent, xbar, j_latent, reuse
        self.map = system.map

    def _latent(self, full: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        latent = self.map.latent(full)
        return latent, self.xbar0 + self.j_latent @ (latent - self.latent0)  # (matmul: an einsum costs twice as much here)

    def positions(self, q: torch.Tensor) -> torch.Tensor:
        full = self.system.full(q)
        return self.map.compose(self._latent(full)[1], full)

    def jacobian(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        full = self.system.full(q)
        _, xbar = self._latent(full)
        J, x = self.map.jacobian(full, lambda _latent: (self.j_latent, xbar))
        basis = self.system.basis
        return (J, x) if basis is None else (J @ basis, x)

    def correct(self, q: torch.Tensor, xbar: torch.Tensor) -> float:
        """Fold the exact latent decode ``xbar`` at q into the cached J̄ — J̄ += (Δx̄ − J̄ Δz) Δzᵀ / ‖Δz‖², exact
        along the step just taken — and return the model's miss there relative to the latent motion."""
        latent, model = self._latent(self.system.full(q))
        dz = latent - self.latent0
        denom = float(dz @ dz)
        miss = float((xbar - model).norm()) / (float((xbar - self.xbar0).norm()) + 1e-12)
        if denom > 0 and self.reuse is not None and self.reuse.latent is not None:
            self.reuse.latent = self.j_latent + (xbar - model)[..., None] * (dz / denom)
        return miss

    def moved(self, q: torch.Tensor) -> Linearization:
        """The model anchored at q instead, with the exact decode there (the system's last one: no decode) and
        the latent Jacobian as it stands (the cache's, secant-updated, when it has one)."""
        latent = self._latent(self.system.full(q))[0]
        cached = self.reuse.latent if self.reuse is not None and self.reuse.latent is not None else self.j_latent
        return Linearization(self.system, latent, self.latent_positions(q), cached, self.reuse)

    def latent_positions(self, q: torch.Tensor) -> torch.Tensor:
        """The exact latent decode x̄ at q (from the system's last decode when it was there)."""
        return self.system.latent_positions(self._latent(self.system.full(q))[0])


STOP_REACH = 0.1  # the largest overshoot (rad, or a slide's travel rows' units) a stop puts back inelastically
STOP_ALIGNMENT = 0.7  # the least cosine between a stop's gradient and the handle-only move that corrects it


class LatentSystem:
    """M(q) q̈ + Jᵀ diag(m) H[q̇, q̇] + ∇_q V = Jᵀ f, with every term a function of the cubature positions.

    With ``orthonormal`` the generalized coordinates are q = Bᵀ-mixed: the mapping's own coordinates are
    ``full(q) = B q`` with B from ``mass_orthonormal_basis`` at rest, so M(0) = I and directions that move no
    mass are gone; ``k`` is then the reduced count and ``k_full`` the mapping's."""

    def __init__(self, mapping, cubature: Cubature, constants: Constants,
                 scene: Scene, k: int, dtype: torch.dtype = torch.float32, device: str = "cpu",
                 gust: tuple[float, float] = (0.0, 0.0), orthonormal: bool = False) -> None:
        self.map, self.k, self.c, self.scene, self.gust = mapping, k, constants, scene, gust
        self.k_full, self.basis, self.gram = k, None, None
        # q's leading coordinates that move the latent; the rest move handles only (cheap: no decode)
        self.k_latent_coords = mapping.k_latent
        t = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
        self.masses, self.areas, self.pins = t(cubature.masses), t(cubature.drag_areas), t(cubature.pins)
        self.rest, self.rest_normals = t(cubature.points), t(cubature.normals)
        self.edges = torch.as_tensor(cubature.edges, device=device)
        self.bends = torch.as_tensor(cubature.bends, device=device)
        self.edge_length = energies.strain(self.rest, self.edges, torch.ones(len(self.edges), dtype=dtype, device=device)) + 1
        self.bend_length = energies.strain(self.rest, self.bends, torch.ones(len(self.bends), dtype=dtype, device=device)) + 1
        # stretch springs and bending springs as one set: one gather, one norm for both (their weights differ)
        self.springs = torch.cat([self.edges.reshape(-1, 2), self.bends.reshape(-1, 2)])
        self.spring_length = torch.cat([self.edge_length, self.bend_length])
        self._spring_weights: tuple | None = None  # see spring_weights
        self.pinned = bool((cubature.pins > 0).any())
        self.shell = not cubature.solid  # an open surface: its in-plane compression may give way (``compression``)
        self.dtype, self.device = dtype, device
        self.pin_target, self.contacts, self.time = self.rest, [], None  # the scene at ``time`` (set_time)
        # the prior acts on the learned latent only: rigid and handle motion costs nothing of plausibility
        self.k_prior = mapping.k_latent
        self.free_rigid_motion = mapping.holds_rigid_motion
        self.jointed = mapping.anchors is not None  # pieces turning at joints
        if self.jointed:
            self._joint_setup(mapping, dtype)
        self._last: tuple[torch.Tensor, torch.Tensor] | None = None  # (latent, deformation) of the last positions()
        self._pair_memo: tuple | None = None  # see spring_pair_difference
        self._strain_memo: tuple | None = None  # see spring_strain and spring_strain_jvp
        self._strain_jvp_memo: tuple | None = None
        self._residual_memo: tuple | None = None  # see nonlinear_residuals and q_residual
        self._full_memo: tuple | None = None  # see full
        self._q_residual_memo: tuple | None = None
        self._step_start: tuple | None = None  # (q, ĥ) of the implicit step under way: see begin_step
        # tangent frames carry the normals (cofactor: n' ∝ F t1 × F t2, blind to F's normal column) and, on
        # shells, measure strain in the surface only: a sheet's handle columns along its normal move nothing
        self._tangents = tangent_frames(self.rest_normals)  # (N, 3, 2)
        self._f_basis = None  # the map's own coordinates' elasticity (None: they have none)
        strain_basis = mapping.strain_basis(self.rest)
        if strain_basis is not None:
            frames = torch.eye(3, dtype=dtype, device=device).expand(len(self.rest), 3, 3) if cubature.solid else self._tangents
            self._f_basis = torch.einsum("nabk,nbd->nadk", strain_basis, frames)  # ∂(F P)/∂q
            self._frames = frames
            d = frames.shape[-1]
            self._upper = torch.triu_indices(d, d, device=device)  # the Green strain's independent entries (i ≤ j)
            self._upper_eye = (self._upper[0] == self._upper[1]).to(dtype)
            self._f_flat = self._f_basis.reshape(-1, self._f_basis.shape[-1])  # (N·3·d, K): F P as one product
            # d(F P) at the i and j columns of each independent entry, split by row c and contiguous: (N, P, K) each
            self._f_upper = [[self._f_basis[:, c].index_select(1, ix).contiguous() for c in range(3)]
                             for ix in self._upper]
        self._q_constants: tuple | None = None  # see _q_jacobian_constants
        self.latent_inertia: float | None = None  # set by the first mass_matrix call
        if orthonormal:
            J0, _ = self.jacobian(torch.zeros(k, dtype=dtype, device=device), "forward")
            self.gram = torch.einsum("nik,n,nil->kl", J0, self.masses, J0)
            self.basis, self.k_latent_coords = mass_orthonormal_basis(J0, self.masses, split=mapping.k_latent,
                                                                      constraints=mapping.anchors)
            self.k = self.basis.shape[1]

    def truncate_modes(self, max_frequency: float) -> int:
        """Keep only the rest-state vibration modes slower than ``max_frequency`` (rad/s): the eigenvectors
        of the Gauss–Newton stiffness in the mass-orthonormal coordinates (M = I there). An explicit step h
        is stable only for ω h < 2; a learned latent that moves little mass but stretches springs has modes
        far faster (about 10⁵ rad/s on a ribbon), which is what made explicit Verlet blow up. Returns how many
        modes were dropped. Needs ``orthonormal``."""
        if self.basis is None:
            raise ValueError("truncate_modes needs mass-orthonormal coordinates")
        q = torch.zeros(self.k, dtype=self.dtype, device=self.device)
        J, x = self.jacobian(q, "forward")
        JR, JQ = self.residual_jacobian(x, J), self.q_residual_jacobian(q)
        lam, vectors = torch.linalg.eigh((JR.T @ JR + JQ.T @ JQ).double())
        keep = lam < max_frequency**2
        self.basis = self.basis @ vectors[:, keep].to(self.basis.dtype)
        dropped = self.k - int(keep.sum())
        self.k = self.k_latent_coords = self.basis.shape[1]  # modes mix latent and handles: no handle-only block
        return dropped

    # -- the scene at a time ---------------------------------------------------------------------
    def set_time(self, t: float) -> None:
        """Move the scene to time t: pin targets and colliders where the animation has them then."""
        driver = self.scene.driver
        if driver is None or t == self.time:
            return
        self.time = t
        if driver.animated and len(driver.pinned):
            self.pin_target = driver.cubature_pin_targets(t, self.rest)
        if driver.sdfs:  # (without colliders the list stays the same object: see nonlinear_residuals)
            self.contacts = driver.contacts(t)

    def touching(self, x: torch.Tensor) -> bool:
        """Whether any free (unpinned) point of ``x`` is in contact with the ground or a collider."""
        free = self.pins < 0.5
        s = self.scene
        if s.ground_normal is not None and bool(((x @ s.ground_normal - s.ground_offset < 0) & free).any()):
            return True
        return any(bool((contact.active(contact.distance(x)[0]) & free).any()) for contact in self.contacts)

    def contact_weight(self) -> torch.Tensor:
        return (self.c.ground * self.masses) ** 0.5

    def friction(self, x_start: torch.Tensor, xdot_start: torch.Tensor, h: float):
        """The implicit step's friction term on the points touching a collider (see ``scene.friction_terms``)."""
        if not self.contacts:
            return None
        from .scene import friction_terms

        diagonal = float((self.rest.max(0).values - self.rest.min(0).values).norm())
        return friction_terms(self.contacts, x_start, xdot_start, self.masses, self.c.ground, diagonal, h)

    # -- coordinates ----------------------------------------------------------------------------
    def full(self, q: torch.Tensor) -> torch.Tensor:
        """The mapping's own coordinates (…, k_full) of q (…, k); the last one is kept (a step asks for the
        same q's several times)."""
        if self.basis is None:
            return q
        hit = self._full_memo
        if hit is not None and hit[0] is q and hit[1] is self.basis:
            return hit[2]
        value = q @ self.basis.T
        self._full_memo = (q, self.basis, value)
        return value

    def latent_part(self, q: torch.Tensor) -> torch.Tensor:
        """The learned-latent coordinates of q (the prior's and the guard's)."""
        return self.full(q)[..., : self.k_prior]

    def reduce_velocity(self, qdot_full: torch.Tensor) -> torch.Tensor:
        """The mass-orthogonal projection of a velocity in the mapping's coordinates onto q̇ (exact at rest)."""
        return qdot_full if self.basis is None else self.basis.T @ (self.gram @ qdot_full)

    # -- kinematics ---------------------------------------------------------------------------
    def positions(self, q: torch.Tensor) -> torch.Tensor:
        """x(q) at one state; the latent deformation is kept so the normals there need no second decode."""
        q = self.full(q)
        with torch.no_grad():
            return self.map.compose(self.latent_positions(self.map.latent(q)), q)

    def latent_deformation(self, latent: torch.Tensor) -> torch.Tensor:
        """The NeurokMap's deformation at ``latent`` (mapping coordinates), decoded only when the latent differs
        from the last one decoded (handle-only moves, the frame's output decode after its step's last one)."""
        last = self._last
        if last is not None and last[0].shape == latent.shape and torch.equal(last[0], latent):
            return last[1]
        with torch.no_grad():
            deformation = self.map.decoder.deformation(latent)
        self._last = (latent.clone(), deformation)
        return deformation

    def jacobian(self, q: torch.Tensor, method: str = "forward", reuse: JacobianCache | None = None,
                 relinearize: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(J (N, 3, k), x (N, 3)); handle columns are exact, latent columns by ``method`` (see ``jacobian``).

        With ``reuse`` the latent columns — the expensive part, k_latent + 1 decodes — come from the cache while
        it is fresh (see ``JacobianCache``); the handle columns and x are always those of q. ``relinearize``
        takes the cached latent columns whatever their age, without ageing them (within one implicit step)."""
        q = self.full(q)

        def inner(latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self._latent_jacobian(latent, method, reuse, relinearize)

        J, x = self.map.jacobian(q, inner)
        return (J, x) if self.basis is None else (J @ self.basis, x)

    def _latent_jacobian(self, latent: torch.Tensor, method: str, reuse: JacobianCache | None,
                         relinearize: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(∂x̄/∂latent (N, 3, k_latent), x̄) of the latent decode x̄ at ``latent``, the columns from ``reuse``
        while it is fresh (see ``jacobian``)."""
        if reuse is not None and (reuse.fresh() or (relinearize and reuse.latent is not None)):
            reuse.age += 0 if relinearize else 1
            return reuse.latent, self.latent_positions(latent)
        j_latent, xbar = jacobian(self.map.decoder, latent, method)
        if reuse is not None:
            reuse.store(j_latent)
        return j_latent, xbar

    def linearization(self, q: torch.Tensor, method: str = "difference",
                      reuse: JacobianCache | None = None) -> Linearization:
        """The mapping at q with its latent decode replaced by its first-order model there (see
        ``Linearization``): one decode at most (none when the latent was the last one decoded), plus the
        latent Jacobian when ``reuse`` is stale."""
        latent = self.map.latent(self.full(q))
        j_latent, xbar = self._latent_jacobian(latent, method, reuse)
        return Linearization(self, latent, xbar, j_latent, reuse)

    def latent_positions(self, latent: torch.Tensor) -> torch.Tensor:
        """The latent decode x̄ at ``latent``, from the last ``positions`` call when it was at the same state."""
        with torch.no_grad():
            return self.map.decoder.positions(self.latent_deformation(latent))

    def mass_matrix(self, J: torch.Tensor) -> torch.Tensor:
        """M(q) = Jᵀ diag(m) J + μ I (k, k).

        μ is a small constant latent inertia (a kinetic term ½ μ ‖q̇‖², fixed at the first evaluation to 10⁻³
        of M's mean diagonal): latent directions the decoder barely uses would otherwise make M singular and
        the explicit integrator explode. Being a constant-mass term it keeps the Lagrangian conservative."""
        M = torch.einsum("nik,n,nil->kl", J, self.masses, J)
        if self.latent_inertia is None:
            self.latent_inertia = float(1e-3 * M.diagonal().mean()) + 1e-12
        return M + self.latent_inertia * torch.eye(self.k, dtype=M.dtype, device=M.device)

    def coriolis(self, q: torch.Tensor, qdot: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        """Jᵀ diag(m) H[q̇, q̇], H[q̇, q̇] = d²/ds² x(q + s q̇) at s = 0 (two nested forward-mode derivatives)."""
        q, qdot = self.full(q), self.full(qdot)
        H = jvp(lambda v: jvp(self.map, (v,), (qdot,))[1], (q,), (qdot,))[1]  # (N, 3)
        return torch.einsum("nik,n,ni->k", J, self.masses, H)

    def normals(self, q: torch.Tensor) -> torch.Tensor:
        """The rest normals carried to the state q by the map (the latent's rotation, the handles' stretch)."""
        q = self.full(q)
        with torch.no_grad():
            deformation = self.latent_deformation(self.map.latent(q))
        return self.map.carry_normals(deformation, q, self.rest_normals, self._tangents)

    def q_residual(self, q: torch.Tensor) -> torch.Tensor:
        """The sum-of-squares terms that depend on q directly: the latent prior (plausibility), and the
        handles' own elasticity — the Green strain (FᵀF − I)/2 of the handle motion's deformation gradient F
        on each point's strain frame (``_deformed_frames``), mass-weighted, with the stretch stiffness. Rotation-invariant, so rigid motion
        costs nothing; it keeps a solid from folding flat where the surface springs alone would let it."""
        key = self._q_key()
        hit = self._q_residual_memo
        if hit is not None and hit[0] is q and hit[1][0] is key[0] and hit[1][1:] == key[1:] and hit[3] is self._step_start:
            return hit[2]
        full = self.full(q)
        value = energies.plausibility_residual(full[..., : self.k_prior], self.c.plausibility)
        if self._f_basis is not None:
            fp = self._deformed_frames(full)  # (N, 3, d)
            green = 0.5 * ((fp.index_select(2, self._upper[0]) * fp.index_select(2, self._upper[1])).sum(1) - self._upper_eye)
            if self.shell and self.c.compression < 1.0:
                green = self._green_scale(green) * green
            value = torch.cat([value, (self._strain_weight() * green).reshape(-1)])
            joints = self._q_jacobian_constants()[3]
            if joints is not None:  # (rows, turns) in q's coordinates: x_q @ q is x @ full
                value = torch.cat([value, joints[0] @ q, self._joint_stops(joints[1], joints[2], joints[3], q)[0]])
                damping = self._joint_damping_rows(joints)
                if damping is not None:
                    value = torch.cat([value, damping @ (q - self._step_start[0])])
        self._q_residual_memo = (q, key, value, self._step_start)  # a step's last state is the next one's anchor and the trace's
        return value

    def _deformed_frames(self, q: torch.Tensor) -> torch.Tensor:
        """F P: the handle motion's deformation gradient on each point's strain frame P (the identity in a
        solid, the two tangents on a shell), linear in the handle coordinates of q (mapping coordinates)."""
        return self._frames + (self._f_flat @ q[self.map.k_latent:]).view(self._frames.shape)

    def _q_key(self) -> tuple:
        """What the q-dependent residual's constants depend on: the basis (by identity) and the material."""
        return (self.basis, self.c.plausibility, self.c.stiffness, self.c.joint, self.c.pin, self.c.compression,
                self.c.joint_limit, self.c.joint_stop)

    def _joint_rows(self) -> torch.Tensor | None:
        """A jointed assembly's weighted rows on the mapping's coordinates (R, k_full), None for one piece: each
        anchor's gap with the pin spring (per unit of the object's mass; zero on the mass-orthonormal basis, which
        keeps the anchors shared exactly) and the pieces' relative turn with the joint stiffness (``joints.py``)."""
        if not self.jointed:
            return None
        return torch.cat([(self.c.pin * float(self.masses.sum())) ** 0.5 * self._anchor_rows,
                          self.c.joint ** 0.5 * self._turn_rows, self.c.joint ** 0.5 * self._slide_rows])

    def _joint_stops(self, turns: torch.Tensor, slides: torch.Tensor, hinges: torch.Tensor,
                     q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A jointed assembly's joint limits, (residual (J + S + L,), its Jacobian) for the joints' turn rows
        ``turns`` (9 J, k), the slides' travel rows ``slides`` (S, k) and the limited hinges' sin/cos rows
        ``hinges`` (2 L, k) on the coordinates of q: a stiff one-sided spring √k (‖F_child − F_parent‖ − s_max)⁺
        once a joint has turned past the material's ``joint_limit`` θ_max (‖R − I‖ = 2√2 sin(θ/2) for a turn θ;
        s_max that of θ_max), rotation-invariant like the joint's spring; one once a slide has travelled past
        either end of its range; and one once a hinge with its own range has turned past either end of it (its
        signed turn atan2(sin θ, cos θ), √2 per radian as ‖R − I‖ grows)."""
        count = len(turns) // 9
        weight = self.c.joint_stop ** 0.5
        limits = torch.where(torch.isnan(self._turn_limits), torch.full_like(self._turn_limits, self.c.joint_limit),
                             self._turn_limits)
        active = (limits > 0) & (limits < math.pi)
        if count and bool(active.any()):
            relative = (turns @ q).view(count, 9)  # (J, 9): F_child − F_parent, row-major
            size, reach = relative.norm(dim=1), (2 * math.sqrt(2) * torch.sin(limits.double() / 2)).to(q.dtype)
            over = active & (size > reach)
            residual = weight * torch.where(over, size - reach, torch.zeros_like(size))
            direction = torch.where(over[:, None], relative / size.clamp_min(1e-12)[:, None], torch.zeros_like(relative))
            jacobian = weight * torch.einsum("ja,jak->jk", direction, turns.view(count, 9, -1))
        else:
            residual, jacobian = q.new_zeros(count), q.new_zeros(count, len(q))
        if len(slides):
            travel = slides @ q
            lower, upper = self._slide_limits[:, 0], self._slide_limits[:, 1]
            past = (travel - upper).clamp_min(0) - (lower - travel).clamp_min(0)
            residual = torch.cat([residual, weight * past])
            jacobian = torch.cat([jacobian, weight * (past != 0).to(q.dtype)[:, None] * slides])
        if len(hinges):
            sine, cosine = (hinges @ q).view(-1, 2).unbind(1)
            cosine = cosine + 1
            angle = torch.atan2(sine, cosine)
            lower, upper = self._hinge_limits[:, 0], self._hinge_limits[:, 1]
            past = (angle - upper).clamp_min(0) - (lower - angle).clamp_min(0)
            rows = hinges.view(-1, 2, hinges.shape[-1])
            d_angle = (cosine[:, None] * rows[:, 0] - sine[:, None] * rows[:, 1]) / (sine ** 2 + cosine ** 2).clamp_min(1e-12)[:, None]
            residual = torch.cat([residual, math.sqrt(2) * weight * past])
            jacobian = torch.cat([jacobian, math.sqrt(2) * weight * (past != 0).to(q.dtype)[:, None] * d_angle])
        return residual, jacobian

    def _joint_setup(self, mapping, dtype: torch.dtype) -> None:
        """The joints' rows on the mapping's coordinates (no latent columns), unweighted, and their own limits
        (``HandleMap.slides``, a joints.JointLimits; none: the material's joint_limit only)."""
        pad = lambda rows: torch.cat([rows.new_zeros(len(rows), mapping.k_latent), rows], 1).to(dtype)  # noqa: E731
        self._anchor_rows, self._turn_rows = pad(mapping.anchors), pad(mapping.turns)
        self._motion_rows: tuple | None = None  # see _joint_damping_rows
        limits = getattr(mapping, "slides", None)
        if limits is None:
            none = mapping.turns.new_zeros(0, mapping.turns.shape[1])
            limits = JointLimits(none, none.new_zeros(0, 2), torch.full((len(mapping.turns) // 9,), math.nan), none,
                                 none.new_zeros(0, 2))
        self._slide_rows, self._hinge_rows = pad(limits.slide_rows), pad(limits.hinge_rows)
        self._slide_limits, self._turn_limits = limits.slide_limits.to(dtype), limits.turn_limits.to(dtype)
        self._hinge_limits = limits.hinge_limits.to(dtype)

    def stopped(self, state):
        """``state`` held at the joints' own stops (a slide's range, a hinge's), inelastically, as a drawer's or a
        lid's end holds: the stiff stop spring alone throws a piece back about as fast as it came, and BDF2 reads
        velocities from positions. A joint past its stop is put back on it and the velocity that carries it on is
        taken out of this state and of the one before it (BDF2's history), moving the handle coordinates only —
        a slide along its travel, a hinge along the turn about its axis — which positions follow linearly. (The
        material's symmetric ``joint_limit`` keeps its spring.)"""
        if not self.jointed or not (len(self._slide_limits) or len(self._hinge_limits)):
            return state
        joints = self._q_jacobian_constants()[3]
        turns, slides, hinges = joints[1], joints[2], joints[3]
        residual, jacobian = self._joint_stops(turns, slides, hinges, state.q)
        weight, first = self.c.joint_stop ** 0.5, len(turns) // 9
        rows = [(past, jacobian[first + i] / weight, slides[i]) for i, past in
                enumerate((residual[first: first + len(slides)] / weight).tolist()) if past]
        if len(hinges):  # the signed turn's gradient; moved along sin θ's row, a turn about the axis
            sine, cosine = (hinges @ state.q).view(-1, 2).unbind(1)
            for i, past in enumerate((residual[first + len(slides):] / (math.sqrt(2) * weight)).tolist()):
                if past and float(cosine[i] + 1) > 0:
                    rows.append((past, jacobian[first + len(slides) + i] / (math.sqrt(2) * weight), hinges[2 * i]))
        if not rows:
            return state
        lat = self.k_latent_coords
        q, qdot, previous = state.q, state.qdot, state.previous
        before = None if previous is None else previous.q
        for past, grad, direction in rows:
            along = direction.clone()
            along[:lat] = 0  # handle coordinates only: positions follow them linearly, with no decode
            rate = float(grad @ along)  # the stop's coordinate per unit along
            # only a small, well-aimed correction: where the stop's gradient leans on the latent, or a chained
            # joint's turn is read off a parent that has turned far, the stiff stop spring alone holds it
            if abs(past) > STOP_REACH or rate < STOP_ALIGNMENT * float(grad.norm() * along.norm()):
                continue
            q = q - (past / rate) * along
            qdot = qdot - ((grad @ qdot) / rate) * along
            if before is not None:
                before = before - ((grad @ (before - q)) / rate) * along
        # a handle-only move changes no latent, so these positions need no decode; they are linear in it
        moved = lambda x, dq: x + (self.positions(state.q + dq) - state.x)  # noqa: E731
        if previous is not None:
            previous = dataclasses.replace(previous, q=before, x=moved(previous.x, before - previous.q),
                                           qdot=qdot, xdot=moved(previous.xdot, qdot - previous.qdot))
        return dataclasses.replace(state, q=q, x=self.positions(q), qdot=qdot,
                                   xdot=moved(state.xdot, qdot - state.qdot), previous=previous)

    def _strain_weight(self) -> torch.Tensor:
        return (self.c.stiffness * self.masses / self.masses.sum()).sqrt()[:, None]

    def _q_jacobian_constants(self) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
        """(the prior's rows of ∂q_residual/∂q in q's coordinates, the basis rows of the handle coordinates
        (None without a basis), the strain weights, the joints' weighted rows and unweighted turn rows in q's
        coordinates (None for one piece)): kept while the basis and the material stay."""
        key = self._q_key()
        cached = self._q_constants
        if cached is not None and cached[0][0] is key[0] and cached[0][1:] == key[1:]:
            return cached[1]
        prior = torch.zeros(self.k_prior, self.k_full, dtype=self.dtype, device=self.device)
        prior[:, : self.k_prior] = self.c.plausibility ** 0.5 * torch.eye(self.k_prior, dtype=self.dtype, device=self.device)
        handles, joints = None, self._joint_rows()
        joints = None if joints is None else (joints, self._turn_rows, self._slide_rows, self._hinge_rows)
        if self.basis is not None:
            prior, handles = prior @ self.basis, self.basis[self.k_prior:]
            joints = None if joints is None else tuple(rows @ self.basis for rows in joints)
        weight = self._strain_weight()[:, :, None] if self._f_basis is not None else None
        self._q_constants = (key, (prior, handles, weight, joints))
        return prior, handles, weight, joints

    def q_residual_jacobian(self, q: torch.Tensor) -> torch.Tensor:
        """∂ q_residual / ∂q (R_q, k), written out: the prior is diagonal, the Green strain's derivative is
        ½ (dFᵀ F + Fᵀ dF) with dF the constant gradient basis."""
        prior, handles, weight, joints = self._q_jacobian_constants()
        if self._f_basis is None or self.k_full == self.k_prior:
            return prior
        fp = self._deformed_frames(self.full(q))
        f_i, f_j = (fp.index_select(2, ix) for ix in self._upper)  # (N, 3, P)
        b_i, b_j = self._f_upper  # per row c: (N, P, K)
        d_green = f_i[:, 0, :, None] * b_j[0]  # ½ Σ_c (F_ci dF_cj + F_cj dF_ci), as fused multiply-adds
        for c in range(3):
            if c:
                d_green.addcmul_(f_i[:, c, :, None], b_j[c])
            d_green.addcmul_(f_j[:, c, :, None], b_i[c])
        weight = 0.5 * weight
        if self.shell and self.c.compression < 1.0:  # the entries the tension field softens, at this q
            weight = weight * self._green_scale(0.5 * ((f_i * f_j).sum(1) - self._upper_eye))[..., None]
        strain = (weight * d_green).reshape(-1, d_green.shape[-1])  # (N·P, K)
        rows = [prior, torch.cat([strain.new_zeros(len(strain), self.k_prior), strain], 1) if handles is None
                else strain @ handles]
        if joints is None:
            return torch.cat(rows)
        damping = self._joint_damping_rows(joints)
        return torch.cat([*rows, joints[0], self._joint_stops(joints[1], joints[2], joints[3], q)[1],
                          *([] if damping is None else [damping])])

    def begin_step(self, q: torch.Tensor, h: float) -> None:
        """The state a step starts from and its effective length: the joints' damping acts on the motion since."""
        self._step_start = (q, h)

    def _joint_damping_rows(self, joints: tuple) -> torch.Tensor | None:
        """√(c/h) (turn and travel rows) on q's coordinates: the implicit step's ½ (c/h) ‖rows (q − q_n)‖² is a joint
        damping c per unit ‖Ḟ_child − Ḟ_parent‖² (and a slide's travel); None without one or outside a step."""
        if not self.c.joint_damping or self._step_start is None:
            return None
        if self._motion_rows is None or self._motion_rows[0] is not joints:  # once per basis and material
            self._motion_rows = (joints, torch.cat([joints[1], joints[2]]))
        return (self.c.joint_damping / self._step_start[1]) ** 0.5 * self._motion_rows[1]

    # -- potential ------------------------------------------------------------------------------
    def residuals(self, x: torch.Tensor) -> torch.Tensor:
        """The sum-of-squares part of V(x) as one residual vector: pins, then stretch, bending, ground, colliders."""
        return torch.cat([self.linear_residuals(x), self.nonlinear_residuals(x)])

    def residual_jacobian(self, x: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        """∂residuals/∂q = ∂r/∂x · J, written out per term (R, k); the rows follow ``residuals``."""
        return torch.cat([self.linear_residual_jacobian(J), self.nonlinear_residual_jacobian(x, J)])

    def linear_residuals(self, x: torch.Tensor) -> torch.Tensor:
        """The residuals linear in x (the pins; empty when nothing is pinned)."""
        if not self.pinned:
            return x.new_zeros(0)
        return energies.pin_residual(x, self.pin_target, self.pins, self.masses, self.c.pin).reshape(-1)

    def linear_residual_jacobian(self, J: torch.Tensor) -> torch.Tensor:
        """∂ linear_residuals/∂q along J (N, 3, k): the same at every x."""
        if not self.pinned:
            return J.new_zeros(0, J.shape[-1])
        return (((self.c.pin * self.pins * self.masses) ** 0.5)[:, None, None] * J).reshape(-1, J.shape[-1])

    def nonlinear_residuals(self, x: torch.Tensor) -> torch.Tensor:
        """Stretch, bending, ground and collider residuals at x; kept for the same x, contacts and material
        (a step's accepted state is evaluated again as the next step's anchor and for the energy trace)."""
        c, s = self.c, self.scene
        key = (c.stiffness, c.bending, c.ground, c.compression, c.spring_compression)  # the scene's time matters through the contacts only
        hit = self._residual_memo
        if hit is not None and hit[0] is x and hit[1] is self.contacts and hit[2] == key:
            return hit[3]
        parts = [self.spring_weights_at(x) * self.spring_strain(x)]  # stretch, then bending
        if s.ground_normal is not None:
            parts.append(energies.ground_residual(x, self.masses, s.ground_normal, s.ground_offset, c.ground))
        parts.extend(contact.residual(x, self.contact_weight()) for contact in self.contacts)
        value = torch.cat(parts)
        self._residual_memo = (x, self.contacts, key, value)
        return value

    def nonlinear_residual_jacobian(self, x: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        c, s = self.c, self.scene
        parts = [self.spring_weights_at(x)[:, None] * self.spring_strain_jvp(x, J)]
        if s.ground_normal is not None:
            parts.append(energies.ground_residual_jvp(x, self.masses, s.ground_normal, s.ground_offset, c.ground, J))
        parts.extend(contact.residual_jvp(x, self.contact_weight(), J) for contact in self.contacts)
        return torch.cat(parts)

    def spring_weights(self) -> torch.Tensor:
        """Each spring's residual weight (``energies.spring_weight``): the stretch springs', then the bending ones'."""
        key = (self.c.stiffness, self.c.bending)
        if self._spring_weights is None or self._spring_weights[0] != key:
            e, b = len(self.edges), len(self.bends)
            weights = torch.cat([torch.full((e,), energies.spring_weight(key[0], e)),
                                 torch.full((b,), energies.spring_weight(key[1], b))]).to(self.dtype).to(self.device)
            self._spring_weights = (key, weights)
        return self._spring_weights[1]

    def spring_weights_at(self, x: torch.Tensor) -> torch.Tensor:
        """``spring_weights`` at x: on an open surface whose ``spring_compression`` is below 1, a stretch spring
        shorter than at rest weighs √spring_compression of a stretched one (a tension field: cloth buckles instead
        of resisting)."""
        weights = self.spring_weights()
        if not self.shell or self.c.spring_compression >= 1.0:
            return weights
        e = len(self.edges)
        soft = self.spring_strain(x)[:e] < 0
        return torch.cat([torch.where(soft, weights[:e] * self.c.spring_compression ** 0.5, weights[:e]), weights[e:]])

    def _green_scale(self, green: torch.Tensor) -> torch.Tensor:
        """Per entry of the handles' Green strain (N, P): √compression where an open surface is compressed along
        one of its strain frame's axes (a negative diagonal entry), else 1."""
        soft = (green < 0) & (self._upper_eye > 0)
        return torch.where(soft, green.new_tensor(self.c.compression ** 0.5), green.new_tensor(1.0))

    def spring_strain(self, x: torch.Tensor) -> torch.Tensor:
        """``energies.strain`` of all springs at x (stretch, then bending), kept for the same x (the springs
        and the stiffness damping share it)."""
        hit = self._strain_memo
        if hit is not None and hit[0] is x:
            return hit[1]
        value = energies.strain(x, self.springs, self.spring_length)
        self._strain_memo = (x, value)
        return value

    def spring_strain_jvp(self, x: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        """``energies.strain_jvp`` of all springs at x along J (S, k), kept for the same x and J."""
        hit = self._strain_jvp_memo
        if hit is not None and hit[0] is x and hit[1] is J:
            return hit[2]
        value = energies.strain_jvp(x, self.springs, self.spring_length, J, self.spring_pair_difference(J))
        self._strain_jvp_memo = (x, J, value)
        return value

    def edge_strain(self, x: torch.Tensor) -> torch.Tensor:
        """The stretch springs' part of ``spring_strain``."""
        return self.spring_strain(x)[: len(self.edges)]

    def edge_strain_jvp(self, x: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        """The stretch springs' part of ``spring_strain_jvp`` (E, k)."""
        return self.spring_strain_jvp(x, J)[: len(self.edges)]

    def spring_pair_difference(self, J: torch.Tensor) -> torch.Tensor:
        """J[springs[:, 1]] − J[springs[:, 0]], kept while the same J comes back (a chord solve reuses one J over
        its iterations, at a new x each)."""
        hit = self._pair_memo
        if hit is not None and hit[0] is J:
            return hit[1]
        diff = energies.pair_difference(J, self.springs)
        self._pair_memo = (J, diff)
        return diff

    def potential(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return (energies.energy(self.residuals(x)) + energies.gravity_energy(x, self.masses, self.scene.gravity)
                + energies.energy(self.q_residual(q)))

    def energy(self, q: torch.Tensor, qdot: torch.Tensor) -> float:
        """Total mechanical energy T + V at (q, q̇), T = ½ q̇ᵀ M(q) q̇ (latent inertia included)."""
        J, x = self.jacobian(q)
        return float(0.5 * qdot @ self.mass_matrix(J) @ qdot + self.potential(x, q))

    # -- forces ---------------------------------------------------------------------------------
    def wind_at(self, t: float) -> torch.Tensor:
        return energies.gust(self.scene.wind, t, *self.gust)

    def external_force(self, q: torch.Tensor, xdot: torch.Tensor, t: float, x: torch.Tensor | None = None) -> torch.Tensor:
        """Wind drag and the scene's force fields on the cubature points (N, 3) at positions x (those of q when
        not given); zero without wind or fields."""
        wind, force = self.wind_at(t), torch.zeros_like(xdot)
        driver = self.scene.driver
        if driver is not None and driver.fields:
            field_wind, accel = driver.field_effects(self.positions(q) if x is None else x, t)
            if field_wind is not None:
                wind = wind + energies.gust(field_wind, t, *self.gust)
            if accel is not None:
                force = force + self.masses[:, None] * accel
        if self.c.drag != 0:  # still air drags too: a swinging sheet is not a pendulum in a vacuum
            force = force + energies.wind_force(xdot, self.normals(q), self.areas, wind, self.c.drag)
        return force

    def damping_force(self, x: torch.Tensor, xdot: torch.Tensor) -> torch.Tensor:
        if self.c.damping_mass == 0 and self.c.damping_stiffness == 0:
            return torch.zeros_like(xdot)
        with torch.enable_grad():
            return energies.rayleigh_force(x.detach(), xdot, self.masses, self.edges, self.edge_length,
                                           self.c.damping_mass, self.c.damping_stiffness)

    def potential_gradient(self, x: torch.Tensor, q: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        """∇_q V = Jᵀ ∇_x V + ∇_q V_prior, with ∇_x V by reverse mode on the cheap x-space energy."""
        with torch.enable_grad():
            xr, qr = x.detach().requires_grad_(True), q.detach().requires_grad_(True)
            gx, gq = torch.autograd.grad(self.potential(xr, qr), (xr, qr))
        return torch.einsum("nik,ni->k", J, gx) + gq

    def acceleration(self, q: torch.Tensor, qdot: torch.Tensor, t: float, conservative: bool = False) -> torch.Tensor:
        """q̈ = M⁻¹ (Q − ∇_q V − Jᵀ m H[q̇, q̇]); ``conservative`` drops wind and damping."""
        self.set_time(t)
        J, x = self.jacobian(q)
        rhs = -self.potential_gradient(x, q, J) - self.coriolis(q, qdot, J)
        if not conservative:
            xdot = torch.einsum("nik,k->ni", J, qdot)
            f = self.external_force(q, xdot, t, x) + self.damping_force(x, xdot)
            rhs = rhs + torch.einsum("nik,ni->k", J, f)
        return torch.linalg.solve(self.mass_matrix(J), rhs)


def jacobian(mapping: Callable[[torch.Tensor], torch.Tensor], q: torch.Tensor,
             method: str = "forward") -> tuple[torch.Tensor, torch.Tensor]:
    """(J (N, 3, k), x (N, 3)) of ``mapping`` at ``q``.

    ``forward``: exact, by forward mode (one batched jvp per generalized coordinate).
    ``difference``: one-sided differences in a single batched decode of k + 1 latents — about five times
    cheaper through a transformer on the CPU, accurate to O(ε); the implicit integrator's default."""
    if method == "difference":
        k = q.shape[-1]
        batch = torch.cat([q[None], q[None] + DIFFERENCE_STEP * torch.eye(k, dtype=q.dtype, device=q.device)])
        with torch.no_grad():
            xs = mapping(batch)
        return ((xs[1:] - xs[0]) / DIFFERENCE_STEP).permute(1, 2, 0), xs[0]

    def both(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = mapping(v)
        return y, y

    return jacfwd(both, has_aux=True)(q)
