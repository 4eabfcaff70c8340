"""The 4D dataset: backends move sanely, generation is deterministic and resumable, curation, loader."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

pytest.importorskip("mujoco")

from neurok_blender.errors import InputError  # noqa: E402
from neurok_blender.pipeline.data import curate, store  # noqa: E402
from neurok_blender.pipeline.data.families import FAMILIES, make_spec  # noqa: E402
from neurok_blender.pipeline.data.generate import RECIPES, generate, job_list, simulate_specs  # noqa: E402
from neurok_blender.pipeline.data.mujoco_backend import trilinear_embedding  # noqa: E402

SMOKE = RECIPES["smoke"]


def short(family: str, seed: int = 7, **changes):
    return dataclasses.replace(make_spec(family, seed), frames=16, fps=24.0, **changes)


def run(spec):
    return simulate_specs([spec], SMOKE)[0]


def test_at_least_twelve_families_in_four_categories():
    assert len(FAMILIES) >= 12
    assert {f.category for f in FAMILIES.values()} == {"cloth", "elastic_solid", "soft_toy", "articulated"}
    assert {f.split for f in FAMILIES.values()} == {"train", "val", "test"}
    by_cat = {}
    for f in FAMILIES.values():
        by_cat.setdefault(f.category, set()).add(f.split)
    assert all("test" in splits for splits in by_cat.values()), "each category holds out a family"


def test_specs_are_deterministic_and_randomized():
    a, b, c = make_spec("flag", 3), make_spec("flag", 3), make_spec("flag", 4)
    assert np.array_equal(a.vertices, b.vertices) and a.material == b.material
    assert not np.array_equal(a.wind, c.wind)


def test_a_new_family_leaves_every_other_familys_sequences_as_they_were():
    """Seeds index the families by generator 1.0.0's alphabetical order, new ones after: adding the drape (1.1.0)
    must not reseed, so the datasets and the numbers measured on them stay reproducible."""
    from neurok_blender.pipeline.data.generate import SEED_ORDER, sequence_seed

    added = ("drape", "gale", "drop", "cover", "carry", "shroud", "twirl", "slider")  # each new family after the ones before it
    original = sorted(set(FAMILIES) - set(added))
    assert SEED_ORDER[: len(original)] == tuple(original) and set(SEED_ORDER) == set(FAMILIES)
    assert SEED_ORDER[len(original):] == added
    for i, fam in enumerate(original):
        old = int(np.random.SeedSequence([0, i, 5]).generate_state(1)[0] & 0x7FFFFFFF)  # 1.0.0's rule
        assert sequence_seed(0, fam, 5) == old, fam
    assert sorted(FAMILIES).index("tower") != SEED_ORDER.index("tower")  # the rule would have reseeded tower


def test_the_drape_is_large_motion_cloth_released_flat_and_held_out():
    spec = make_spec("drape", 11)
    assert FAMILIES["drape"].split == "test" and FAMILIES["drape"].category == "cloth"
    assert np.ptp(spec.vertices[:, 2]) < 1e-9  # released flat
    assert spec.gravity[2] <= -8.0  # always under gravity: it swings down
    held = spec.pin_weights > 0.5
    assert 1 <= held.sum() < 0.2 * len(held)
    kinds = {int((make_spec("drape", s).pin_weights > 0.5).sum() <= 2) for s in range(12)}
    assert kinds == {0, 1}  # some held along an edge, some at one or two corners
    spec = short("drape")
    frames, held = run(spec), spec.pin_weights > 0.5
    assert np.abs(frames[:, held] - frames[0, held]).max() < 1e-6
    free = frames[-1, ~held, 2] - frames[0, ~held, 2]
    assert free.mean() < -0.05  # the free part has started to swing down within 16 frames


@pytest.mark.parametrize("family", ["flag", "beam", "jelly", "door"])
def test_mujoco_backends_are_deterministic(family):
    spec = short(family)
    assert np.array_equal(run(spec), run(spec))


@pytest.mark.parametrize("family", ["flag", "cape", "beam", "star_toy"])
def test_pinned_vertices_stay_put(family):
    spec = short(family)
    frames = run(spec)
    pinned = spec.pin_weights > 0.5
    assert pinned.any()
    assert np.abs(frames[:, pinned] - frames[0, pinned]).max() < 1e-6


@pytest.mark.parametrize("family", ["flag", "beam", "jelly"])
def test_gravity_pulls_down(family):
    spec = short(family, gravity=np.array([0.0, 0.0, -9.81]), wind=np.zeros(3), poke={})
    frames = run(spec)
    free = spec.pin_weights < 0.5
    assert (frames[-1, free, 2] - frames[0, free, 2]).mean() < -1e-3


@pytest.mark.parametrize("family", ["flag", "tower"])
def test_wind_pushes_along_the_wind(family):
    wind = np.array([0.0, 8.0, 0.0])
    spec = short(family, gravity=np.zeros(3), wind=wind, gust=(0.0, 1.0), poke={})
    frames = run(spec)
    free = spec.pin_weights < 0.5
    assert (frames[-1, free] - frames[0, free]).mean(0) @ wind > 0


def test_articulated_base_is_fixed_and_parts_stay_rigid():
    spec = short("laptop")
    frames = run(spec)
    base = spec.parts == 0
    assert np.abs(frames[:, base] - frames[0, base]).max() < 1e-9
    lid = np.flatnonzero(spec.parts == 1)[:2]
    d0 = np.linalg.norm(frames[0, lid[0]] - frames[0, lid[1]])
    assert np.allclose(np.linalg.norm(frames[:, lid[0]] - frames[:, lid[1]], axis=1), d0, atol=1e-6)


def still(family: str):
    """An articulated spec in still air without gravity, its joints started at their initial positions."""
    return short(family, gravity=np.zeros(3), wind=np.zeros(3), gust=(0.0, 1.0), poke={})


def test_articulated_joints_rest_where_the_mesh_shows_them():
    """No hidden pre-stress (generator 1.2.0): with no initial joint velocity, gravity or wind the assembly stays
    as its mesh shows it, though its joints start away from 0 (before, the springs pulled them back to 0)."""
    spec = still("lamp")
    assert any(abs(j.qpos0) > 0.01 for j in spec.joints)
    spec = dataclasses.replace(spec, joints=[dataclasses.replace(j, qvel0=0.0) for j in spec.joints])
    frames = run(spec)
    assert np.abs(frames - spec.vertices[None]).max() < 1e-6


def test_articulated_initial_velocities_are_the_first_motion_and_rigid_per_part():
    from neurok_blender.pipeline.data.mujoco_backend import articulated_initial_velocities

    spec = still("door")
    velocity = articulated_initial_velocities(spec)
    frames = run(spec)
    base, door = spec.parts == 0, spec.parts == 1
    assert np.abs(velocity[base]).max() < 1e-9  # the fixed frame does not move
    axis = np.asarray(spec.joints[0].axis) / np.linalg.norm(spec.joints[0].axis)
    assert np.abs(velocity[door] @ axis).max() < 1e-6  # a hinge moves its part about its axis only
    first = (frames[1] - frames[0])[door] * spec.fps  # the first frame's mean velocity, joint damping and all
    cosine = (first * velocity[door]).sum() / (np.linalg.norm(first) * np.linalg.norm(velocity[door]))
    assert cosine > 0.99 and 0.7 < np.linalg.norm(first) / np.linalg.norm(velocity[door]) < 1.3


def test_trilinear_embedding_reproduces_points():
    lo, hi, counts = np.zeros(3), np.array([1.0, 2.0, 0.5]), (3, 4, 2)
    pts = np.random.default_rng(0).uniform(lo, hi, size=(50, 3))
    idx, w = trilinear_embedding(pts, lo, hi, counts)
    axes = [np.linspace(lo[i], hi[i], counts[i]) for i in range(3)]
    nodes = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    assert np.allclose(np.einsum("pk,pkj->pj", w, nodes[idx]), pts)
    assert np.allclose(w.sum(1), 1.0)


@pytest.mark.blender
@pytest.mark.slow
def test_blender_backends_sane_and_deterministic():
    pytest.importorskip("bpy")
    cloth, ball = short("kerchief"), short("softball")  # the bpy process rebuilds specs from (family, seed)
    assert cloth.gravity[2] < 0
    first = simulate_specs([cloth, ball], SMOKE)
    again = simulate_specs([cloth, ball], SMOKE)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    pinned = cloth.pin_weights > 0.5
    assert np.abs(first[0][:, pinned] - first[0][0, pinned]).max() < 1e-5
    assert (first[0][-1, ~pinned, 2] - first[0][0, ~pinned, 2]).mean() < -1e-3
    assert np.isfinite(first[1]).all() and np.abs(first[1] - first[1][0]).max() > 1e-4


def _sheet_frames():
    spec = short("flag")
    frames = np.repeat(spec.vertices[None], 10, axis=0).copy()
    frames[1:, :, 2] -= np.linspace(0.01, 0.1, 9)[:, None]  # a slow rigid drop: plausible, no stretch
    return spec, frames


@pytest.mark.parametrize("damage, reason", [
    (lambda f: f.__setitem__((5, 3, 0), np.nan), "non_finite"),
    (lambda f: f.__setitem__((slice(6, None), slice(None), 0), 1e4), "blow_up"),
    (lambda f: f.__setitem__((slice(6, None), 0, 0), f[6:, 0, 0] + 2.0), "too_fast"),
    (lambda f: f.__setitem__((slice(1, None),), f[0]), "static"),
])
def test_rejection_filter(damage, reason):
    spec, frames = _sheet_frames()
    assert curate.rejection_reason(frames, spec.triangles, np.zeros(len(frames[0])), 24.0, 10) is None
    damage(frames)
    assert curate.rejection_reason(frames, spec.triangles, np.zeros(len(frames[0])), 24.0, 10) == reason


def test_overstretch_and_pin_drift_are_rejected():
    spec, frames = _sheet_frames()
    stretched = frames.copy()
    centre = stretched[0].mean(0)
    stretched[5:] = centre + 3.0 * (stretched[5:] - centre)
    assert curate.rejection_reason(stretched, spec.triangles, np.zeros(len(frames[0])), 1.0, 10) == "overstretched"
    assert curate.rejection_reason(frames, spec.triangles, spec.pin_weights, 24.0, 10) == "pins_drift"


def test_a_recorded_poke_is_rebuilt_from_the_spec_and_points_where_the_simulator_pushed():
    from neurok_blender.pipeline.validate import recorded_poke

    spec = next(s for s in (short("blob", seed) for seed in range(20)) if s.poke)
    frames = run(spec)
    meta = {"family": "blob", "seed": spec.seed, "conditions": spec.conditions()}
    seq = {"rest": frames[0], "frames": frames, "triangles": spec.triangles, "pins": spec.pin_weights}
    poke = recorded_poke(seq, meta)
    assert poke["vertices"] == spec.poke["vertices"].tolist()
    assert np.allclose(poke["velocity"], spec.poke["velocity"])
    moved = (frames[1, poke["vertices"]] - frames[0, poke["vertices"]]).mean(0)  # the stored frames' axes
    assert moved @ np.asarray(poke["velocity"]) > 0.5 * np.linalg.norm(moved) * np.linalg.norm(poke["velocity"])
    quiet = dict(meta, conditions=dict(meta["conditions"], poke_velocity=[0.0, 0.0, 0.0]))
    assert recorded_poke(seq, quiet) is None
    assert recorded_poke(dict(seq, rest=frames[0][:-1]), meta) is None  # another mesh: not this spec's poke


def test_a_dropped_soft_solid_lands_on_its_floor_and_squashes():
    from neurok_blender.pipeline.validate import conditions_settings

    spec = dataclasses.replace(make_spec("drop", 3), frames=36, wind=np.zeros(3), poke={})
    assert spec.ground == 0.0 and not spec.pin_weights.any() and spec.vertices[:, 2].min() >= 0.1 - 1e-9
    frames = run(spec)
    lowest, height = frames[:, :, 2].min(1), np.ptp(frames[:, :, 2], axis=1)
    assert lowest.min() > -0.05  # the floor stops it (a little give at the impact)
    assert abs(lowest[-6:]).max() < 0.02  # and it ends resting on it
    assert height[-1] < 0.9 * height[0]  # squashed
    settings = conditions_settings({"conditions": spec.conditions()}, 10)
    assert settings["ground"] == 0.0  # the rollout gets the same floor
    assert "ground" not in short("blob").conditions()  # the other solids have none


def test_the_gale_always_blows_hard_and_gusts():
    for seed in range(5):
        spec = make_spec("gale", seed)
        assert 10.0 <= np.linalg.norm(spec.wind[:2]) <= 20.0 and 0.5 <= spec.gust[0] <= 0.9
        assert spec.pin_weights.sum() >= 4 and FAMILIES["gale"].split == "train"


def test_the_grid_simulator_holds_whole_cells_and_validate_can_roll_out_with_them():
    from neurok_blender.pipeline.data.mujoco_backend import grid_held_share
    from neurok_blender.pipeline.validate import held_pins

    spec = short("plate")
    frames = run(spec)
    held = grid_held_share(spec)
    assert (held >= spec.pin_weights - 1e-12).all() and (held > 0.999).sum() > 1.5 * (spec.pin_weights > 0).sum()
    moved = np.linalg.norm(frames - frames[:1], axis=-1).max(0)
    assert moved[held > 0.999].max() < 1e-6 and moved[held < 1e-9].min() > 0  # held ones never move, free ones do
    meta = {"family": "plate", "seed": spec.seed, "simulator": "mujoco_grid"}
    seq = {"rest": frames[0], "pins": spec.pin_weights}
    assert np.array_equal(held_pins(seq, meta), held)
    assert held_pins(seq, dict(meta, simulator="mujoco_cloth")) is None
    assert held_pins(dict(seq, pins=np.zeros_like(spec.pin_weights)), meta) is None  # not this spec's pins


def test_sequences_made_before_their_familys_current_generator_are_left_out_of_the_held_out_table():
    from neurok_blender.pipeline.data.dataset import SequenceRef
    from neurok_blender.pipeline.validate import current

    assert FAMILIES["lamp"].current_since == "1.2.0" and FAMILIES["drape"].current_since == "1.0.0"
    assert FAMILIES["lamp"].is_current("1.2.0") and FAMILIES["lamp"].is_current("1.10.0")
    assert not FAMILIES["lamp"].is_current("1.1.0")
    refs = [SequenceRef("a", 0, {"family": "lamp", "generator_version": "1.0.0"}),
            SequenceRef("b", 0, {"family": "lamp", "generator_version": "1.2.0"}),
            SequenceRef("a", 1, {"family": "plate", "generator_version": "1.0.0"}),
            SequenceRef("a", 2, {"family": "door"})]  # no version recorded: the first generator's
    assert [(r.shard, r.key) for r in current(refs)] == [("b", 0), ("a", 1)]
    assert current(refs, keep_stale=True) == refs


def test_an_assemblys_initial_joint_velocities_are_rebuilt_from_the_spec():
    from neurok_blender.pipeline.validate import recorded_initial_velocities

    spec = short("lamp")
    frames = run(spec)
    meta = {"family": "lamp", "seed": spec.seed, "simulator": "mujoco_articulated", "conditions": spec.conditions()}
    seq = {"rest": frames[0], "frames": frames, "triangles": spec.triangles, "pins": spec.pin_weights}
    velocity = recorded_initial_velocities(seq, meta)
    assert velocity.shape == spec.vertices.shape and np.abs(velocity[spec.parts == 0]).max() < 1e-9
    assert np.abs(velocity[spec.parts > 0]).max() > 0.1  # its joints start moving (qvel0 up to 2 rad/s)
    assert recorded_initial_velocities(seq, dict(meta, simulator="mujoco_grid")) is None
    assert recorded_initial_velocities(dict(seq, rest=frames[0][:-1]), meta) is None  # another mesh


def test_an_assemblys_recorded_springs_and_limits_become_its_joint_material():
    """½ k θ² of the simulator's hinge is NeuROK's joint · M g ℓ θ²; its head's near-fixed hinge is left out."""
    from neurok_blender.pipeline.validate import recorded_joints

    spec = make_spec("lamp", 7)
    meta = {"family": "lamp", "seed": 7, "simulator": "mujoco_articulated"}
    seq = {"rest": spec.vertices, "triangles": spec.triangles, "pins": spec.pin_weights}
    got = recorded_joints(seq, meta)
    arms = spec.joints[:2]  # the foot and the elbow turn ±1.0 and ±1.2 rad; the head ±0.1
    mass = spec.material["mass"] * 4  # base, two arms, head: the same mass each
    diagonal = float(np.linalg.norm(np.ptp(spec.vertices, axis=0)))
    assert got["joint"] == pytest.approx(np.mean([j.stiffness for j in arms]) / (2 * mass * 9.81 * diagonal))
    assert got["joint_limit"] == pytest.approx(1.1)
    assert recorded_joints(seq, dict(meta, simulator="mujoco_grid")) == {}
    assert recorded_joints(dict(seq, rest=spec.vertices[:-1]), meta) == {}  # another mesh: not this spec's joints


@pytest.fixture(scope="module")
def smoke_dataset(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("smoke"))
    result = generate(root, "smoke", families=["flag", "beam", "blob", "door", "lamp", "ribbon"], progress=False)
    return root, result


def test_smoke_generation_writes_shards_and_card(smoke_dataset):
    root, result = smoke_dataset
    card = result["card"]
    assert card["sequences"] + card["rejected"] == 6
    assert set(card["by_category"]) <= {"cloth", "elastic_solid", "soft_toy", "articulated"}
    assert os.path.exists(os.path.join(root, "DATASET_CARD.md"))
    with open(os.path.join(root, "dataset.json")) as fh:
        assert json.load(fh)["generator_version"]
    seqs = store.read_shard(store.shard_path(root, 0))
    first = seqs[0]
    assert first["frames"].shape[1:] == first["rest"].shape and first["frames"].shape[0] == SMOKE.frames
    assert {"family", "category", "split", "simulator", "material", "conditions"} <= set(first["meta"])


def test_generation_resumes_by_skipping_finished_shards(smoke_dataset):
    root, first = smoke_dataset
    again = generate(root, "smoke", families=["flag", "beam", "blob", "door", "lamp", "ribbon"], progress=False)
    assert again["ran"] == 0 and again["skipped"] == first["ran"]


def test_job_lists_are_deterministic_and_sharded():
    a = job_list(RECIPES["full"], 0, sorted(FAMILIES), 64)
    assert a == job_list(RECIPES["full"], 0, sorted(FAMILIES), 64) and len(a) == 64
    assert a != job_list(RECIPES["full"], 1, sorted(FAMILIES), 64)
    with pytest.raises(InputError):
        generate("/tmp/unused", "smoke", shard="3/2")


def test_loader_shapes_and_split_by_family(smoke_dataset):
    pytest.importorskip("torch")
    from neurok_blender.pipeline.data.dataset import FramePairDataset

    root, _ = smoke_dataset
    train = FramePairDataset(root, "train", points=128, queries=64)
    item = train[0]
    assert item["features"].shape == (128, 7)
    assert item["delta"].shape == (2, 128, 3) and item["query_delta"].shape == (2, 64, 3)
    assert item["queries"].shape == (64, 3) and item["frame_pair"].shape == (2,)
    assert all(r.meta["split"] == "train" for r in train.refs)
    test = FramePairDataset(root, "test", points=32, queries=32)
    assert {r.meta["family"] for r in test.refs} <= {"ribbon", "lamp"}
    import torch

    assert isinstance(train, torch.utils.data.Dataset)
    batch = next(iter(torch.utils.data.DataLoader(train, batch_size=2)))
    assert batch["features"].shape == (2, 128, 7)


def test_preview_draws_a_contact_sheet(smoke_dataset, tmp_path):
    pytest.importorskip("matplotlib")
    from neurok_blender.pipeline.data.preview import contact_sheet

    root, _ = smoke_dataset
    out = contact_sheet(root, str(tmp_path / "sheet.png"), count=3)
    assert os.path.getsize(out) > 10_000


def test_two_draws_read_as_one_dataset_hold_each_sequence_once(tmp_path):
    """Two draws of one recipe share sequences (same family, seed, generator, recipe: the same frames); read
    together they are one dataset, so a shared sequence counts once in a fit, a table or an epoch."""
    from neurok_blender.pipeline.data.dataset import index_sequences
    from neurok_blender.pipeline.data.store import write_shard

    def seq(seed, split="train"):
        meta = {"family": "beam", "split": split, "seed": seed, "generator_version": "1.3.0", "recipe": "full"}
        return {"frames": np.zeros((2, 3, 3)), "triangles": np.array([[0, 1, 2]]), "pins": np.zeros(3), "meta": meta}

    write_shard(str(tmp_path / "small"), 0, [seq(1), seq(2)], {})
    write_shard(str(tmp_path / "large"), 0, [seq(2), seq(3), seq(4, "test")], {})
    roots = [str(tmp_path / "large"), str(tmp_path / "small")]
    assert [r.meta["seed"] for r in index_sequences(roots, "train")] == [2, 3, 1]
    assert len(index_sequences(str(tmp_path / "small"), "train")) == 2  # one root: as stored


def _box_frames(frames: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """A closed unit box (8 corners, 12 outward triangles) at rest in every frame."""
    corners = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], float)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return np.repeat(corners[None], frames, 0), faces


def test_a_solid_that_flattens_or_turns_inside_out_is_rejected_as_collapsed():
    frames, faces = _box_frames()
    assert curate.is_closed(faces) and not curate.is_closed(faces[:-1])
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # rigid motion keeps the volume
    frames[3:] = frames[3:] @ turn.T + np.array([2.0, -1.0, 0.5])
    assert curate.volume_change(frames, faces) < 1e-9
    assert curate.rejection_reason(frames, faces, np.zeros(8), 1.0, 6) is None  # 1 fps: the jump is not too fast
    squashed = frames.copy()
    squashed[4:, :, 2] = 0.5 + 0.6 * (squashed[4:, :, 2] - 0.5)  # 40 % thinner: edges shrink, nothing overstretches
    assert curate.volume_change(squashed, faces) == pytest.approx(0.4)
    assert curate.rejection_reason(squashed, faces, np.zeros(8), 1.0, 6) == "collapsed"
    inverted = frames.copy()
    inverted[5:, :, 2] = 1.0 - inverted[5:, :, 2]  # mirrored: the surface inside out, volume -1
    assert curate.volume_change(inverted, faces) == pytest.approx(2.0)
    spec, sheet = _sheet_frames()  # an open sheet encloses nothing: never collapsed
    assert curate.volume_change(sheet, spec.triangles) is None
    flat = frames.copy()
    flat[:, :, 2] = 0.0  # a closed surface with no volume at rest: no ratio to measure
    assert curate.volume_change(flat, faces) is None


def test_collapsed_fe_solids_are_left_out_of_fits_tables_and_training(tmp_path, capsys):
    from neurok_blender.pipeline.data.dataset import SequenceRef, sound

    frames, faces = _box_frames()
    squashed = frames.copy()
    squashed[2:, :, 2] *= 0.5
    shard = tmp_path / "shard-0000.npz"
    arrays = {}
    for k, seq in enumerate((frames, squashed, squashed)):
        arrays.update({f"{k}/rest": seq[0], f"{k}/frames": seq, f"{k}/triangles": faces, f"{k}/pins": np.zeros(8)})
    np.savez(shard, **arrays)
    metas = [{"family": "blob", "seed": 1, "category": "soft_toy"}, {"family": "plate", "seed": 2, "category": "elastic_solid"},
             {"family": "flag", "seed": 3, "category": "cloth"}]  # a sheet's family is never measured
    refs = [SequenceRef(str(shard), k, meta) for k, meta in enumerate(metas)]
    assert [r.meta["seed"] for r in sound(refs)] == [1, 3]
    said = capsys.readouterr().err
    assert "left out 1 collapsed solids" in said and "plate 2" in said
    assert [r.meta["seed"] for r in sound(refs, keep_collapsed=True)] == [1, 2, 3]


def test_the_sound_recipe_raises_only_the_soft_toys_youngs_modulus_to_the_bending_floor():
    """Recipe ``sound``: a blob or jelly too soft in bending (B < 1, which the FE simulator collapses) gets the
    Young's modulus that makes B = 1 and nothing else changes; other families and stiff enough ones are as drawn."""
    from neurok_blender.pipeline.data.families import bending_number
    from neurok_blender.pipeline.data.generate import spec_for

    full, sound = RECIPES["full"], RECIPES["sound"]
    raised = 0
    for family, seed in [("blob", s) for s in range(4)] + [("jelly", s) for s in range(4)]:
        a, b = spec_for(family, seed, full), spec_for(family, seed, sound)
        assert bending_number(b) >= 1.0 - 1e-9
        assert bending_number(b) == pytest.approx(max(1.0, bending_number(a)))
        assert {k: v for k, v in a.material.items() if k != "young"} == {k: v for k, v in b.material.items() if k != "young"}
        np.testing.assert_array_equal(a.vertices, b.vertices)
        raised += b.material["young"] > a.material["young"]
    assert raised >= 4  # most soft toys as drawn are under the floor
    for family in ("plate", "star_toy", "flag"):
        assert spec_for(family, 3, sound).material == spec_for(family, 3, full).material


def test_the_contact_families_drop_cloth_on_colliders_and_carry_it_and_hold_some_out():
    """Generator 1.5.0: cloth dropped on a primitive collider standing on a floor (cover; shroud held out for
    validation) and cloth carried or spun by its object (carry; twirl held out for testing)."""
    from neurok_blender.pipeline.data.generate import CONTACT_FAMILIES

    assert set(CONTACT_FAMILIES) == {"cover", "carry", "shroud", "twirl"}
    assert [FAMILIES[f].split for f in CONTACT_FAMILIES] == ["train", "train", "val", "test"]
    for seed in range(6):
        cover, shroud = make_spec("cover", seed), make_spec("shroud", seed)
        for spec, kinds in ((cover, {"sphere", "cylinder"}), (shroud, {"box"})):
            (collider,) = spec.colliders
            assert collider["kind"] in kinds and spec.ground == 0.0 and spec.backend == "blender_cloth"
            top = collider["centre"][2] + collider["size"][2] / 2
            assert spec.vertices[:, 2].min() > top  # released above it
            assert np.ptp(spec.vertices[:, 2]) < 1e-9 and not spec.pin_weights.any()  # flat and free
            assert spec.conditions()["colliders"][0]["kind"] == collider["kind"]
        carry, twirl = make_spec("carry", seed), make_spec("twirl", seed)
        for spec in (carry, twirl):
            assert spec.pin_weights.any() and len(spec.drive) == 2 and spec.drive[0]["time"] == 0.0
            assert spec.conditions()["drive"][1]["time"] == spec.drive[1]["time"]
        assert np.linalg.norm(carry.drive[1]["location"]) >= 0.5 and abs(carry.drive[1]["yaw"]) <= np.pi / 2
        assert np.linalg.norm(twirl.drive[1]["location"]) == 0.0 and abs(twirl.drive[1]["yaw"]) >= np.pi / 2


@pytest.mark.blender
@pytest.mark.slow
def test_blender_cloth_drapes_over_its_collider_and_trails_its_carried_pins():
    pytest.importorskip("bpy")
    recipe = dataclasses.replace(SMOKE, frames=36)  # the bpy process rebuilds specs with the recipe's frames
    cover, carry = (dataclasses.replace(make_spec(f, seed), frames=36, fps=24.0) for f, seed in (("cover", 4), ("carry", 2)))
    draped, carried = simulate_specs([cover, carry], recipe)
    (c,) = cover.colliders
    centre = np.asarray(c["centre"])
    last = draped[-1]
    near = np.linalg.norm(last[:, :2] - centre[:2], axis=1) < 0.05
    assert last[near, 2].min() > centre[2] + c["size"][2] / 2 - 0.05  # held up by the collider
    far = np.linalg.norm(last[:, :2] - centre[:2], axis=1).argmax()
    assert last[far, 2] < cover.vertices[far, 2] - 0.15  # the rest hangs down beside it
    assert last[:, 2].min() > -0.02  # and the floor holds
    pinned = carry.pin_weights > 0.5
    assert np.abs(carried[:, pinned] - carried[0, pinned]).max() < 1e-5  # stored in the object's frame
    go = np.asarray(carry.drive[1]["location"], float)
    trail = (carried[:, ~pinned] - carried[0, ~pinned]).mean(1) @ (go / np.linalg.norm(go))  # object frame = world at 0
    assert trail.min() < -0.03  # the free part falls behind as the object moves off
