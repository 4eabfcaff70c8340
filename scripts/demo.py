"""`make demo`: builds the demo scene (a flag on a pole blown by a Wind field object, a wobbling jelly, a
cape pinned at the shoulders of a moving body it collides with), bakes all three through the real batch path with
the shipped default model, then reopens the saved file, scrubs it, and shows what it holds:

    out/demo.blend          the baked scene (caches relative to it, under out/neurok_cache/)
    out/demo.gif            the baked scene rendered by Blender (Workbench), frame by frame from the caches
    out/cape_vs_cloth.gif   the cape beside Blender Cloth's on the same body, pins and collider, rendered the same way
    out/demo_sheet.png      frames of each object, read back from the reopened file
    out/demo_energy.png     each object's energy over time, from the engine's report
    out/demo_report.json    the batch report (seconds, device, material, energy per object)
    out/render.log          what Blender printed while rendering (each frame saved; its display-less GPU set-up's
                            EGL messages)

It writes nothing else. `make demo-publish` copies the pictures to docs/demo/, where the README shows them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import render

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
OBJECTS = ("Flag", "Jelly", "Cape")
SHEET_FRAMES = (1, 12, 24, 48, 72, 96)
# the jelly's wobble has a period of about 7 frames and is gone by frame 30: its row shows the first swings
FRAMES_OF = {"Jelly": (1, 3, 6, 10, 13, 24)}


def pin_where(obj, name: str, predicate) -> None:
    group = obj.vertex_groups.new(name=name)
    group.add([v.index for v in obj.data.vertices if predicate(v.co)], 1.0, "REPLACE")
    obj.neurok.pin_group = name


def build_scene(path: str, frames: int = 96) -> None:
    import bpy

    import neurok_blender

    neurok_blender.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps = 24

    # a flag on a pole at its left edge, blown by a gusty Wind field object (no panel wind)
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=40, y_subdivisions=26, size=2.0, location=(0, 0, 2.0),
                                    rotation=(math.pi / 2, 0, 0))
    flag = bpy.context.active_object
    flag.name = "Flag"
    flag.scale = (1.5, 1.0, 1.0)
    pin_where(flag, "pole", lambda co: co.x < -0.99)
    bpy.ops.object.effector_add(type="WIND", location=(0, -3, 2.0), rotation=(-math.pi / 2, 0, 0.3))  # +Z → +y
    wind = bpy.context.active_object
    wind.name = "Wind"
    wind.field.strength, wind.field.noise = 6.0, 0.5
    wind.field.seed = 1  # Blender draws a new effector's noise seed at random: fixed, so every run bakes the same flag

    # a jelly cube on the ground, base held, pushed sideways at the first frame
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(4, 0, 0.5))
    jelly = bpy.context.active_object
    jelly.name = "Jelly"
    bpy.ops.object.mode_set(mode="EDIT")
    bpy.ops.mesh.subdivide(number_cuts=6)
    bpy.ops.object.mode_set(mode="OBJECT")
    pin_where(jelly, "base", lambda co: co.z < -0.49)
    jelly.neurok.initial_velocity = (2.5, 0.0, 0.0)
    jelly.neurok.use_ground, jelly.neurok.ground_height = True, 0.0

    # a cape pinned at the shoulders of a body (a sphere with a Collision modifier) that walks along -y and
    # stops: the cape trails behind, then swings forward against the body's back
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.4, location=(-4, 0, 1.4))
    body = bpy.context.active_object
    body.name = "Body"
    body.modifiers.new("Collision", "COLLISION")
    for frame, y in ((1, 0.0), (30, -1.5)):
        body.location.y = y
        body.keyframe_insert("location", frame=frame)
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=24, y_subdivisions=32, size=1.6, location=(0, 0.45, -0.5),
                                    rotation=(math.pi / 2, 0, 0))
    cape = bpy.context.active_object
    cape.name = "Cape"
    cape.parent = body  # it rides on the body; its pinned shoulders follow the body's animation
    pin_where(cape, "shoulders", lambda co: co.y > 0.79 and abs(co.x) < 0.5)
    for ob in (jelly, cape):  # the Wind field is the flag's: the others weigh it at 0 (Field Weights > Wind)
        ob.neurok.field_weight_wind = 0.0
    scene.frame_set(1)
    bpy.ops.wm.save_as_mainfile(filepath=path)


def bake(scene_path: str, out_blend: str, report: str) -> int:
    cmd = [sys.executable, "-m", "neurok_blender.batch", "--blend", scene_path, "--save", out_blend,
           "--report", report] + [arg for name in OBJECTS for arg in ("--object", name)]
    print("baking:", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode  # progress streams straight to the terminal


def read_back(blend: str) -> dict[str, dict]:
    """Reopen the saved file and scrub it: world-space positions of each object at the sheet's frames."""
    import bpy

    bpy.ops.wm.open_mainfile(filepath=blend)
    scene = bpy.context.scene
    shots: dict[str, dict] = {}
    for name in OBJECTS:
        obj = bpy.data.objects[name]
        mod = next(m for m in obj.modifiers if m.type == "MESH_CACHE")
        if not mod.filepath.startswith("//"):
            raise RuntimeError(f"{name}'s cache path {mod.filepath!r} is not relative to the .blend")
        mesh = obj.data
        mesh.calc_loop_triangles()
        tris = np.empty(len(mesh.loop_triangles) * 3, np.int64)
        mesh.loop_triangles.foreach_get("vertices", tris)
        frames = {}
        for frame in sorted({*SHEET_FRAMES, *FRAMES_OF.get(name, SHEET_FRAMES)}):
            scene.frame_set(frame)
            ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
            co = np.empty(len(ev.data.vertices) * 3)
            ev.data.vertices.foreach_get("co", co)
            m = np.array(obj.matrix_world)
            frames[frame] = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
        shots[name] = {"triangles": tris.reshape(-1, 3), "frames": frames}
    body = bpy.data.objects.get("Body")
    if body is not None:  # drawn beside the cape it collides with
        mesh = body.data
        mesh.calc_loop_triangles()
        tris = np.empty(len(mesh.loop_triangles) * 3, np.int64)
        mesh.loop_triangles.foreach_get("vertices", tris)
        co = np.empty(len(mesh.vertices) * 3)
        mesh.vertices.foreach_get("co", co)
        poses = {}
        for frame in SHEET_FRAMES:
            scene.frame_set(frame)
            m = np.array(body.matrix_world)
            poses[frame] = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
        shots["Cape"]["collider"] = {"triangles": tris.reshape(-1, 3), "frames": poses}
    return shots


def draw_sheet(shots: dict[str, dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    light = np.array([0.4, -0.6, 0.7]) / np.linalg.norm([0.4, -0.6, 0.7])
    fig = plt.figure(figsize=(2.6 * len(SHEET_FRAMES), 2.8 * len(shots)))
    for row, (name, shot) in enumerate(shots.items()):
        every = np.concatenate(list(shot["frames"].values()))
        lo, hi = every.min(0), every.max(0)
        centre, half = (lo + hi) / 2, (hi - lo).max() / 2 * 1.05
        for col, frame in enumerate(FRAMES_OF.get(name, SHEET_FRAMES)):
            pos = shot["frames"][frame]
            ax = fig.add_subplot(len(shots), len(SHEET_FRAMES), row * len(SHEET_FRAMES) + col + 1, projection="3d")
            tri = pos[shot["triangles"]]
            normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
            normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
            shade = 0.35 + 0.65 * np.abs(normal @ light)
            colour = np.array([0.85, 0.45, 0.2]) if name == "Jelly" else np.array([0.25, 0.5, 0.85])
            ax.add_collection3d(Poly3DCollection(tri, facecolors=shade[:, None] * colour, edgecolors="none"))
            if "collider" in shot:
                body = shot["collider"]["frames"][frame][shot["collider"]["triangles"]]
                ax.add_collection3d(Poly3DCollection(body, facecolors=(0.6, 0.6, 0.6, 0.5), edgecolors="none"))
            ax.set_xlim(centre[0] - half, centre[0] + half)
            ax.set_ylim(centre[1] - half, centre[1] + half)
            ax.set_zlim(centre[2] - half, centre[2] + half)
            ax.view_init(elev=20, azim=60 if name == "Cape" else -30)  # three-quarter views: out-of-plane motion shows
            ax.set_axis_off()
            ax.set_title(f"{name}, frame {frame}", fontsize=9)
    fig.suptitle("NeuROK demo: read back from out/demo.blend (mesh caches)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw_energy(report: dict, path: str, fps: float = 24.0) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    objs = [o for o in report["objects"] if o.get("stats", {}).get("energy")]
    fig, axes = plt.subplots(1, len(objs), figsize=(4.2 * len(objs), 3.2), squeeze=False)
    for ax, o in zip(axes[0], objs):
        e = o["stats"]["energy"]
        t = np.arange(len(e["total"])) / fps
        base = e["potential"][0]
        ax.plot(t, np.array(e["kinetic"]), label="kinetic T")
        ax.plot(t, np.array(e["potential"]) - base, label="potential V − V₀")
        ax.plot(t, np.array(e["total"]) - base, label="total − V₀", color="k", lw=1)
        ax.set_title(f"{o['name']} ({o['seconds']:.1f} s on {o['device']})", fontsize=10)
        ax.set_xlabel("time (s)")
    axes[0][0].set_ylabel("energy (model units)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "out"))
    parser.add_argument("--docs", default="", help="also copy the animations and sheets here (default: don't)")
    parser.add_argument("--frames", type=int, default=96,
                        help="the scene's length (the README's pictures: 96; the tests run a short demo)")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    scene_path = os.path.join(out, "demo_scene.blend")
    blend, report_path = os.path.join(out, "demo.blend"), os.path.join(out, "demo_report.json")
    if args.frames != 96:  # a short demo: the sheets and the renders spread over what there is
        global SHEET_FRAMES, FRAMES_OF
        SHEET_FRAMES, FRAMES_OF = tuple(int(f) for f in np.linspace(1, args.frames, 6).round()), {}
        render.FRAMES = range(1, args.frames + 1, 2)
    build_scene(scene_path, args.frames)
    print(f"demo scene: {scene_path}", flush=True)
    if bake(scene_path, blend, report_path) != 0:
        print("\nThe demo bake failed; the message above says why.", file=sys.stderr)
        return 1
    shots = read_back(blend)
    for name, shot in shots.items():
        moved = max(np.abs(pos - shot["frames"][1]).max() for pos in shot["frames"].values())
        print(f"{name}: reopened, scrubbed; largest displacement over the drawn frames: {moved:.3f} m")
    draw_sheet(shots, os.path.join(out, "demo_sheet.png"))
    with open(report_path) as fh:
        draw_energy(json.load(fh), os.path.join(out, "demo_energy.png"))
    log = os.path.join(out, "render.log")
    if os.path.exists(log):
        os.remove(log)
    render.demo(blend, os.path.join(out, "demo.gif"))
    render.cape_vs_cloth(blend, os.path.join(out, "cape_vs_cloth.gif"))
    egl = sum("EGL" in line for line in open(log)) if os.path.exists(log) else 0
    if egl:
        print(f"(Blender printed {egl} EGL messages while it set up its GPU without a display: harmless, kept in {log})")
    if args.docs:
        os.makedirs(args.docs, exist_ok=True)
        for name in ("demo.gif", "cape_vs_cloth.gif", "demo_sheet.png", "demo_energy.png"):
            shutil.copyfile(os.path.join(out, name), os.path.join(args.docs, name))
    print("\nDone. Open these:")
    for name in ("demo.blend", "demo.gif", "cape_vs_cloth.gif", "demo_sheet.png", "demo_energy.png",
                 "demo_report.json"):  # `make demo-publish` copies the pictures to docs/demo/
        print(f"  {os.path.join(out, name)}")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the bpy module can hang in its C++ exit handlers
