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


def test_cloth_presets_drape_in_the_order_of_their_materials():
    drops = {}
    for preset in ("silk", "denim", "leather"):
        scene, frames = run("drape_ball_small", cloth_preset=preset)
        drops[preset] = float(scene["v"][:, 2].mean() - frames[-1][:, 2].mean())
    assert drops["silk"] > drops["denim"] > drops["leather"], drops


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
