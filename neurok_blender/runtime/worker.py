"""The runtime worker: one bake per process, protocol on stdout, logs on stderr. No bpy use.

Run as ``python -m neurok_blender.runtime.worker`` (or through ``runtime/launch.py`` from an
installed extension). ``--probe`` only says hello: interpreter, torch version and device.
"""

from __future__ import annotations

import _thread
import argparse
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO

import numpy as np

from ..bridge import protocol
from ..bridge.request import SimulationRequest
from ..errors import InputError, NeurokError, ProtocolError, SimulationDiverged, WorkerFailed
from ..pc2 import PC2Writer
from ..version import RELEASE_VERSION
from . import device as devices
from . import threads
from .engine import Engine, EngineFactory, load_default_engine
from .mesh import MeshInput

EXIT_OK, EXIT_CRASH, EXIT_ERROR, EXIT_CANCELLED = 0, 1, 2, 130


class Channel:
    """The worker's side of the wire: frames go to the real stdout, and nothing else does."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, msg_type: str, data: dict[str, Any] | None = None) -> None:
        frame = protocol.encode(msg_type, data)
        with self._lock:
            try:
                self._stream.write(frame)
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass  # the add-on is gone; the stdin watchdog ends this process


def read_request(stream: BinaryIO) -> tuple[SimulationRequest, MeshInput]:
    """Block until one REQUEST message has arrived and turn it into typed inputs."""
    decoder = protocol.Decoder()
    while chunk := stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1 << 16):
        for msg in decoder.feed(chunk):
            if msg.type != protocol.REQUEST:
                raise ProtocolError(f"expected a request, got {msg.type!r}")
            request = SimulationRequest.from_dict(msg.data)
            if not request.output_path:
                raise InputError("the request names no output file")
            return request, mesh_from_arrays(msg.arrays, request.object_name, request)
    raise ProtocolError("the add-on closed the connection before sending a request")


def _array(arrays: dict[str, protocol.Array], name: str, dtype: str, width: int | None) -> np.ndarray:
    if name not in arrays:
        raise InputError(f"the request carries no {name!r} array")
    arr = arrays[name]
    try:
        out = np.frombuffer(arr.data, dtype=np.dtype(arr.dtype)).reshape(arr.shape).astype(dtype)
    except (TypeError, ValueError) as exc:
        raise InputError(f"array {name!r} is malformed: {exc}") from exc
    if width is not None and (out.ndim != 2 or out.shape[1] != width):
        raise InputError(f"array {name!r} must have shape (N, {width}), got {out.shape}")
    return out


def mesh_from_arrays(arrays: dict[str, protocol.Array], name: str = "",
                     request: SimulationRequest | None = None) -> MeshInput:
    """The mesh, and the scene's arrays when the request has a scene: ``collider<i>_triangles`` per collider,
    ``initial_velocities`` (V, 3), and the scene track the request names (memory-mapped, never read whole)."""
    vertices = _array(arrays, "vertices", "float64", 3)
    triangles = _array(arrays, "triangles", "int64", 3) if "triangles" in arrays else None
    pins = _array(arrays, "pin_weights", "float64", None) if "pin_weights" in arrays else None
    scene = None
    if request is not None and (request.colliders or request.track or "initial_velocities" in arrays):
        from .. import track as tracks
        from .dynamics.scene import SceneInput

        colliders = [_array(arrays, f"collider{i}_triangles", "int64", 3) for i in range(len(request.colliders))]
        velocities = _array(arrays, "initial_velocities", "float64", 3) if "initial_velocities" in arrays else None
        rows = None
        if request.track:
            weights = np.zeros(len(vertices)) if pins is None else pins
            rows = tracks.open_track(request.track, request.frame_count, tracks.layout_for(request, weights))
        scene = SceneInput(colliders, rows, velocities)
    return MeshInput.from_arrays(vertices, triangles, pins, name=name, scene=scene)


def _watch_stdin(stream: BinaryIO) -> None:
    """When the add-on (or Blender) goes away, stdin closes: stop instead of living on as an orphan."""
    try:
        while stream.read(1 << 12):
            pass
    except (OSError, ValueError):
        pass
    _thread.interrupt_main()


def write_frames(channel: Channel, request: SimulationRequest, mesh: MeshInput, engine: Engine, device: str) -> int:
    written = 0
    with PC2Writer(request.output_path, len(mesh.vertices), start_frame=request.frame_start) as writer:
        for positions in engine.frames(mesh, device):
            pos = np.asarray(positions, dtype=np.float64)
            if pos.shape != mesh.vertices.shape or not np.isfinite(pos).all():
                raise SimulationDiverged(f"frame {request.frame_start + written} is not finite or has the wrong shape")
            writer.append(pos)
            channel.send(protocol.FRAME, {"index": written, "frame": request.frame_start + written, "of": request.frame_count})
            written += 1
            if written == request.frame_count:
                break
    if written < request.frame_count:
        raise WorkerFailed(f"the engine produced {written} of {request.frame_count} frames")
    return written


def run_bake(channel: Channel, request: SimulationRequest, mesh: MeshInput, factory: EngineFactory) -> dict[str, Any]:
    """Simulate and write every frame; returns the DONE message's data (the caller sends it)."""
    started = time.perf_counter()
    thread_count = threads.apply(request.threads)
    engine = factory(request)
    device, warning = devices.resolve_device(request.device)
    if warning:
        channel.send(protocol.WARNING, {"message": warning})
    channel.send(protocol.PROGRESS, {"stage": "simulating", "device_name": devices.device_label(device)})
    try:
        count = write_frames(channel, request, mesh, engine, device)
    except Exception as exc:
        if device != "cuda" or not devices.is_cuda_oom(exc):
            raise
        channel.send(protocol.WARNING, {"message": "CUDA ran out of memory; retrying the bake on the CPU"})
        device = "cpu"
        channel.send(protocol.PROGRESS, {"stage": "simulating", "device_name": "CPU"})
        count = write_frames(channel, request, mesh, engine, device)
    seconds = time.perf_counter() - started
    done = {"frames": count, "path": request.output_path, "seconds": seconds, "device": devices.device_label(device),
            "threads": thread_count}
    stats = getattr(engine, "stats", None)
    if callable(stats):
        done["stats"] = stats()
    return done


def _remove_partial(path: str | None) -> None:
    if path and os.path.exists(path):
        try:
            os.remove(path)
        except OSError:
            pass


def _install_signal_handlers() -> None:
    if sys.platform == "win32":
        signal.signal(signal.SIGBREAK, signal.default_int_handler)  # CTRL_BREAK from the add-on
    else:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def serve(channel: Channel, stdin: BinaryIO, factory: EngineFactory) -> int:
    output = None
    try:
        request, mesh = read_request(stdin)
        output = request.output_path
        threading.Thread(target=_watch_stdin, args=(stdin,), daemon=True).start()
        done = run_bake(channel, request, mesh, factory)
        # From here the output is finished and belongs to the add-on: once it reads DONE it closes our
        # stdin, and the watchdog's interrupt must not delete a file the add-on is about to move.
        output = None
        channel.send(protocol.DONE, done)
        return EXIT_OK
    except KeyboardInterrupt:
        _remove_partial(output)
        channel.send(protocol.CANCELLED, {})
        return EXIT_CANCELLED
    except NeurokError as exc:
        _remove_partial(output)
        channel.send(protocol.ERROR, {"code": exc.code, "message": str(exc)})
        return EXIT_ERROR
    except Exception as exc:  # a bug: keep the traceback in the log, give the user the gist
        traceback.print_exc(file=sys.stderr)
        _remove_partial(output)
        channel.send(protocol.ERROR, {"code": WorkerFailed.code, "message": f"internal error: {type(exc).__name__}: {exc}"})
        return EXIT_CRASH


def main(argv: list[str] | None = None, engine_factory: EngineFactory | None = None) -> int:
    parser = argparse.ArgumentParser(prog="neurok-worker", description=__doc__)
    parser.add_argument("--probe", action="store_true", help="report interpreter, torch and device, then exit")
    args = parser.parse_args(argv)
    _install_signal_handlers()
    channel = Channel(sys.stdout.buffer)
    sys.stdout = sys.stderr  # stray prints (ours or a library's) must never corrupt the protocol stream
    try:
        info = devices.torch_info()
    except NeurokError as exc:
        channel.send(protocol.HELLO, protocol.hello_data(release=RELEASE_VERSION, torch=None, pid=os.getpid()))
        channel.send(protocol.ERROR, {"code": exc.code, "message": str(exc)})
        return EXIT_ERROR
    channel.send(protocol.HELLO, protocol.hello_data(release=RELEASE_VERSION, pid=os.getpid(), **info))
    if args.probe:
        channel.send(protocol.DONE, {})
        return EXIT_OK
    return serve(channel, sys.stdin.buffer, engine_factory or load_default_engine)


if __name__ == "__main__":
    sys.exit(main())
