"""Jointed assemblies: an object modelled as separate closed pieces — a desk lamp's base, arms and head; a laptop's
base and lid — moves as parts that turn about the places where they meet. No bpy use; no torch either.

The affine handles (handles.py) become one per piece: the whole-object handle, then one more for every piece but
the root (the most pinned piece, else the heaviest), each weighing 1 on its piece and 0 elsewhere, so a piece's
rigid turn is an exact point of the space. Pieces are joined in a tree (the shortest gaps first, Kruskal's rule
over the pieces' cubature points), each joint where its two pieces meet (the midpoints of their closest point
pairs), of the kind the contact suggests (``contact_joint``): a hinge along a line of contact (a door on its frame,
a lid on a laptop's base); a hinge across two bars meeting at an angle (a lamp's elbow), and at the foot of the bar
below it about the same axis (``_planar_chains``: a linkage turns in its plane); a weld where a face rests on a
face; else a ball joint. Both pieces carry the joint's anchors (a ball joint's or a weld's centre, a hinge's two
ends) to the same place — three equations per anchor, linear in the handle coordinates, which the mass-orthonormal
basis satisfies exactly (its columns are taken in their null space; a weld adds the pieces' relative turn). A
rotational spring (``Material.joint``) resists the relative turn, ½ k ‖F_child − F_parent‖² (rotation-invariant,
2θ² for a turn θ), and a stiff stop past ``Material.joint_limit`` holds it (LatentSystem). The springs of the
cubature graph that crossed from one piece to another are dropped: they glued the pieces into one elastic body, so
an assembly could not fold.

A hinge hidden inside a patch of contact with no linkage to show its plane (a bar standing alone on a base), a
slide's direction and a joint's own limits are not in a mesh; the rotational spring, the fitted limit and the
learned latent stand in for them. The articulated families' simulator has them (pipeline/data/families.py), which
is what the held-out lamps measure (docs/results.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ...errors import InputError
from .cubature import is_closed
from .handles import DOF

MAX_PARTS = 8  # more loose pieces than this (a scatter of debris, a mesh of many islands) is not an assembly
CONTACT_BAND = 0.03  # a joint's anchor averages the point pairs within this share of the diagonal of the closest


HINGE_RATIO = 3.0  # a contact (or a piece) this many times longer than it is wide is a line (a bar)
CROSSING_ANGLE = 30.0  # degrees: two bars meeting at least this far from parallel turn in the plane they span
# a contact as wide as this share of the smaller piece's length is a face resting on a face. A slide along it (a
# drawer) let the child fly off: nothing in a mesh says where a slide stops, and a lamp's head slid off its arm
FACE_SHARE = 0.5


@dataclass(frozen=True)
class Joint:
    parent: int  # pieces (labels)
    child: int
    anchor: np.ndarray  # (3,) rest position, in the cubature's units
    axis: np.ndarray | None = None  # (3,) unit: a hinge along the line where the pieces meet; None: a ball joint
    half_length: float = 0.0  # a hinge's anchors sit this far either side of ``anchor`` along ``axis``
    weld: bool = False  # a face resting on a face: the pieces move as one (``axis`` is the faces' normal)
    slide: bool = False  # the child moves along ``axis`` only, without turning (a drawer on its runners)
    # how far it may go from rest: a hinge's turn about ``axis`` (rad; the larger side stops both ways), a slide's
    # travel along it (the cubature's units, lower ≤ 0 ≤ upper); None: the material's joint_limit, a free slide
    limits: tuple[float, float] | None = None

    @property
    def kind(self) -> str:
        return "weld" if self.weld else "slide" if self.slide else "ball" if self.axis is None else "hinge"

    def anchors(self) -> list[np.ndarray]:
        """The points both pieces must share: the centre of a ball joint, a weld or a slide, a hinge's two ends."""
        if self.axis is None or self.weld or self.slide:
            return [np.asarray(self.anchor, float)]
        return [self.anchor - self.half_length * self.axis, self.anchor + self.half_length * self.axis]

    def describe(self) -> dict:
        """What a report shows of the joint, for an artist to check or override it."""
        out = {"kind": self.kind, "parent": int(self.parent), "child": int(self.child),
               "anchor": [round(float(v), 6) for v in self.anchor]}
        if self.axis is not None and not self.weld:
            out["axis"] = [round(float(v), 6) for v in self.axis]
        if self.limits is not None:
            out["range"] = [float(v) for v in self.limits]
        return out


def _long_axis(points: np.ndarray) -> np.ndarray | None:
    """A piece's long direction when it is a bar (its longest principal spread HINGE_RATIO times the next), else None."""
    if len(points) < 3:
        return None
    _, spread, vt = np.linalg.svd(points - points.mean(0), full_matrices=False)
    return vt[0] if spread[0] > HINGE_RATIO * max(spread[1], 1e-12) else None


def contact_joint(parent: int, child: int, midpoints: np.ndarray, parent_points: np.ndarray | None = None,
                  child_points: np.ndarray | None = None) -> Joint:
    """The joint where two pieces meet, from the midpoints (K, 3) of their closest point pairs: a hinge across two
    bars that meet at an angle (a lamp's upper arm on its lower one, an elbow), about the normal of the plane they
    span — the linkage turns in its own plane; a hinge along the contact when it is a line (its longest principal
    spread HINGE_RATIO times the next: a door along its frame, a laptop's lid along the base's back edge); a weld
    where a face rests on a face (the contact spans half the smaller piece or more: a drawer on its cabinet's
    floor, a lamp's head on its arm's end), the pieces moving as one; else a ball joint at the contact's centre (a
    lamp's arm standing on its base).

    The crossing comes first: two bars that cross touch over a patch no longer than they are thick, and the few
    cubature points there can fall on a "line" by chance, which would hinge an elbow about the wrong axis
    (docs/decisions.md#crossing-bars)."""
    centre = midpoints.mean(0)
    crossing = _crossing_hinge(parent, child, centre, parent_points, child_points)
    if crossing is not None:
        return crossing
    along_contact = _long_axis(midpoints)
    if along_contact is not None:
        along = (midpoints - centre) @ along_contact
        return Joint(parent, child, centre + 0.5 * (along.max() + along.min()) * along_contact, along_contact,
                     0.5 * float(along.max() - along.min()))
    if parent_points is not None and child_points is not None and len(midpoints) >= 3:
        _, _, vt = np.linalg.svd(midpoints - centre, full_matrices=False)
        smaller = min((parent_points, child_points), key=lambda p: float(np.ptp(p, 0).max()))
        if float(np.ptp(midpoints @ vt[0])) >= FACE_SHARE * float(np.ptp(smaller, 0).max()):
            return Joint(parent, child, centre, vt[2], 0.0, weld=True)
    return Joint(parent, child, centre)


def _crossing_hinge(parent: int, child: int, centre: np.ndarray, parent_points: np.ndarray | None,
                    child_points: np.ndarray | None) -> Joint | None:
    """A hinge through ``centre`` about the normal of the plane two bars span, when both pieces are bars meeting
    at least CROSSING_ANGLE from parallel; else None."""
    bars = [None if p is None else _long_axis(p) for p in (parent_points, child_points)]
    if bars[0] is None or bars[1] is None:
        return None
    normal = np.cross(bars[0], bars[1])
    if np.linalg.norm(normal) <= np.sin(np.radians(CROSSING_ANGLE)):
        return None
    normal /= np.linalg.norm(normal)
    width = max(float(np.ptp(p @ normal)) for p in (parent_points, child_points))
    return Joint(parent, child, centre, normal, 0.5 * width)


@dataclass(frozen=True)
class Assembly:
    """An object's pieces and joints, over its cubature points."""

    labels: np.ndarray  # (N,) the piece of each cubature point
    root: int  # the piece with no handle of its own (it moves with the whole-object handle only)
    joints: list[Joint]
    handle_of: dict[int, int]  # piece → its handle (1, 2, …; the root has none)

    @property
    def handles(self) -> int:
        return 1 + len(self.handle_of)

    def weights(self, labels: np.ndarray) -> np.ndarray:
        """(len(labels), handles): 1 for the whole-object handle, 1 for the piece's own, 0 elsewhere."""
        w = np.zeros((len(labels), self.handles))
        w[:, 0] = 1.0
        for piece, h in self.handle_of.items():
            w[labels == piece, h] = 1.0
        return w

    def intra_edges(self, edges: np.ndarray) -> np.ndarray:
        """The springs that stay within one piece."""
        return edges[self.labels[edges[:, 0]] == self.labels[edges[:, 1]]] if len(edges) else edges

    def _difference(self, joint: Joint) -> np.ndarray:
        """(H,) the child's handle weights minus the parent's."""
        d = np.zeros(self.handles)
        for piece, sign in ((joint.child, 1.0), (joint.parent, -1.0)):
            if piece in self.handle_of:
                d[self.handle_of[piece]] += sign
        return d

    def anchor_rows(self, centre: np.ndarray) -> np.ndarray:
        """(3 J, 12 H): the gap a state opens at each joint's anchor, linear in the handle coordinates —
        Σ_h (w_child,h − w_parent,h) (A_h (a − c) + t_h) for the rest anchor a and the handles' centre c."""
        blocks = []
        for joint in self.joints:
            for anchor in joint.anchors():
                rows = self._gap_rows(joint, anchor, centre)
                if joint.slide:  # only the gap across the axis is held, and the turn: it moves along the axis
                    rows = _across(joint.axis) @ rows
                # a weld and a slide keep the pieces' relative turn too (all of F_c − F_p)
                blocks += [rows, self._turn_block(joint)] if joint.weld or joint.slide else [rows]
        return np.concatenate([np.atleast_2d(b) for b in blocks]) if blocks else np.zeros((0, DOF * self.handles))

    def _gap_rows(self, joint: Joint, anchor: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """(3, 12 H): the gap the child opens from its parent at ``anchor``, linear in the handle coordinates."""
        r, rows = anchor - centre, np.zeros((3, DOF * self.handles))
        for h, d in enumerate(self._difference(joint)):
            if d:
                for b in range(3):
                    rows[b, DOF * h + 3 * b: DOF * h + 3 * b + 3] = d * r  # A_h[b, :]
                    rows[b, DOF * h + 9 + b] = d  # t_h[b]
        return rows

    def _turn_block(self, joint: Joint) -> np.ndarray:
        """(9, 12 H): F_child − F_parent of one joint, linear in the handle coordinates."""
        rows = np.zeros((9, DOF * self.handles))
        for h, d in enumerate(self._difference(joint)):
            if d:
                rows[:, DOF * h: DOF * h + 9] = d * np.eye(9)
        return rows

    def turn_rows(self) -> np.ndarray:
        """(9 J, 12 H): F_child − F_parent at each joint (Σ_h (w_child,h − w_parent,h) A_h), linear in the handles;
        zero for a weld or a slide, whose turn ``anchor_rows`` holds."""
        blocks = [np.zeros((9, DOF * self.handles)) if joint.weld or joint.slide else self._turn_block(joint)
                  for joint in self.joints]
        return np.concatenate(blocks) if blocks else np.zeros((0, DOF * self.handles))

    def turn_limits(self) -> np.ndarray:
        """(J,) each joint's symmetric turn limit (rad): NaN where the material's ``joint_limit`` holds, inf where
        the joint's own range stops it instead (``hinge_rows``)."""
        return np.array([np.inf if j.limits is not None and j.kind == "hinge" else np.nan for j in self.joints])

    def limited_hinges(self) -> list[Joint]:
        return [j for j in self.joints if j.limits is not None and j.kind == "hinge"]

    def hinge_rows(self) -> np.ndarray:
        """(2 L, 12 H): for each hinge with its own range, sin θ and cos θ − 1 of its turn θ about its axis, linear
        in the handles — ½ a·vee(ΔF − ΔFᵀ) and ½ tr(P ΔF) with ΔF = F_child − F_parent and P = I − a aᵀ; exact
        while the parent has not turned (θ = atan2(sin, cos) then reads the signed turn over the whole circle)."""
        rows = []
        for joint in self.limited_hinges():
            a = np.asarray(joint.axis, float)
            skew = np.zeros((3, 3))  # sin θ = Σ skew ⊙ ΔF
            for i, j, k in ((0, 2, 1), (1, 0, 2), (2, 1, 0)):
                skew[j, k] += 0.5 * a[i]
                skew[k, j] -= 0.5 * a[i]
            plane = 0.5 * (np.eye(3) - np.outer(a, a))  # symmetric: tr(P ΔF)/2 = Σ plane ⊙ ΔF
            turn = self._turn_block(joint)
            rows += [skew.reshape(-1) @ turn, plane.reshape(-1) @ turn]
        return np.array(rows).reshape(len(rows), DOF * self.handles)

    def hinge_limits(self) -> np.ndarray:
        """(L, 2) each limited hinge's range (rad) from its rest pose."""
        return np.array([j.limits for j in self.limited_hinges()], float).reshape(-1, 2)

    def slides(self) -> list[Joint]:
        return [j for j in self.joints if j.slide]

    def slide_rows(self, centre: np.ndarray, length: float) -> np.ndarray:
        """(S, 12 H): each slide's travel along its axis, √2 s / ``length`` — so the joint spring's ½ k row² is
        k (s/ℓ)², a slide's counterpart of a hinge's k θ² — linear in the handle coordinates."""
        rows = [np.sqrt(2.0) / length * (joint.axis @ self._gap_rows(joint, joint.anchor, centre))
                for joint in self.slides()]
        return np.array(rows).reshape(len(rows), DOF * self.handles)

    def slide_limits(self, length: float) -> np.ndarray:
        """(S, 2) each slide's travel range in the units of ``slide_rows`` (±inf where it is free)."""
        return np.array([[-np.inf, np.inf] if j.limits is None else np.sqrt(2.0) / length * np.asarray(j.limits, float)
                         for j in self.slides()]).reshape(-1, 2)


class JointLimits(NamedTuple):
    """An assembly's joints' own limits as arrays (numpy or torch) on the handle coordinates: its slides' travel
    rows and ranges (``Assembly.slide_rows``, ``slide_limits``), each joint's symmetric turn limit
    (``turn_limits``), its limited hinges' sin/cos rows and ranges (``hinge_rows``, ``hinge_limits``)."""

    slide_rows: Any
    slide_limits: Any
    turn_limits: Any
    hinge_rows: Any
    hinge_limits: Any

    @classmethod
    def of(cls, found: Assembly, centre: np.ndarray, length: float) -> JointLimits:
        return cls(found.slide_rows(centre, length), found.slide_limits(length), found.turn_limits(),
                   found.hinge_rows(), found.hinge_limits())


def _across(axis: np.ndarray) -> np.ndarray:
    """(2, 3) two unit directions square to ``axis`` and to each other."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    helper = np.eye(3)[int(np.argmin(np.abs(axis)))]
    first = np.cross(axis, helper)
    first /= np.linalg.norm(first)
    return np.stack([first, np.cross(axis, first)])


def rigid_pieces(triangles: np.ndarray, labels: np.ndarray) -> bool:
    """Whether every loose piece of the mesh (``labels``: each vertex's, from ``cubature.part_labels``) is a
    closed surface — a solid part, which an assembly moves as a rigid piece. An open piece is a sheet (a flag
    modelled with its pole): it must keep its own folds and waves, so such a mesh is not made an assembly and stays
    one body with the vibration-mode handles."""
    if len(triangles) == 0:
        return False
    owner = labels[triangles[:, 0]]
    return all(is_closed(triangles[owner == piece]) for piece in np.unique(owner))


def assembly(points: np.ndarray, masses: np.ndarray, pins: np.ndarray, labels: np.ndarray | None) -> Assembly | None:
    """The pieces of an object with 2 to MAX_PARTS loose parts (each with a cubature point), joined in a tree;
    None for one piece or too many."""
    if labels is None:
        return None
    pieces = np.unique(labels)
    if not 2 <= len(pieces) <= MAX_PARTS:
        return None
    pinned = np.array([float((masses * (pins > 0.5))[labels == p].sum()) for p in pieces])
    mass = np.array([float(masses[labels == p].sum()) for p in pieces])
    root = int(pieces[np.lexsort((-mass, -pinned))[0]])  # most pinned mass, then heaviest
    diagonal = float(np.linalg.norm(points.max(0) - points.min(0)))
    gaps = []
    for a in range(len(pieces)):
        for b in range(a + 1, len(pieces)):
            pa, pb = points[labels == pieces[a]], points[labels == pieces[b]]
            d = np.linalg.norm(pa[:, None] - pb[None], axis=-1)
            near = np.nonzero(d <= d.min() + CONTACT_BAND * diagonal)
            gaps.append((float(d.min()), int(pieces[a]), int(pieces[b]), 0.5 * (pa[near[0]] + pb[near[1]])))
    group = {int(p): int(p) for p in pieces}

    def find(p: int) -> int:
        while group[p] != p:
            p = group[p]
        return p

    tree = []
    for _, a, b, midpoints in sorted(gaps, key=lambda g: g[0]):  # Kruskal: the shortest gaps joining two groups
        ra, rb = find(a), find(b)
        if ra != rb:
            group[max(ra, rb)] = min(ra, rb)
            tree.append((a, b, midpoints))
    # parent → child away from the root, so each joint reads "the child turns on its parent"
    joints, reached, pending = [], {root}, list(tree)
    while pending:
        for edge in list(pending):
            a, b, midpoints = edge
            if a in reached or b in reached:
                parent, child = (a, b) if a in reached else (b, a)
                joints.append(contact_joint(parent, child, midpoints, points[labels == parent], points[labels == child]))
                reached.add(child)
                pending.remove(edge)
    joints = _planar_chains(joints, points, labels)
    others = [int(p) for p in pieces if p != root]
    return Assembly(labels, root, joints, {p: h + 1 for h, p in enumerate(others)})


def slide_reach(joint: Joint, points: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """How far a slide may go either way before its piece's centre leaves the span of the piece it rests on, along
    its axis: a drawer stops before it falls out, a slider at its rail's ends (a mesh shows no stop of its own)."""
    along = lambda piece: points[labels == piece] @ joint.axis  # noqa: E731
    parent, centre = along(joint.parent), float(along(joint.child).mean())
    return min(float(parent.min()) - centre, 0.0), max(float(parent.max()) - centre, 0.0)


def overridden(found: Assembly, overrides, points: np.ndarray) -> Assembly:
    """The assembly with the artist's overrides (``bridge.request.JointOverride``: joint 1, 2, … or 0 for every
    joint; type, axis, range) applied in order. A joint that does not exist, or a hinge or slide left without an
    axis, is an InputError naming it: the bake stops before anything is written."""

    joints = list(found.joints)
    for override in overrides:
        if override.joint > len(joints):
            raise InputError(f"joint override for joint {override.joint}: this object has {len(joints)} joint"
                             f"{'s' if len(joints) != 1 else ''}")
        for i in range(len(joints)) if override.joint == 0 else [override.joint - 1]:
            joints[i] = _overridden_joint(joints[i], override, points, found.labels, i + 1)
    return dataclasses.replace(found, joints=joints)


def _overridden_joint(joint: Joint, override, points: np.ndarray, labels: np.ndarray, number: int) -> Joint:
    kind = joint.kind if override.type == "auto" else override.type
    axis = joint.axis if override.axis is None else np.asarray(override.axis, float)
    if kind in ("ball", "weld"):
        return Joint(joint.parent, joint.child, joint.anchor, None if kind == "ball" else axis, weld=kind == "weld")
    if axis is None or (override.axis is None and joint.kind not in ("hinge", "slide")):
        raise InputError(f"joint {number} was found a {joint.kind} joint; give the {kind}'s axis too")
    limits = None if override.range is None else (float(override.range[0]), float(override.range[1]))
    if kind == "slide":
        out = Joint(joint.parent, joint.child, joint.anchor, axis, slide=True)
        return dataclasses.replace(out, limits=limits or slide_reach(out, points, labels))
    keep = joint.kind == "hinge" and override.axis is None
    half = joint.half_length if keep else 0.5 * float(np.ptp(points[labels == joint.child] @ axis))
    return Joint(joint.parent, joint.child, joint.anchor, axis, max(half, 1e-6), limits=limits or (joint.limits if joint.kind == "hinge" else None))


def _planar_chains(joints: list[Joint], points: np.ndarray, labels: np.ndarray) -> list[Joint]:
    """A linkage turns in one plane: the joint at a bar's foot whose bar carries a hinge across two bars (a lamp's
    lower arm on its base, below its elbow) becomes a hinge about the same axis, through the foot — a ball joint
    there, or a hinge along a "line" of contact shorter than a HINGE_RATIO-th of the bar: the bar's end face, whose
    few cubature points fell on a line by chance (a door's line along its frame spans the bar)."""
    out = list(joints)
    for i, joint in enumerate(out):
        bar = points[labels == joint.child]
        long_axis = _long_axis(bar)
        if long_axis is None or joint.weld:
            continue
        if joint.kind == "hinge" and 2 * joint.half_length * HINGE_RATIO >= float(np.ptp(bar @ long_axis)):
            continue
        above = [j for j in out if j.parent == joint.child and j.kind == "hinge" and j.half_length > 0]
        crossing = [j for j in above if _long_axis(points[labels == j.child]) is not None]
        if crossing:
            axis = crossing[0].axis
            width = float(np.ptp(points[labels == joint.child] @ axis))
            out[i] = Joint(joint.parent, joint.child, joint.anchor, axis, 0.5 * width)
    return out
