"""The full-resolution cloth layer of an open surface (the folds the reduced motion cannot hold): its topology,
contact, the layer's solver and the stage the simulation calls once a frame. No bpy use."""

from .stage import DetailStage

__all__ = ["DetailStage"]
