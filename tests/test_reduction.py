"""The simulation's latent coordinates from the model's learned reduction, or an active subspace fitted at
set-up (the ablation): which one a bake uses, and a clear error when the checkpoint cannot give what is asked."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.runtime import api  # noqa: E402
from neurok_blender.runtime.model import checkpoint  # noqa: E402
from neurok_blender.runtime.model.config import PRESETS  # noqa: E402
from neurok_blender.runtime.model.network import NeurokModel  # noqa: E402
from tests.conftest import grid_sheet  # noqa: E402


@pytest.fixture(scope="module")
def learned_checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = NeurokModel(dataclasses.replace(PRESETS["neurok-xs"], reduced_k=3))
    with torch.no_grad():
        for p in model.head.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # a decoder whose output depends on the latent
    path = str(tmp_path_factory.mktemp("ckpt") / "learned")
    checkpoint.save(model, path)
    return path, model


def run(path, subspace, **research):
    v, tris = grid_sheet(6, 5)
    pins = np.zeros(len(v))
    pins[:6] = 1.0
    sim = api.prepare(v, tris, pins=pins, checkpoint=path, device="cpu", frame_count=3,
                      solver={"cubature": 24, "handles": 1, "variation": 0.0, "subspace": subspace}, research=research)
    return sim, sim.run()


def test_a_bake_takes_the_models_learned_directions(learned_checkpoint):
    path, model = learned_checkpoint
    sim, frames = run(path, subspace=3)
    assert sim.subspace.kind == "learned" and sim.stats()["reduction"] == "learned"
    assert sim.subspace.basis.shape == (model.config.latent_tokens * model.config.latent_dim, 3)
    assert torch.allclose(sim.subspace.basis.T @ sim.subspace.basis, torch.eye(3), atol=1e-5)
    assert np.isfinite(frames).all()
    two, _ = run(path, subspace=2)  # fewer: the leading directions
    assert torch.allclose(two.subspace.basis, sim.subspace.basis[:, :2], atol=1e-5)
    active, frames_active = run(path, subspace=3, reduction="active")  # the ablation
    assert active.subspace.kind == "active" and active.stats()["reduction"] == "active"
    assert np.isfinite(frames_active).all()
    more, _ = run(path, subspace=4)  # "auto" and more than the model learned: an active subspace
    assert more.subspace.kind == "active"


def test_asking_for_more_learned_directions_than_the_model_has_is_an_input_error(learned_checkpoint):
    path, _ = learned_checkpoint
    with pytest.raises(InputError, match="learned 3 latent directions, fewer than the 4 asked for"):
        run(path, subspace=4, reduction="learned")
    with pytest.raises(InputError, match="reduction"):
        run(path, subspace=3, reduction="pca")
