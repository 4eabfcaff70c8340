"""The NeuROK runtime: model, dynamics, worker. No bpy use; torch is imported lazily where needed."""
