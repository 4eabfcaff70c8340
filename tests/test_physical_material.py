"""A closed solid's material in physical units: Young's modulus and density set the stiffness through the
checkpoint's calibrated law (runtime/dynamics/material.py: PhysicalLaw), so a soft rubber block sags where a
stiff one holds. The law's fit and its refusals are exact; the sag comparison is physics, not timing."""

from __future__ import annotations

import numpy as np
import pytest

from neurok_blender.errors import InputError
from neurok_blender.runtime.dynamics.material import Material, MaterialPredictor, PhysicalLaw, with_physical
from tests.conftest import SHIPPED_CHECKPOINT, needs_model


def test_the_law_is_a_power_of_youngs_modulus_over_density_gravity_and_size():
    numbers = np.array([0.3, 1.0, 4.0, 30.0, 200.0])
    law = PhysicalLaw.fit(numbers, 3.0 * numbers**1.25)
    assert (law.scale, law.exponent, law.fitted_on) == (pytest.approx(3.0), pytest.approx(1.25), 5)
    assert law.spread == pytest.approx(0.0, abs=1e-9)
    base = law.stiffness(1e5, 1000.0, 1.0)
    assert base == pytest.approx(3.0 * (1e5 / (1000.0 * 9.81)) ** 1.25)
    assert law.stiffness(2e5, 1000.0, 1.0) == pytest.approx(base * 2**1.25)  # twice as stiff a material
    assert law.stiffness(1e5, 2000.0, 1.0) == pytest.approx(base / 2**1.25)  # twice as heavy: sags as a softer one
    assert law.stiffness(1e5, 1000.0, 2.0) == pytest.approx(base / 2**1.25)  # twice as large: sags as a softer one
    with pytest.raises(ValueError, match="at least two distinct materials"):
        PhysicalLaw.fit(np.array([1.0, 1.0]), np.array([2.0, 3.0]))


def test_a_physical_material_keeps_the_bending_ratio_and_refuses_what_it_was_not_fitted_for():
    law = PhysicalLaw(scale=2.0, exponent=1.0)
    predicted = Material(stiffness=10.0, bending=0.5)
    out = with_physical(predicted, law, 9810.0, 1000.0, 1.0, solid=True)
    assert out.stiffness == pytest.approx(2.0) and out.bending == pytest.approx(0.1)
    assert out.drag == predicted.drag  # the rest stays predicted
    with pytest.raises(InputError, match="closed solids"):
        with_physical(predicted, law, 9810.0, 1000.0, 1.0, solid=False)
    with pytest.raises(InputError, match="no calibrated physical-material law"):
        with_physical(predicted, None, 9810.0, 1000.0, 1.0, solid=True)


@needs_model
def test_the_shipped_checkpoint_carries_a_law_fitted_on_its_training_solids():
    law = MaterialPredictor.load(str(SHIPPED_CHECKPOINT)).physical
    assert law is not None and law.fitted_on >= 10
    assert 0.5 < law.exponent < 2.0  # near the strain energy's own E / (ρ g ℓ), not a degenerate fit


def block():
    trimesh = pytest.importorskip("trimesh")
    s = trimesh.creation.box(extents=(0.3, 0.3, 0.6)).subdivide().subdivide()
    return np.asarray(s.vertices) + [0.0, 0.0, 1.0], np.asarray(s.faces)


@needs_model
def test_a_soft_block_hung_from_its_top_sags_where_a_stiff_one_holds():
    pytest.importorskip("torch")
    from neurok_blender.runtime import api

    v, f = block()
    pins = (v[:, 2] > v[:, 2].max() - 1e-6).astype(float)
    free = pins == 0

    def sag(young: float) -> tuple[float, float]:
        sim = api.prepare(v, f, pins=pins, frame_count=13, device="cpu", young_modulus=young, density=1000.0,
                          solver={"variation": 0.0})
        frames = sim.run()
        return float((v[free, 2].mean() - frames[:, free, 2].mean(1)).max()), sim.material.stiffness

    soft, soft_stiffness = sag(3e3)  # a soft gel
    stiff, stiff_stiffness = sag(3e6)  # a hard rubber
    assert soft_stiffness < stiff_stiffness / 100  # a thousand times the modulus: orders of magnitude stiffer
    assert soft > 0.05  # the gel sags under its own weight (0.34 m of its 0.6 m here)
    assert stiff < 0.005  # the rubber hardly moves (0.2 mm here)


@needs_model
def test_a_sheet_given_a_youngs_modulus_is_refused():
    pytest.importorskip("torch")
    from neurok_blender.runtime import api
    from tests.conftest import grid_sheet

    v, f = grid_sheet()
    with pytest.raises(InputError, match="closed solids"):
        api.prepare(v, f, frame_count=3, device="cpu", young_modulus=1e5)
