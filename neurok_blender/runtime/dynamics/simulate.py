"""The NeuROK engine: encode the shape, reduce the latent, fit the initial state, integrate, decode each
frame at full resolution. ``Simulation`` is the Python API; ``NeurokEngine`` is what the worker runs.
No bpy use."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...errors import InputError
from ..data.dataset import features as point_features
from ..data.dataset import sample_surface
from ..model import checkpoint, knn, reduction
from ..model.network import NeurokModel
from . import cubature as cubature_mod
from . import energies, integrators
from .material import Material, MaterialPredictor, shape_features
from .system import LatentSystem, NeurokMap, Scene

ENCODER_POINTS = 1024
EXTRAS = {"ground": "a height (float) or {'normal': [x, y, z], 'offset': d} in local space",
          "poke": "{'vertices': [indices], 'velocity': [x, y, z]}: an initial push on some vertices",
          "initial_velocity": "[x, y, z]: every vertex starts moving with this velocity",
          "integrator": f"one of {integrators.INTEGRATORS}",
          "iterations": "Gauss–Newton iterations per implicit step (default 2)",
          "jacobian": "'difference' (default, batched one-sided differences) or 'forward' (exact forward mode)",
          "order": "implicit integrator order: 1 (backward Euler, the default the material was fitted with) or 2 (BDF2: less numerical damping, livelier)",
          "variation": "size of the seed's random initial latent velocity (default 0.5, 0 turns it off)",
          "material": "overrides of the predicted material, e.g. {'drag': 2.0}",
          "cubature": "number of cubature points (default 160)",
          "subspace": "number of generalized coordinates k_q (default 16)"}

_MODELS: dict[str, tuple[NeurokModel, MaterialPredictor]] = {}


def load_model(path: str, device: str) -> tuple[NeurokModel, MaterialPredictor]:
    """The checkpoint and its fitted material table, cached per process."""
    key = f"{os.path.abspath(path)}@{device}"
    if key not in _MODELS:
        model, _ = checkpoint.load(path, device=device)
        model.requires_grad_(False)  # the dynamics differentiate through inputs only
        _MODELS[key] = (model, MaterialPredictor.load(path))
    return _MODELS[key]


@dataclass
class Options:
    """Everything about one simulation besides the mesh. Vectors are in the mesh's local frame."""

    frames: int = 120
    fps: float = 24.0
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    wind: tuple[float, float, float] = (0.0, 0.0, 0.0)
    stiffness: float = 1.0
    damping: float = 1.0
    seed: int = 0
    ground: float | dict[str, Any] | None = None
    poke: dict[str, Any] | None = None
    initial_velocity: tuple[float, float, float] | None = None
    integrator: str = "implicit"
    iterations: int = 2
    jacobian: str = "difference"
    order: int = 1
    variation: float = 0.5
    material: dict[str, float] = field(default_factory=dict)
    cubature: int = 160
    subspace: int = 16

    def __post_init__(self) -> None:
        if self.integrator not in integrators.INTEGRATORS:
            raise InputError(f"integrator must be one of {integrators.INTEGRATORS}, got {self.integrator!r}")
        if not (isinstance(self.frames, int) and self.frames >= 1):
            raise InputError(f"frames must be a positive integer, got {self.frames!r}")
        if not (math.isfinite(self.fps) and self.fps > 0):
            raise InputError(f"fps must be positive, got {self.fps}")
        if not 8 <= int(self.cubature) <= 4096:
            raise InputError(f"cubature must be between 8 and 4096 points, got {self.cubature}")
        if not 1 <= int(self.subspace) <= 64:
            raise InputError(f"subspace must be between 1 and 64 coordinates, got {self.subspace}")
        if not (math.isfinite(self.variation) and self.variation >= 0):
            raise InputError(f"variation must be a finite number >= 0, got {self.variation}")
        if self.order not in (1, 2):
            raise InputError(f"order must be 1 or 2, got {self.order!r}")
        if self.jacobian not in ("difference", "forward"):
            raise InputError(f"jacobian must be 'difference' or 'forward', got {self.jacobian!r}")
        if not 1 <= int(self.iterations) <= 20:
            raise InputError(f"iterations must be between 1 and 20, got {self.iterations}")

    @classmethod
    def from_request(cls, request: Any) -> Options:
        extras = dict(request.extras)
        unknown = sorted(set(extras) - set(EXTRAS))
        if unknown:
            raise InputError(f"unknown request extras {unknown}; valid extras are {sorted(EXTRAS)}")
        return cls(frames=request.frame_count, fps=request.fps, gravity=request.gravity, wind=request.wind,
                   stiffness=request.stiffness, damping=request.damping, seed=request.seed, **extras)


def _ground(spec: float | dict[str, Any] | None) -> tuple[np.ndarray, float] | None:
    if spec is None:
        return None
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return np.array([0.0, 0.0, 1.0]), float(spec)
    try:
        normal, offset = np.asarray(spec["normal"], float), float(spec["offset"])
    except (TypeError, KeyError, ValueError) as exc:
        raise InputError(f"ground must be a height or {{'normal': [x, y, z], 'offset': d}}, got {spec!r}") from exc
    if normal.shape != (3,) or not np.isfinite(normal).all() or np.linalg.norm(normal) == 0 or not math.isfinite(offset):
        raise InputError(f"the ground plane needs a finite non-zero normal and offset, got {spec!r}")
    return normal / np.linalg.norm(normal), offset


class Simulation:
    """One object's simulation, set up once; ``frames()`` streams (V, 3) arrays in the input's vertex order."""

    def __init__(self, vertices: np.ndarray, triangles: np.ndarray | None, pin_weights: np.ndarray | None,
                 options: Options, checkpoint_dir: str, device: str = "cpu") -> None:
        started = time.perf_counter()
        self.options, self.device = options, device
        v = np.asarray(vertices, np.float64)
        tris = np.zeros((0, 3), np.int64) if triangles is None else np.asarray(triangles, np.int64).reshape(-1, 3)
        pins = np.zeros(len(v)) if pin_weights is None else np.asarray(pin_weights, np.float64)
        if v.ndim != 2 or v.shape[1] != 3 or len(v) == 0 or not np.isfinite(v).all():
            raise InputError("vertices must be a non-empty (V, 3) array of finite numbers")
        if pins.shape != (len(v),):
            raise InputError(f"pin weights must have one value per vertex ({len(v)}), got shape {pins.shape}")
        lo, hi = v.min(0), v.max(0)
        self.centre, self.scale = (lo + hi) / 2, float((hi - lo).max() / 2)
        if not self.scale > 1e-9:
            raise InputError("the object has zero size; nothing to simulate")
        self.vertices = v
        rng = np.random.default_rng(0)  # geometry sampling is fixed; the seed only picks the variation
        norm = (v - self.centre) / self.scale
        if len(tris) and _area(v, tris) > 0:
            self.cubature = cubature_mod.from_mesh(v, tris, pins, options.cubature, rng)
            tri, bary = sample_surface(norm, tris, ENCODER_POINTS, rng)
            feats = point_features(norm, tris, pins, tri, bary)
        else:  # a point cloud (or only degenerate faces): a kNN graph over the points
            self.cubature = cubature_mod.from_points(v, pins, options.cubature, rng)
            pick = rng.choice(len(v), size=min(ENCODER_POINTS, len(v)), replace=False)
            feats = np.concatenate([norm[pick], cubature_mod.point_normals(norm[pick]), pins[pick, None]], 1)
        self.model, predictor = load_model(checkpoint_dir, device)
        dtype = torch.float32
        t = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
        with torch.no_grad():
            mu, tokens = self.model.encode_prior(t(feats)[None])
        queries = t((self.cubature.points - self.centre) / self.scale)[None]
        k = int(options.subspace)
        self.subspace = reduction.active_subspace(self.model, mu, tokens, queries, k=k, samples=max(48, 4 * k), seed=0)
        self.map = NeurokMap(self.model, tokens, self.subspace, queries, t(self.centre), self.scale)

        predicted = predictor.predict(shape_features(self.cubature.points, self.cubature.pins, self.cubature.solid))
        self.material: Material = predicted.updated(options.material).with_multipliers(options.stiffness, options.damping)
        constants = self.material.scaled(self.cubature.total_mass, self.cubature.diagonal)
        ground = _ground(options.ground)
        scene = Scene(t(options.gravity), t(options.wind), None if ground is None else t(ground[0]),
                      0.0 if ground is None else ground[1])
        self.system = LatentSystem(self.map, self.cubature, constants, scene, self.subspace.k, dtype, device,
                                   gust=(self.material.gust_amplitude, self.material.gust_frequency))
        self.vertices_norm = t(norm)  # decoded every frame: converted once
        self.drive_index = knn.nearest(self.vertices_norm, queries[0], self.model.config.knn)
        self.energy: list[dict[str, float]] = []
        # the initial state, and one throwaway step so first-call costs (kernel selection, functorch
        # tracing) count as set-up and per-frame timings are steady-state
        q0 = torch.zeros(self.subspace.k, dtype=dtype, device=device)  # F(q0) is the input shape exactly
        self.initial = integrators.initial_state(self.system, q0, self.initial_velocity())
        n_sub = integrators.substeps(options.fps, options.integrator)
        self._step(self.initial, 1.0 / (options.fps * n_sub))
        self.system.lm = 1e-2  # the warm-up leaves no trace in the run itself
        self.timing = {"setup_s": time.perf_counter() - started, "dynamics_s": 0.0, "decode_s": 0.0}

    # -- initial conditions ------------------------------------------------------------------------
    def initial_velocity(self) -> torch.Tensor:
        """q̇0: the least-squares fit of the requested vertex velocities, plus the seed's variation —
        a random latent velocity drawn from the prior N(0, I) projected on the subspace."""
        o, sys_ = self.options, self.system
        k = self.subspace.k
        J, _ = sys_.jacobian(torch.zeros(k, dtype=sys_.dtype, device=self.device))
        target = torch.zeros_like(sys_.rest)
        if o.initial_velocity is not None:
            target = target + torch.as_tensor(o.initial_velocity, dtype=sys_.dtype, device=self.device)
        if o.poke:
            target = target + self._poke_field(o.poke)
        target = target * (1.0 - sys_.pins)[:, None]  # pinned parts are held: they start at rest
        qdot = torch.zeros(k, dtype=sys_.dtype, device=self.device)
        if bool(target.any()):
            M = sys_.mass_matrix(J)
            qdot = torch.linalg.solve(M, torch.einsum("nik,n,ni->k", J, sys_.masses, target))
        if o.variation > 0:
            gen = torch.Generator().manual_seed(int(o.seed))
            xi = torch.randn(self.subspace.basis.shape[0], generator=gen).to(sys_.dtype).to(self.device)
            qdot = qdot + o.variation * (self.subspace.basis.T @ xi)  # latent units per second
        return qdot

    def _poke_field(self, poke: dict[str, Any]) -> torch.Tensor:
        try:
            idx = np.asarray(poke["vertices"], np.int64).reshape(-1)
            vel = np.asarray(poke["velocity"], float).reshape(3)
        except (TypeError, KeyError, ValueError) as exc:
            raise InputError(f"poke must be {{'vertices': [...], 'velocity': [x, y, z]}}, got {poke!r}") from exc
        if idx.size == 0 or idx.min() < 0 or idx.max() >= len(self.vertices) or not np.isfinite(vel).all():
            raise InputError("poke names vertices outside the mesh or a non-finite velocity")
        poked = self.vertices[idx]
        d = np.linalg.norm(self.cubature.points[:, None] - poked[None], axis=-1).min(1)
        radius = 0.1 * self.cubature.diagonal
        weight = np.exp(-((d / radius) ** 2))
        return torch.as_tensor(weight[:, None] * vel, dtype=self.system.dtype, device=self.device)

    # -- stepping ------------------------------------------------------------------------------------
    def decode_vertices(self, q: torch.Tensor) -> np.ndarray:
        started = time.perf_counter()
        with torch.no_grad():
            deformation = self.map.deformation(q)
            moved = knn.drive(self.vertices_norm, deformation, self.drive_index, self.model.config.head)
            out = (moved.double().cpu().numpy() * self.scale) + self.centre
        self.timing["decode_s"] += time.perf_counter() - started
        return out

    def _record(self, s: integrators.State, frame: int) -> None:
        sys_ = self.system
        with torch.no_grad():
            kinetic = float(energies.kinetic_energy(s.xdot, sys_.masses))
            potential = float(sys_.potential(s.x, s.q))
        self.energy.append({"frame": frame, "time": s.t, "kinetic": kinetic, "potential": potential,
                            "total": kinetic + potential, "latent_norm": float(s.q.norm())})

    def _step(self, s: integrators.State, h: float) -> integrators.State:
        o = self.options
        if o.integrator == "implicit":
            return integrators.implicit_step(self.system, s, h, int(o.iterations), o.jacobian, o.order)
        with torch.no_grad():
            return integrators.verlet_step(self.system, s, h)

    def states(self) -> Iterator[integrators.State]:
        """The latent state at each output frame, starting with the rest state at frame 0."""
        o, s = self.options, self.initial
        guard = integrators.Guard(self.cubature.diagonal, torch.as_tensor(self.cubature.points.mean(0),
                                                                          dtype=self.system.dtype, device=self.device))
        n_sub = integrators.substeps(o.fps, o.integrator)
        h = 1.0 / (o.fps * n_sub)
        self._record(s, 0)
        yield s
        for frame in range(1, o.frames):
            started = time.perf_counter()
            for _ in range(n_sub):
                s = self._step(s, h)
                guard.check(s, frame)
            self.timing["dynamics_s"] += time.perf_counter() - started
            self._record(s, frame)
            yield s

    def frames(self) -> Iterator[np.ndarray]:
        for i, s in enumerate(self.states()):
            yield self.vertices.copy() if i == 0 else self.decode_vertices(s.q)

    def run(self) -> np.ndarray:
        """All frames as one (T, V, 3) array."""
        return np.stack(list(self.frames()))


def _area(v: np.ndarray, tris: np.ndarray) -> float:
    return float(np.linalg.norm(np.cross(v[tris[:, 1]] - v[tris[:, 0]], v[tris[:, 2]] - v[tris[:, 0]]), axis=1).sum())


class NeurokEngine:
    """The product engine behind Simulate and the batch script (the worker's EngineFactory)."""

    name = "neurok"

    def __init__(self, request: Any, checkpoint_dir: str) -> None:
        self.request, self.checkpoint_dir = request, checkpoint_dir
        self.options = Options.from_request(request)  # bad extras fail before any work
        self.simulation: Simulation | None = None
        checkpoint.read_config(checkpoint_dir)  # a missing or other-version checkpoint fails early and clearly

    def frames(self, request: Any, mesh: Any, device: str) -> Iterator[np.ndarray]:
        self.simulation = Simulation(mesh.vertices, mesh.triangles, mesh.pin_weights, self.options,
                                     self.checkpoint_dir, device)
        yield from self.simulation.frames()

    def stats(self) -> dict[str, Any]:
        """What the DONE message reports besides the frames: timings, the material used, the energy trace."""
        sim = self.simulation
        if sim is None:
            return {}
        trace = {key: [round(e[key], 6) for e in sim.energy] for key in ("kinetic", "potential", "total")}
        return {"timing": {k: round(v, 4) for k, v in sim.timing.items()}, "material": sim.material.to_dict(),
                "energy": trace, "cubature": len(sim.cubature.points), "subspace": sim.subspace.k}
