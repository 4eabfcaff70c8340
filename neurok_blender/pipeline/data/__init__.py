"""The curated 4D dataset: procedural shapes, simulator backends, shards, loader. No bpy use
(except ``blender_backend``, which runs in its own bpy process)."""

GENERATOR_VERSION = "1.1.0"  # 1.1.0: the drape family (large-motion cloth, held out); other families unchanged
