"""The learned kinematics reading (runtime/dynamics/kinematics.py, trained by pipeline/kinematics.py): it reads a
joint's type, axis and range from the static shape, trained on the training families' recorded joints."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")  # the pieces come from the runtime's cubature and joints

from neurok_blender.pipeline import kinematics  # noqa: E402
from neurok_blender.runtime.dynamics.kinematics import (  # noqa: E402
    FILE,
    TYPES,
    KinematicsReader,
    axis_candidates,
    joint_features,
)

SHIPPED = "neurok_blender/runtime/weights/neurok-s"


def test_labels_come_from_the_specs_own_joints():
    """A slider's one joint is a slide along its rail; a lamp's head, which hardly turns, is labelled a weld."""
    (slide,) = kinematics.labelled_joints("slider", 3)
    assert slide["kind"] == "slide" and slide["range"][0] < 0 < slide["range"][1]
    kinds = [s["kind"] for s in kinematics.labelled_joints("lamp", 3)]
    assert sorted(kinds) == ["hinge", "hinge", "weld"]
    features = joint_features(slide["joint"], slide["points"], slide["labels"], slide["masses"])
    directions, candidates = axis_candidates(slide["joint"], slide["points"], slide["labels"])
    assert features.shape == (16,) and np.all(np.isfinite(features)) and features[-1] == 1.0
    assert len(directions) == len(candidates) and np.allclose(np.linalg.norm(directions, axis=1), 1.0)


def test_training_is_deterministic_and_learns_what_the_rules_cannot_see(tmp_path):
    """Trained on a few seeds of the training families, the reading calls a held-out slider's joint a slide
    along its rail (the rules see a face resting on a face: a weld) and a door's a hinge about its frame."""
    samples = [s for fam in kinematics.TRAIN_FAMILIES for seed in range(12) for s in kinematics.labelled_joints(fam, seed)]
    reader, again = kinematics.train(samples), kinematics.train(samples)
    assert np.array_equal(reader.type_weights, again.type_weights)
    fresh = kinematics.labelled_joints("slider", 500) + kinematics.labelled_joints("door", 500)
    table = kinematics.compare(fresh, reader)
    assert table["slider"]["learned"]["type_accuracy"] == 1.0 and table["slider"]["rules"]["type_accuracy"] == 0.0
    assert table["slider"]["learned"]["axis_degrees"] < 10.0
    assert table["door"]["learned"]["type_accuracy"] == 1.0 and table["door"]["learned"]["axis_degrees"] < 10.0


def test_the_shipped_reading_loads_and_reads_every_joint():
    reader = KinematicsReader.load(SHIPPED)
    assert reader is not None and reader.type_weights.shape == (16, len(TYPES))
    assert KinematicsReader.load("/nonexistent") is None
    sample = kinematics.labelled_joints("slider", 7)[0]
    from neurok_blender.runtime.dynamics.joints import Assembly

    (override,) = reader.read(Assembly(sample["labels"], 0, [sample["joint"]], {}), sample["points"], sample["masses"])
    assert override.type == "slide" and abs(float(np.asarray(override.axis) @ sample["axis"])) > 0.95
    assert override.range[0] < 0 < override.range[1]


def test_the_trainer_refuses_held_out_families(tmp_path):
    with pytest.raises(SystemExit):
        kinematics.main(["train", "--families", "drawer", "--sequences", "1", "--out", str(tmp_path / FILE)])
