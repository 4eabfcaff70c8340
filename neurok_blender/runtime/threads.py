"""How many CPU threads a bake's torch uses. An artist's machine is never idle (Blender itself, a render, a second
bake): a thread pool sized for every core, whose idle threads spin while they wait for each other, loses most of its
time to the other processes' turns. So a bake takes the cores that are free when it starts. Waiting threads keep
OpenMP's default short spin: making them sleep at once (OMP_WAIT_POLICY=PASSIVE) helped a bake that shares its
cores but made an idle one's frames nearly twice as slow (docs/decisions.md#threads). No bpy use; torch only in
``apply``."""

from __future__ import annotations

import os
import time

SAMPLE_S = 0.1  # how long the machine's load is watched before a bake picks its threads
REUSE_S = 5.0  # a process preparing bakes back to back reuses its last look for this long
_last: tuple[float, int] | None = None  # (when, free cores)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def busy_cores() -> float:
    """How many cores other processes keep busy now: from /proc/stat over SAMPLE_S where there is one (this process
    sleeps meanwhile), else the one-minute load average, else none."""
    try:
        first = _cpu_times()
        time.sleep(SAMPLE_S)
        second = _cpu_times()
        total, idle = second[0] - first[0], second[1] - first[1]
        return (os.cpu_count() or 1) * (total - idle) / total if total > 0 else 0.0
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except (AttributeError, OSError):
            return 0.0


def _cpu_times() -> tuple[int, int]:
    """(all, idle) jiffies summed over the machine's cores, from /proc/stat's first line."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    return sum(fields[:8]), fields[3] + fields[4]  # idle and iowait; guest time is already inside user


def choose(requested: int = 0) -> int:
    """``requested`` threads if given (≥ 1); otherwise (0) the cores other processes leave free (of those this process
    may use), at least one."""
    global _last
    if requested:
        return int(requested)
    if _last is None or time.monotonic() - _last[0] > REUSE_S:
        _last = (time.monotonic(), max(1, min(cores(), int((os.cpu_count() or 1) - busy_cores() + 0.5))))
    return _last[1]


def apply(requested: int = 0) -> int:
    """Set torch's intra-op threads for this bake; returns how many."""
    import torch

    count = choose(requested)
    torch.set_num_threads(count)
    return count
