"""The line that says a long simulation of ``simcoll run`` is still running: shown on a
terminal only, after a while, updated, and erased before the table's next line."""

from __future__ import annotations

import io
import threading

import pytest

import simcoll.cli.run as run_command
from simcoll.cli import main, waiting
from simcoll.cli.waiting import still_running


class Terminal(io.StringIO):
    """A stream that says it is a terminal and tells when it was first written to."""

    def __init__(self, tty: bool = True) -> None:
        super().__init__()
        self.tty = tty
        self.written = threading.Event()

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        self.written.set()
        return super().write(text)


@pytest.fixture
def at_once(monkeypatch):
    monkeypatch.setattr(waiting, "SHOWN_AFTER", 0.0)
    monkeypatch.setattr(waiting, "EVERY", 0.01)


def test_a_long_simulation_shows_a_line_on_a_terminal_and_erases_it(at_once):
    out = Terminal()
    with still_running("all_reduce of 64 B", out):
        assert out.written.wait(10)
    text = out.getvalue()
    assert text.startswith("\r# simulating all_reduce of 64 B: 0 s so far\x1b[K")
    assert text.endswith("\x1b[K\r\x1b[K")  # the last update, then the line erased


def test_nothing_is_shown_where_standard_error_is_not_a_terminal(at_once):
    out = Terminal(tty=False)
    with still_running("all_reduce of 64 B", out):
        assert not out.written.wait(0.1)
    assert out.getvalue() == ""


def test_nothing_is_shown_for_a_simulation_shorter_than_the_wait():
    out = Terminal()
    assert waiting.SHOWN_AFTER >= 1.0
    with still_running("all_reduce of 64 B", out):
        pass
    assert out.getvalue() == ""


def test_ctrl_c_erases_the_line_and_goes_on(at_once):
    out = Terminal()
    with pytest.raises(KeyboardInterrupt), still_running("x", out):
        assert out.written.wait(10)
        raise KeyboardInterrupt
    assert out.getvalue().endswith("\r\x1b[K")


@pytest.mark.parametrize("seconds, shown", [(0.4, "0 s"), (7.9, "7 s"), (65, "1 min 05 s"),
                                            (3599, "59 min 59 s"), (7380, "2 h 03 min")])
def test_the_time_so_far_reads_as_a_clock(seconds, shown):
    assert waiting._elapsed(seconds) == shown


def test_simcoll_run_shows_the_line_while_a_size_simulates(at_once, monkeypatch, capsys):
    err = Terminal()
    real = run_command.simulate

    def slow(*args, **kwargs):  # returns once the line is on the terminal
        assert err.written.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_command, "simulate", slow)
    monkeypatch.setattr("sys.stderr", err)
    assert main(["run", "-b", "64", "-e", "128", "-f", "2"]) == 0
    shown = err.getvalue()
    assert "\r# simulating all_reduce of 64 B: 0 s so far\x1b[K" in shown
    assert "\r# simulating all_reduce of 128 B: 0 s so far\x1b[K" in shown
    assert shown.endswith("\r\x1b[K")
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line and not line.startswith("#")]
    assert [row[0] for row in rows] == ["64", "128"]


class CountingTerminal(io.StringIO):
    """A terminal that counts its writes and keeps what each flush made visible."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.first = threading.Event()
        self.third = threading.Event()
        self.flushed: list[str] = []
        self.flushed_once = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.writes += 1
        self.first.set()
        if self.writes >= 3:
            self.third.set()
        return super().write(text)

    def flush(self) -> None:
        self.flushed.append(self.getvalue())
        self.flushed_once.set()


@pytest.mark.parametrize("seconds, shown", [(59.99, "59 s"), (60, "1 min 00 s"),
                                            (3599.9, "59 min 59 s"), (3600, "1 h 00 min"),
                                            (3660, "1 h 01 min")])
def test_the_clock_turns_over_at_a_minute_and_an_hour(seconds, shown):
    assert waiting._elapsed(seconds) == shown


def test_each_update_of_the_line_is_flushed_to_the_terminal(monkeypatch):
    monkeypatch.setattr(waiting, "SHOWN_AFTER", 0.0)
    monkeypatch.setattr(waiting, "EVERY", 0.01)
    out = CountingTerminal()
    with still_running("x", out):
        # flushed while the simulation still runs, not only when the line is erased
        assert out.flushed_once.wait(5)
    # stderr on a terminal is line-buffered and the line has no newline: each update
    # must be flushed to appear, and so must the erasing
    assert out.flushed and out.flushed[0].startswith("\r# simulating x: 0 s so far\x1b[K")
    assert out.flushed[-1].endswith("\r\x1b[K")


def test_after_the_first_wait_the_line_is_updated_every_EVERY_seconds(monkeypatch):
    monkeypatch.setattr(waiting, "SHOWN_AFTER", 1.0)
    monkeypatch.setattr(waiting, "EVERY", 0.01)
    out = CountingTerminal()
    with still_running("x", out):
        assert out.first.wait(10)
        # two more updates 0.01 s apart, well before another SHOWN_AFTER (1 s) passes
        assert out.third.wait(0.6)
