"""App handlers: caches of an unsaved file move next to the .blend when it is saved. Blender side."""

from __future__ import annotations

import bpy

from .ops import apply, cache

_to_delete: list[str] = []


def _our_modifiers():
    for obj in bpy.data.objects:
        if obj.type == "MESH" and obj.library is None:
            mod = apply.find_modifier(obj)
            if mod is not None:
                yield obj, mod


@bpy.app.handlers.persistent
def on_save_pre(filepath: str = "", *_args) -> None:
    target = filepath or bpy.data.filepath
    if not target:
        return
    _to_delete.extend(cache.relocate_for_save(target, list(_our_modifiers())))


@bpy.app.handlers.persistent
def on_save_post(*_args) -> None:
    while _to_delete:
        cache.discard(_to_delete.pop())


def register() -> None:
    bpy.app.handlers.save_pre.append(on_save_pre)
    bpy.app.handlers.save_post.append(on_save_post)


def unregister() -> None:
    for handler_list, fn in ((bpy.app.handlers.save_pre, on_save_pre), (bpy.app.handlers.save_post, on_save_post)):
        while fn in handler_list:
            handler_list.remove(fn)
