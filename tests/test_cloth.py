"""Cloth behaves as cloth, through the SDK and the shipped model: what physics fixes about a dropped tablecloth and a
carried cape, and Blender's cloth presets in the order of their materials. The scenes are scripts/cloth_check.py's,
where they are also measured against Blender Cloth."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, needs_model

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import cloth_check  # noqa: E402

pytestmark = [pytest.mark.slow, needs_model]


def run(name: str, **settings) -> tuple[dict, np.ndarray]:
    scene = cloth_check.scenes()[name]
    frames, _, _ = cloth_check.neurok(scene, **settings)
    return scene, frames


def test_a_draped_cloth_hangs_below_the_balls_equator_at_its_free_edges_without_showing_through():
    scene, frames = run("drape_ball_small")  # a 1 m cloth dropped on a ball of radius 0.3 whose centre is at 0.3
    v = scene["v"]
    edge = (np.abs(v[:, 0]) > 0.49) | (np.abs(v[:, 1]) > 0.49)
    assert frames[-1][edge, 2].mean() < 0.3, frames[-1][edge, 2].mean()
    assert cloth_check.penetration(frames, scene) <= 0.01


def test_a_carried_cape_trails_behind_its_pins():
    scene, frames = run("cape_carried")  # carried 1 m across its plane in half a second
    assert cloth_check.lag(frames, scene) > 0.2
    pinned = scene["pins"] > 0
    assert np.abs(frames[-1][pinned, 1] + 1.0).max() < 0.01  # the pins went where the object went


def test_cloth_presets_fold_in_the_order_of_their_stiffness():
    """Blender's presets at this resolution (a 24 × 24 sheet on a ball): silk folds most and leather least, which
    also hangs least (Cloth: folds 16.2°, 11.9°, 3.8°; drops 0.386, 0.377, 0.329 m)."""
    folds, drops = {}, {}
    for preset in ("silk", "denim", "leather"):
        scene, frames = run("drape_ball_small", cloth_preset=preset)
        folds[preset] = cloth_check.fold_angle(frames[-12:], scene["f"])
        drops[preset] = float(scene["v"][:, 2].mean() - frames[-1][:, 2].mean())
    assert folds["silk"] > folds["denim"] > folds["leather"], folds
    assert drops["leather"] < min(drops["silk"], drops["denim"]) - 0.01, drops


def test_an_open_mesh_takes_the_cloth_material_and_a_closed_one_its_shapes():
    import trimesh

    from neurok_blender.runtime import api
    from neurok_blender.runtime.dynamics.material import cloth_material

    scene = cloth_check.scenes()["sheet_edge"]
    sheet = api.prepare(scene["v"], scene["f"], pins=scene["pins"], frame_count=2, device="cpu")
    silk = api.prepare(scene["v"], scene["f"], pins=scene["pins"], frame_count=2, device="cpu", cloth_preset="silk")
    shape = api.prepare(scene["v"], scene["f"], pins=scene["pins"], frame_count=2, device="cpu", cloth_preset="shape")
    assert sheet.material.stiffness == pytest.approx(cloth_material("auto")["stiffness"])
    assert silk.material.stiffness == pytest.approx(cloth_material("silk")["stiffness"])
    assert shape.material.compression == 1.0 and shape.material.stiffness != sheet.material.stiffness
    ball = trimesh.creation.icosphere(2, radius=0.3)
    v, f = np.asarray(ball.vertices), np.asarray(ball.faces)
    solid = [api.prepare(v, f, frame_count=2, device="cpu", cloth_preset=p).material for p in ("auto", "silk")]
    assert solid[0] == solid[1] and solid[0].compression == 1.0  # a closed mesh ignores the cloth setting


def test_an_open_surface_takes_more_handles_where_it_meets_something_or_is_carried():
    from neurok_blender.runtime import api

    scene = cloth_check.scenes()["sheet_edge"]
    v, f, pins = scene["v"], scene["f"], scene["pins"]

    def handles(**settings):
        return api.prepare(v, f, pins=pins, frame_count=2, device="cpu", **settings).stats()["handles"]

    assert handles() == 4
    assert handles(ground=0.5) == 8
    assert handles(ground=0.5, solver={"contact_handles": 6}) == 6
    assert handles(ground=0.5, cloth_preset="shape") == 4  # the shape's rule, as before cloth had its own


def test_cloth_takes_the_checkpoints_cloth_model_and_everything_else_the_shape_model(tmp_path):
    """A checkpoint folder may hold a cloth model (``cloth/``): an open surface with the cloth material decodes
    through it; a closed solid, ``cloth_preset="shape"`` and ``research={"cloth_latent": "shape"}`` through the
    shape model. Which one ran is the model object the simulation holds."""
    import shutil

    import torch
    import trimesh

    from neurok_blender.runtime import api
    from neurok_blender.runtime.dynamics.simulation import CLOTH_MODEL, load_model
    from neurok_blender.runtime.engine import DEFAULT_CHECKPOINT_DIR

    ckpt = tmp_path / "ckpt"
    shutil.copytree(DEFAULT_CHECKPOINT_DIR, ckpt, ignore=shutil.ignore_patterns(CLOTH_MODEL))
    shutil.copytree(DEFAULT_CHECKPOINT_DIR, ckpt / CLOTH_MODEL, ignore=shutil.ignore_patterns(CLOTH_MODEL))
    shape, cloth = load_model(str(ckpt), "cpu")[0], load_model(str(ckpt / CLOTH_MODEL), "cpu")[0]
    assert shape is not cloth
    scene = cloth_check.scenes()["sheet_edge"]

    def model(v, f, pins=None, **settings):
        return api.prepare(v, f, pins=pins, frame_count=2, device="cpu", checkpoint=str(ckpt), **settings).model

    assert model(scene["v"], scene["f"], scene["pins"]) is cloth
    sim = api.prepare(scene["v"], scene["f"], pins=scene["pins"], frame_count=3, device="cpu", checkpoint=str(ckpt))
    at_rest = sim.latent_vertices(torch.zeros(sim.subspace.k)).numpy()
    assert np.abs(at_rest - scene["v"]).max() < 1e-5  # the rest latent decodes the rest shape exactly
    assert np.isfinite(sim.run()).all()
    assert model(scene["v"], scene["f"], scene["pins"], cloth_preset="shape") is shape
    assert model(scene["v"], scene["f"], scene["pins"], research={"cloth_latent": "shape"}) is shape
    ball = trimesh.creation.icosphere(2, radius=0.3)
    assert model(np.asarray(ball.vertices), np.asarray(ball.faces)) is shape


def test_no_latent_leaves_handles_and_springs_alone():
    from neurok_blender.errors import InputError
    from neurok_blender.runtime import api

    scene = cloth_check.scenes()["sheet_edge"]
    v, f, pins = scene["v"], scene["f"], scene["pins"]
    one = api.prepare(v, f, pins=pins, frame_count=2, device="cpu", solver={"subspace": 1})
    none = api.prepare(v, f, pins=pins, frame_count=2, device="cpu", solver={"subspace": 1},
                       research={"no_latent": True})
    assert none.k == one.k - 1  # the latent's one direction moves nothing and is dropped
    with pytest.raises(InputError, match="cloth_latent"):
        api.prepare(v, f, pins=pins, frame_count=2, device="cpu", research={"cloth_latent": "mine"})
    with pytest.raises(InputError, match="no_latent"):
        api.prepare(v, f, pins=pins, frame_count=2, device="cpu", research={"no_latent": "yes"})


def test_spring_compression_softens_the_springs_alone_and_the_presets_keep_them_with_the_handles():
    """Two tension fields: ``compression`` on the handles' own strain, ``spring_compression`` on the stretch springs
    between cubature points (what the decoded surface's folds relieve). A preset sets both alike."""
    import torch

    from neurok_blender.runtime import api
    from neurok_blender.runtime.dynamics.material import Material, cloth_material

    assert cloth_material("auto")["spring_compression"] == cloth_material("auto")["compression"]
    assert Material().updated({"compression": 0.2}).spring_compression == 0.2  # an override carries the springs
    assert Material().updated({"compression": 0.2, "spring_compression": 1.0}).spring_compression == 1.0
    scene = cloth_check.scenes()["sheet_edge"]
    sims = {sc: api.prepare(scene["v"], scene["f"], pins=scene["pins"], frame_count=2, device="cpu",
                            material={"spring_compression": sc}) for sc in (0.01, 1.0)}
    system = sims[1.0].system
    x = system.rest * torch.tensor([0.9, 0.9, 1.0])  # squeezed in its plane: every stretch spring shorter
    e = len(system.edges)
    soft, stiff = (sims[sc].system.spring_weights_at(x)[:e] for sc in (0.01, 1.0))
    assert torch.allclose(soft, 0.1 * stiff)
    q = torch.zeros(system.k)
    assert torch.equal(sims[0.01].system.q_residual(q), sims[1.0].system.q_residual(q))  # the handles' alike
