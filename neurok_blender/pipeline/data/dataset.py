"""Reading the dataset for training: an index of sequences by split, and a torch Dataset of
(sequence, frame pair) samples with surface points and per-point features. No bpy use."""

from __future__ import annotations

import glob
import json
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InputError
from ...runtime.geometry import features, interpolate, sample_surface


@dataclass(frozen=True)
class SequenceRef:
    shard: str
    key: int
    meta: dict[str, Any]


def index_sequences(root: str | list[str], split: str | None = None,
                    families: list[str] | None = None) -> list[SequenceRef]:
    """Every kept sequence of the dataset (optionally one split or some families), in shard order; several roots
    are read one after another, as one dataset, each sequence once: two draws of one recipe share sequences (the
    48-sequence draw's seeds are among the 400-sequence draw's), and a sequence read twice would count twice in a
    fit, a table or a training epoch."""
    if not isinstance(root, str):
        seen: set[tuple] = set()
        refs = []
        for r in root:
            for ref in index_sequences(r, split, families):
                identity = sequence_identity(ref.meta)
                if identity not in seen:
                    seen.add(identity)
                    refs.append(ref)
        return refs
    paths = sorted(glob.glob(os.path.join(root, "shards", "shard-*.npz")))
    if not paths:
        raise InputError(f"no dataset shards under {root!r}; run `python -m neurok_blender.pipeline.data generate` first")
    refs = []
    for path in paths:
        with np.load(path) as data:
            keys = sorted({int(name.split("/")[0]) for name in data.files})
            for k in keys:
                meta = json.loads(str(data[f"{k}/meta"]))
                if (split is None or meta["split"] == split) and (families is None or meta["family"] in families):
                    refs.append(SequenceRef(path, k, meta))
    return refs


def sequence_identity(meta: dict) -> tuple:
    """What makes a sequence the same sequence in another draw: its family, seed, generator and recipe (the
    generator is seeded, so these make the same frames)."""
    return (meta["family"], meta.get("seed"), meta.get("generator_version", "1.0.0"), meta.get("recipe"))


def sound(refs: list[SequenceRef], keep_collapsed: bool = False) -> list[SequenceRef]:
    """The sequences that pass today's curation where an older draw stored them: a closed solid whose volume changed
    by more than ``curate.MAX_VOLUME_CHANGE`` (an FE simulation that flattened or turned its surface inside out;
    generator 1.4.0 rejects them) is left out of fits, tables and training, and said so on stderr. Loads each solid
    sequence (elastic solid, soft toy) once to measure it."""
    from .curate import MAX_VOLUME_CHANGE, volume_change

    if keep_collapsed:
        return refs
    kept, dropped = [], []
    for ref in refs:
        change = None
        if ref.meta.get("category") in ("elastic_solid", "soft_toy"):  # sheets enclose nothing, rigid parts keep theirs
            seq = load_sequence(ref)
            change = volume_change(seq["frames"], seq["triangles"].astype(np.int64))
        (dropped if change is not None and change > MAX_VOLUME_CHANGE else kept).append(ref)
    if dropped:
        named = ", ".join(f"{r.meta['family']} {r.meta.get('seed')}" for r in dropped)
        print(f"left out {len(dropped)} collapsed solids (volume changed by more than {MAX_VOLUME_CHANGE:.0%}): "
              f"{named}", file=sys.stderr)
    return kept


def load_sequence(ref: SequenceRef) -> dict[str, np.ndarray]:
    with np.load(ref.shard) as data:
        return {name: data[f"{ref.key}/{name}"] for name in ("rest", "triangles", "frames", "pins")}


def vertex_masses(rest: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Lumped vertex areas (a third of each adjacent triangle's), floored so an unused vertex still counts."""
    tri = rest[triangles]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    masses = np.zeros(len(rest))
    np.add.at(masses, triangles.ravel(), np.repeat(area / 3.0, 3))
    return np.maximum(masses, 1e-6 * max(masses.max(), 1e-12))


def handle_residual(rest: np.ndarray, frames: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """What the affine handles cannot hold, as the latent-decoded shape x̄ the handles then carry onto each frame.

    The simulation moves a latent-decoded point by x = x̄ + Σ_h w_h (A_h (x̄ − c) + t_h) (``runtime/dynamics/
    handles.py``). Per frame the handles are fitted in closed form to the frame with x̄ at rest (least squares:
    the frame is linear in every A_h and t_h), and x̄ is solved from x = frame: x̄ = c + (I + M)⁻¹ (frame − c − T)
    with M = Σ_h w_h A_h and T = Σ_h w_h t_h per point. So handles + latent reach every training frame exactly, and
    the latent carries only what the handles miss (folds, wrinkles, bulges). Where a point's I + M is nearly
    singular (a handle fit that flattens it) the residual is added instead. ``frames`` (T, V, 3), ``weights`` (V, H)."""
    centre = rest.mean(0)
    r = rest - centre
    phi = np.concatenate([weights[:, :, None] * r[:, None, :], weights[:, :, None]], -1).reshape(len(rest), -1)
    coeff = np.linalg.pinv(phi, rcond=1e-8) @ (frames - rest).transpose(1, 0, 2).reshape(len(rest), -1)  # (4H, T·3)
    coeff = coeff.reshape(weights.shape[1], 4, len(frames), 3).transpose(2, 0, 3, 1)  # (T, H, 3 out, 4: A row | t)
    linear = np.eye(3) + np.einsum("vh,thab->tvab", weights, coeff[..., :3])  # (T, V, 3, 3)
    shift = np.einsum("vh,tha->tva", weights, coeff[..., 3])  # (T, V, 3)
    fitted = rest + np.einsum("tvab,vb->tva", linear - np.eye(3), r) + shift
    sound = np.linalg.svd(linear, compute_uv=False)[..., -1] > 0.2  # (T, V)
    unskinned = centre + np.linalg.solve(np.where(sound[..., None, None], linear, np.eye(3)),
                                         (frames - centre - shift)[..., None])[..., 0]
    return np.where(sound[..., None], unskinned, rest + frames - fitted)


class FramePairDataset:
    """Item i draws a sequence, a frame pair (a, b), surface points with features, and the
    deformations δ = X_t − X_0 at those points for both frames; query points carry δ too.

    With ``residual_handles`` H > 0 the deformations are the latent's training target under H affine handles
    (``handle_residual``): what the simulation's handles cannot reach, the latent learns.

    Subclasses ``torch.utils.data.Dataset`` when torch is importable; items are numpy float32 arrays.
    """

    def __init__(self, root: str | list[str], split: str = "train", points: int = 1024, queries: int = 1024,
                 seed: int = 0, families: list[str] | None = None, cache: int = 64,
                 residual_handles: int = 0, fit_handles: int = 0) -> None:
        self.refs = sound(index_sequences(root, split, families))  # several roots train as one dataset
        if not self.refs:
            raise InputError(f"the {split!r} split of {root!r} holds no sequences")
        self.points, self.queries, self.seed = points, queries, seed
        self.epoch = 0  # set by the training loop so every epoch draws new frames and points
        self._cache: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._cache_size = cache
        self.residual_handles = residual_handles
        self.fit_handles = fit_handles  # > 0: items carry the queries' handle weights (the loss fits handles itself)
        self._weights: dict[int, np.ndarray] = {}  # handle weights per sequence: small, kept for every epoch

    def __len__(self) -> int:
        return len(self.refs)

    def handle_weights(self, i: int, seq: dict[str, np.ndarray]) -> np.ndarray:
        """The sequence's handle weights as the simulation makes them (the smoothest modes of the spring graph)."""
        if i not in self._weights:
            from ...runtime.dynamics.handles import handle_weights
            from ...runtime.geometry import unique_edges

            tris = seq["triangles"].astype(np.int64)
            self._weights[i] = handle_weights(seq["rest"], vertex_masses(seq["rest"], tris), unique_edges(tris),
                                              self.residual_handles or self.fit_handles)
        return self._weights[i]

    def sequence(self, i: int) -> dict[str, np.ndarray]:
        if i not in self._cache:
            self._cache[i] = load_sequence(self.refs[i])
            if self.residual_handles:
                seq = self._cache[i]
                seq["frames"] = handle_residual(seq["rest"], seq["frames"], self.handle_weights(i, seq)).astype(np.float32)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(i)
        return self._cache[i]

    def __getitem__(self, i: int) -> dict[str, Any]:
        rng = np.random.default_rng([self.seed, self.epoch, i])
        seq = self.sequence(i % len(self.refs))
        rest, tris, frames, pins = seq["rest"], seq["triangles"].astype(np.int64), seq["frames"], seq["pins"]
        pair = np.sort(rng.choice(np.arange(1, len(frames)), size=2, replace=len(frames) < 3))
        tri, bary = sample_surface(rest, tris, self.points, rng)
        qtri, qbary = sample_surface(rest, tris, self.queries, rng)
        moved = frames[pair] - rest  # (2, V, 3)
        return {
            "features": features(rest, tris, pins, tri, bary).astype(np.float32),
            "delta": interpolate(moved, tris, tri, bary).astype(np.float32),  # (2, N, 3)
            "queries": interpolate(rest, tris, qtri, qbary).astype(np.float32),
            "query_delta": interpolate(moved, tris, qtri, qbary).astype(np.float32),
            "frame_pair": pair.astype(np.int64),
            "sequence": i % len(self.refs),
            **({"query_weights": interpolate(self.handle_weights(i % len(self.refs), seq), tris, qtri,
                                             qbary).astype(np.float32)} if self.fit_handles else {}),
        }


try:  # make it a real torch Dataset where torch is present, without requiring torch to import the module
    from torch.utils.data import Dataset as _TorchDataset

    FramePairDataset = type("FramePairDataset", (FramePairDataset, _TorchDataset), {})  # noqa: F811
except ImportError:  # pragma: no cover
    pass
