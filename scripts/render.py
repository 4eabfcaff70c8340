"""Blender renders of the baked demo file (Workbench, through the bpy module): the whole scene as an animated GIF,
and the cape beside Blender Cloth's own cape on the same body, pins and collider. The mesh caches play without
the add-on, so what is rendered is what a render farm would see."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile

FRAMES = range(1, 97, 2)  # every other frame of the demo's 96
SIZE = (640, 360)
FPS = 12  # half the scene's 24: every other frame, in real time
COLOURS = {"Flag": (0.25, 0.5, 0.85, 1), "Jelly": (0.9, 0.45, 0.2, 1), "Cape": (0.75, 0.5, 0.95, 1),
           "Body": (0.7, 0.7, 0.7, 1), "Ground": (0.35, 0.37, 0.33, 1)}


def _setup(scene) -> None:
    import bpy

    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x, scene.render.resolution_y = SIZE
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"
    shading = scene.display.shading
    shading.light, shading.color_type = "STUDIO", "OBJECT"
    shading.show_shadows, shading.show_cavity = True, True
    if scene.world is None:
        scene.world = bpy.data.worlds.new("World")
    scene.world.color = (0.9, 0.92, 0.95)
    for ob in scene.objects:
        base = ob.name.split(".")[0].split(" ")[0]
        if base in COLOURS:
            ob.color = COLOURS[base]


def _camera(scene, location, target, lens: float = 35.0, ortho: float | None = None) -> None:
    import bpy
    from mathutils import Vector

    data = bpy.data.cameras.new("RenderCamera")
    data.lens = lens
    if ortho is not None:
        data.type, data.ortho_scale = "ORTHO", ortho
    cam = bpy.data.objects.new("RenderCamera", data)
    scene.collection.objects.link(cam)
    cam.location = location
    cam.rotation_euler = (Vector(target) - Vector(location)).to_track_quat("-Z", "Y").to_euler()
    scene.camera = cam


def _ground(scene, size: float, location=(0.0, 0.0, 0.0)) -> None:
    import bpy

    mesh = bpy.data.meshes.new("Ground")
    h = size / 2
    mesh.from_pydata([(-h, -h, 0), (h, -h, 0), (h, h, 0), (-h, h, 0)], [], [(0, 1, 2, 3)])
    ob = bpy.data.objects.new("Ground", mesh)
    ob.location = location
    scene.collection.objects.link(ob)


def _label(scene, text: str, location, rotation, size: float = 0.3) -> None:
    import bpy

    curve = bpy.data.curves.new(text, type="FONT")
    curve.body, curve.size, curve.align_x = text, size, "CENTER"
    ob = bpy.data.objects.new(text, curve)
    ob.location, ob.rotation_euler, ob.color = location, rotation, (0.1, 0.1, 0.1, 1)
    scene.collection.objects.link(ob)


@contextlib.contextmanager
def _output_to(log_path: str):
    """The process's stdout and stderr (fds 1 and 2) into a log while Blender renders: it reports every saved frame,
    and without a display its GPU set-up prints "EGL Error (0x3009)" (EGL_BAD_MATCH) while it looks for a context
    it can use; the frames render all the same."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)


def _render_gif(scene, out_gif: str) -> str:
    """Render FRAMES in order (a cloth simulation steps as the frames advance) and write them as one GIF."""
    import bpy
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for frame in range(FRAMES[0], FRAMES[-1] + 1):
            scene.frame_set(frame)  # every frame in turn, rendered or not: a cloth simulation steps one at a time
            if frame not in FRAMES:
                continue
            scene.render.filepath = os.path.join(tmp, f"f{frame:04d}.png")
            with _output_to(os.path.join(os.path.dirname(os.path.abspath(out_gif)), "render.log")):
                bpy.ops.render.render(write_still=True)
            paths.append(scene.render.filepath)
        images = [Image.open(p).convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT) for p in paths]
        images[0].save(out_gif, save_all=True, append_images=images[1:], duration=round(1000 / FPS), loop=0,
                       optimize=True)
    print(f"rendered {len(FRAMES)} frames with Blender (Workbench) to {out_gif}", flush=True)
    return out_gif


def demo(blend: str, out_gif: str) -> str:
    """The baked demo as it plays: the flag in its gusts, the jelly's sway, the cape on its walking body."""
    import bpy

    bpy.ops.wm.open_mainfile(filepath=blend)
    scene = bpy.context.scene
    _ground(scene, 14.0, (0.0, 0.0, 0.0))
    _setup(scene)
    _camera(scene, (5.5, -8.5, 3.6), (-0.6, 0.4, 0.9), lens=30.0)  # three-quarter view: the flag turning shows
    return _render_gif(scene, out_gif)


def cape_vs_cloth(blend: str, out_gif: str) -> str:
    """The demo's cape (NeuROK, from its cache) above Blender Cloth's: a copy of the body and the cape one row
    below, the copy's NeuROK cache swapped for a Cloth modifier pinned by the same group, colliding with the
    same sphere, at Cloth's default (cotton-like) settings."""
    import bpy

    bpy.ops.wm.open_mainfile(filepath=blend)
    scene = bpy.context.scene
    for name in ("Flag", "Jelly", "Wind"):
        bpy.data.objects.remove(bpy.data.objects[name], do_unlink=True)
    body, cape = bpy.data.objects["Body"], bpy.data.objects["Cape"]
    row = bpy.data.objects.new("ClothRow", None)  # the second row: everything below it moves 2.4 m down
    row.location = (0.0, 0.0, -2.4)
    scene.collection.objects.link(row)
    body2 = body.copy()
    scene.collection.objects.link(body2)
    body2.parent = row
    cape2 = cape.copy()
    cape2.data = cape.data.copy()
    scene.collection.objects.link(cape2)
    cape2.parent = body2
    for mod in [m for m in cape2.modifiers if m.type == "MESH_CACHE"]:
        cape2.modifiers.remove(mod)
    cloth = cape2.modifiers.new("Cloth", "CLOTH")
    cloth.settings.vertex_group_mass = cape.vertex_groups[0].name  # the pins NeuROK was given
    cloth.point_cache.frame_start, cloth.point_cache.frame_end = 1, scene.frame_end
    _setup(scene)
    x = body.matrix_world.translation.x
    eye, target = (x + 8.0, 3.8, 0.9), (x, -0.75, -0.1)
    facing = math.atan2(eye[1] - target[1], eye[0] - target[0]) + math.pi / 2  # the labels turned to the camera
    _label(scene, "NeuROK", (x, 0.4, 2.1), (math.pi / 2, 0, facing))
    _label(scene, "Blender Cloth", (x, 0.4, -0.3), (math.pi / 2, 0, facing))
    _camera(scene, eye, target, lens=34.0)
    return _render_gif(scene, out_gif)
