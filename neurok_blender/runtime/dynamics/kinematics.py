"""A learned reading of an assembly's kinematics: each joint's type (hinge, slide or weld), axis and range, read
from the static shape by a small model trained on the articulated families' recorded joints
(pipeline/kinematics.py), beside the hand-written rules of joints.py. No bpy use; numpy only.

The rules find where two pieces meet and what the contact looks like (a line: a hinge; a face on a face: a weld;
else a ball joint); the reading starts from the same pieces and contact and decides what moves there:

- the type, by multinomial logistic regression on the joint's features (``joint_features``: the rules' kind, the
  pieces' spreads and mass shares, the contact's length, where the child sits above the joint);
- the axis, by scoring candidate directions (the pieces' principal axes, the rules' axis, the vertical) with a
  logistic scorer per type (``axis_candidates``) and taking the best;
- the range, by ridge regression per type: radians for a hinge, a share of the parent's extent along the axis for
  a slide.

Its output is a list of joint overrides (``bridge.request.JointOverride``), applied as an artist's would be;
the artist's own overrides come after it and win.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from ...bridge.request import JointOverride
from .joints import Assembly, Joint

TYPES = ("hinge", "slide", "weld")
DEFAULT = "rules"  # what research joints "auto" reads with: the better on the validation families (decisions#kinematics-reading)
FILE = "kinematics.json"  # in the checkpoint's folder
UP = np.array([0.0, 0.0, 1.0])


def _spread(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(principal spreads, descending (3,); principal axes as rows (3, 3))."""
    centred = points - points.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    s = np.concatenate([s, np.zeros(3 - len(s))]) / np.sqrt(max(len(points), 1))
    return s, vt if len(vt) == 3 else np.eye(3)


def _extent(points: np.ndarray, axis: np.ndarray) -> float:
    return float(np.ptp(points @ axis)) if len(points) else 0.0


def joint_features(joint: Joint, points: np.ndarray, labels: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """(16,) what the reading sees of one joint, in the object's own scale (its diagonal)."""
    diagonal = max(float(np.linalg.norm(np.ptp(points, 0))), 1e-12)
    child, parent = points[labels == joint.child], points[labels == joint.parent]
    s_child, _ = _spread(child)
    s_parent, _ = _spread(parent)
    kind = [float(joint.kind == k) for k in ("hinge", "ball", "weld")]
    share = float(masses[labels == joint.child].sum() / max(masses.sum(), 1e-12))
    largest = max(float(np.ptp(child, 0).max()), 1e-12)
    offset = child.mean(0) - np.asarray(joint.anchor, float)
    upright = abs(float(joint.axis @ UP)) if joint.axis is not None else 0.0
    return np.array([*kind, *(s_child / diagonal), *(s_parent / diagonal), share, joint.half_length / largest, upright,
                     float(offset @ UP) / diagonal, float(np.linalg.norm(offset[:2])) / diagonal,
                     float((child.mean(0) - parent.mean(0)) @ UP) / diagonal, 1.0])


def axis_candidates(joint: Joint, points: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(directions (C, 3), their features (C, 13)): the child's and the parent's principal axes, the rules' axis
    (when it has one) and the vertical."""
    child, parent = points[labels == joint.child], points[labels == joint.parent]
    _, child_axes = _spread(child)
    _, parent_axes = _spread(parent)
    directions, tags = [], []
    for k in range(3):
        directions.append(child_axes[k])
        tags.append(("child", k))
    for k in range(3):
        directions.append(parent_axes[k])
        tags.append(("parent", k))
    if joint.axis is not None and not joint.weld:
        directions.append(np.asarray(joint.axis, float))
        tags.append(("found", 0))
    directions.append(UP)
    tags.append(("up", 0))
    offset = child.mean(0) - np.asarray(joint.anchor, float)
    offset = offset / max(float(np.linalg.norm(offset)), 1e-12)
    child_size, parent_size = max(float(np.ptp(child, 0).max()), 1e-12), max(float(np.ptp(parent, 0).max()), 1e-12)
    found = np.asarray(joint.axis, float) if joint.axis is not None else np.zeros(3)
    rows = []
    for d, (source, k) in zip(directions, tags):
        one_hot = [float(source == "child" and k == i) for i in range(3)] + \
                  [float(source == "parent" and k == i) for i in range(3)] + [float(source == "found"), float(source == "up")]
        rows.append(one_hot + [abs(float(d @ UP)), _extent(child, d) / child_size, _extent(parent, d) / parent_size,
                               abs(float(d @ found)), abs(float(d @ offset))])
    return np.array(directions), np.array(rows)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


@dataclass(frozen=True)
class KinematicsReader:
    """The trained reading (weights from ``FILE``): feature standardization, the type's logistic regression, an
    axis scorer and a range regression per type."""

    mean: np.ndarray  # (F,)
    scale: np.ndarray  # (F,)
    type_weights: np.ndarray  # (F, len(TYPES))
    axis_mean: np.ndarray  # (A,)
    axis_scale: np.ndarray
    axis_weights: dict  # type → (A,)
    range_weights: dict  # type → (F, 2)

    @classmethod
    def load(cls, folder: str) -> KinematicsReader | None:
        path = os.path.join(folder, FILE)
        if not os.path.isfile(path):
            return None
        with open(path) as fh:
            data = json.load(fh)
        arr = lambda v: np.asarray(v, float)  # noqa: E731
        return cls(arr(data["mean"]), arr(data["scale"]), arr(data["type_weights"]), arr(data["axis_mean"]),
                   arr(data["axis_scale"]), {k: arr(v) for k, v in data["axis_weights"].items()},
                   {k: arr(v) for k, v in data["range_weights"].items()})

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "scale": self.scale.tolist(), "type_weights": self.type_weights.tolist(),
                "axis_mean": self.axis_mean.tolist(), "axis_scale": self.axis_scale.tolist(),
                "axis_weights": {k: v.tolist() for k, v in self.axis_weights.items()},
                "range_weights": {k: v.tolist() for k, v in self.range_weights.items()}}

    def standardized(self, features: np.ndarray) -> np.ndarray:
        return (features - self.mean) / self.scale

    def joint_type(self, features: np.ndarray) -> str:
        return TYPES[int(np.argmax(self.standardized(features) @ self.type_weights))]

    def axis(self, kind: str, directions: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        scores = ((candidates - self.axis_mean) / self.axis_scale) @ self.axis_weights[kind]
        return directions[int(np.argmax(scores))]

    def joint_range(self, kind: str, features: np.ndarray, joint: Joint, axis: np.ndarray, points: np.ndarray,
                    labels: np.ndarray) -> tuple[float, float]:
        """(lower ≤ 0 ≤ upper): radians for a hinge; for a slide, its share times the parent's extent along the axis."""
        lower, upper = self.standardized(features) @ self.range_weights[kind]
        if kind == "slide":
            reach = _extent(points[labels == joint.parent], axis)
            lower, upper = lower * reach, upper * reach
        return min(float(lower), -1e-3), max(float(upper), 1e-3)

    def read(self, found: Assembly, points: np.ndarray, masses: np.ndarray) -> list[JointOverride]:
        """The joints as the reading sees them, as overrides of the rules' (1, 2, … in their order)."""
        out = []
        for number, joint in enumerate(found.joints, 1):
            features = joint_features(joint, points, found.labels, masses)
            kind = self.joint_type(features)
            if kind == "weld":
                out.append(JointOverride(joint=number, type="weld"))
                continue
            directions, candidates = axis_candidates(joint, points, found.labels)
            axis = self.axis(kind, directions, candidates)
            limits = self.joint_range(kind, features, joint, axis, points, found.labels)
            out.append(JointOverride(joint=number, type=kind, axis=tuple(float(v) for v in axis), range=limits))
        return out
