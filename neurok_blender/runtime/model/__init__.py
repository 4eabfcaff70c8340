"""The NeuROK model: config and presets, transformer blocks, the three networks, dual quaternions,
K-nearest driving, model reduction, checkpoints. No bpy use."""
