"""The NeuROK runtime: model, dynamics, worker. No bpy use; torch is imported lazily where needed."""

from .threads import sleep_while_waiting

sleep_while_waiting()  # before anything here loads torch's OpenMP: waiting threads then yield their core
