"""The Simulate, Clear Bake operators. Blender side, no torch.

Simulate is modal with a 0.1 s timer in the UI (ESC cancels); called from a script or in
background mode it runs the same session loop and blocks.
"""

from __future__ import annotations

import bpy

from ..errors import NeurokError
from . import apply, cache
from .bake import BakeSession


def target_objects(context: bpy.types.Context) -> list[bpy.types.Object]:
    """Selected mesh objects, the active one first."""
    active = context.active_object
    selected = [ob for ob in context.selected_objects if ob.type == "MESH"]
    ordered = [active] if active is not None and active.type == "MESH" and (active in selected or not selected) else []
    return ordered + [ob for ob in selected if ob is not active]


def _set_status(context: bpy.types.Context, progress: float, text: str) -> None:
    wm = context.window_manager
    wm.neurok_progress, wm.neurok_status = progress, text


def report_outcomes(op: bpy.types.Operator, session: BakeSession) -> set[str]:
    for outcome in session.outcomes:
        for warning in outcome.warnings:
            op.report({"WARNING"}, f"{outcome.name}: {warning}")
        op.report({"INFO"} if outcome.ok else {"ERROR"}, f"{outcome.name}: {outcome.message}")
    if session.cancelled:
        return {"CANCELLED"}
    return {"FINISHED"} if any(o.ok for o in session.outcomes) else {"CANCELLED"}


class NEUROK_OT_simulate(bpy.types.Operator):
    """Simulate the selected mesh objects with NeuROK and bake the motion"""

    bl_idname = "neurok.simulate"
    bl_label = "Simulate"
    bl_options = {"REGISTER"}

    _session: BakeSession | None = None
    _timer = None

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return bool(target_objects(context))

    def _start(self, context: bpy.types.Context) -> bool:
        objects = target_objects(context)
        if not objects:
            self.report({"ERROR"}, "select a mesh object to simulate")
            return False
        try:
            self._session = BakeSession([ob.name for ob in objects])
        except NeurokError as exc:
            self.report({"ERROR"}, str(exc))
            return False
        return True

    def execute(self, context: bpy.types.Context) -> set[str]:
        if not self._start(context):
            return {"CANCELLED"}
        self._session.run_blocking(context)
        _set_status(context, 0.0, "")
        return report_outcomes(self, self._session)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        if bpy.app.background or context.window is None:
            return self.execute(context)
        if not self._start(context):
            return {"CANCELLED"}
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.modal_handler_add(self)
        wm.progress_begin(0, 1000)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        session = self._session
        if event.type == "ESC":
            session.cancel()
        if event.type not in {"TIMER", "ESC"}:
            return {"PASS_THROUGH"}
        done = session.step(context)
        context.window_manager.progress_update(int(session.progress * 1000))
        _set_status(context, session.progress, session.status())
        context.workspace.status_text_set(f"NeuROK: {session.status()}  (Esc to cancel)")
        for area in context.screen.areas if context.screen else ():
            if area.type == "VIEW_3D":
                area.tag_redraw()
        if not done:
            return {"RUNNING_MODAL"}
        self._end(context)
        return report_outcomes(self, session)

    def cancel(self, context: bpy.types.Context) -> None:
        if self._session is not None:
            self._session.cancel()
            self._session.close()
        self._end(context)

    def _end(self, context: bpy.types.Context) -> None:
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        context.workspace.status_text_set(None)
        _set_status(context, 0.0, "")


class NEUROK_OT_clear_bake(bpy.types.Operator):
    """Remove the NeuROK bake (cache modifier and file, or shape keys) from the selected objects"""

    bl_idname = "neurok.clear_bake"
    bl_label = "Clear Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return bool(target_objects(context))

    def execute(self, context: bpy.types.Context) -> set[str]:
        cleared = 0
        for obj in target_objects(context):
            path = apply.remove_mesh_cache(obj)
            keys = apply.remove_shape_key_bake(obj)
            if path:
                cache.discard(path)
            cleared += bool(path) or bool(keys)
            obj.neurok.last_bake = ""
        self.report({"INFO"}, f"cleared {cleared} bake(s)")
        return {"FINISHED"}


CLASSES = [NEUROK_OT_simulate, NEUROK_OT_clear_bake]
