"""Test-only worker entry: the real worker driving an analytic engine. Never shipped (tests/ is excluded).

Sample i of a bake is ``rest + i * STEP`` (exact in float32), so a test can tell which sample a
scene frame shows. ``NEUROK_TEST_ENGINE`` picks a misbehaviour: ``die_at:N`` (hard exit at
sample N), ``hang_at:N``, ``nan_at:N``, ``slow:SECONDS`` (per frame), ``raise_at:N``.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from neurok_blender.runtime import worker

STEP = np.array([0.25, -0.5, 1.0])


def sample(rest: np.ndarray, i: int) -> np.ndarray:
    return rest + i * STEP


class AnalyticEngine:
    name = "analytic"

    def __init__(self, request) -> None:
        self.request = request
        mode = os.environ.get("NEUROK_TEST_ENGINE", "")
        self.kind, _, arg = mode.partition(":")
        self.arg = float(arg) if arg else 0.0

    def frames(self, mesh, device):
        rest = mesh.vertices
        for i in range(self.request.frame_count):
            if self.kind == "slow":
                time.sleep(self.arg)
            if i == int(self.arg) and self.kind == "die_at":
                os._exit(9)
            if i == int(self.arg) and self.kind == "hang_at":
                time.sleep(3600)
            if i == int(self.arg) and self.kind == "raise_at":
                raise RuntimeError("analytic engine exploded on purpose")
            out = sample(rest, i)
            if i == int(self.arg) and self.kind == "nan_at":
                out = out * np.nan
            yield out


if __name__ == "__main__":
    print("analytic worker starting (stderr only)", file=sys.stderr)
    sys.exit(worker.main(sys.argv[1:], engine_factory=AnalyticEngine))
