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

from ...bridge.request import DEFAULT_DENSITY, LocalScene, Poke, SimulationRequest
from ...errors import InputError
from ..geometry import bbox_normalizer, sample_surface
from ..geometry import features as point_features
from ..mesh import MeshInput
from ..model import checkpoint, knn, reduction
from ..model.network import NeurokModel
from ..research import PRODUCT, Research
from . import cubature as cubature_mod
from . import energies, integrators, joints, kinematics
from .cloth import DetailStage
from .cloth.guide import ReducedGuide
from .handles import HandleMap, handle_weights, smooth_on_mesh, weight_gradients
from .kinematics import KinematicsReader
from .maps import LatentMap
from .material import Material, MaterialPredictor, cloth_material, shape_features, with_physical
from .scene import SceneDriver
from .system import LatentSystem, NeurokMap, Scene

ENCODER_POINTS = 1024

_MODELS: dict[str, tuple[NeurokModel, MaterialPredictor]] = {}


VERLET_MODE_LIMIT = 0.5  # explicit Verlet keeps rest-state modes slower than this / h (docs/decisions.md#verlet-modes)
WEIGHT_SMOOTHING = 2.0  # handle weights smoothed along the mesh, in vertices per cubature point (decisions#weight-smoothing)
# a checkpoint's own cloth model: the latent trained on what the handles miss in cloth (decisions#cloth-latent)
CLOTH_MODEL = "cloth"
DRIVE_NEIGHBOURS = 16  # each vertex follows this many nearest cubature points, smoothly (decisions#drive-neighbours)


def load_model(path: str, device: str) -> tuple[NeurokModel, MaterialPredictor]:
    """The checkpoint and its fitted material table, cached per process."""
    key = f"{os.path.abspath(path)}@{device}"
    if key not in _MODELS:
        model, _ = checkpoint.load(path, device=device)
        model.requires_grad_(False)  # the dynamics differentiate through inputs only
        _MODELS[key] = (model, MaterialPredictor.load(path))
    return _MODELS[key]


RIGID_FIT = 1e3  # how much more an assembly's fitted initial velocity avoids straining a piece than missing a point


class Simulation:
    """One object's simulation, set up once in named stages; ``frames()`` streams (V, 3) arrays in the input's
    vertex order. ``scene`` is the request's loads in the mesh's frame (``SimulationRequest.local_scene``);
    ``research`` the ablation switches (the product's by default)."""

    def __init__(self, mesh: MeshInput, request: SimulationRequest, scene: LocalScene, checkpoint_dir: str,
                 device: str = "cpu", research: Research = PRODUCT) -> None:
        started = time.perf_counter()
        self.mesh, self.request, self.local, self.device, self.research = mesh, request, scene, device, research
        self.checkpoint_dir = checkpoint_dir
        self.dtype = torch.float32
        feats = self._sample_shape()
        self.model, predictor = load_model(checkpoint_dir, device)
        cloth_dir = os.path.join(checkpoint_dir, CLOTH_MODEL)
        if self._is_cloth() and research.cloth_latent == "cloth" and os.path.isdir(cloth_dir):
            self.model = load_model(cloth_dir, device)[0]  # the latent trained on cloth meeting things
        self._learned_map(feats)
        mapping = self._coordinates()
        self.driver = SceneDriver(request, mesh.vertices, mesh.pin_weights, self.cubature.points, self.cubature.pins,
                                  mesh.scene, self.dtype, device)
        self.material = self._material(predictor)
        self._mechanics(mapping)
        self._vertex_drive()
        # last, so the reduced set-up's temporaries are gone before the layer's own are made (a large mesh's peak)
        self.detail = DetailStage(mesh, request, scene, self.driver, self.material, self.dtype, device) \
            if self._is_cloth() and request.solver.detail else None
        self.pinned_vertices = np.flatnonzero(mesh.pin_weights > 0)
        self.energy: list[dict[str, float]] = []
        self.penetration = {"deepest_decoded": 0.0, "deepest_cubature": 0.0}  # world units, before the fix-up
        # the initial state, and one throwaway step so first-call costs (kernel selection, functorch
        # tracing) count as set-up and per-frame timings are steady-state
        q0 = torch.zeros(self.k, dtype=self.dtype, device=device)  # F(q0) is the input shape exactly
        self.initial = integrators.initial_state(self.system, q0, self.initial_velocity())
        self._integrator().step(self.system, self.initial, self.h)  # its own integrator: no trace left
        self.timing = {"setup_s": time.perf_counter() - started, "dynamics_s": 0.0, "decode_s": 0.0}

    def _tensor(self, a: Any) -> torch.Tensor:
        return torch.as_tensor(a, dtype=self.dtype, device=self.device)

    def _integrator(self) -> integrators.Verlet | integrators.Implicit:
        return integrators.from_solver(self.request.solver, self.research)

    # -- set-up stages -------------------------------------------------------------------------------
    def _sample_shape(self) -> np.ndarray:
        """Normalize the mesh, place the cubature points, and sample the prior encoder's input features."""
        mesh, cubature_count = self.mesh, self.request.solver.cubature
        v, tris, pins = mesh.vertices, mesh.triangles, mesh.pin_weights
        centre, scale = bbox_normalizer(v)
        self.centre, self.scale = centre[0], float(scale[0, 0])
        self.vertices = v
        rng = np.random.default_rng(0)  # geometry sampling is fixed; the seed only picks the variation
        self.norm = (v - self.centre) / self.scale
        if mesh.has_surface:
            self.cubature = cubature_mod.from_mesh(v, tris, pins, cubature_count, rng)
            tri, bary = sample_surface(self.norm, tris, ENCODER_POINTS, rng)
            return point_features(self.norm, tris, pins, tri, bary)
        # a point cloud (or only degenerate faces): a kNN graph over the points
        self.cubature = cubature_mod.from_points(v, pins, cubature_count, rng)
        pick = rng.choice(len(v), size=min(ENCODER_POINTS, len(v)), replace=False)
        return np.concatenate([self.norm[pick], cubature_mod.point_normals(self.norm[pick]), pins[pick, None]], 1)

    def _learned_map(self, feats: np.ndarray) -> None:
        """Encode the shape, reduce its latent to ``Solver.subspace`` directions, and build the learned map."""
        t, k, how = self._tensor, self.request.solver.subspace, self.research.reduction
        with torch.no_grad():
            mu, tokens = self.model.encode_prior(t(feats)[None])
        self.queries = t((self.cubature.points - self.centre) / self.scale)[None]
        if how == "learned" and self.model.config.reduced_k < k:
            raise InputError(f"research reduction 'learned': this checkpoint learned {self.model.config.reduced_k} "
                             f"latent directions, fewer than the {k} asked for (solver subspace); ask for at most "
                             f"{self.model.config.reduced_k} or use reduction 'active'")
        self.subspace = reduction.object_subspace(self.model, mu, tokens, self.queries, k, how)
        if self.research.no_latent:  # directions that move nothing: the mass-orthonormal basis drops them
            self.subspace = dataclasses.replace(self.subspace, basis=torch.zeros_like(self.subspace.basis))
        self.map = NeurokMap(self.model, tokens, self.subspace, self.queries, t(self.centre), self.scale)

    def _coordinates(self):
        """The coordinate map: the learned latent, with affine handles on top (one per piece of an assembly,
        joined at its joints) unless the research switches take them away."""
        research, t = self.research, self._tensor
        c, tris = self.cubature, self.mesh.triangles
        self.handles: HandleMap | None = None
        self.assembly, self.vertex_parts = None, c.vertex_labels  # the pieces' labels, from the cubature's set-up
        if not research.handles:
            return LatentMap(self.map)
        if (research.joints != "off" and self.vertex_parts is not None and 2 <= c.parts <= joints.MAX_PARTS
                and joints.rigid_pieces(tris, self.vertex_parts)):
            self.assembly = joints.assembly(c.points, c.masses, c.pins, c.labels)
            reader = self._kinematics_reader()
            if reader is not None:  # the learned reading of what moves at each joint, before the artist's word
                self.assembly = joints.overridden(self.assembly, reader.read(self.assembly, c.points, c.masses),
                                                  c.points)
        if self.request.joints and self.assembly is None:
            raise InputError("joint overrides are for an assembly (a mesh of 2 to "
                             f"{joints.MAX_PARTS} loose closed pieces); {self.request.object_name or 'this object'!r} "
                             "is one body")
        if self.assembly is not None and self.request.joints:
            self.assembly = joints.overridden(self.assembly, self.request.joints, c.points)
        com = c.masses @ c.points / c.total_mass
        anchors = turns = slides = None
        if self.assembly is not None:  # the pieces turn at their joints: no springs from one piece to the next
            edges = self.assembly.intra_edges(c.edges)
            self.cubature = c = dataclasses.replace(c, edges=edges, bends=cubature_mod.two_hop(edges, len(c.points)))
            weights = self.assembly.weights(c.labels)
            anchors, turns = t(self.assembly.anchor_rows(com)), t(self.assembly.turn_rows())
            slides = joints.JointLimits(*map(t, joints.JointLimits.of(self.assembly, com, c.diagonal)))
        else:
            weights = handle_weights(c.points, c.masses, c.edges, self._handle_count(),
                                     c.pins if research.handle_modes == "pinned" else None)
        gradients = weight_gradients(c.points, c.edges, weights)
        self.handles = HandleMap(self.map, self.subspace.k, t(weights), t(com), t(gradients), anchors, turns, slides)
        return self.handles

    def _kinematics_reader(self) -> KinematicsReader | None:
        """The checkpoint's learned kinematics reading where the research switch (or the product's default,
        kinematics.DEFAULT) asks for it; None for the rules alone (or a checkpoint without one)."""
        choice = self.research.joints if self.research.joints != "auto" else kinematics.DEFAULT
        return KinematicsReader.load(self.checkpoint_dir) if choice == "learned" else None

    def _is_cloth(self) -> bool:
        """An open surface, with the cloth material (not the shape's prediction)."""
        return self.mesh.has_surface and not self.cubature.solid and self.request.cloth_preset != "shape"

    def _handle_count(self) -> int:
        """A closed solid's handles; an open surface's, more where it meets something or is carried by its pins."""
        solver, request = self.request.solver, self.request
        if self.cubature.solid:
            return solver.solid_handles
        touched = bool(request.colliders) or request.ground is not None or request.animated_pins
        return solver.contact_handles if touched and request.cloth_preset != "shape" else solver.handles

    def _material(self, predictor: MaterialPredictor) -> Material:
        """The shape's predicted material, with the artist's physical material, stops, overrides and multipliers."""
        request, c = self.request, self.cubature
        feats = shape_features(c.points, c.pins, c.solid, c.parts)
        predicted = predictor.predict(feats)
        typical = predictor.typical_material(feats) if self.research.solid_default == "law" else None
        if typical is not None and c.solid and c.parts == 1 and not request.young_modulus and predictor.physical:
            predicted = with_physical(predicted, predictor.physical, *typical, c.diagonal * self.driver.length_scale,
                                      True)
        if self._is_cloth():
            predicted = predicted.updated(cloth_material(request.cloth_preset))
        if request.young_modulus:  # the law wants the object's size in metres: the world's, not the mesh's units
            predicted = with_physical(predicted, predictor.physical, request.young_modulus,
                                      request.density or DEFAULT_DENSITY, c.diagonal * self.driver.length_scale,
                                      c.solid)
        if request.joint_limit:  # the artist's stop for an assembly's joints
            predicted = predicted.updated({"joint_limit": request.joint_limit})
        return predicted.updated(request.material).with_multipliers(request.stiffness, request.damping,
                                                                   request.joint_stiffness)

    def _mechanics(self, mapping) -> None:
        """The reduced mechanical system in the mesh's frame, and the step that integrates it."""
        request, local, t = self.request, self.local, self._tensor
        ground = self.ground = local.ground
        scene = Scene(t(local.gravity), t(local.wind), None if ground is None else t(ground[0]),
                      0.0 if ground is None else ground[1], self.driver)
        constants = self.material.scaled(self.cubature.total_mass, self.cubature.diagonal)
        self.system = LatentSystem(mapping, self.cubature, constants, scene, mapping.k, self.dtype, self.device,
                                   gust=(self.material.gust_amplitude, self.material.gust_frequency),
                                   orthonormal=self.research.orthonormal)
        self.h = 1.0 / (request.fps * integrators.substeps(request.fps, self._integrator()))
        self.dropped_modes = 0
        if request.solver.integrator == "verlet" and self.research.orthonormal:  # keep the modes it can follow
            self.dropped_modes = self.system.truncate_modes(VERLET_MODE_LIMIT / self.h)
        self.k = self.system.k  # the generalized coordinates (mass-orthonormal mixtures of the mapping's)

    def _vertex_drive(self) -> None:
        """How each mesh vertex follows the cubature points: its nearest points' deformations, and handle weights
        blended from theirs and smoothed along the mesh over about one cubature spacing."""
        self.vertices_norm = self._tensor(self.norm)  # decoded every frame: converted once
        self.drive_index, self.drive_weights = knn.smooth_neighbours(self.vertices_norm, self.queries[0],
                                                                     DRIVE_NEIGHBOURS)
        if self.assembly is not None:  # each vertex moves with its own piece
            self.vertex_weights = self._tensor(self.assembly.weights(self.vertex_parts))
        elif self.handles is not None:
            blended = torch.einsum("vk,vkh->vh", self.drive_weights, self.handles.weights[self.drive_index])
            v, tris = self.mesh.vertices, self.mesh.triangles
            self.vertex_weights = smooth_on_mesh(blended, tris if self.mesh.has_surface else None,  # (V, H)
                                                 WEIGHT_SMOOTHING * len(v) / len(self.cubature.points))
        else:
            self.vertex_weights = None

    # -- initial conditions ------------------------------------------------------------------------
    def initial_velocity(self) -> torch.Tensor:
        """q̇0: the least-squares fit of the requested vertex velocities, plus the seed's variation —
        a random latent velocity drawn from the prior N(0, I) projected on the subspace."""
        r, sys_ = self.request, self.system
        k = self.k
        J, _ = sys_.jacobian(torch.zeros(k, dtype=sys_.dtype, device=self.device))
        target = torch.zeros_like(sys_.rest) + torch.as_tensor(self.local.initial_velocity, dtype=sys_.dtype,
                                                               device=self.device)
        if self.driver.initial_velocities is not None:  # the animation's own motion at the first frame
            near = knn.nearest(sys_.rest.cpu(), torch.as_tensor(self.vertices, dtype=sys_.dtype), 1)[:, 0]
            target = target + torch.as_tensor(self.driver.initial_velocities[near.numpy()], dtype=sys_.dtype,
                                              device=self.device)
        if r.poke is not None:
            target = target + self._poke_field(r.poke)
        if any(r.initial_spin):
            target = target + self._spin_field(r.initial_spin)
        if not r.animated_pins:
            target = target * (1.0 - sys_.pins)[:, None]  # pinned parts are held: they start at rest
        qdot = torch.zeros(k, dtype=sys_.dtype, device=self.device)
        if bool(target.any()):
            M = sys_.mass_matrix(J)
            if self.assembly is not None:
                M = M + self._rigid_pieces_metric(M)
            qdot = torch.linalg.solve(M, torch.einsum("nik,n,ni->k", J, sys_.masses, target))
        variation = r.solver.variation
        if variation > 0:
            gen = torch.Generator().manual_seed(r.seed)
            xi = torch.randn(self.subspace.basis.shape[0], generator=gen).to(sys_.dtype).to(self.device)
            latent = variation * (self.subspace.basis.T @ xi)  # latent units per second
            qdot = qdot + sys_.reduce_velocity(torch.cat([latent, latent.new_zeros(sys_.k_full - len(latent))]))
        return qdot

    def _rigid_pieces_metric(self, M: torch.Tensor) -> torch.Tensor:
        """An assembly's pieces are rigid: a penalty on the rate of their handles' strain and on the latent's
        velocity, so that a given velocity field is fitted by the pieces' turns at their joints — not by shear (a
        thin lid's turn about its hinge and a shear of it move its points alike, but only the turn is free of
        strain), nor by the latent, which the joints do not hold."""
        sys_ = self.system
        rows = sys_.q_residual_jacobian(torch.zeros(self.k, dtype=sys_.dtype, device=self.device))
        count = sys_._f_basis.shape[0] * len(sys_._upper[0]) if sys_._f_basis is not None else 0
        strain = rows[sys_.k_prior: sys_.k_prior + count]
        gram = strain.T @ strain
        scale = RIGID_FIT * float(M.diagonal().mean())
        gram = scale * len(gram) / max(float(gram.diagonal().sum()), 1e-30) * gram
        latent = torch.zeros(len(gram), dtype=gram.dtype, device=gram.device)
        latent[: sys_.k_latent_coords] = scale
        return gram + latent.diag()

    def _spin_field(self, spin: tuple[float, float, float]) -> torch.Tensor:
        """Velocities (N, 3) in the mesh's frame of a rotation at ``spin`` (world space) about the centre of mass."""
        m, p = self.local.world_matrix, self.cubature.points
        world = np.stack([p[:, 0] * m[4 * r] + p[:, 1] * m[4 * r + 1] + p[:, 2] * m[4 * r + 2] + m[4 * r + 3]
                          for r in range(3)], 1)
        com = self.cubature.masses @ world / self.cubature.total_mass
        velocity = np.cross(np.asarray(spin), world - com)
        local = np.linalg.solve(np.asarray(self.local.linear), velocity.T).T
        return torch.as_tensor(local, dtype=self.system.dtype, device=self.device)

    def _poke_field(self, poke: Poke) -> torch.Tensor:
        idx = np.asarray(poke.vertices, np.int64)
        if idx.max() >= len(self.vertices):
            raise InputError(f"poke names vertex {int(idx.max())}, but the mesh has {len(self.vertices)} vertices")
        vel = np.asarray(self.local.poke_velocity)
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
            x = self.reduced_vertices(q)
            if t is not None:
                x = self._scene_fixups(x, t)
        out = self._in_frame(x.double().cpu().numpy(), frame)
        self.timing["decode_s"] += time.perf_counter() - started
        return out

    def reduced_vertices(self, q: torch.Tensor) -> torch.Tensor:
        """The mesh under the reduced coordinates q (V, 3), in the simulation frame, before any scene fix-up."""
        q = self.system.full(q)
        local = self.latent_vertices(q[: self.subspace.k], reuse=True)
        if self.handles is None:
            return local
        _, a, shift = self.handles.split(q)
        return self.handles.blend(local, a, shift, self.vertex_weights)

    def _in_frame(self, out: np.ndarray, frame: int | None) -> np.ndarray:
        """Simulation-frame positions expressed in the object's frame at that output frame (its animation undone)."""
        if frame is not None and self.driver.animated:
            m = np.linalg.solve(self.driver.object_matrix(frame), self.driver.m0)  # sim frame → this frame's local
            out = out @ m[:3, :3].T + m[:3, 3]
        return out

    def latent_vertices(self, latent: torch.Tensor, reuse: bool = False) -> torch.Tensor:
        """The mesh vertices under the latent alone (the handles' x̄), in the object's local frame: each vertex follows
        its nearest cubature points. ``reuse``: the step's last decode (no derivative through it)."""
        deformation = self.system.latent_deformation(latent) if reuse else self.map.deformation(latent)
        moved = knn.drive(self.vertices_norm, deformation, self.drive_index, self.model.kind, self.drive_weights)
        return moved * self.scale + self.map.centre

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
        integrator = self._integrator()
        n_sub = integrators.substeps(r.fps, integrator)
        self._record(s, 0)
        yield s
        for frame in range(1, r.frame_count):
            started = time.perf_counter()
            for _ in range(n_sub):
                s = self.system.stopped(integrator.step(self.system, s, self.h))
                guard.check(s, frame)
            self.timing["dynamics_s"] += time.perf_counter() - started
            self._record(s, frame)
            yield s

    def frames(self) -> Iterator[np.ndarray]:
        if self.detail is not None:
            yield from self._detail_frames()
            return
        for i, s in enumerate(self.states()):
            self.last_state, self._last_x = s, s.x
            yield self.vertices.copy() if i == 0 else self.decode_vertices(s.q, s.t, i)

    def _detail_frames(self) -> Iterator[np.ndarray]:
        """The cloth layer's frames: on its own, or with the reduced motion as its coarse level (two scales). It
        starts with the reduced motion's initial velocity at every vertex (the request's push, spin, poke and the
        seed's variation)."""
        layer, fps = self.detail.layer, self.request.fps
        with torch.no_grad():
            step = 1e-3
            layer.v = (self.reduced_vertices(step * self.initial.qdot) - self.reduced_vertices(0 * self.initial.qdot)) / step
        self._record_layer(0)
        yield self.vertices.copy()
        guide = self._guide() if self.research.detail_guide == "reduced" else None
        for i in range(1, self.request.frame_count):
            x0, v0 = layer.x, layer.v
            started = time.perf_counter()
            x = self.detail.frame(i)
            if guide is not None:
                layer.shift(guide.correction(x0, v0, x, (i - 1) / fps), 1.0 / fps)
                x = layer.x
            self.timing["dynamics_s"] += time.perf_counter() - started
            self._record_layer(i)
            yield self._in_frame(x.double().cpu().numpy(), i)

    def _record_layer(self, frame: int) -> None:
        kinetic, potential = self.detail.layer.energy(self._tensor(self.local.gravity))
        self.energy.append({"frame": frame, "time": frame / self.request.fps, "kinetic": kinetic,
                            "potential": potential, "total": kinetic + potential, "latent_norm": 0.0})

    def _guide(self) -> ReducedGuide:
        integrator = self._integrator()
        n_sub = integrators.substeps(self.request.fps, integrator)
        return ReducedGuide(self.system, integrator.step, self.h, n_sub, self.reduced_vertices,
                            self._tensor(self.detail.layer.topology.masses))

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
                "joint_list": [] if self.assembly is None else [j.describe() for j in self.assembly.joints],
                "penetration": {k: round(v, 6) for k, v in self.penetration.items()},
                "detail": None if self.detail is None else
                {"substeps": self.detail.layer.substeps, "guide": self.research.detail_guide}}
