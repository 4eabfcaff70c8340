"""NeuROK for Blender: register() and unregister() only. Blender-side modules are imported
lazily so that ``python -m neurok_blender.runtime...`` works without bpy."""

_registered_classes: list = []


def _modules():
    from . import handlers, ops, prefs, props, ui

    return props, prefs, ops, ui, handlers


def register() -> None:
    import bpy

    props, prefs, ops, ui, handlers = _modules()
    for cls in (*props.CLASSES, *prefs.CLASSES, *ops.CLASSES, *ui.CLASSES):
        bpy.utils.register_class(cls)
        _registered_classes.append(cls)
    props.register()
    handlers.register()


def unregister() -> None:
    import bpy

    props, prefs, ops, ui, handlers = _modules()
    handlers.unregister()
    props.unregister()
    while _registered_classes:
        bpy.utils.unregister_class(_registered_classes.pop())
