"""The demo's Blender renders (scripts/render.py): a scene rendered by Workbench frame by frame becomes one
animated GIF of the stated size, every frame stepped in order so a simulation advances."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = pytest.mark.blender
bpy = pytest.importorskip("bpy")
PIL = pytest.importorskip("PIL")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import render  # noqa: E402


def test_a_scene_renders_to_an_animated_gif_stepping_every_frame(blender, tmp_path, monkeypatch):
    from PIL import Image

    monkeypatch.setattr(render, "FRAMES", range(1, 6, 2))
    monkeypatch.setattr(render, "SIZE", (96, 54))
    blender.ops.mesh.primitive_cube_add(size=1.0)
    cube = blender.context.active_object
    cube.name = "Jelly"
    for frame, x in ((1, 0.0), (5, 1.0)):
        cube.location.x = x
        cube.keyframe_insert("location", frame=frame)
    seen = []
    blender.app.handlers.frame_change_post.append(lambda scene, *_: seen.append(scene.frame_current))
    scene = blender.context.scene
    render._setup(scene)
    render._camera(scene, (0.5, -6.0, 1.0), (0.5, 0.0, 0.0))
    out = render._render_gif(scene, str(tmp_path / "anim.gif"))
    blender.app.handlers.frame_change_post.clear()
    image = Image.open(out)
    assert image.n_frames == 3 and image.size == (96, 54)
    stepped = [f for i, f in enumerate(seen) if i == 0 or f != seen[i - 1]]  # a render re-sends its own frame
    assert stepped == [1, 2, 3, 4, 5]  # frames between the rendered ones are stepped too, in order
    assert cube.color[:3] == pytest.approx(render.COLOURS["Jelly"][:3])
    frames = []
    for i in range(image.n_frames):
        image.seek(i)
        frames.append(image.convert("RGB").tobytes())
    assert frames[0] != frames[-1]  # the cube moved between the first and the last frame
