"""A closed solid's material by name (jelly, rubber, plastic, wood, metal): each sets a Young's modulus and density
through the calibrated law, a dropped solid deforms in the order of their stiffness, and a wrong name is refused."""

from __future__ import annotations

import numpy as np
import pytest

from neurok_blender.bridge.request import SOLID_MATERIALS, SimulationRequest
from neurok_blender.errors import InputError
from tests.conftest import needs_model

torch = pytest.importorskip("torch")


def test_a_named_material_sets_its_modulus_and_density():
    request = SimulationRequest(solid_material="rubber")
    assert (request.young_modulus, request.density) == SOLID_MATERIALS["rubber"]
    again = SimulationRequest.from_dict(request.to_dict())  # the wire's round trip keeps it
    assert (again.solid_material, again.young_modulus) == ("rubber", SOLID_MATERIALS["rubber"][0])


@pytest.mark.parametrize("settings, message", [
    ({"solid_material": "steel"}, "solid_material must be one of jelly, rubber, plastic, wood, metal, got 'steel'"),
    ({"solid_material": "wood", "young_modulus": 1e5}, "give the material's name or its numbers, not both"),
])
def test_a_wrong_or_contradicted_material_is_refused_in_one_line(settings, message):
    with pytest.raises(InputError, match=message) as refused:
        SimulationRequest.from_dict(settings)
    assert "\n" not in str(refused.value)


def non_rigid(frames: np.ndarray, rest: np.ndarray) -> float:
    """The largest departure from a rigid motion of the rest shape over the frames, over the shape's size."""
    worst = 0.0
    a = rest - rest.mean(0)
    for x in frames:
        b = x - x.mean(0)
        u, _, vt = np.linalg.svd(a.T @ b)
        d = np.sign(np.linalg.det(u @ vt))
        r = u @ np.diag([1.0, 1.0, d]) @ vt
        worst = max(worst, float(np.sqrt(((a @ r - b) ** 2).sum(1).mean())))
    return worst / float(np.ptp(rest, 0).max())


@needs_model
@pytest.mark.slow
def test_a_dropped_solid_deforms_in_the_order_of_its_materials_stiffness():
    import trimesh

    from neurok_blender.runtime import api

    ball = trimesh.creation.icosphere(2, radius=0.3)
    v, f = np.asarray(ball.vertices) + [0.0, 0.0, 0.6], np.asarray(ball.faces)
    squash = {}
    for name in ("jelly", "rubber", "plastic", "metal"):
        frames = api.simulate(v, f, frame_count=20, device="cpu", ground=0.0, solid_material=name).frames
        squash[name] = non_rigid(frames, v)
    assert squash["jelly"] > squash["rubber"] > squash["plastic"], squash
    assert squash["metal"] <= squash["plastic"] * 1.05 + 1e-4, squash
