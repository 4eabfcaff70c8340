"""`make bench`: NeuROK against Blender's own simulators on the same meshes, frames and machine, in one run.

For pinned cloth of about 1k, 10k and 50k vertices (a horizontal sheet pinned along one edge, falling
under gravity) it bakes Blender Cloth and NeuROK, and for closed solids of the same sizes Blender Soft
Body and NeuROK; it reports per-frame times (NeuROK's latent dynamics and decoding separately), the
ratios, each process's peak memory, and NeuROK's per-frame vertex error against the Blender Cloth bake
(over the bounding-box diagonal; the rest shape as the baseline). Each measurement runs in its own
process, so peak memory is that run's own. Results replace the marked section of docs/results.md.

    python scripts/bench.py --sizes 1000 10000 50000 --frames 48 --out docs/results.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
GPU_START, GPU_END = "<!-- bench-gpu:start -->", "<!-- bench-gpu:end -->"
SIMULATOR = {"cloth": "Cloth", "drape": "Cloth", "solid": "Soft Body"}
DRAPE_LIMIT = 10_000  # the drape on a collider runs at the sizes artists drape (Blender Cloth takes minutes beyond)


# -- meshes ------------------------------------------------------------------------------------------------
def sheet(target: int, size: float = 2.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A horizontal square sheet of about ``target`` vertices at z = 1, pinned along x = min."""
    n = max(2, int(round(np.sqrt(target))))
    xs, ys = np.meshgrid(np.linspace(-size / 2, size / 2, n), np.linspace(-size / 2, size / 2, n), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.ones(xs.size)], 1)
    idx = np.arange(n * n).reshape(n, n)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    tris = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    pins = (v[:, 0] < -size / 2 + 1e-9).astype(np.float64)
    return v, tris, pins


def drape(target: int, size: float = 2.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A horizontal square sheet of about ``target`` vertices at z = 1, free, above the ball ``ball()``."""
    v, tris, _ = sheet(target, size)
    return v, tris, np.zeros(len(v))


def ball() -> tuple[np.ndarray, np.ndarray]:
    """The drape's collider: an icosphere of radius 0.6 (1,280 triangles) centred at the origin."""
    import trimesh

    s = trimesh.creation.icosphere(3, radius=0.6)
    return np.asarray(s.vertices), np.asarray(s.faces)


def box(target: int, size: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The closed surface of a cube with about ``target`` vertices, resting on z = 0, its bottom pinned."""
    s = max(2, int(round(np.sqrt(target / 6))) + 1)
    lin = np.linspace(-0.5, 0.5, s)
    verts: dict[tuple, int] = {}
    tris = []

    def vid(p):
        key = tuple(np.round(p, 9))
        if key not in verts:
            verts[key] = len(verts)
        return verts[key]

    for axis in range(3):
        for side in (-0.5, 0.5):
            for i in range(s - 1):
                for j in range(s - 1):
                    quad = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = np.zeros(3)
                        p[axis] = side
                        p[(axis + 1) % 3], p[(axis + 2) % 3] = lin[i + di], lin[j + dj]
                        quad.append(vid(p))
                    if side < 0:
                        quad = quad[::-1]
                    tris += [[quad[0], quad[1], quad[2]], [quad[0], quad[2], quad[3]]]
    v = np.zeros((len(verts), 3))
    for key, i in verts.items():
        v[i] = key
    v = v * size + np.array([0, 0, size / 2])
    return v, np.asarray(tris, np.int64), (v[:, 2] < 1e-6).astype(np.float64)


def peak_rss_mb() -> float:
    """This process's own peak resident set. On Linux from VmHWM (ru_maxrss keeps the high-water mark of
    the parent from before exec, which would hide a child's smaller peak)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


# -- one measurement per process ------------------------------------------------------------------------------
def run_blender(inp: str, out: str) -> None:
    import bpy

    data = np.load(inp)
    v, tris, pins, kind, frames = data["v"], data["tris"], data["pins"], str(data["kind"]), int(data["frames"])
    bpy.ops.wm.read_homefile(use_empty=True)
    if kind == "drape":
        cv, cf = ball()
        cmesh = bpy.data.meshes.new("ball")
        cmesh.from_pydata(cv.tolist(), [], cf.tolist())
        collider = bpy.data.objects.new("ball", cmesh)
        bpy.context.scene.collection.objects.link(collider)
        collider.modifiers.new("Collision", "COLLISION")
    scene = bpy.context.scene
    scene.render.fps, scene.frame_start, scene.frame_end = 24, 1, frames
    mesh = bpy.data.meshes.new("bench")
    mesh.from_pydata(v.tolist(), [], tris.tolist())
    obj = bpy.data.objects.new("bench", mesh)
    scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    group = obj.vertex_groups.new(name="pin")
    group.add([int(i) for i in np.flatnonzero(pins > 0)], 1.0, "REPLACE")
    if kind in ("cloth", "drape"):
        mod = obj.modifiers.new("Cloth", "CLOTH")
        if pins.any():
            mod.settings.vertex_group_mass = "pin"
        cache = mod.point_cache
    else:
        bpy.ops.object.modifier_add(type="SOFT_BODY")
        sb = obj.soft_body
        sb.use_goal, sb.vertex_group_goal = True, "pin"
        sb.goal_default, sb.goal_min, sb.goal_max = 0.5, 0.0, 1.0  # used where the bpy module ignores the group
        cache = obj.modifiers["Softbody"].point_cache
    cache.frame_start, cache.frame_end = 1, frames
    out_frames, times = [], []
    for f in range(1, frames + 1):
        t = time.perf_counter()
        scene.frame_set(f)
        times.append(time.perf_counter() - t)
        ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        co = np.empty(len(v) * 3)
        ev.data.vertices.foreach_get("co", co)
        out_frames.append(co.reshape(-1, 3))
    np.savez(out, frames=np.asarray(out_frames, np.float32), times=np.asarray(times), rss=peak_rss_mb(),
             version=bpy.app.version_string, threads=scene.render.threads)


def run_neurok(inp: str, out: str, device: str) -> None:
    import torch

    from neurok_blender.runtime import api

    data = np.load(inp)
    v, tris, pins, frames = data["v"], data["tris"], data["pins"], int(data["frames"])
    scene = {}
    if str(data["kind"]) == "drape":
        cv, cf = ball()
        scene["colliders"] = [{"vertices": cv, "triangles": cf}]
    t0 = time.perf_counter()
    sim = api.prepare(v, tris, pins=pins if pins.any() else None, device=device, frame_count=frames, fps=24.0,
                      solver={"variation": 0.0}, **scene)
    setup = time.perf_counter() - t0
    t1 = time.perf_counter()
    result = sim.run()
    if device == "cuda":
        torch.cuda.synchronize()
    loop = time.perf_counter() - t1
    np.savez(out, frames=result.astype(np.float32), setup=setup, loop=loop, dynamics=sim.timing["dynamics_s"],
             decode=sim.timing["decode_s"], rss=peak_rss_mb(), threads=torch.get_num_threads(),
             gpu_peak=(torch.cuda.max_memory_allocated() / 2**20) if device == "cuda" else 0.0)


def measure(kind: str, which: str, mesh, frames: int, python: str, device: str = "cpu") -> dict:
    v, tris, pins = mesh
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(inp, v=v, tris=tris, pins=pins, kind=kind, frames=frames)
        cmd = [python, os.path.abspath(__file__), f"--{which}-worker", inp, out, "--device", device]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
        if done.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"{which} {kind} failed:\n{done.stderr[-3000:]}")
        with np.load(out) as r:
            return {k: r[k] for k in r.files}


def fidelity(neurok: np.ndarray, reference: np.ndarray, rest: np.ndarray) -> tuple[float, float]:
    diag = float(np.linalg.norm(rest.max(0) - rest.min(0)))
    err = np.linalg.norm(neurok - reference, axis=-1).mean(-1) / diag
    base = np.linalg.norm(rest[None] - reference, axis=-1).mean(-1) / diag
    return float(err[1:].mean()), float(base[1:].mean())


def gpu_mb(d: dict) -> str:
    return f" (+{d['gpu_peak']:.0f} GPU)"


def mean_drop(rest: np.ndarray, frames: np.ndarray) -> float:
    """How far the vertices fell on average from rest to the last frame (m)."""
    return float((rest[:, 2] - frames[-1][:, 2]).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 10000, 50000])
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results.md"))
    parser.add_argument("--json", default=os.path.join(ROOT, "out", "bench.json"))
    parser.add_argument("--blender-worker", nargs=2, metavar=("IN", "OUT"))
    parser.add_argument("--neurok-worker", nargs=2, metavar=("IN", "OUT"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-blender", action="store_true",
                        help="NeuROK alone, on the CPU and on CUDA side by side (for a GPU machine without the bpy "
                             "module); writes its own section of docs/results.md")
    args = parser.parse_args(argv)
    if args.blender_worker:
        run_blender(*args.blender_worker)
        sys.stdout.flush()
        os._exit(0)  # the bpy module can hang in its exit handlers
    if args.neurok_worker:
        run_neurok(*args.neurok_worker, args.device)
        return 0

    import torch

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if args.no_blender:
        return neurok_only(args, devices, argv if argv is not None else sys.argv[1:])
    rows = []
    for kind, make in (("cloth", sheet), ("drape", drape), ("solid", box)):
        for size in args.sizes if kind != "drape" else [s for s in args.sizes if s <= DRAPE_LIMIT]:
            mesh = make(size)
            n = len(mesh[0])
            print(f"{kind} {n} vertices: Blender {SIMULATOR[kind]} ...", file=sys.stderr, flush=True)
            ref = measure(kind, "blender", mesh, args.frames, sys.executable)
            row = {"kind": kind, "vertices": n, "frames": args.frames,
                   "blender_s": float(ref["times"][1:].mean()), "blender_rss": float(ref["rss"]),
                   "blender_version": str(ref["version"])}
            for dev in devices:
                print(f"{kind} {n} vertices: NeuROK on {dev} ...", file=sys.stderr, flush=True)
                res = measure(kind, "neurok", mesh, args.frames, sys.executable, dev)
                steps = args.frames - 1
                err, base = fidelity(res["frames"], ref["frames"], mesh[0])
                row[dev] = {"drop": mean_drop(mesh[0], res["frames"]), "blender_drop": mean_drop(mesh[0], ref["frames"]),
                            "dynamics_s": float(res["dynamics"]) / steps, "decode_s": float(res["decode"]) / steps,
                            "frame_s": float(res["loop"]) / steps, "setup_s": float(res["setup"]),
                            "rss": float(res["rss"]), "gpu_peak": float(res["gpu_peak"]), "error": err, "rest_error": base}
            rows.append(row)
            print(json.dumps(row, default=float), file=sys.stderr, flush=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(rows, fh, indent=1, default=float)
    write(args.out, rows, devices, argv if argv is not None else sys.argv[1:])
    print(f"wrote {args.out} and {args.json}", file=sys.stderr)
    return 0


def write(path: str, rows: list[dict], devices: list[str], argv: list[str]) -> None:
    ms = lambda s: f"{1000 * s:.1f}"  # noqa: E731
    cpu = platform.processor() or platform.machine()
    lines = [START, "## NeuROK against Blender's simulators", "",
             f"`python scripts/bench.py {' '.join(argv)}` (`make bench`), {rows[0]['frames']} frames at 24 fps, one run, "
             f"{os.cpu_count()} cores ({cpu}), Blender {rows[0]['blender_version']} (bpy module) with its default "
             "settings (Cloth quality 5; Soft Body goal on the pinned vertices). Cloth: a horizontal 2 m square sheet "
             "pinned along one edge, falling under gravity. Drape: the same sheet, free, dropped onto a ball collider "
             "(radius 0.6 m, 1,280 triangles). Solid: the closed surface of a cube, its bottom pinned. NeuROK runs "
             "its defaults: an open surface through its full-resolution cloth layer (20 sweeps a frame), a solid "
             "through the reduced motion. Times are per frame, averaged over frames 2…N (the first frame is the rest "
             "state for both); NeuROK's set-up (encode, reduce, build the cubature and the layer) is listed "
             "separately. Peak memory is each "
             "process's maximum resident set (VmHWM), libraries included. Error (cloth only): mean vertex distance to "
             "the Blender Cloth bake over the bounding-box diagonal, frames 2…N, with the rest shape's error as the "
             "baseline. Drop (cloth only): the vertices' mean fall from rest to the last frame, NeuROK / Blender Cloth. "
             "No fidelity is claimed against Soft Body: in the bpy module its goal vertex group is ignored, so "
             "its cube does not hold its pinned base and the two runs do not simulate the same thing.", ""]
    for dev in devices:
        lines += [f"### NeuROK on {dev.upper()}", "", *(["float32 throughout; peak MB adds the GPU's peak allocation.", ""]
                                                      if dev == "cuda" else []),
                  "| mesh | vertices | Blender ms/frame | NeuROK ms/frame (dynamics + decode) | speed-up | NeuROK set-up s | "
                  "peak MB Blender / NeuROK | error vs Blender (rest baseline) | drop NeuROK / Blender (m) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            d = r[dev]
            sim = SIMULATOR[r["kind"]]
            fid = f"{d['error']:.3f} ({d['rest_error']:.3f})" if r["kind"] != "solid" else "—"
            fid += f" | {d['drop']:.3f} / {d['blender_drop']:.3f}" if r["kind"] != "solid" else " | —"
            lines.append(f"| {r['kind']} ({sim}) | {r['vertices']:,} | {ms(r['blender_s'])} | {ms(d['frame_s'])} "
                         f"({ms(d['dynamics_s'])} + {ms(d['decode_s'])}) | **{r['blender_s'] / d['frame_s']:.1f}×** | "
                         f"{d['setup_s']:.1f} | {r['blender_rss']:.0f} / {d['rss']:.0f}{gpu_mb(d) if dev == 'cuda' else ''} | {fid} |")
        lines.append("")
    if "cuda" not in devices:
        lines += ["No CUDA device on this machine, so there is no GPU row here (a lent GPU machine's rows are in the next section).", ""]
    lines += targets(rows)
    lines.append(END)
    replace_section(path, START, END, "\n".join(lines))


def targets(rows: list[dict]) -> list[str]:
    """Issue 44's per-frame targets, each judged from this run's rows (a target whose row was not run is left out)."""
    def row(kind: str, low: int, high: int) -> dict | None:
        return next((r for r in rows if r["kind"] == kind and low <= r["vertices"] <= high), None)

    def verdict(ok: bool) -> str:
        return "met" if ok else "**not met**"

    out = []
    wanted = (("drape", 500, 2000, 4, "a sheet dropped on a ball collider at 1k vertices"),
              ("drape", 5000, 20000, 12, "the same at 10k vertices"),
              ("cloth", 5000, 20000, 20, "the pinned sheet without a collider at 10k vertices"),
              ("cloth", 30000, 80000, 30, "the pinned sheet at 50k vertices"),
              ("cloth", 150000, 300000, 30, "the pinned sheet at 200k vertices"),
              ("solid", 5000, 20000, 1, "a solid against Soft Body at 10k vertices"))
    for kind, low, high, factor, what in wanted:
        r = row(kind, low, high)
        if r:
            ratio = r["blender_s"] / r["cpu"]["frame_s"]
            out.append(f"- At least {factor}× cheaper per frame than Blender {SIMULATOR[kind]}, {what}: "
                       f"{verdict(ratio >= factor)} ({ratio:.1f}× here).")
    if not out:
        return []
    return ["Targets, from this run:", "", *out, "",
            "The cloth layer's cost grows with the vertex count (every vertex, every substep); a solid's reduced motion "
            "is almost flat in it (only the decode grows).", ""]


def neurok_only(args, devices: list[str], argv: list[str]) -> int:
    """The GPU machine's rows: the same meshes and frames through NeuROK on its CPU and on CUDA, the per-frame
    times, set-up, peak memory, and how far the CUDA rollout is from the CPU one (float32 on both)."""
    import torch

    if "cuda" not in devices:
        print("bench --no-blender: torch sees no CUDA device; only the CPU rows will be written", file=sys.stderr)
    rows = []
    for kind, make in (("cloth", sheet), ("solid", box)):
        for size in args.sizes:
            mesh = make(size)
            row: dict = {"kind": kind, "vertices": len(mesh[0]), "frames": args.frames}
            runs = {}
            for dev in devices:
                print(f"{kind} {row['vertices']} vertices: NeuROK on {dev} ...", file=sys.stderr, flush=True)
                res = runs[dev] = measure(kind, "neurok", mesh, args.frames, sys.executable, dev)
                steps = args.frames - 1
                row[dev] = {"dynamics_s": float(res["dynamics"]) / steps, "decode_s": float(res["decode"]) / steps,
                            "frame_s": float(res["loop"]) / steps, "setup_s": float(res["setup"]),
                            "rss": float(res["rss"]), "gpu_peak": float(res["gpu_peak"]),
                            "drop": mean_drop(mesh[0], res["frames"])}
            if len(runs) == 2:
                diag = float(np.linalg.norm(mesh[0].max(0) - mesh[0].min(0)))
                gap = np.linalg.norm(runs["cuda"]["frames"] - runs["cpu"]["frames"], axis=-1) / diag
                row["gap_mean"], row["gap_max"] = float(gap.mean()), float(gap.max())
            rows.append(row)
            print(json.dumps(row, default=float), file=sys.stderr, flush=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(rows, fh, indent=1, default=float)
    ms = lambda s: f"{1000 * s:.1f}"  # noqa: E731
    name = torch.cuda.get_device_name(0) if "cuda" in devices else "no GPU"
    lines = [GPU_START, "## NeuROK on a GPU machine", "",
             f"`python scripts/bench.py {' '.join(argv)}` (run by `scripts/gpu_check.sh`): the bench's meshes, "
             f"{args.frames} frames at 24 fps, NeuROK alone on one machine: {name}, {os.cpu_count()} CPU cores "
             f"({platform.processor() or platform.machine()}), torch {torch.__version__}, CUDA {torch.version.cuda}, "
             "float32 throughout. That machine's Python has no bpy module, so Blender's times are "
             "the CPU table's above, from another machine; compare NeuROK's two devices here with each other. "
             "Gap: mean (max) vertex distance between the CUDA and the CPU rollout over the bounding-box diagonal.",
             "", "| mesh | vertices | CPU ms/frame (dynamics + decode) | CUDA ms/frame (dynamics + decode) | "
             "CUDA speed-up | set-up s CPU / CUDA | peak MB CPU / CUDA (+GPU) | gap CUDA vs CPU | drop CPU / CUDA (m) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        c, g = r["cpu"], r.get("cuda")
        cell = lambda d: f"{ms(d['frame_s'])} ({ms(d['dynamics_s'])} + {ms(d['decode_s'])})"  # noqa: E731
        if g is None:
            lines.append(f"| {r['kind']} | {r['vertices']:,} | {cell(c)} | — | — | {c['setup_s']:.1f} / — | "
                         f"{c['rss']:.0f} / — | — | {c['drop']:.3f} / — |")
            continue
        lines.append(f"| {r['kind']} | {r['vertices']:,} | {cell(c)} | {cell(g)} | **{c['frame_s'] / g['frame_s']:.1f}×** | "
                     f"{c['setup_s']:.1f} / {g['setup_s']:.1f} | {c['rss']:.0f} / {g['rss']:.0f} (+{g['gpu_peak']:.0f}) | "
                     f"{r['gap_mean']:.1e} ({r['gap_max']:.1e}) | {c['drop']:.3f} / {g['drop']:.3f} |")
    lines += ["", GPU_END]
    replace_section(args.out, GPU_START, GPU_END, "\n".join(lines))
    print(f"wrote {args.out} and {args.json}", file=sys.stderr)
    return 0


def replace_section(path: str, start: str, end: str, block: str) -> None:
    """Put ``block`` (which begins with ``start`` and ends with ``end``) in place of that marked section of
    the file, or append it; the rest of the file is kept."""
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with open(path, "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    sys.exit(main())
