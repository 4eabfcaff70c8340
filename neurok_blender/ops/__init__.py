"""Operators: simulate, clear, runtime check/install, and the bake writers. Blender side, no torch."""

from . import runtime, simulate

CLASSES = [*simulate.CLASSES, *runtime.CLASSES]
