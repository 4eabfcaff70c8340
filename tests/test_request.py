"""SimulationRequest: the one settings type — typed, validated once, unknown keys refused, physical limits."""

from __future__ import annotations

import dataclasses
import math

import pytest

from neurok_blender.bridge.request import MATERIAL_KEYS, Ground, Poke, SimulationRequest, Solver
from neurok_blender.errors import InputError


def test_roundtrip_through_dict():
    req = SimulationRequest(output_path="/tmp/x.pc2", frame_start=5, frame_count=10, wind=(1, 2, 3),
                            ground=Ground(offset=0.5), poke=Poke((3, 4), (0, 1, 0)), solver=Solver(order=2),
                            material={"drag": 2.0})
    assert SimulationRequest.from_dict(req.to_dict()) == req
    assert req.wind == (1.0, 2.0, 3.0) and req.solver.order == 2


def test_one_set_of_defaults():
    req = SimulationRequest()
    assert (req.frame_count, req.fps, req.stiffness, req.damping) == (120, 24.0, 1.0, 1.0)
    assert req.ground is None and req.poke is None and req.solver == Solver()


def test_unknown_keys_name_the_valid_ones():
    with pytest.raises(InputError, match="valid keys are .*frame_count") as refused:
        SimulationRequest.from_dict({"output_path": "x", "frames": 3})
    listed = str(refused.value).split("valid keys are")[1]
    assert "threads" in listed and not any(name in listed for name in ("output_path", "'track'", "animated_pins"))
    with pytest.raises(InputError, match="unknown solver keys .*valid keys are .*subspace"):
        SimulationRequest.from_dict({"solver": {"subspaces": 3}})
    with pytest.raises(InputError, match="unknown material keys"):
        SimulationRequest(material={"stifness": 1.0})


@pytest.mark.parametrize("bad", [
    {"frame_count": 0}, {"frame_count": "10"}, {"fps": -1.0}, {"device": "tpu"}, {"gravity": (0, 0)},
    {"wind": (0, float("nan"), 0)}, {"seed": True}, {"solver": {"integrator": "rk4"}}, {"solver": {"order": 3}},
    {"solver": {"subspace": 0}}, {"solver": {"handles": 17}}, {"solver": {"handles": -1}},
    {"solver": {"solid_handles": 0}}, {"solver": {"solid_handles": 17}},
    {"solver": {"refresh": 0}}, {"solver": {"handles": 0}},
    {"ground": {"normal": (0, 0, 0)}}, {"poke": {"vertices": [], "velocity": (0, 1, 0)}},
    {"material": {"drag": -1.0}}, {"world_matrix": (1.0, 0.0)}, {"frame_count": 2.5},
    {"material": {"joint": -1.0}}, {"material": {"joint_limit": float("nan")}},
])
def test_bad_values_are_input_errors(bad):
    with pytest.raises(InputError):
        SimulationRequest.from_dict({"output_path": "x.pc2", **bad})


@pytest.mark.parametrize("name, value, message", [
    ("stiffness", -1.0, "stiffness multiplier must be between 0.01 and 100, got -1.0"),
    ("stiffness", 0.0, "stiffness multiplier must be between 0.01 and 100"),
    ("stiffness", math.inf, "stiffness multiplier must be a finite number"),
    ("stiffness", 1e6, "stiffness multiplier must be between 0.01 and 100"),
    ("damping", -0.5, "damping multiplier must be between 0 and 100, got -0.5"),
    ("damping", math.nan, "damping multiplier must be a finite number"),
    ("wind", (1e6, 0, 0), "wind of 1e\\+06 m/s is beyond the physical limit of 200 m/s"),
    ("wind", (150, 150, 0), "wind of 212.1 m/s is beyond the physical limit of 200 m/s"),
    ("gravity", (0, 0, -2000), "gravity of 2000 m/s² is beyond the physical limit of 1000 m/s²"),
    ("gravity", (0, math.inf, 0), "gravity must be 3 finite numbers"),
    ("initial_velocity", (0, 0, 1e4), "initial velocity of 1e\\+04 m/s is beyond"),
    ("initial_spin", (0, 0, 5000), "initial spin of 5000 rad/s is beyond the physical limit of 1000 rad/s"),
    ("young_modulus", -5.0, "young_modulus \\(Pa\\) \\(0: not given\\) must be between 1 and 1e\\+12"),
    ("young_modulus", 1e15, "young_modulus \\(Pa\\) \\(0: not given\\) must be between 1 and 1e\\+12"),
    ("young_modulus", math.nan, "young_modulus \\(Pa\\) must be a finite number"),
])
def test_unphysical_settings_are_refused_naming_the_setting_and_its_range(name, value, message):
    with pytest.raises(InputError, match=message):
        SimulationRequest(**{name: value})


def test_settings_at_the_limits_are_accepted():
    req = SimulationRequest(stiffness=0.01, damping=0.0, wind=(200, 0, 0), gravity=(0, 0, -1000))
    assert req.damping == 0.0 and req.wind == (200.0, 0.0, 0.0)


def test_a_physical_material_is_optional_and_density_needs_a_youngs_modulus():
    assert SimulationRequest().young_modulus == 0.0 and SimulationRequest().density == 0.0  # predicted from the shape
    req = SimulationRequest.from_dict({"young_modulus": 5e4, "density": 900})
    assert (req.young_modulus, req.density) == (5e4, 900.0)
    assert SimulationRequest(young_modulus=5e4).density == 0.0  # the runtime takes DEFAULT_DENSITY
    with pytest.raises(InputError, match="density is used only with young_modulus"):
        SimulationRequest(density=900.0)
    with pytest.raises(InputError, match="density \\(kg/m³\\) \\(0: not given\\) must be between 1 and 100000"):
        SimulationRequest(young_modulus=5e4, density=1e7)


def test_world_vectors_turn_into_the_mesh_frame():
    # the object is rotated 90° about z and scaled by 2: local +x points along world +y
    matrix = (0.0, -2.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0, 0.0, 0.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0)
    req = SimulationRequest(wind=(0, 4, 0), gravity=(0, 0, -9.81), world_matrix=matrix, ground=Ground(offset=1.0))
    assert req.local_wind == pytest.approx((2.0, 0.0, 0.0))
    assert req.local_gravity == pytest.approx((0.0, 0.0, -9.81 / 2))
    normal, offset = req.local_ground()
    assert normal == pytest.approx((0.0, 0.0, 1.0)) and offset == pytest.approx((1.0 - 3.0) / 2)


def test_a_flat_object_has_no_local_frame():
    flat = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    with pytest.raises(InputError, match="'Flag' has zero scale on some axis"):
        SimulationRequest(object_name="Flag", world_matrix=flat)


def test_material_keys_are_the_material_table_fields():
    material = pytest.importorskip("neurok_blender.runtime.dynamics.material")
    assert set(MATERIAL_KEYS) == {f.name for f in dataclasses.fields(material.Material)}


def test_a_number_for_the_ground_is_the_floor_height():
    assert SimulationRequest.from_dict({"ground": -0.5}).ground == Ground((0.0, 0.0, 1.0), -0.5)


@pytest.mark.parametrize("ablation", [{"latent": "exact"}, {"orthonormal": False}, {"reduction": "active"},
                                      {"handle_modes": "pinned"}, {"joints": "off"}, {"jacobian": "forward"}])
def test_an_ablation_is_not_a_solver_setting_and_the_error_says_where_it_went(ablation):
    with pytest.raises(InputError, match="research switches: the SDK's research="):
        SimulationRequest.from_dict({"solver": ablation})


@pytest.mark.parametrize("bad, message", [
    ({"latent": "quadratic"}, "research latent must be one of linearized, exact"),
    ({"reduction": "pca"}, "research reduction must be one of"), ({"joints": "glued"}, "research joints"),
    ({"handle_modes": "fixed"}, "research handle_modes"), ({"orthonormal": "yes"}, "must be true or false"),
    ({"handles": 0}, "research handles must be true or false"), ({"lattent": "exact"}, "unknown research keys"),
])
def test_research_switches_are_checked_like_settings(bad, message):
    from neurok_blender.runtime.research import Research

    with pytest.raises(InputError, match=message):
        Research.of(bad)


def test_no_research_is_the_product_and_the_product_is_the_default():
    from neurok_blender.runtime.research import PRODUCT, Research

    assert Research.of(None) is PRODUCT and Research.of({}) == PRODUCT == Research()
    assert Research.of(Research(latent="exact")).latent == "exact"


def test_the_cloth_preset_is_one_of_blenders_or_auto_or_the_shapes():
    from neurok_blender.bridge.request import CLOTH_CHOICES

    assert SimulationRequest().cloth_preset == "auto"
    for name in CLOTH_CHOICES:
        assert SimulationRequest(cloth_preset=name).cloth_preset == name
    with pytest.raises(InputError, match="cloth_preset must be one of auto, shape, cotton"):
        SimulationRequest(cloth_preset="velvet")
