"""RuntimeProcess: starts the worker, reads its messages without blocking, cancels and reaps it.
Standard library only."""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from ..errors import ProtocolError, RuntimeUnavailable, WorkerFailed, WorkerTimeout
from . import protocol

STDERR_TAIL_LINES = 40
EXIT_WRONG_PYTHON = 3  # runtime/launch.py's exit code for an interpreter older than the runtime needs


def _popen_flags() -> dict[str, Any]:
    if sys.platform == "win32":
        # No console window, and a process group so CTRL_BREAK reaches only the worker.
        flags = subprocess.CREATE_NO_WINDOW | subprocess.CREATE_NEW_PROCESS_GROUP
        return {"creationflags": flags}
    return {}


class RuntimeProcess:
    """One worker process speaking the NeuROK protocol over its stdin/stdout.

    ``poll()`` never blocks: the modal operator calls it on a timer, and background mode
    calls it in a loop. The last lines of the worker's stderr are kept for error messages.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        handshake_timeout: float = 120.0,
        idle_timeout: float = 300.0,
        grace: float = 3.0,
        log_path: str | None = None,
    ) -> None:
        self.argv = [os.fspath(a) for a in argv]
        self.log_path = log_path  # the worker's whole stderr is copied here (best effort), for later reading
        self.env, self.cwd = env, cwd
        self.handshake_timeout, self.idle_timeout, self.grace = handshake_timeout, idle_timeout, grace
        self.hello: protocol.Message | None = None
        self._proc: subprocess.Popen | None = None
        self._messages: queue.Queue = queue.Queue()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._threads: list[threading.Thread] = []
        self._last_heard = 0.0
        self._finished = False
        self._kill_at: float | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=self.env, cwd=self.cwd, **_popen_flags(),
            )
        except OSError as exc:
            raise WorkerFailed(f"could not start the runtime worker {self.argv[0]!r}: {exc}") from exc
        self._last_heard = time.monotonic()
        for target in (self._read_stdout, self._read_stderr):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr_tail)

    def send(self, msg_type: str, data: dict[str, Any] | None = None, arrays: dict[str, Any] | None = None) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(protocol.encode(msg_type, data, arrays))
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._failure(f"the worker stopped reading its input ({exc})") from exc

    def poll(self) -> list[protocol.Message]:
        """Return the messages that arrived since the last call; raise on death or silence."""
        out = []
        while True:
            try:
                item = self._messages.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, Exception):
                raise item
            out.append(self._accept(item))
        if out:
            self._last_heard = time.monotonic()
        elif not self._finished:
            self._check_alive()
        self._maybe_kill()
        return out

    def cancel(self) -> None:
        """Ask the worker to stop (SIGINT); it is killed if it has not exited after the grace period."""
        if not self.running:
            return
        try:
            if sys.platform == "win32":
                self._proc.send_signal(signal.CTRL_BREAK_EVENT)
            else:
                self._proc.send_signal(signal.SIGINT)
        except OSError:
            pass
        self._kill_at = time.monotonic() + self.grace

    def close(self, timeout: float | None = None) -> int | None:
        """Stop the worker if it still runs and reap it; returns its exit code."""
        if self._proc is None:
            return None
        grace = self.grace if timeout is None else timeout
        if self._proc.stdin and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()  # EOF on stdin tells a healthy worker to exit
            except OSError:
                pass
        try:
            self._proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for thread in self._threads:
            thread.join(timeout=1.0)
        return self._proc.returncode

    def __enter__(self) -> RuntimeProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------
    def _accept(self, msg: protocol.Message) -> protocol.Message:
        if self.hello is None:
            protocol.check_hello(msg)
            self.hello = msg
        if msg.type in protocol.FINAL_TYPES:
            self._finished = True
        return msg

    def _check_alive(self) -> None:
        code = self._proc.poll() if self._proc else None
        if code is not None and self._messages.empty():
            for thread in self._threads:
                thread.join(timeout=1.0)  # let the readers drain what the worker wrote last
            if self._messages.empty():
                if code == EXIT_WRONG_PYTHON and self.hello is None:
                    raise RuntimeUnavailable(self.stderr_tail().strip() or "the runtime interpreter is too old")
                raise self._failure(f"the runtime worker exited unexpectedly (exit code {code})")
            return
        limit = self.handshake_timeout if self.hello is None else self.idle_timeout
        if time.monotonic() - self._last_heard > limit:
            what = "did not say hello" if self.hello is None else "stopped reporting progress"
            self._kill()
            raise WorkerTimeout(f"the runtime worker {what} within {limit:.0f} s{self._tail_suffix()}")

    def _maybe_kill(self) -> None:
        if self._kill_at is not None and time.monotonic() > self._kill_at and self.running:
            self._kill()

    def _kill(self) -> None:
        if self.running:
            self._proc.kill()
            self._proc.wait()

    def _failure(self, what: str) -> WorkerFailed:
        return WorkerFailed(what + self._tail_suffix())

    def _tail_suffix(self) -> str:
        tail = self.stderr_tail().strip()
        return f"\n--- worker log (last lines) ---\n{tail}" if tail else ""

    def _read_stdout(self) -> None:
        decoder = protocol.Decoder()
        stream = self._proc.stdout
        try:
            while chunk := stream.read1(1 << 16):
                for msg in decoder.feed(chunk):
                    self._messages.put(msg)
        except ProtocolError as exc:
            self._messages.put(exc)
        except (OSError, ValueError):
            pass

    def _read_stderr(self) -> None:
        log = None
        if self.log_path:
            try:
                log = open(self.log_path, "w", encoding="utf-8")
                log.write(f"# NeuROK worker log: {' '.join(self.argv)}\n")
            except OSError:
                log = None  # a log that cannot be written must not stop the bake
        try:
            for raw in iter(self._proc.stderr.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip()
                self._stderr_tail.append(line)
                if log is not None:
                    try:
                        log.write(line + "\n")
                        log.flush()
                    except OSError:
                        log = None
        finally:
            if log is not None:
                log.close()
