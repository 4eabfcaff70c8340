"""Operators: simulate, clear (operators.py), the runtime interpreter check/install (interpreter.py), and the bake
writers. Blender side, no torch."""

from . import interpreter, operators

CLASSES = [*operators.CLASSES, *interpreter.CLASSES]
