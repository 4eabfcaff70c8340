"""Jointed assemblies (runtime/dynamics/joints.py): a mesh of loose pieces gets a handle per piece, joints where the
pieces meet (a hinge along a line of contact, else a ball joint) and no springs across pieces."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurok_blender.runtime.dynamics import joints  # noqa: E402
from neurok_blender.runtime.dynamics.cubature import count_parts, from_mesh, part_labels  # noqa: E402
from neurok_blender.runtime.dynamics.handles import DOF, mass_orthonormal_basis  # noqa: E402
from tests.conftest import needs_model  # noqa: E402

trimesh = pytest.importorskip("trimesh")


def box(extents, centre, subdivide=2):
    s = trimesh.creation.box(extents=extents)
    for _ in range(subdivide):
        s = s.subdivide()
    return np.asarray(s.vertices) + np.asarray(centre, float), np.asarray(s.faces)


def merged(*pieces):
    verts, tris, offset = [], [], 0
    for v, f in pieces:
        verts.append(v)
        tris.append(f + offset)
        offset += len(v)
    return np.concatenate(verts), np.concatenate(tris)


def door():
    """A 2 m post and a 0.8 m door panel beside it, 1 cm apart along the post's whole height."""
    return merged(box((0.1, 0.1, 2.0), (-0.05, 0, 1.0)), box((0.8, 0.04, 1.96), (0.41, 0, 1.0)))


def post_and_arm():
    """A post (a vertical bar) and a horizontal arm (a bar) on top of it, meeting over a small square."""
    return merged(box((0.06, 0.06, 0.6), (0, 0, 0.3)), box((0.6, 0.06, 0.06), (0.27, 0, 0.63)))


def plate_and_post():
    """A flat base plate and a post standing on it: the post's foot is a small square on a wide plate."""
    return merged(box((0.5, 0.5, 0.04), (0, 0, 0.02)), box((0.06, 0.06, 0.6), (0, 0, 0.34)))


def drawer():
    """A box resting on a board, its whole floor on the board's top."""
    return merged(box((0.6, 0.5, 0.03), (0, 0, 0.015)), box((0.5, 0.45, 0.2), (0, 0, 0.13)))


def pieces(v, f):
    """The assembly the simulation builds: over 400 cubature points, the first piece pinned."""
    pins = (part_labels(v, f) == 0).astype(float)
    c = from_mesh(v, f, pins, 400, np.random.default_rng(0))
    return joints.assembly(c.points, c.masses, c.pins, c.labels), c


def rigid_fit(a, b):
    """(R, t) with b ≈ a Rᵀ + t (Kabsch)."""
    ca, cb = a.mean(0), b.mean(0)
    u, _, vt = np.linalg.svd((a - ca).T @ (b - cb))
    r = vt.T @ np.diag([1, 1, np.sign(np.linalg.det(vt.T @ u.T))]) @ u.T
    return r, cb - r @ ca


def largest_turn(rest, frames, piece):
    """The largest angle (rad) a piece's best rigid fit turns through over the frames."""
    return max(np.arccos(np.clip((np.trace(rigid_fit(rest[piece], x[piece])[0]) - 1) / 2, -1, 1)) for x in frames)


def rows_residual(rows, a, t, handles):
    """rows · q for handle 1 moved by (A = a, t), every other handle still."""
    q = np.zeros(DOF * handles)
    q[DOF: DOF + 9], q[DOF + 9: 2 * DOF] = a.reshape(-1), t
    return rows @ q


def test_part_labels_number_the_pieces_and_weld_a_soup():
    v, f = door()
    labels = part_labels(v, f)
    assert set(labels) == {0, 1} and (labels[: len(v) // 2] == 0).all() and count_parts(v, f) == 2
    post = f[labels[f[:, 0]] == 0]
    soup = v[post].reshape(-1, 3)  # the post alone, every corner its own vertex
    assert count_parts(soup, np.arange(len(soup)).reshape(-1, 3)) == 1


def test_the_joint_follows_the_contact():
    """A line of contact is a hinge along it, two bars meeting at an angle a hinge across their plane, a face
    on a face a weld, a small patch a ball joint."""
    a, _ = pieces(*door())
    (hinge,) = a.joints
    assert a.root == 0 and (hinge.parent, hinge.child) == (0, 1)  # the pinned post is the root
    assert hinge.kind == "hinge" and abs(hinge.axis[2]) > 0.99 and hinge.half_length > 0.8  # along the post
    assert hinge.anchor[0] == pytest.approx(0.005, abs=0.02)  # in the gap between post and door
    (elbow,) = pieces(*post_and_arm())[0].joints
    assert elbow.kind == "hinge" and abs(elbow.axis[1]) > 0.99  # the post along z, the arm along x: about y
    assert elbow.anchor[2] == pytest.approx(0.6, abs=0.03) and np.abs(elbow.anchor[:2]).max() < 0.04
    (ball,) = pieces(*plate_and_post())[0].joints
    assert ball.kind == "ball" and ball.anchor[2] == pytest.approx(0.04, abs=0.03)  # at the post's foot
    lamp = pieces(*merged(box((0.5, 0.5, 0.04), (0, 0, 0.02)), box((0.06, 0.06, 0.6), (0, 0, 0.34)),
                          box((0.6, 0.06, 0.06), (0.27, 0, 0.67))))[0]
    foot, elbow = sorted(lamp.joints, key=lambda j: j.anchor[2])
    assert foot.kind == elbow.kind == "hinge" and abs(foot.axis[1]) > 0.99  # a linkage turns in its plane
    weld, = pieces(*drawer())[0].joints
    assert weld.kind == "weld" and abs(weld.axis[2]) > 0.99  # the box's floor on the board's top face


def test_crossing_bars_hinge_in_their_plane_whatever_line_their_few_contact_points_make():
    """Two bars that cross touch over a patch as small as they are thick, where a few cubature points can fall on
    a line by chance: three of nine held-out lamps had their elbows hinged about such a near-vertical "line", and
    their arms swung sideways instead of folding. The crossing decides; a foot hinged along its bar's end face by
    the same chance turns with the linkage."""
    rng = np.random.default_rng(0)
    post = np.c_[rng.uniform(-0.02, 0.02, (40, 2)), rng.uniform(0.04, 0.44, 40)]  # a vertical bar
    arm = np.c_[rng.uniform(0.0, 0.35, 40), rng.uniform(-0.02, 0.02, 40), rng.uniform(0.42, 0.46, 40)]  # along x
    line = np.array([[0.02, 0.0, 0.40], [0.02, 0.0, 0.42], [0.02, 0.0, 0.44]])  # 3 midpoints, one above another
    elbow = joints.contact_joint(1, 2, line, post, arm)
    assert elbow.kind == "hinge" and abs(elbow.axis[1]) > 0.99  # about y, not along the "line" (z)
    base = np.c_[rng.uniform(-0.12, 0.12, (60, 2)), rng.uniform(0.0, 0.04, 60)]
    foot_line = np.array([[-0.02, 0.0, 0.04], [0.0, 0.003, 0.04], [0.02, 0.0, 0.04]])  # along x, 4 cm long
    foot = joints.contact_joint(0, 1, foot_line, base, post)
    assert foot.kind == "hinge" and abs(foot.axis[0]) > 0.99  # by chance, a hinge along the end face
    points = np.concatenate([base, post, arm])
    labels = np.repeat([0, 1, 2], [60, 40, 40])
    chained = joints._planar_chains([foot, elbow], points, labels)
    assert abs(chained[0].axis[1]) > 0.99 and chained[1] == elbow  # the foot turns with the elbow, about y
    door_line = np.c_[np.zeros(5), np.zeros(5), np.linspace(0.05, 0.43, 5)]  # a line as long as the bar
    door_hinge = joints.contact_joint(0, 1, door_line, base, post)
    assert joints._planar_chains([door_hinge, elbow], points, labels)[0] == door_hinge  # a real line stays


def test_a_sheet_among_the_pieces_keeps_the_mesh_one_body():
    """A flag modelled with its pole is not an assembly: the flag is open and must wave, not swing as a board."""
    v, f = door()
    assert joints.rigid_pieces(f, part_labels(v, f))
    sheet = trimesh.creation.box(extents=(0.8, 0.04, 1.96)).subdivide()
    flag_v, flag_f = np.asarray(sheet.vertices), np.asarray(sheet.faces)
    keep = flag_v[flag_f].mean(1)[:, 1] < 0.019  # drop the +y face's triangles: an open surface
    post = box((0.1, 0.1, 2.0), (-0.05, 0, 1.0))
    flagpole = merged(post, (flag_v + [0.41, 0, 1.0], flag_f[keep]))
    assert not joints.rigid_pieces(flagpole[1], part_labels(*flagpole))


def test_one_piece_or_a_scatter_is_no_assembly():
    v, f = box((1, 1, 1), (0, 0, 0))
    assert joints.assembly(v, np.ones(len(v)), np.zeros(len(v)), part_labels(v, f)) is None
    many = merged(*[box((0.1, 0.1, 0.1), (i, 0, 0), 0) for i in range(joints.MAX_PARTS + 1)])
    assert joints.assembly(many[0], np.ones(len(many[0])), np.zeros(len(many[0])), part_labels(*many)) is None


def rotation(axis, angle):
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def test_a_turn_about_the_hinge_keeps_its_anchors_and_any_other_turn_opens_them():
    a, c = pieces(*door())
    hinge, centre = a.joints[0], c.points.mean(0)
    rows = a.anchor_rows(centre)
    assert rows.shape == (6, DOF * 2)  # a hinge shares two anchors
    for axis, holds in ((hinge.axis, True), (np.array([1.0, 0, 0]), False)):
        r = rotation(axis, 0.7)  # the door turned about ``axis`` through the hinge's centre
        a1, t1 = r - np.eye(3), (np.eye(3) - r) @ (hinge.anchor - centre)
        gap = np.abs(rows_residual(rows, a1, t1, 2)).max()
        assert (gap < 1e-9) if holds else (gap > 0.1)
    turn = rows_residual(a.turn_rows(), rotation(hinge.axis, 0.3) - np.eye(3), np.zeros(3), 2)
    assert float(turn @ turn) == pytest.approx(4 * (1 - np.cos(0.3)), rel=1e-9)  # ‖R − I‖² = 2θ² for small θ


def test_the_mass_orthonormal_basis_keeps_the_anchors_exactly():
    a, c = pieces(*plate_and_post())
    v, labels, centre = c.points, c.labels, c.points.mean(0)
    w = a.weights(labels)  # (V, 2)
    r = v - centre
    eye = np.eye(3)
    # the handle Jacobian (V, 3, 24): ∂x_a/∂A_h[b, c] = w_h δ_ab r_c, ∂x_a/∂t_h[b] = w_h δ_ab
    d_a = np.einsum("vh,ab,vc->vahbc", w, eye, r).reshape(len(v), 3, 2, 9)
    d_t = np.einsum("vh,ab->vahb", w, eye)
    jac = torch.as_tensor(np.concatenate([d_a, d_t], -1).reshape(len(v), 3, -1))
    rows = torch.as_tensor(a.anchor_rows(centre))
    basis, _ = mass_orthonormal_basis(jac, torch.ones(len(v), dtype=torch.float64), constraints=rows)
    assert basis.shape[1] == 24 - 3  # a ball joint takes three of the two pieces' 24 affine coordinates
    assert float((rows @ basis).abs().max()) < 1e-9
    gram = torch.einsum("nik,n,nil->kl", jac @ basis, torch.ones(len(v), dtype=torch.float64), jac @ basis)
    assert torch.allclose(gram, torch.eye(basis.shape[1], dtype=torch.float64), atol=1e-9)


@needs_model
def test_an_arm_on_a_pinned_post_swings_down_at_its_joint():
    """Under gravity a horizontal arm jointed to a pinned post falls about the joint: its tip drops far, the joint
    stays shared and the arm keeps its length. Glued (joints "off"), the assembly stands stiff."""
    from neurok_blender.runtime import api

    v, f = post_and_arm()
    labels = part_labels(v, f)
    pins = (labels == 0).astype(float)
    arm = labels == 1
    tip = int(np.argmax(np.where(arm, v[:, 0], -np.inf)))
    sim = api.prepare(v, f, pins=pins, frame_count=13, device="cpu", material={"joint": 0.01})
    last = sim.run()[-1]
    assert sim.stats()["joints"] == 1 and sim.stats()["joint_kinds"] == {"hinge": 1}
    assert v[tip, 2] - last[tip, 2] > 0.2  # half a second: the 0.6 m arm's tip has fallen over a third of it
    r, t = rigid_fit(v[arm], last[arm])
    assert np.linalg.norm(last[arm] - (v[arm] @ r.T + t), axis=1).max() < 0.01  # the arm turned as a rigid body
    assert np.degrees(np.arccos((np.trace(r) - 1) / 2)) > 30
    anchor = sim.assembly.joints[0].anchor
    assert np.linalg.norm(r @ anchor + t - anchor) < 0.01  # about its joint, which it shares with the post
    assert np.abs(last[~arm] - v[~arm]).max() < 1e-3  # the pinned post holds
    glued = api.simulate(v, f, pins=pins, frame_count=13, device="cpu", research={"joints": "off"}).frames[-1]
    assert v[tip, 2] - glued[tip, 2] < 0.05


@needs_model
def test_a_joint_limit_stops_the_turn():
    """Material ``joint_limit``: past it a stiff stop holds the joint — the soft arm that would fall far stops near
    the limit, and the stop acts on the turn only (the arm stays rigid and on its joint)."""
    from neurok_blender.runtime import api

    v, f = post_and_arm()
    labels = part_labels(v, f)
    pins, arm = (labels == 0).astype(float), labels == 1

    def turned(**material):
        """The arm's largest turn over half a second."""
        frames = api.simulate(v, f, pins=pins, frame_count=13, device="cpu", material=dict(joint=0.003, **material)).frames
        return largest_turn(v, frames, arm)

    assert turned() > 1.2  # free: over 70° in half a second
    assert turned(joint_limit=0.5) == pytest.approx(0.5, abs=0.1)


@needs_model
def test_the_artists_joint_settings_stiffen_and_stop_the_joints():
    """The panel's Joint Stiffness multiplies the predicted spring (Stiffness leaves it alone) and its Joint Limit
    (the request's ``joint_limit``, rad) stops the turn as the material's does."""
    from neurok_blender.runtime import api

    v, f = post_and_arm()
    labels = part_labels(v, f)
    pins, arm = (labels == 0).astype(float), labels == 1

    def turned(**settings):
        sim = api.prepare(v, f, pins=pins, frame_count=13, device="cpu", material={"joint": 0.003}, **settings)
        return sim.material, largest_turn(v, list(sim.frames()), arm)

    material, free = turned()
    stiff_material, stiff = turned(joint_stiffness=100.0)
    assert stiff_material.joint == pytest.approx(100 * material.joint) and stiff < 0.5 * free
    assert turned(stiffness=5.0)[0].joint == pytest.approx(material.joint)
    limited_material, limited = turned(joint_limit=0.5)
    assert limited_material.joint_limit == 0.5 and limited == pytest.approx(0.5, abs=0.1)


def drawer_setup():
    v, f = drawer()
    labels = part_labels(v, f)
    pins, box_ = (labels == 0).astype(float), labels == 1
    push = np.zeros_like(v)
    push[box_] = (0.0, 1.0, 0.0)  # 1 m/s along the board's depth
    return v, f, pins, box_, push


@needs_model
def test_a_drawer_told_to_slide_slides_along_its_axis_and_stops_at_its_range():
    """A slide (the artist's override: the contact alone reads as a weld) moves the drawer along its axis only —
    no sideways or vertical motion, no turn — and its range stops it there without throwing it back."""
    from neurok_blender.runtime import api

    v, f, pins, box_, push = drawer_setup()
    slide = {"joint": 1, "type": "slide", "axis": (0, 1, 0)}
    sim = api.prepare(v, f, pins=pins, frame_count=19, device="cpu", initial_velocities=push, material={"joint": 0.0},
                      joints=[dict(slide, range=(-0.05, 0.1))])
    frames = sim.run()
    assert sim.stats()["joint_list"][0]["kind"] == "slide"
    travel = frames[:, box_].mean(1) - v[box_].mean(0)
    assert travel[:, 1].max() == pytest.approx(0.1, abs=0.015)  # stopped at its range
    assert np.abs(travel[:, [0, 2]]).max() < 2e-3 and largest_turn(v, frames, box_) < 0.01
    hit = int(np.argmax(travel[:, 1] > 0.09))
    assert travel[hit: hit + 4, 1].min() > 0.07  # an inelastic stop: it stays near the end it hit
    free = api.simulate(v, f, pins=pins, frame_count=7, device="cpu", initial_velocities=push, material={"joint": 0.0},
                        joints=[slide]).frames
    assert (free[:, box_].mean(1) - v[box_].mean(0))[:, 1].max() > 0.2  # without the range it goes on
    welded = api.simulate(v, f, pins=pins, frame_count=7, device="cpu", initial_velocities=push).frames
    assert np.abs(welded[:, box_] - v[box_]).max() < 0.01  # as found (a weld), the push does not move it


@needs_model
def test_a_hinges_own_range_stops_it_one_way_and_not_the_other():
    """A hinge's range (lower, upper) from the rest pose is signed (right-handed about its axis): the arm falls
    the negative way about the axis found (−y), so a lower −0.2 rad stops it there, and under a lower −1.5 and an
    upper 0.2 it falls on past 1.2 rad."""
    from neurok_blender.runtime import api

    v, f = post_and_arm()
    labels = part_labels(v, f)
    pins, arm = (labels == 0).astype(float), labels == 1

    def turned(lower, upper):
        joints_ = [{"joint": 1, "range": (lower, upper)}]
        frames = api.simulate(v, f, pins=pins, frame_count=13, device="cpu", material={"joint": 0.003},
                              joints=joints_).frames
        return largest_turn(v, frames, arm)

    assert turned(-0.2, 1.5) == pytest.approx(0.2, abs=0.05)
    assert turned(-1.5, 0.2) > 1.2


def test_joint_overrides_are_applied_to_the_joints_found():
    """Type, axis and range replace the found joint's; a slide without a range stops where its piece would leave
    the one it rests on; a joint that does not exist or a hinge without an axis is refused by name."""
    from neurok_blender.bridge.request import JointOverride
    from neurok_blender.errors import InputError

    a, c = pieces(*drawer())
    assert [j.kind for j in a.joints] == ["weld"]
    slid = joints.overridden(a, [JointOverride(type="slide", axis=(0, 1, 0))], c.points)
    joint = slid.joints[0]
    assert joint.kind == "slide" and joint.limits[0] < 0 < joint.limits[1]
    assert joint.limits[1] == pytest.approx(0.25 - c.points[c.labels == joint.child, 1].mean(), abs=0.02)
    assert slid.anchor_rows(c.points.mean(0)).shape[0] == 2 + 9  # across the axis, and the turn
    assert slid.slide_rows(c.points.mean(0), 1.0).shape == (1, DOF * 2)
    hinged = joints.overridden(a, [JointOverride(joint=1, type="hinge", axis=(1, 0, 0), range=(-0.5, 0.1))], c.points)
    assert hinged.joints[0].kind == "hinge" and hinged.hinge_limits().tolist() == [[-0.5, 0.1]]
    with pytest.raises(InputError, match="joint override for joint 2: this object has 1 joint$"):
        joints.overridden(a, [JointOverride(joint=2, type="ball")], c.points)
    with pytest.raises(InputError, match="joint 1 was found a weld joint; give the hinge's axis too"):
        joints.overridden(a, [JointOverride(type="hinge")], c.points)


@pytest.mark.parametrize("override, message", [
    ({"type": "prismatic"}, "joint override's type must be one of auto, hinge, slide, ball, weld, got 'prismatic'"),
    ({"axis": (0, 0, 0)}, "joint override's axis must be a non-zero direction"),
    ({"axis": (1, 0)}, "joint override's axis must be 3 finite numbers"),
    ({"type": "slide", "range": (0.1, 0.3)}, "joint override's range must go from at most 0 to at least 0"),
    ({"type": "weld", "axis": (0, 0, 1)}, "a weld joint has no axis or range to override"),
    ({"joint": 9}, "joint override's joint \\(0: every joint\\) must be between 0 and 8, got 9"),
])
def test_a_bad_joint_override_is_refused_in_one_line(override, message):
    from neurok_blender.bridge.request import SimulationRequest
    from neurok_blender.errors import InputError

    with pytest.raises(InputError, match=message):
        SimulationRequest(joints=[override])


@needs_model
def test_joint_overrides_on_one_body_are_refused_before_anything_runs():
    from neurok_blender.errors import InputError
    from neurok_blender.runtime import api

    v, f = box((0.4, 0.4, 0.4), (0, 0, 0.2))
    with pytest.raises(InputError, match="joint overrides are for an assembly"):
        api.prepare(v, f, frame_count=2, device="cpu", joints=[{"type": "hinge", "axis": (0, 0, 1)}])


@needs_model
def test_the_learned_reading_reads_a_box_on_a_board_as_a_slide_where_the_rules_weld_it():
    """Research joints "learned" (runtime/dynamics/kinematics.py) against "rules"; the artist's override still
    comes last and wins."""
    from neurok_blender.runtime import api

    v, f, pins, _, _ = drawer_setup()
    kinds = lambda **kw: api.prepare(v, f, pins=pins, frame_count=2, device="cpu", **kw).stats()["joint_kinds"]  # noqa: E731
    assert kinds(research={"joints": "rules"}) == {"weld": 1}
    assert kinds(research={"joints": "learned"}) == {"slide": 1}
    assert kinds(research={"joints": "learned"}, joints=[{"type": "weld"}]) == {"weld": 1}
