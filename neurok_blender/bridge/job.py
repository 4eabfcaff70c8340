"""BakeJob: one bake as a small state machine over a RuntimeProcess. Standard library only."""

from __future__ import annotations

import time
from typing import Any

from ..errors import BakeCancelled, WorkerFailed, error_from_code
from . import protocol
from .client import RuntimeProcess


class BakeJob:
    """Sends one request after the handshake and follows the worker until DONE.

    ``poll()`` returns True once the bake has finished; it raises the worker's typed error,
    BakeCancelled after ``cancel()``, or WorkerFailed/WorkerTimeout when the worker dies or hangs.
    """

    def __init__(self, process: RuntimeProcess, header: dict[str, Any], arrays: dict[str, Any], label: str = "") -> None:
        self.process, self.header, self.arrays, self.label = process, header, arrays, label
        self.frames_total = int(header.get("frame_count", 0))
        self.frames_done = 0
        self.status = "starting runtime"
        self.device = ""
        self.warnings: list[str] = []
        self.result: dict[str, Any] = {}
        self._sent = False
        self._cancelled = False
        self._done = False
        self.started_at = time.monotonic()

    @property
    def progress(self) -> float:
        return self.frames_done / self.frames_total if self.frames_total else 0.0

    def start(self) -> None:
        self.process.start()

    def cancel(self) -> None:
        self._cancelled = True
        self.status = "cancelling"
        self.process.cancel()

    def poll(self) -> bool:
        if self._done:
            return True
        try:
            messages = self.process.poll()
        except WorkerFailed:
            if self._cancelled:
                raise BakeCancelled("bake cancelled") from None
            raise
        for msg in messages:
            self._handle(msg)
        if self._cancelled and not self.process.running and not self._done:
            raise BakeCancelled("bake cancelled")
        return self._done

    def close(self) -> None:
        self.process.close()

    def _handle(self, msg: protocol.Message) -> None:
        handler = getattr(self, f"_on_{msg.type}", None)
        if handler is None:
            raise WorkerFailed(f"unexpected {msg.type!r} message from the worker")
        handler(msg)

    def _on_hello(self, msg: protocol.Message) -> None:
        self.device = str(msg.data.get("device_name") or msg.data.get("device") or "")
        if self._cancelled:
            return
        self.process.send(protocol.REQUEST, self.header, self.arrays)
        self._sent = True
        self.status = "preparing"

    def _on_progress(self, msg: protocol.Message) -> None:
        self.status = str(msg.data.get("stage", self.status))
        if "device_name" in msg.data:
            self.device = str(msg.data["device_name"])

    def _on_frame(self, msg: protocol.Message) -> None:
        self.frames_done = int(msg.data.get("index", self.frames_done)) + 1
        self.status = "simulating"

    def _on_warning(self, msg: protocol.Message) -> None:
        self.warnings.append(str(msg.data.get("message", "")))

    def _on_error(self, msg: protocol.Message) -> None:
        text = str(msg.data.get("message", "unknown error"))
        tail = self.process.stderr_tail().strip()
        if msg.data.get("code") in (None, "NEUROK_ERROR", "WORKER_FAILED") and tail:
            text += f"\n--- worker log (last lines) ---\n{tail}"
        raise error_from_code(str(msg.data.get("code", "")), text)

    def _on_cancelled(self, msg: protocol.Message) -> None:
        raise BakeCancelled("bake cancelled")

    def _on_done(self, msg: protocol.Message) -> None:
        self.result = dict(msg.data)
        self.frames_done = self.frames_total or self.frames_done
        self.status = "done"
        self._done = True
