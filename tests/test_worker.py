"""The runtime worker through the real client: frames, errors, cancel, kill, hang, orphan safety."""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

pytest.importorskip("torch")

from neurok_blender.bridge.client import RuntimeProcess  # noqa: E402
from neurok_blender.bridge.job import BakeJob  # noqa: E402
from neurok_blender.bridge.request import SimulationRequest  # noqa: E402
from neurok_blender.errors import (  # noqa: E402
    BakeCancelled,
    ModelNotInstalled,
    ProtocolError,
    SimulationDiverged,
    WorkerFailed,
    WorkerTimeout,
)
from neurok_blender.pc2 import read_pc2  # noqa: E402
from tests.conftest import ANALYTIC_ENTRY, LAUNCHER, ROOT, needs_model, run_job, runtime_python, worker_job  # noqa: E402
from tests.support.analytic_worker import sample  # noqa: E402

REST = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float32)
TRIS = np.array([[0, 1, 2], [1, 3, 2]], dtype=np.int32)


def make_job(out_path, mode="", frames=6, entry=ANALYTIC_ENTRY, checkpoint="", **timeouts) -> BakeJob:
    """A job on the CPU (so device assertions hold on machines with a GPU too)."""
    arrays = {"vertices": REST, "triangles": TRIS, "pin_weights": np.zeros(4, np.float32)}
    return worker_job(out_path, arrays, frames=frames, entry=entry, mode=mode, timeouts=timeouts, frame_start=10,
                      checkpoint=checkpoint, device="cpu")


run = run_job


def started_slow_job(tmp_path, frames: int, until: int) -> BakeJob:
    """A slow analytic bake, started and polled until it has written ``until`` frames."""
    job = make_job(tmp_path / "out.pc2", mode="slow:0.2", frames=frames)
    job.start()
    while job.frames_done < until:
        job.poll()
        time.sleep(0.01)
    return job


def test_frames_are_written_exactly(tmp_path):
    job = run(make_job(tmp_path / "out.pc2"))
    frames, start, _ = read_pc2(tmp_path / "out.pc2")
    assert start == 10.0 and frames.shape == (6, 4, 3)
    for i in range(6):
        assert np.array_equal(frames[i], sample(REST.astype(np.float64), i).astype(np.float32))
    assert job.frames_done == 6 and job.device.startswith("CPU")
    assert job.result["frames"] == 6


def test_paths_with_spaces_and_non_ascii(tmp_path):
    folder = tmp_path / "dossier avec espaces ü 雪"
    folder.mkdir()
    run(make_job(folder / "flag ü.pc2"))
    assert read_pc2(folder / "flag ü.pc2")[0].shape == (6, 4, 3)


def test_without_a_model_the_product_engine_says_so(tmp_path):
    job = make_job(tmp_path / "out.pc2", entry=None, checkpoint=str(tmp_path / "no-such-model"))
    with pytest.raises(ModelNotInstalled, match="No NeuROK model is installed"):
        run(job)
    assert not (tmp_path / "out.pc2").exists()


@needs_model
def test_the_product_engine_bakes_with_the_shipped_model(tmp_path):
    job = run(make_job(tmp_path / "out.pc2", entry=None, frames=5), timeout=120)
    frames, start, _ = read_pc2(str(tmp_path / "out.pc2"))
    assert frames.shape == (5, 4, 3) and start == 10 and np.isfinite(frames).all()
    assert np.allclose(frames[0], REST) and job.result["device"] == "CPU"


def test_worker_killed_mid_bake_is_a_clear_error(tmp_path):
    job = make_job(tmp_path / "out.pc2", mode="die_at:3")
    with pytest.raises(WorkerFailed, match="exited unexpectedly.*exit code 9") as err:
        run(job)
    assert "analytic worker starting" in str(err.value)  # the stderr tail reaches the user


def test_engine_exception_is_reported_with_the_log(tmp_path):
    with pytest.raises(WorkerFailed, match="exploded on purpose"):
        run(make_job(tmp_path / "out.pc2", mode="raise_at:2"))
    assert not (tmp_path / "out.pc2").exists()


def test_nan_frame_raises_diverged_and_removes_output(tmp_path):
    with pytest.raises(SimulationDiverged):
        run(make_job(tmp_path / "out.pc2", mode="nan_at:2"))
    assert not (tmp_path / "out.pc2").exists()


def test_cancel_stops_the_worker_and_removes_output(tmp_path):
    job = started_slow_job(tmp_path, frames=200, until=2)
    job.cancel()
    with pytest.raises(BakeCancelled):
        while True:
            job.poll()
            time.sleep(0.01)
    job.close()
    assert not job.process.running
    assert not (tmp_path / "out.pc2").exists()


def test_hanging_worker_times_out_and_is_killed(tmp_path):
    job = make_job(tmp_path / "out.pc2", mode="hang_at:1", idle_timeout=1.5)
    with pytest.raises(WorkerTimeout, match="stopped reporting progress"):
        run(job)
    assert not job.process.running


def test_worker_exits_when_the_addon_disappears(tmp_path):
    """Closing stdin (Blender quitting) ends the worker: no orphan keeps running."""
    job = started_slow_job(tmp_path, frames=500, until=1)
    proc = job.process._proc
    proc.stdin.close()
    assert proc.wait(timeout=20) != 0
    job.close()


def test_probe_reports_torch_and_device():
    argv = [runtime_python(), LAUNCHER, "--", "--probe"]
    with RuntimeProcess(argv) as proc:
        msgs = []
        deadline = time.monotonic() + 60
        while not any(m.type == "done" for m in msgs) and time.monotonic() < deadline:
            msgs += proc.poll()
            time.sleep(0.01)
    hello = msgs[0].data
    assert hello["torch"] and hello["device_name"] and hello["python"].startswith("3.")


def test_interpreter_without_torch_is_runtime_unavailable(tmp_path):
    """A Python that cannot import torch fails the handshake with a typed error, not a crash."""
    shadow = tmp_path / "shadow"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch" / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow), ROOT]))
    proc = RuntimeProcess([sys.executable, LAUNCHER, "--", "--probe"], env=env)
    proc.start()
    msgs = []
    deadline = time.monotonic() + 60
    while not any(m.type == "error" for m in msgs) and time.monotonic() < deadline:
        msgs += proc.poll()
        time.sleep(0.01)
    proc.close()
    error = [m for m in msgs if m.type == "error"][0]
    assert error.data["code"] == "RUNTIME_UNAVAILABLE" and "cannot import torch" in error.data["message"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_during_handshake_leaves_no_process(tmp_path):
    job = make_job(tmp_path / "out.pc2")
    job.start()
    job.cancel()  # before HELLO arrives
    with pytest.raises(BakeCancelled):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            job.poll()
            time.sleep(0.01)
    job.close()
    assert job.process._proc.returncode is not None


def test_protocol_version_mismatch_is_a_clear_error(tmp_path):
    job = make_job(tmp_path / "out.pc2", entry="tests.support.old_protocol_worker")
    with pytest.raises(ProtocolError, match="protocol version 0 does not match"):
        run(job)
    assert not job.process.running


def test_an_interrupt_after_done_never_deletes_the_finished_output(tmp_path, monkeypatch):
    """The add-on closes the worker's stdin as soon as it reads DONE; the watchdog's interrupt can land
    while DONE is still being sent. The finished file must survive it (the add-on is about to move it)."""
    import io

    from neurok_blender.bridge import protocol
    from neurok_blender.runtime import worker
    from tests.support.analytic_worker import AnalyticEngine

    class InterruptedAtDone:
        def __init__(self):
            self.sent = []

        def send(self, msg_type, data=None):
            self.sent.append(msg_type)
            if msg_type == protocol.DONE:
                raise KeyboardInterrupt

    out = tmp_path / "out.pc2"
    request = SimulationRequest(output_path=str(out), frame_count=3)
    arrays = {"vertices": REST, "triangles": TRIS, "pin_weights": np.zeros(4, np.float32)}
    stdin = io.BytesIO(protocol.encode(protocol.REQUEST, request.to_dict(), arrays))
    monkeypatch.setattr(worker, "_watch_stdin", lambda stream: None)  # the interrupt comes from the channel here
    channel = InterruptedAtDone()
    code = worker.serve(channel, stdin, AnalyticEngine)
    assert protocol.DONE in channel.sent and code == worker.EXIT_CANCELLED
    assert read_pc2(str(out))[0].shape == (3, 4, 3)
