"""Where bakes live on disk, safe file names, the atomic swap, and moving caches on save. Blender side."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import uuid

import bpy

from ..errors import CacheError

CACHE_DIRNAME = "neurok_cache"
MAX_NAME = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """A file name that cannot escape its folder: no separators, no '..', no NUL, bounded length.

    A short hash of the full name keeps distinct names distinct after sanitizing."""
    cleaned = _UNSAFE.sub("_", name).strip("._") or "object"
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[:MAX_NAME]}-{digest}"


def temp_root() -> str:
    return os.path.join(tempfile.gettempdir(), CACHE_DIRNAME, f"unsaved-{os.getpid()}")


def cache_dir(blend_path: str | None = None) -> str:
    """The folder for this .blend's caches (a temporary one while the file is unsaved)."""
    blend_path = bpy.data.filepath if blend_path is None else blend_path
    if not blend_path:
        return temp_root()
    stem = os.path.splitext(os.path.basename(blend_path))[0]
    return os.path.join(os.path.dirname(os.path.abspath(blend_path)), CACHE_DIRNAME, safe_name(stem))


def cache_path(obj_name: str, blend_path: str | None = None) -> str:
    folder = cache_dir(blend_path)
    path = os.path.join(folder, safe_name(obj_name) + ".pc2")
    if os.path.commonpath([os.path.abspath(path), os.path.abspath(folder)]) != os.path.abspath(folder):
        raise CacheError(f"refusing a cache path outside the cache folder for {obj_name!r}")
    return path


def partial_path(final: str) -> str:
    """A sibling file for the bake in progress; same folder, so the final rename is atomic."""
    folder = os.path.dirname(final)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise CacheError(f"cannot create the cache folder {folder!r}: {exc.strerror or exc}") from exc
    if not os.access(folder, os.W_OK):
        raise CacheError(f"the cache folder {folder!r} is not writable")
    return f"{final}.{uuid.uuid4().hex[:8]}.partial"


def log_path(final: str) -> str:
    """Where the worker's log of an object's latest bake goes: beside its cache, ending in .log."""
    return os.path.splitext(final)[0] + ".log"


def commit(partial: str, final: str) -> None:
    """Replace the previous bake with the finished one in a single rename."""
    try:
        os.replace(partial, final)
    except OSError as exc:
        discard(partial)
        raise CacheError(f"cannot move the finished bake into place ({final!r}): {exc.strerror or exc}") from exc


def discard(path: str | None) -> None:
    if path and os.path.exists(path):
        try:
            os.remove(path)
        except OSError:
            pass


def relative_to_blend(path: str) -> str:
    """'//'-relative when the .blend is saved (and on the same drive), absolute otherwise."""
    if not bpy.data.filepath:
        return path
    try:
        return bpy.path.relpath(path)
    except ValueError:
        return path


def relocate_for_save(target_blend: str, modifiers) -> list[str]:
    """Copy each cache that is not yet beside ``target_blend`` there and repoint its modifier.

    Returns the old paths that lived in the temporary folder (to delete after the save)."""
    moved = []
    # Blender remaps '//' paths from the current file's folder to the new one while it saves,
    # so the new path is written relative to where the file is now (or to the target if unsaved).
    base = os.path.dirname(os.path.abspath(bpy.data.filepath or target_blend))
    for obj, modifier in modifiers:
        old = bpy.path.abspath(modifier.filepath)
        new = cache_path(obj.name, target_blend)
        if not os.path.exists(old) or os.path.abspath(old) == os.path.abspath(new):
            continue
        os.makedirs(os.path.dirname(new), exist_ok=True)
        shutil.copy2(old, new)
        try:
            modifier.filepath = "//" + os.path.relpath(new, base).replace(os.sep, "/")
        except ValueError:  # another drive: no relative path exists
            modifier.filepath = new
        if os.path.abspath(old).startswith(os.path.abspath(os.path.join(tempfile.gettempdir(), CACHE_DIRNAME))):
            moved.append(old)
    return moved
