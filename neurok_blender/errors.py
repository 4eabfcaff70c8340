"""The error hierarchy shared by both sides of the boundary. Standard library only."""

from __future__ import annotations


class NeurokError(Exception):
    """Base of every error NeuROK raises on purpose; ``code`` names it on the wire."""

    code = "NEUROK_ERROR"


class InputError(NeurokError):
    """The object, the settings or the request cannot be simulated as given."""

    code = "INPUT_ERROR"


class RuntimeUnavailable(NeurokError):
    """No usable runtime interpreter (missing, no torch, wrong Python)."""

    code = "RUNTIME_UNAVAILABLE"


class ModelNotInstalled(NeurokError):
    """No NeuROK checkpoint is installed, so nothing can be simulated."""

    code = "MODEL_NOT_INSTALLED"


class CheckpointError(NeurokError):
    """A checkpoint is missing, corrupt, or made for another model version."""

    code = "CHECKPOINT_ERROR"


class ProtocolError(NeurokError):
    """The worker and the add-on do not speak the same wire protocol."""

    code = "PROTOCOL_ERROR"


class WorkerFailed(NeurokError):
    """The worker process died or reported a fatal error."""

    code = "WORKER_FAILED"


class WorkerTimeout(NeurokError):
    """The worker stopped answering within its time limit."""

    code = "WORKER_TIMEOUT"


class BakeCancelled(NeurokError):
    """The user cancelled the bake; the previous bake is kept."""

    code = "CANCELLED"


class SimulationDiverged(NeurokError):
    """The integrator blew up (NaN or runaway energy); nothing was written."""

    code = "SIMULATION_DIVERGED"


class CacheError(NeurokError):
    """The cache folder cannot be written, or a cache file is unreadable."""

    code = "CACHE_ERROR"


ERRORS_BY_CODE: dict[str, type[NeurokError]] = {
    cls.code: cls
    for cls in (
        NeurokError,
        InputError,
        RuntimeUnavailable,
        ModelNotInstalled,
        CheckpointError,
        ProtocolError,
        WorkerFailed,
        WorkerTimeout,
        BakeCancelled,
        SimulationDiverged,
        CacheError,
    )
}


def error_from_code(code: str, message: str) -> NeurokError:
    """Rebuild a typed error received over the wire; unknown codes become WorkerFailed."""
    return ERRORS_BY_CODE.get(code, WorkerFailed)(message)
