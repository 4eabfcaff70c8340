"""Self-describing checkpoints: weights in safetensors, config and training metadata in JSON.
Loading never unpickles anything. No bpy use."""

from __future__ import annotations

import json
import os
from typing import Any

from ...errors import CheckpointError
from .config import MODEL_FORMAT_VERSION, ModelConfig
from .network import NeurokModel

WEIGHTS, CONFIG = "model.safetensors", "config.json"


def save(model: NeurokModel, directory: str, metadata: dict[str, Any] | None = None) -> str:
    """Write weights and config atomically (temp names, then rename)."""
    from safetensors.torch import save_file

    os.makedirs(directory, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    doc = {"format_version": MODEL_FORMAT_VERSION, "model": model.config.to_dict(), "metadata": metadata or {}}
    for name, write in ((WEIGHTS, lambda p: save_file(state, p)),
                        (CONFIG, lambda p: open(p, "w").write(json.dumps(doc, indent=2, sort_keys=True)))):
        tmp = os.path.join(directory, name + ".tmp")
        write(tmp)
        os.replace(tmp, os.path.join(directory, name))
    return directory


def read_config(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, CONFIG)
    if not os.path.isfile(path):
        raise CheckpointError(f"no checkpoint at {directory!r} (missing {CONFIG})")
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"the checkpoint config {path!r} is unreadable: {exc}") from exc
    version = doc.get("format_version") if isinstance(doc, dict) else None
    if version != MODEL_FORMAT_VERSION:
        raise CheckpointError(f"checkpoint format {version} is not the supported format {MODEL_FORMAT_VERSION}; "
                              "re-export it with this version of NeuROK")
    return doc


def load(directory: str, device: str = "cpu") -> tuple[NeurokModel, dict[str, Any]]:
    """Rebuild the model from its own config and load its weights; (model, metadata)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    doc = read_config(directory)
    model = NeurokModel(ModelConfig.from_dict(doc["model"]))
    path = os.path.join(directory, WEIGHTS)
    try:
        state = load_file(path, device=device)
    except (OSError, SafetensorError, ValueError) as exc:
        raise CheckpointError(f"the checkpoint weights {path!r} are missing or corrupt: {exc}") from exc
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"the weights in {path!r} do not fit the model in its config: {exc}") from exc
    return model.to(device).eval(), doc.get("metadata", {})
