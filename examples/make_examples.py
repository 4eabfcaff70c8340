"""Writes the README's quick-start inputs beside this file: a flag on a pole, three ways.

    flag.obj     a 1.5 m × 1 m sheet, 32 × 20 vertices, upright in the xz-plane (the SDK and CLI read it)
    pole.txt     the vertex indices along its left edge, one per line (the pins)
    flag.blend   the same flag as the object "Flag", its pins in the vertex group "pole" (the batch reads it)

Run with the project's venv: `.venv/bin/python examples/make_examples.py`. The files are committed; this script is how
they were made.
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS, ROWS, WIDTH, HEIGHT, TOP = 32, 20, 1.5, 1.0, 2.0


def flag() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertices (V, 3), triangles (F, 3) and the pole's vertex indices."""
    x, z = np.meshgrid(np.linspace(-WIDTH / 2, WIDTH / 2, COLUMNS), np.linspace(TOP - HEIGHT, TOP, ROWS))
    vertices = np.stack([x.ravel(), np.zeros(x.size), z.ravel()], 1)
    i = np.arange(ROWS * COLUMNS).reshape(ROWS, COLUMNS)
    a, b, c, d = i[:-1, :-1].ravel(), i[:-1, 1:].ravel(), i[1:, 1:].ravel(), i[1:, :-1].ravel()
    triangles = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    return vertices, triangles, i[:, 0]


def write_obj(path: str, vertices: np.ndarray, triangles: np.ndarray) -> None:
    with open(path, "w") as fh:
        fh.write("# a flag for the NeuROK quick start (examples/make_examples.py)\n")
        fh.writelines(f"v {x:.6f} {y:.6f} {z:.6f}\n" for x, y, z in vertices)
        fh.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in triangles)


def write_blend(path: str, vertices: np.ndarray, triangles: np.ndarray, pole: np.ndarray) -> None:
    import bpy

    sys.path.insert(0, os.path.dirname(HERE))
    import neurok_blender

    neurok_blender.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.render.fps = 1, 48, 24
    mesh = bpy.data.meshes.new("Flag")
    mesh.from_pydata(vertices.tolist(), [], triangles.tolist())
    obj = bpy.data.objects.new("Flag", mesh)
    scene.collection.objects.link(obj)
    obj.vertex_groups.new(name="pole").add(pole.tolist(), 1.0, "REPLACE")
    obj.neurok.pin_group = "pole"
    bpy.ops.wm.save_as_mainfile(filepath=path, compress=True)


def main() -> int:
    vertices, triangles, pole = flag()
    write_obj(os.path.join(HERE, "flag.obj"), vertices, triangles)
    with open(os.path.join(HERE, "pole.txt"), "w") as fh:
        fh.writelines(f"{i}\n" for i in pole)
    write_blend(os.path.join(HERE, "flag.blend"), vertices, triangles, pole)
    print("wrote flag.obj, pole.txt, flag.blend in", HERE)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the bpy module can hang in its C++ exit handlers
