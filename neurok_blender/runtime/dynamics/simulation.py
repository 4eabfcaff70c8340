"""One object's NeuROK simulation: encode the shape, reduce the latent, fit the initial state, integrate, decode
each frame at full resolution. Driven by the worker's engine (runtime/engine.py) and the SDK. No bpy use."""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ...bridge.request import DEFAULT_DENSITY, Poke, SimulationRequest
from ...errors import InputError
from ..geometry import bbox_normalizer, sample_surface
from ..geometry import features as point_features
from ..mesh import MeshInput
from ..model import checkpoint, knn, reduction
from ..model.network import NeurokModel
from . import cubature as cubature_mod
from . import energies, integrators, joints
from .handles import HandleMap, handle_weights, smooth_on_mesh, weight_gradients
from .material import Material, MaterialPredictor, shape_features, with_physical
from .scene import SceneDriver
from .system import LatentSystem, NeurokMap, Scene

ENCODER_POINTS = 1024

_MODELS: dict[str, tuple[NeurokModel, MaterialPredictor]] = {}


# explicit Verlet keeps the rest-state modes slower than this / h (rad/s). Its stability limit is ω h < 2, but a
# mode's frequency grows as the shape deforms: with 1 / h the held-out ribbon of the drift run diverged at step
# 100 (its 30 modes' stiffness grew past the limit); with 0.5 / h (27 kept) 1,000 steps keep the energy within
# 0.2 % of the largest kinetic energy
VERLET_MODE_LIMIT = 0.5
# the handle weights' smoothing along the mesh (``handles.smooth_on_mesh``), in (vertices per cubature point):
# about the square of one cubature spacing in edges. On the demo's jelly (a 1 m cube sheared 0.7 m) 2 takes the
# mean change of the angle between neighbouring faces from 4.26 to 2.58 degrees, on a 1,040-vertex flag in a strong
# wind from 3.19 to 0.46 (the jelly's rest is the latent's own; scripts/surface_check.py)
WEIGHT_SMOOTHING = 2.0
# each vertex follows this many nearest cubature points, weighted smoothly by distance (``knn.smooth_neighbours``),
# where it followed the equal average of the model's ``knn`` (4): with the weight smoothing above, the demo's jelly's
# mean change of the angle between neighbouring faces goes from 2.58 to 1.35 degrees, the motion unchanged
# (scripts/surface_check.py; 16 neighbours decode a 200k-vertex frame faster than the old gather of 4)
DRIVE_NEIGHBOURS = 16


def load_model(path: str, device: str) -> tuple[NeurokModel, MaterialPredictor]:
    """The checkpoint and its fitted material table, cached per process."""
    key = f"{os.path.abspath(path)}@{device}"
    if key not in _MODELS:
        model, _ = checkpoint.load(path, device=device)
        model.requires_grad_(False)  # the dynamics differentiate through inputs only
        _MODELS[key] = (model, MaterialPredictor.load(path))
    return _MODELS[key]


class Simulation:
    """One object's simulation, set up once; ``frames()`` streams (V, 3) arrays in the input's vertex order."""

    def __init__(self, mesh: MeshInput, request: SimulationRequest, checkpoint_dir: str, device: str = "cpu") -> None:
        started = time.perf_counter()
        self.mesh, self.request, self.device = mesh, request, device
        solver = request.solver
        v, tris, pins = mesh.vertices, mesh.triangles, mesh.pin_weights
        centre, scale = bbox_normalizer(v)
        self.centre, self.scale = centre[0], float(scale[0, 0])
        self.vertices = v
        rng = np.random.default_rng(0)  # geometry sampling is fixed; the seed only picks the variation
        norm = (v - self.centre) / self.scale
        if mesh.has_surface:
            self.cubature = cubature_mod.from_mesh(v, tris, pins, solver.cubature, rng)
            tri, bary = sample_surface(norm, tris, ENCODER_POINTS, rng)
            feats = point_features(norm, tris, pins, tri, bary)
        else:  # a point cloud (or only degenerate faces): a kNN graph over the points
            self.cubature = cubature_mod.from_points(v, pins, solver.cubature, rng)
            pick = rng.choice(len(v), size=min(ENCODER_POINTS, len(v)), replace=False)
            feats = np.concatenate([norm[pick], cubature_mod.point_normals(norm[pick]), pins[pick, None]], 1)
        self.model, predictor = load_model(checkpoint_dir, device)
        dtype = torch.float32
        t = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
        with torch.no_grad():
            mu, tokens = self.model.encode_prior(t(feats)[None])
        queries = t((self.cubature.points - self.centre) / self.scale)[None]
        k = solver.subspace
        if solver.reduction == "learned" and self.model.config.reduced_k < k:
            raise InputError(f"solver reduction 'learned': this checkpoint learned {self.model.config.reduced_k} "
                             f"latent directions, fewer than the {k} asked for (solver subspace); ask for at most "
                             f"{self.model.config.reduced_k} or use reduction 'active'")
        self.subspace = reduction.object_subspace(self.model, mu, tokens, queries, k, solver.reduction)
        self.map = NeurokMap(self.model, tokens, self.subspace, queries, t(self.centre), self.scale)
        mapping = self.map
        self.handles: HandleMap | None = None
        c = self.cubature
        self.assembly, vertex_parts = None, c.vertex_labels  # the pieces' labels, from the cubature's set-up
        if (solver.handles and solver.joints == "auto" and vertex_parts is not None
                and 2 <= c.parts <= joints.MAX_PARTS and joints.rigid_pieces(tris, vertex_parts)):
            self.assembly = joints.assembly(c.points, c.masses, c.pins, c.labels)
        if self.assembly is not None:  # the pieces turn at their joints: no springs from one piece to the next
            edges = self.assembly.intra_edges(c.edges)
            self.cubature = c = dataclasses.replace(c, edges=edges, bends=cubature_mod.two_hop(edges, len(c.points)))
        if solver.handles:
            com = c.masses @ c.points / c.total_mass
            anchors = turns = None
            if self.assembly is not None:
                weights = self.assembly.weights(c.labels)
                anchors, turns = t(self.assembly.anchor_rows(com)), t(self.assembly.turn_rows())
            else:
                weights = handle_weights(c.points, c.masses, c.edges, solver.solid_handles if c.solid else solver.handles,
                                         c.pins if solver.handle_modes == "pinned" else None)
            gradients = weight_gradients(c.points, c.edges, weights)
            self.handles = mapping = HandleMap(self.map, k, t(weights), t(com), t(gradients), anchors, turns)
        k_full = mapping.k if self.handles is not None else k  # the mapping's coordinates: latent, then handles

        self.driver = SceneDriver(request, v, pins, self.cubature.points, self.cubature.pins, mesh.scene, dtype, device)
        predicted = predictor.predict(shape_features(self.cubature.points, self.cubature.pins, self.cubature.solid,
                                                   self.cubature.parts))
        if request.young_modulus:  # the law wants the object's size in metres: the world's, not the mesh's units
            predicted = with_physical(predicted, predictor.physical, request.young_modulus,
                                      request.density or DEFAULT_DENSITY,
                                      self.cubature.diagonal * self.driver.length_scale, self.cubature.solid)
        if request.joint_limit:  # the artist's stop for an assembly's joints
            predicted = predicted.updated({"joint_limit": request.joint_limit})
        self.material: Material = predicted.updated(request.material).with_multipliers(
            request.stiffness, request.damping, request.joint_stiffness)
        constants = self.material.scaled(self.cubature.total_mass, self.cubature.diagonal)
        ground = request.local_ground()
        self.ground = ground
        scene = Scene(t(request.local_gravity), t(request.local_wind), None if ground is None else t(ground[0]),
                      0.0 if ground is None else ground[1], self.driver)
        self.system = LatentSystem(mapping, self.cubature, constants, scene, k_full, dtype, device,
                                   gust=(self.material.gust_amplitude, self.material.gust_frequency),
                                   orthonormal=solver.orthonormal)
        self.h = 1.0 / (request.fps * integrators.substeps(request.fps, integrators.from_solver(solver)))
        self.dropped_modes = 0
        if solver.integrator == "verlet" and solver.orthonormal:  # explicit: keep the modes its step can follow
            self.dropped_modes = self.system.truncate_modes(VERLET_MODE_LIMIT / self.h)
        self.k = self.system.k  # the generalized coordinates (mass-orthonormal mixtures of the mapping's)
        self.vertices_norm = t(norm)  # decoded every frame: converted once
        self.drive_index, self.drive_weights = knn.smooth_neighbours(self.vertices_norm, queries[0], DRIVE_NEIGHBOURS)
        if self.assembly is not None:  # each vertex moves with its own piece
            self.vertex_weights = t(self.assembly.weights(vertex_parts))
        elif self.handles is not None:  # each vertex takes the handle weights of the points that drive it, blended
            # as their deformations are, then smoothed along the mesh over about one cubature spacing (V / P vertices
            # per point)
            blended = torch.einsum("vk,vkh->vh", self.drive_weights, self.handles.weights[self.drive_index])
            self.vertex_weights = smooth_on_mesh(blended,  # (V, H)
                                                 tris if mesh.has_surface else None,
                                                 WEIGHT_SMOOTHING * len(v) / len(self.cubature.points))
        self.pinned_vertices = np.flatnonzero(pins > 0)
        self.energy: list[dict[str, float]] = []
        self.penetration = {"deepest_decoded": 0.0, "deepest_cubature": 0.0}  # world units, before the fix-up
        # the initial state, and one throwaway step so first-call costs (kernel selection, functorch
        # tracing) count as set-up and per-frame timings are steady-state
        q0 = torch.zeros(self.k, dtype=dtype, device=device)  # F(q0) is the input shape exactly
        self.initial = integrators.initial_state(self.system, q0, self.initial_velocity())
        integrators.from_solver(solver).step(self.system, self.initial, self.h)  # its own integrator: no trace left
        self.timing = {"setup_s": time.perf_counter() - started, "dynamics_s": 0.0, "decode_s": 0.0}

    # -- initial conditions ------------------------------------------------------------------------
    def initial_velocity(self) -> torch.Tensor:
        """q̇0: the least-squares fit of the requested vertex velocities, plus the seed's variation —
        a random latent velocity drawn from the prior N(0, I) projected on the subspace."""
        r, sys_ = self.request, self.system
        k = self.k
        J, _ = sys_.jacobian(torch.zeros(k, dtype=sys_.dtype, device=self.device))
        target = torch.zeros_like(sys_.rest) + torch.as_tensor(r.local_initial_velocity, dtype=sys_.dtype,
                                                               device=self.device)
        if self.driver.initial_velocities is not None:  # the animation's own motion at the first frame
            near = knn.nearest(sys_.rest.cpu(), torch.as_tensor(self.vertices, dtype=sys_.dtype), 1)[:, 0]
            target = target + torch.as_tensor(self.driver.initial_velocities[near.numpy()], dtype=sys_.dtype,
                                              device=self.device)
        if r.poke is not None:
            target = target + self._poke_field(r.poke)
        if any(r.initial_spin):
            target = target + self._spin_field(r)
        if not r.animated_pins:
            target = target * (1.0 - sys_.pins)[:, None]  # pinned parts are held: they start at rest
        qdot = torch.zeros(k, dtype=sys_.dtype, device=self.device)
        if bool(target.any()):
            M = sys_.mass_matrix(J)
            qdot = torch.linalg.solve(M, torch.einsum("nik,n,ni->k", J, sys_.masses, target))
        variation = r.solver.variation
        if variation > 0:
            gen = torch.Generator().manual_seed(r.seed)
            xi = torch.randn(self.subspace.basis.shape[0], generator=gen).to(sys_.dtype).to(self.device)
            latent = variation * (self.subspace.basis.T @ xi)  # latent units per second
            qdot = qdot + sys_.reduce_velocity(torch.cat([latent, latent.new_zeros(sys_.k_full - len(latent))]))
        return qdot

    def _spin_field(self, r: SimulationRequest) -> torch.Tensor:
        """Velocities (N, 3) in the mesh's frame of a rotation at ``initial_spin`` about the centre of mass."""
        world = np.array([r.to_world_point(p) for p in self.cubature.points])
        com = self.cubature.masses @ world / self.cubature.total_mass
        velocity = np.cross(np.asarray(r.initial_spin), world - com)
        local = np.linalg.solve(np.asarray(r.linear), velocity.T).T
        return torch.as_tensor(local, dtype=self.system.dtype, device=self.device)

    def _poke_field(self, poke: Poke) -> torch.Tensor:
        idx = np.asarray(poke.vertices, np.int64)
        if idx.max() >= len(self.vertices):
            raise InputError(f"poke names vertex {int(idx.max())}, but the mesh has {len(self.vertices)} vertices")
        vel = np.asarray(self.request.to_local(poke.velocity))
        poked = self.vertices[idx]
        d = np.linalg.norm(self.cubature.points[:, None] - poked[None], axis=-1).min(1)
        radius = 0.1 * self.cubature.diagonal
        weight = np.exp(-((d / radius) ** 2))
        return torch.as_tensor(weight[:, None] * vel, dtype=self.system.dtype, device=self.device)

    # -- stepping ------------------------------------------------------------------------------------
    def decode_vertices(self, q: torch.Tensor, t: float | None = None, frame: int | None = None) -> np.ndarray:
        """The full mesh at q, in the object's local frame. With the time t and output frame of the state
        (what ``frames`` passes), the scene's fix-ups follow: pinned vertices sit on their targets (blended by
        pin weight), vertices pushed out of colliders and above the ground, and the result expressed in the
        object's frame at that frame (its animated transform undone)."""
        started = time.perf_counter()
        with torch.no_grad():
            q = self.system.full(q)
            deformation = self.system.latent_deformation(q[: self.subspace.k])  # the step's last decode, reused
            moved = knn.drive(self.vertices_norm, deformation, self.drive_index, self.model.kind, self.drive_weights)
            if self.handles is not None:
                _, a, shift = self.handles.split(q)
                local = moved * self.scale + self.map.centre
                x = self.handles.blend(local, a, shift, self.vertex_weights)
            else:
                x = moved * self.scale + self.map.centre
            if t is not None:
                x = self._scene_fixups(x, t)
        out = x.double().cpu().numpy()
        if frame is not None and self.driver.animated:
            m = np.linalg.solve(self.driver.object_matrix(frame), self.driver.m0)  # sim frame → this frame's local
            out = out @ m[:3, :3].T + m[:3, 3]
        self.timing["decode_s"] += time.perf_counter() - started
        return out

    def _scene_fixups(self, x: torch.Tensor, t: float) -> torch.Tensor:
        if len(self.pinned_vertices):
            idx = torch.as_tensor(self.pinned_vertices, device=x.device)
            targets = self.driver.vertex_pin_targets(t)
            target = (self.vertices_norm[idx] * self.scale + self.map.centre) if targets is None else \
                torch.as_tensor(targets, dtype=x.dtype, device=x.device)
            w = torch.as_tensor(self.mesh.pin_weights[self.pinned_vertices], dtype=x.dtype, device=x.device)[:, None]
            x = x.clone()
            x[idx] = (1 - w) * x[idx] + w * target
        if self.ground is not None:  # the floor: no vertex below it
            n = torch.as_tensor(self.ground[0], dtype=x.dtype, device=x.device)
            depth = (x @ n - self.ground[1]).clamp(max=0.0)
            if bool((depth < 0).any()):
                self.penetration["deepest_decoded"] = max(self.penetration["deepest_decoded"],
                                                          float(-depth.min()) * self.driver.length_scale)
                x = x - depth[:, None] * n
        if self.driver.sdfs:
            x, deepest = self.driver.resolve_vertices(x, t)
            self.penetration["deepest_decoded"] = max(self.penetration["deepest_decoded"], deepest)
            with torch.no_grad():
                for contact in self.driver.contacts(t):  # how deep the contact points themselves went
                    d, _ = contact.distance(self._last_x)
                    if bool((d < 0).any()):
                        self.penetration["deepest_cubature"] = max(self.penetration["deepest_cubature"],
                                                                   float(-d.min()) * self.driver.length_scale)
        return x

    def _record(self, s: integrators.State, frame: int) -> None:
        sys_ = self.system
        with torch.no_grad():
            kinetic = float(energies.kinetic_energy(s.xdot, sys_.masses))
            potential = float(sys_.potential(s.x, s.q))
        self.energy.append({"frame": frame, "time": s.t, "kinetic": kinetic, "potential": potential,
                            "total": kinetic + potential, "latent_norm": float(self.system.latent_part(s.q).norm())})

    def states(self) -> Iterator[integrators.State]:
        """The latent state at each output frame, starting with the rest state at frame 0."""
        s, r = self.initial, self.request
        guard = integrators.Guard(self.cubature.diagonal, self.subspace.k, self.system.full)
        integrator = integrators.from_solver(r.solver)
        n_sub = integrators.substeps(r.fps, integrator)
        self._record(s, 0)
        yield s
        for frame in range(1, r.frame_count):
            started = time.perf_counter()
            for _ in range(n_sub):
                s = integrator.step(self.system, s, self.h)
                guard.check(s, frame)
            self.timing["dynamics_s"] += time.perf_counter() - started
            self._record(s, frame)
            yield s

    def frames(self) -> Iterator[np.ndarray]:
        for i, s in enumerate(self.states()):
            self.last_state, self._last_x = s, s.x
            yield self.vertices.copy() if i == 0 else self.decode_vertices(s.q, s.t, i)

    def run(self) -> np.ndarray:
        """All frames as one (T, V, 3) array."""
        return np.stack(list(self.frames()))

    def stats(self) -> dict[str, Any]:
        """Timings, the material used, the energy trace: what a finished bake reports."""
        trace = {key: [round(e[key], 6) for e in self.energy] for key in ("kinetic", "potential", "total")}
        return {"timing": {k: round(v, 4) for k, v in self.timing.items()}, "material": self.material.to_dict(),
                "energy": trace, "cubature": len(self.cubature.points), "subspace": self.subspace.k,
                "reduction": self.subspace.kind,
                "handles": 0 if self.handles is None else self.handles.handles, "coordinates": self.k,
                "joints": 0 if self.assembly is None else len(self.assembly.joints),
                "joint_kinds": {} if self.assembly is None else
                dict(Counter(joint.kind for joint in self.assembly.joints)),  # what an artist checks a swivel against
                "penetration": {k: round(v, 6) for k, v in self.penetration.items()}}
