"""``python -m neurok_blender.runtime simulate MESH --frames N --fps F ... --out OUT.pc2|OUT.npz``. No bpy use."""

from __future__ import annotations

import argparse
import json
import sys

from ..bridge.request import CLOTH_CHOICES, DEVICES, INTEGRATORS, joint_limit_from_degrees
from ..errors import NeurokError

SETTINGS = ("frame_count", "fps", "wind", "gravity", "ground", "seed", "stiffness", "damping", "young_modulus",
            "density", "solid_material", "joint_stiffness", "cloth_preset", "device", "threads", "checkpoint",
            "frame_start")


def _settings(args: argparse.Namespace) -> dict:
    """The options the user gave, as SimulationRequest fields; the request supplies every default."""
    out = {name: getattr(args, name) for name in SETTINGS if getattr(args, name) is not None}
    solver = {"integrator": args.integrator, "detail": None if args.detail is None else args.detail == "on",
              "detail_sweeps": args.detail_sweeps}
    if any(v is not None for v in solver.values()):
        out["solver"] = {k: v for k, v in solver.items() if v is not None}
    if args.joint_limit is not None:
        out["joint_limit"] = joint_limit_from_degrees(args.joint_limit)
    if args.joint:
        try:
            out["joints"] = [json.loads(text) for text in args.joint]
        except ValueError as exc:
            raise NeurokError(f"--joint must be a JSON object of joint override keys: {exc}") from exc
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m neurok_blender.runtime",
                                     description="NeuROK without Blender: simulate a mesh file into a point cache.")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="simulate MESH and write OUT.pc2 or OUT.npz")
    sim.add_argument("mesh", help="a mesh or point-cloud file trimesh can read (.obj, .ply, .stl, .glb, ...)")
    sim.add_argument("--frames", type=int, dest="frame_count", help="frames to write (default 120)")
    sim.add_argument("--fps", type=float, help="frames per second (default 24)")
    sim.add_argument("--wind", nargs=3, type=float, metavar=("X", "Y", "Z"), help="wind velocity (m/s)")
    sim.add_argument("--gravity", nargs=3, type=float, metavar=("X", "Y", "Z"), help="gravity (default 0 0 -9.81)")
    sim.add_argument("--pins", help="text file of vertex indices (one per line) or .npy of per-vertex weights")
    sim.add_argument("--ground", type=float, help="height of a ground plane (z = GROUND) the object cannot pass")
    sim.add_argument("--collider", action="append", default=[], metavar="MESH",
                     help="a still obstacle, a mesh file in the same frame as MESH (repeatable)")
    sim.add_argument("--field", action="append", default=[], metavar="JSON",
                     help='a force field, e.g. \'{"kind": "wind", "strength": 6, "matrix": [...16 numbers]}\' '
                          "(ForceField keys; repeatable)")
    sim.add_argument("--seed", type=int, help="variation: each seed draws another plausible motion")
    sim.add_argument("--stiffness", type=float, help="multiplier on the predicted stiffness (default 1)")
    sim.add_argument("--damping", type=float, help="multiplier on the predicted damping (default 1)")
    sim.add_argument("--young-modulus", type=float, dest="young_modulus", metavar="PA",
                     help="a closed solid's Young's modulus (Pa): its stiffness from its physical material")
    sim.add_argument("--density", type=float, metavar="KG_M3", help="with --young-modulus: its density (default 1000)")
    sim.add_argument("--solid-material", dest="solid_material", metavar="NAME",
                     help="a closed solid's material by name: jelly, rubber, plastic, wood or metal")
    sim.add_argument("--cloth-preset", dest="cloth_preset", choices=CLOTH_CHOICES,
                     help="an open mesh's material: auto (Blender Cloth's default), shape, or a Blender cloth preset")
    sim.add_argument("--joint-stiffness", type=float, dest="joint_stiffness", metavar="X",
                     help="an assembly's (a mesh of loose closed pieces) multiplier on its joints' spring (default 1)")
    sim.add_argument("--joint-limit", type=float, dest="joint_limit", metavar="DEGREES",
                     help="an assembly's joints stop this far from the modelled pose (default: predicted)")
    sim.add_argument("--joint", action="append", default=[], metavar="JSON",
                     help='an assembly\'s joint override, e.g. \'{"joint": 1, "type": "slide", "axis": [0, 1, 0], '
                          '"range": [-0.05, 0.4]}\' (JointOverride keys: joint 1, 2, … or 0 for every joint; range '
                          "radians for a hinge, mesh units for a slide; repeatable)")
    sim.add_argument("--detail", choices=("on", "off"),
                     help="an open mesh's full-resolution cloth layer (the folds); off: the reduced motion alone")
    sim.add_argument("--detail-sweeps", type=int, dest="detail_sweeps", metavar="N",
                     help="the cloth layer's substeps per frame, 1-200 (default 20)")
    sim.add_argument("--integrator", choices=INTEGRATORS)
    sim.add_argument("--device", choices=DEVICES)
    sim.add_argument("--threads", type=int, metavar="N",
                     help="CPU threads, 1-256 (default 0: the cores other processes leave free when it starts)")
    sim.add_argument("--checkpoint", help="checkpoint folder (default: the shipped model)")
    sim.add_argument("--start", type=int, dest="frame_start", help="first frame number stored in the PC2 header")
    sim.add_argument("--energy", help="also write the per-frame energy trace as JSON here")
    sim.add_argument("--out", required=True, help="OUT.pc2 or OUT.npz (npz: 'frames' T×V×3 in the input's vertex order)")
    sim.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _scene(args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """The colliders (mesh files) and force fields (JSON) the options name."""
    from . import api

    colliders = []
    for path in args.collider:
        c = api.load_mesh(path)
        colliders.append({"vertices": c.vertices, "triangles": c.triangles, "name": path})
    fields = []
    for text in args.field:
        try:
            fields.append(json.loads(text))
        except ValueError as exc:
            raise NeurokError(f"--field must be a JSON object of ForceField keys: {exc}") from exc
    return colliders, fields


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from . import api

    try:
        if not args.out.endswith((".pc2", ".npz")):
            raise NeurokError(f"--out must end in .pc2 or .npz, got {args.out!r}")
        request = api.build_request(**_settings(args))  # bad settings are refused before the mesh is read
        mesh = api.load_mesh(args.mesh)
        pins = api.load_pins(args.pins, len(mesh.vertices)) if args.pins else None
        colliders, fields = _scene(args)
        sim_ = api.prepare(mesh.vertices, mesh.triangles, pins=pins, request=request, colliders=colliders or None,
                           fields=fields or None)
        count = api.save_frames(args.out, sim_.frames(), len(mesh.vertices), request.frame_count, request.frame_start,
                                not args.quiet)
        if args.energy:
            with open(args.energy, "w") as fh:
                json.dump(sim_.energy, fh)
    except NeurokError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    t = sim_.timing
    print(f"wrote {count} frames of {len(mesh.vertices)} vertices to {args.out} on {sim_.device} "
          f"(setup {t['setup_s']:.1f} s, dynamics {t['dynamics_s']:.1f} s, decode {t['decode_s']:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
