"""BakeSession: bakes a list of objects one after another through runtime workers. Blender side, no torch.

The modal operator steps it on a timer; background mode and the batch script step it in a
loop. A bake only replaces the previous one after it has completed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import bpy

from ..bridge.job import BakeJob
from ..errors import BakeCancelled, InputError, ModelNotInstalled, NeurokError, RuntimeUnavailable
from ..prefs import get_prefs
from . import apply, cache
from .interpreter import LAST_DEVICE, find_interpreter, new_process
from .scene_input import build_request, track_path

ACTIVE: set[str] = set()  # names of objects with a bake in flight, in this Blender session
SESSION_FATAL = (ModelNotInstalled, RuntimeUnavailable)  # the same for every object: stop, don't repeat


@dataclass
class ObjectBake:
    name: str
    final_path: str
    partial_path: str
    output: str
    frame_start: int
    job: BakeJob
    cache_last: bool = False  # the bake started from the evaluated (deformed) shape: its cache goes last


@dataclass
class Outcome:
    name: str
    ok: bool
    message: str
    result: dict = field(default_factory=dict)  # the worker's DONE data (frames, seconds, device, stats)
    warnings: list[str] = field(default_factory=list)  # the worker's WARNING messages (a CUDA fallback, …)


@dataclass
class BakeSession:
    names: list[str]
    timeouts: dict[str, float] = field(default_factory=dict)
    current: ObjectBake | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    cancelled: bool = False
    blend_path: str | None = None  # bake into this .blend's cache folder (the batch's --save), not the open file's
    threads: int | None = None  # CPU threads (the batch's --threads); None: the preference's

    def __post_init__(self) -> None:
        self.total = len(self.names)
        busy = [n for n in self.names if n in ACTIVE]
        if busy:
            raise InputError(f"already baking {', '.join(busy)}; wait for that bake or cancel it")
        ACTIVE.update(self.names)
        self.pending = list(self.names)

    @property
    def finished(self) -> bool:
        return self.current is None and not self.pending

    @property
    def progress(self) -> float:
        done = len(self.outcomes) + (self.current.job.progress if self.current else 0.0)
        return done / self.total if self.total else 1.0

    def status(self) -> str:
        if self.current is None:
            return "finishing"
        job = self.current.job
        where = f" on {job.device}" if job.device else ""
        return f"{self.current.name}: {job.status} {job.frames_done}/{job.frames_total}{where}"

    def step(self, context: bpy.types.Context) -> bool:
        """Advance without blocking; returns True when every object is done."""
        if self.current is None and self.pending:
            self._begin(context, self.pending.pop(0))
        if self.current is not None:
            self._poll(context)
        if self.finished:
            self.close()
        return self.finished

    def run_blocking(self, context: bpy.types.Context, report=None, interval: float = 0.02) -> None:
        """The same loop, blocking (background mode, batch); ``report`` gets progress lines."""
        last = ""
        try:
            while not self.step(context):
                line = self.status()
                if report and line != last:
                    report(line)
                    last = line
                time.sleep(interval)
        except KeyboardInterrupt:
            self.cancel()
            while not self.step(context):
                time.sleep(interval)

    def cancel(self) -> None:
        self.cancelled = True
        for name in self.pending:
            self.outcomes.append(Outcome(name, False, "cancelled before it started"))
        self.pending.clear()
        if self.current is not None:
            self.current.job.cancel()

    def close(self) -> None:
        if self.current is not None:
            self.current.job.cancel()
            self.current.job.close()
            cache.discard(self.current.partial_path)
            cache.discard(track_path(self.current.partial_path))
            self.outcomes.append(Outcome(self.current.name, False, "cancelled"))
            self.current = None
        ACTIVE.difference_update(self.names)

    def _skip_rest(self, exc: NeurokError) -> None:
        for name in self.pending:
            self.outcomes.append(Outcome(name, False, f"skipped: {exc}"))
        self.pending.clear()

    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    # -- one object ------------------------------------------------------------------------
    def _begin(self, context: bpy.types.Context, name: str) -> None:
        try:
            self.current = self._prepare(context, name)
        except NeurokError as exc:
            self.outcomes.append(Outcome(name, False, str(exc)))
            ACTIVE.discard(name)
            if isinstance(exc, SESSION_FATAL):
                self._skip_rest(exc)

    def _prepare(self, context: bpy.types.Context, name: str) -> ObjectBake:
        obj = bpy.data.objects.get(name)
        if obj is None:
            raise InputError(f"the object '{name}' no longer exists")
        prefs = get_prefs(context)
        checkpoint = bpy.path.abspath(prefs.checkpoint_path) if prefs and prefs.checkpoint_path else ""
        final = cache.cache_path(obj.name, self.blend_path)
        interpreter, _ = find_interpreter(context)
        partial = cache.partial_path(final)
        threads = self.threads if self.threads is not None else (prefs.cpu_threads if prefs else 0)
        request, arrays = build_request(context, obj, partial, checkpoint, threads=threads)
        cache_last = arrays.pop("evaluated_rest", None) is not None
        log = cache.log_path(final)
        job = BakeJob(new_process(interpreter, log_path=log, **self.timeouts), request.to_dict(), arrays, label=obj.name)
        job.start()
        return ObjectBake(name, final, partial, obj.neurok.output, request.frame_start, job, cache_last)

    def _poll(self, context: bpy.types.Context) -> None:
        bake = self.current
        try:
            if not bake.job.poll():
                return
            cache.discard(track_path(bake.partial_path))
            bake.job.close()
            message = self._finish(bake)
            result = dict(bake.job.result)
            if "path" in result:  # the worker wrote the in-progress file: the cache is at its final path, or gone
                result["path"] = bake.final_path if bake.output != "SHAPE_KEYS" else None
            self.outcomes.append(Outcome(bake.name, True, message, result, list(bake.job.warnings)))
        except NeurokError as exc:
            bake.job.close()
            cache.discard(bake.partial_path)
            text = "cancelled; the previous bake is kept" if isinstance(exc, BakeCancelled) else str(exc)
            self.outcomes.append(Outcome(bake.name, False, text, warnings=list(bake.job.warnings)))
            if isinstance(exc, SESSION_FATAL):
                self._skip_rest(exc)
        except Exception as exc:  # a Blender-side failure while applying: keep the old bake, say why
            bake.job.close()
            cache.discard(bake.partial_path)
            self.outcomes.append(Outcome(bake.name, False, f"applying the bake failed: {exc}"))
        cache.discard(track_path(bake.partial_path))
        self.current = None
        ACTIVE.discard(bake.name)

    def _finish(self, bake: ObjectBake) -> str:
        obj = bpy.data.objects.get(bake.name)
        if obj is None:
            raise InputError(f"the object '{bake.name}' was deleted during its bake")
        job = bake.job
        if bake.output == "SHAPE_KEYS":
            apply.apply_shape_keys(obj, bake.partial_path, bake.frame_start)
            cache.discard(bake.partial_path)
            cache.discard(apply.remove_mesh_cache(obj))
        else:
            cache.commit(bake.partial_path, bake.final_path)
            apply.apply_mesh_cache(obj, cache.relative_to_blend(bake.final_path), bake.frame_start, last=bake.cache_last)
        end = bake.frame_start + job.frames_total - 1
        seconds = float(job.result.get("seconds", time.monotonic() - job.started_at))
        device = job.result.get("device", job.device)
        summary = f"frames {bake.frame_start}-{end}, {seconds:.1f} s, {device}"
        stats = job.result.get("stats") or {}
        material = stats.get("material") or {}
        if isinstance(material.get("stiffness"), (int, float)):  # what the shape (or the physical material) gave
            summary += f", stiffness {material['stiffness']:.3g}"
        joints = stats.get("joints")
        if isinstance(joints, int) and joints > 0:  # an assembly: it moved as pieces turning at their joints
            summary += f", {joints + 1} pieces on {joints} joint{'s' if joints > 1 else ''}"
            kinds, listed = stats.get("joint_kinds") or {}, stats.get("joint_list")
            if isinstance(listed, list) and listed and all(isinstance(j, dict) for j in listed):
                # "1: hinge, 2: weld": which way each piece could turn, numbered as Which Joint reads them
                summary += " (" + ", ".join(f"{i}: {j.get('kind')}" for i, j in enumerate(listed, 1)) + ")"
            elif isinstance(kinds, dict) and kinds:  # "2 hinges, 1 weld": which way each piece could turn
                summary += " (" + ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in sorted(kinds.items())
                                            if isinstance(n, int)) + ")"
        obj.neurok.last_bake = summary
        obj.neurok.last_bake_start, obj.neurok.last_bake_end = bake.frame_start, end
        if obj.neurok.device == "AUTO" and device:
            LAST_DEVICE["auto"] = "CUDA" if str(device).startswith("CUDA") else "CPU"
        return summary
