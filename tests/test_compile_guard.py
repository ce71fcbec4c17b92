"""Ctrl-C during numba's first compile: a press inside llvmlite's code (its ctypes
callbacks drop a KeyboardInterrupt raised there) is raised once that code returns."""

from __future__ import annotations

import os
import signal
import time
import types

import pytest

from simcoll.network import compile_guard
from simcoll.network.compile_guard import ctrl_c_outside_llvmlite, guard_first_call

CALLBACK = '''
import os, signal, time

def callback(seconds):
    """Press Ctrl-C, then run Python code for a while, as llvmlite's callbacks do."""
    os.kill(os.getpid(), signal.SIGINT)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "returned"
'''


@pytest.fixture(autouse=True)
def python_handles_ctrl_c():
    """Python's own SIGINT handler, which the guard replaces and which a process started
    in the background (SIGINT ignored, as a shell's "&" leaves it) does not have."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _llvmlite_module():
    """A module named as llvmlite's are, holding :data:`CALLBACK`."""
    module = types.ModuleType("llvmlite.simcoll_test")
    exec(CALLBACK, module.__dict__)
    return module


def _spin(seconds, seen):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    seen.append("not interrupted")


def test_a_press_inside_llvmlite_is_raised_soon_after_its_code_returns():
    module, seen = _llvmlite_module(), []
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_outside_llvmlite():
            seen.append(module.callback(0.1))   # not interrupted in there
            _spin(10, seen)                      # but here, 10 ms after it returned
    assert seen == ["returned"]
    assert time.monotonic() - start < 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_press_still_noted_when_the_body_ends_is_raised_then(monkeypatch):
    monkeypatch.setattr(compile_guard, "RETRY", 60.0)   # the retry would come too late
    module, seen = _llvmlite_module(), []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_outside_llvmlite():
            seen.append(module.callback(0.0))
    assert seen == ["returned"]


def test_a_press_outside_llvmlite_is_raised_at_once():
    seen = []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_outside_llvmlite():
            os.kill(os.getpid(), signal.SIGINT)
            _spin(10, seen)
    assert seen == []


def test_only_the_first_call_runs_under_the_handler():
    handlers = guard_first_call(lambda: signal.getsignal(signal.SIGINT))
    first, second = handlers(), handlers()
    assert first is not signal.default_int_handler
    assert second is signal.default_int_handler


def test_a_press_raised_at_the_end_leaves_no_retry_behind(monkeypatch):
    monkeypatch.setattr(compile_guard, "RETRY", 0.2)
    module = _llvmlite_module()  # noqa: F821
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_outside_llvmlite():
            module.callback(0.0)
    # the one press was raised above; its retry must not interrupt again 0.2 s later
    end = time.monotonic() + 0.6
    try:
        while time.monotonic() < end:
            pass
    except KeyboardInterrupt:
        pytest.fail("a retry timer left running interrupted the program again")
