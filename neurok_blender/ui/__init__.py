"""The N-panel (View3D > Sidebar > NeuROK). Draw code only; Blender side, no torch."""

from . import panel

CLASSES = [*panel.CLASSES]
