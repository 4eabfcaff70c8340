"""SimulationRequest: typed, validated, rejects unknown keys."""

from __future__ import annotations

import pytest

from neurok_blender.bridge.request import SimulationRequest
from neurok_blender.errors import InputError


def test_roundtrip_through_dict():
    req = SimulationRequest(output_path="/tmp/x.pc2", frame_start=5, frame_count=10, wind=(1, 2, 3))
    assert SimulationRequest.from_dict(req.to_dict()) == req
    assert req.wind == (1.0, 2.0, 3.0)


def test_unknown_keys_name_the_valid_ones():
    with pytest.raises(InputError, match="valid keys are .*frame_count"):
        SimulationRequest.from_dict({"output_path": "x", "frames": 3})


@pytest.mark.parametrize("bad", [
    {"frame_count": 0}, {"frame_count": "10"}, {"fps": -1.0}, {"device": "tpu"}, {"gravity": (0, 0)},
    {"wind": (0, float("nan"), 0)}, {"stiffness": -1.0}, {"output_path": ""}, {"seed": True},
])
def test_bad_values_are_input_errors(bad):
    with pytest.raises(InputError):
        SimulationRequest.from_dict({"output_path": "x.pc2", **bad})
