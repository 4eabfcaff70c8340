"""A bake's CPU threads: the free cores by default, a given count when asked."""

from __future__ import annotations

import os

import pytest

from neurok_blender.runtime import threads
from tests.conftest import grid_sheet, needs_model


@pytest.fixture(autouse=True)
def fresh_look(monkeypatch):
    monkeypatch.setattr(threads, "_last", None)


@pytest.mark.parametrize("busy, expected", [(0.0, 4), (1.2, 3), (2.6, 1), (3.5, 1), (9.0, 1)])
def test_the_default_takes_the_cores_other_processes_leave_free(monkeypatch, busy, expected):
    monkeypatch.setattr(threads, "cores", lambda: 4)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(threads, "busy_cores", lambda: busy)
    assert threads.choose(0) == expected
    assert threads.choose(3) == 3  # a given count is kept, whatever the load


def test_the_load_is_read_once_for_bakes_prepared_back_to_back(monkeypatch):
    looks = []
    monkeypatch.setattr(threads, "busy_cores", lambda: looks.append(1) or 0.0)
    threads.choose(0), threads.choose(0)
    assert len(looks) == 1


def test_the_machine_load_is_a_count_of_cores():
    assert 0.0 <= threads.busy_cores() <= (os.cpu_count() or 1) + 1e-9


@needs_model
def test_the_sdk_sets_the_threads_it_was_given():
    torch = pytest.importorskip("torch")
    from neurok_blender.runtime import api

    before = torch.get_num_threads()
    try:
        v, t = grid_sheet(4, 3)
        api.prepare(v, t, frame_count=2, threads=1)
        assert torch.get_num_threads() == 1
        api.prepare(v, t, frame_count=2, threads=2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
