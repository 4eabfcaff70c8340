"""Device selection and reporting for the worker. No bpy use; imports torch."""

from __future__ import annotations

import platform
import sys
from typing import Any

from ..errors import RuntimeUnavailable


def torch_info() -> dict[str, Any]:
    """What the HELLO message says about this interpreter; raises RuntimeUnavailable without torch."""
    info: dict[str, Any] = {"python": platform.python_version(), "executable": sys.executable}
    try:
        import torch
    except ImportError as exc:
        raise RuntimeUnavailable(
            f"the runtime interpreter {sys.executable} cannot import torch ({exc}); "
            "use Install runtime in the NeuROK preferences or point them at a Python with torch"
        ) from exc
    info["torch"] = torch.__version__
    info["cuda"] = bool(torch.cuda.is_available())
    info["device_name"] = torch.cuda.get_device_name(0) if info["cuda"] else f"CPU ({platform.processor() or platform.machine()})"
    return info


def resolve_device(requested: str) -> tuple[str, str | None]:
    """(device, warning): 'auto' picks CUDA when present; an unavailable 'cuda' falls back to the CPU."""
    import torch

    if requested == "cpu":
        return "cpu", None
    if torch.cuda.is_available():
        return "cuda", None
    if requested == "cuda":
        return "cpu", "CUDA was requested but is not available; running on the CPU"
    return "cpu", None


def device_label(device: str) -> str:
    import torch

    if device == "cuda":
        return f"CUDA ({torch.cuda.get_device_name(0)})"
    return "CPU"


def is_cuda_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.cuda.OutOfMemoryError) or "CUDA out of memory" in str(exc)
