"""Ctrl-C during a sweep (and in any local pool): the process ends at once, and every
point a worker finished is saved.

A process pool's call queue is fed through a pipe by a thread of the parent; points whose
pickles fill that pipe (a 256-rank topology pickles to some 40 KB) left that thread
blocked once the workers were terminated, and the interpreter waited for it at exit,
forever. The subprocess tests send SIGINT once the sweep has saved a point (the queue is
then full), and fail if the process has not ended 30 s later.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import warnings
from concurrent.futures import Executor, Future, ProcessPoolExecutor

import pytest
from conftest import DiesInAWorker

import simcoll as sc
from simcoll.sweep import load_results, sweep

try:
    import fcntl
except ImportError:   # Windows: the tests that take file locks are skipped there
    fcntl = None

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="POSIX signals, /proc")
# Eight points of 256 ranks: each pickles to some 40 KB, and takes about a second.
BIG = dict(algorithms=["direct"], ranks=[256], sizes=[1024 * i for i in range(1, 9)])
HANG = 30  # seconds: far more than an interrupted sweep needs, even on a loaded machine


def _wait_for(path, proc, lines=1):
    deadline = time.monotonic() + 60
    while not (path.exists() and path.read_bytes().count(b"\n") >= lines):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "nothing saved in 60 s"
        time.sleep(0.01)


def _interrupt(proc, unread=0.0):
    """SIGINT, as a terminal's Ctrl-C; the output (read after ``unread`` seconds), or a
    failure if it does not end."""
    proc.send_signal(signal.SIGINT)
    time.sleep(unread)
    try:
        return proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {HANG} s after Ctrl-C (hung at exit)")


def _start(args, cwd):
    return subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _saved_points(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every saved line whole
        loaded = load_results(path)
    got = {(r["algorithm"], r["nranks"], r["nbytes"]) for r in loaded.records}
    assert got and got <= {("direct", 256, n) for n in BIG["sizes"]}
    assert all(r["error"] is None for r in loaded.records)
    return got


@LINUX
def test_ctrl_c_during_a_sweep_of_large_points_ends_the_process_at_once(tmp_path):
    path = tmp_path / "points.jsonl"
    script = textwrap.dedent(f"""
        import simcoll as sc
        try:
            sc.sweep(sc.topology.switch, "all_to_all", workers=2, save={str(path)!r},
                     progress=False, **{BIG!r})
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """)
    proc = _start([sys.executable, "-c", script], tmp_path)
    _wait_for(path, proc)
    out, err = _interrupt(proc)
    assert (proc.returncode, out) == (0, "interrupted\n"), err
    assert "Error" not in err  # no traceback from the pool's threads either
    assert len(_saved_points(path)) < len(BIG["sizes"])


@LINUX
def test_ctrl_c_during_simcoll_sweep_workers_2_ends_it_at_once(tmp_path):
    out_path = tmp_path / "points.jsonl"
    partial = tmp_path / "points.jsonl.partial.jsonl"
    proc = _start([sys.executable, "-m", "simcoll", "sweep", "--collective", "all_to_all",
                   "--topology", "switch:{p}", "--algorithms", "direct", "--ranks", "256",
                   "--sizes", ",".join(f"{k}K" for k in range(1, 9)), "--workers", "2",
                   "--output", str(out_path)], tmp_path)
    _wait_for(partial, proc)
    _, err = _interrupt(proc)
    assert proc.returncode == 130, err
    assert "simcoll sweep: interrupted" in err and "Traceback" not in err
    assert not out_path.exists()
    _saved_points(partial)


def _unread(proc):
    """Bytes in the pipe of ``proc``'s standard output, not read yet."""
    import fcntl
    import termios

    return struct.unpack("i", fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD,
                                          b"\0" * 4))[0]


def _pipe_nearly_full(proc):
    """The bytes a pipe holds once a write waits on it: its capacity less a page (a
    write of several pages does not fill the last to the byte)."""
    import fcntl

    return fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ) - 4096


def _wait_for_output(proc, least):
    deadline = time.monotonic() + 60
    while _unread(proc) < least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"fewer than {least} bytes printed in 60 s"
        time.sleep(0.01)


@LINUX
@pytest.mark.parametrize("workers, full", [("1", False), ("2", False), ("1", True)],
                         ids=["in-process", "workers-2", "blocked-on-a-full-pipe"])
def test_ctrl_c_during_simcoll_sweep_to_standard_output_keeps_the_lines_printed(tmp_path,
                                                                                workers,
                                                                                full):
    """Without --output only standard output holds the finished points: each is printed
    (and flushed) as it finishes, in grid order, so Ctrl-C keeps them. A line is printed
    whole even when Ctrl-C comes while its write waits on a full pipe (the third 20 kB
    line here: the reader has not read)."""
    proc = _start([sys.executable, "-m", "simcoll", "sweep", "--collective", "all_to_all",
                   "--topology", "switch:{p}", "--algorithms", "direct", "--ranks", "256",
                   "--sizes", ",".join(f"{k}K" for k in range(1, 9)), "--workers", workers,
                   "--json"], tmp_path)
    _wait_for_output(proc, _pipe_nearly_full(proc) if full else 1)
    out, err = _interrupt(proc, unread=0.2 if full else 0.0)  # Ctrl-C while it waits
    assert proc.returncode == 130, err
    assert "simcoll sweep: interrupted" in err and "Traceback" not in err
    assert out.endswith("\n")
    records = [json.loads(line) for line in out.splitlines()]
    assert 1 <= len(records) < len(BIG["sizes"])
    assert [r["nbytes"] for r in records] == BIG["sizes"][:len(records)]
    assert all(r["error"] is None and r["spec"] == "switch:256" for r in records)


@LINUX
def test_a_local_pool_with_large_queued_tasks_ends_at_once_on_ctrl_c(tmp_path):
    """compare and calibrate use simcoll.processes.local_pool: the same fix must hold
    for any tasks, here 300 KB arguments behind two workers that sleep, cancelled by the
    caller (as compare does) before the interrupt leaves the pool."""
    script = textwrap.dedent("""
        import time
        from simcoll.processes import local_pool

        try:
            with local_pool(2) as pool:
                futures = [pool.submit(time.sleep, 120) for _ in range(2)]
                futures += [pool.submit(len, b"x" * 300_000) for _ in range(6)]
                time.sleep(0.5)  # the feeder thread is now blocked on the full pipe
                for future in futures:
                    future.cancel()
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """)
    proc = _start([sys.executable, "-c", script], tmp_path)
    try:
        out, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {HANG} s after the pool was left (hung at exit)")
    assert (proc.returncode, out) == (0, "interrupted\n"), err


# --- nothing finished is lost ---------------------------------------------------------------

class HeldExecutor(Executor):
    """Runs the first point when it is submitted and holds the others until ``release``:
    points that finish while the sweep is busy saving the first."""

    def __init__(self):
        self.held = []

    def submit(self, fn, /, *args, **kwargs):
        future: Future = Future()
        if self.held or getattr(self, "started", False):
            self.held.append((future, fn, args, kwargs))
        else:
            self.started = True
            future.set_running_or_notify_cancel()
            future.set_result(fn(*args, **kwargs))
        return future

    def release(self):
        for future, fn, args, kwargs in self.held:
            if future.set_running_or_notify_cancel():
                future.set_result(fn(*args, **kwargs))


@LINUX
def test_points_finished_but_not_yet_saved_are_saved_on_ctrl_c(tmp_path, monkeypatch):
    path = tmp_path / "points.jsonl"
    pool = HeldExecutor()
    real_fsync, interrupted = os.fsync, []

    def fsync(fd):
        real_fsync(fd)
        if not interrupted and os.path.samefile(f"/proc/self/fd/{fd}", path):
            interrupted.append(path.read_bytes().count(b"\n"))
            pool.release()  # the other points finish while the first is being saved...
            raise KeyboardInterrupt  # ... and Ctrl-C comes

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(KeyboardInterrupt):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 3, 4],
              sizes=[64, 128], save=path, executor=pool)
    assert interrupted == [1]
    lines = path.read_text().splitlines()
    want = {("ring", p, n) for p in (2, 3, 4) for n in (64, 128)}
    saved = [(r["algorithm"], r["nranks"], r["nbytes"]) for r in load_results(path).records]
    assert len(lines) == len(saved) == 6 and set(saved) == want
    for result in load_results(path):  # each as simulate gives it
        direct = sc.simulate(sc.topology.switch(result.nranks), "all_reduce",
                             algorithm="ring", nbytes=result.nbytes)
        assert result.time == direct.time and result.messages == direct.messages


def test_a_second_write_does_not_follow_part_of_a_line(tmp_path, monkeypatch):
    """An interrupt inside a write takes the part written back out: the file never holds
    part of a line that the next record would be glued to."""
    from simcoll.sweep.storage import ResultFile

    path = tmp_path / "points.jsonl"
    record = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                   sizes=[64]).records[0]
    store = ResultFile(path)
    real_write = os.write

    def half_write(fd, data):
        real_write(fd, bytes(data)[:10])
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", half_write)
    with pytest.raises(KeyboardInterrupt):
        store.append(record)
    monkeypatch.setattr(os, "write", real_write)
    assert path.read_bytes() == b""
    store.append(record)
    store.close()
    assert load_results(path).records == (record,)



def test_a_sweep_stopped_before_its_first_point_keeps_what_another_saved_meanwhile(tmp_path):
    """Sweep A makes the save file; sweep B, saving to the same file, writes its points;
    A is stopped before its first point. A removed the file it had made and saved nothing
    to, and B's points with it."""
    from simcoll.sweep.storage import ResultFile

    path = tmp_path / "points.jsonl"
    first = ResultFile(path)  # A: makes the file
    done = sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"], ranks=[2],
                 sizes=[64], save=path)  # B
    first.close()
    assert load_results(path).records == done.records and len(done.records) == 2
    alone = tmp_path / "alone.jsonl"
    ResultFile(alone).close()  # nothing written: the file it made is removed
    assert not alone.exists()


def _two_records():
    return sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"], ranks=[2],
                 sizes=[64]).records


def test_a_sweep_killed_mid_write_is_not_glued_to_the_records_another_appends(tmp_path):
    """Sweep B has the file open; sweep A, saving to it too, is killed half way through a
    record; B's next record was appended to A's cut-off line, a line in the middle that
    no sweep or load_results would read again."""
    from simcoll.sweep.storage import ResultFile

    path = tmp_path / "points.jsonl"
    ring, naive = _two_records()
    ring_line = json.dumps(ring).encode() + b"\n"
    second = ResultFile(path)               # B
    second.append(ring)
    with open(path, "ab") as killed:        # A's write, cut off by SIGKILL
        killed.write(ring_line[:40])
    second.append(naive)
    second.close()
    assert path.read_bytes() == ring_line + ring_line[:40] + b"\n" + \
        json.dumps(naive).encode() + b"\n"
    with pytest.warns(UserWarning, match="ignored line 2, a truncated record"):
        assert load_results(path).records == (ring, naive)
    with pytest.warns(UserWarning, match="ignored line 2"):
        again = sweep(sc.topology.switch, "all_reduce", algorithms=["ring", "naive"],
                      ranks=[2], sizes=[64], save=path)
    assert again.records == (ring, naive)


@pytest.mark.skipif(sys.platform == "win32", reason="no file locks: a cut line stays")
def test_a_truncated_last_line_is_cut_off_only_where_no_other_sweep_has_the_file(tmp_path):
    """Sweep B opened the file while sweep A was writing its last line and cut that line
    off (a record A had saved); A's file is now only cut where nobody else has it open,
    and the line is set apart from what is written after it."""
    from simcoll.sweep.storage import ResultFile

    path = tmp_path / "points.jsonl"
    ring, naive = _two_records()
    ring_line = json.dumps(ring).encode() + b"\n"
    first = ResultFile(path)                # A
    with open(path, "ab") as part:          # A, in the middle of its write
        part.write(ring_line[:40])
    with pytest.warns(UserWarning, match="truncated last line"):
        second = ResultFile(path)           # B leaves A's line alone
    assert path.read_bytes() == ring_line[:40]
    with open(path, "ab") as rest:          # A's write ends
        rest.write(ring_line[40:])
    second.append(naive)
    first.close()
    second.close()
    assert load_results(path).records == (ring, naive)
    path.write_bytes(ring_line[:40])
    with pytest.warns(UserWarning, match="truncated last line"):
        ResultFile(path).close()            # alone: cut off
    assert path.read_bytes() == b""


@pytest.mark.skipif(sys.platform == "win32", reason="no file locks")
def test_a_sweep_that_left_a_truncated_line_alone_still_holds_the_file(tmp_path):
    """Sweep A, opening a file another sweep B had open and a killed one had left a
    truncated line in, tried for an exclusive lock to cut it; Linux dropped A's shared
    lock on the failed try, so once B had closed, a third sweep's remove_unless_open saw
    nobody and removed the file A went on saving to."""
    from simcoll.sweep.storage import ResultFile, remove_unless_open

    path = tmp_path / "points.jsonl"
    ring, naive = _two_records()
    second = ResultFile(path)               # B
    second.append(ring)
    with open(path, "ab") as killed:
        killed.write(json.dumps(ring).encode()[:30])
    with pytest.warns(UserWarning, match="truncated last line"):
        first = ResultFile(path)            # A: not alone, leaves the line
    second.close()
    assert not remove_unless_open(path) and path.exists()
    first.append(naive)
    first.close()
    with pytest.warns(UserWarning, match="ignored line 2"):
        assert load_results(path).records == (ring, naive)
    assert remove_unless_open(path) and not path.exists()


def test_a_failed_fsync_names_the_save_file(tmp_path, monkeypatch):
    from simcoll.sweep.storage import ResultFile

    path = tmp_path / "points.jsonl"
    store = ResultFile(path)

    def failing(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError, match=f"cannot write {path}: Input/output error"):
        store.append(_two_records()[0])
    monkeypatch.undo()
    store.close()


@pytest.mark.skipif(sys.platform == "win32", reason="no file locks: an empty file stays")
def test_a_sweep_stopped_before_its_first_point_keeps_a_file_another_has_open(tmp_path):
    """Sweep A makes the save file, sweep B opens it and has not saved a point yet, A
    stops: A removed the empty file, and B's points then went to a file no longer in the
    folder, without an error."""
    from simcoll.sweep.storage import ResultFile

    path = tmp_path / "points.jsonl"
    record = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                   sizes=[64]).records[0]
    first, second = ResultFile(path), ResultFile(path)
    first.close()
    assert path.exists()
    second.append(record)
    second.close()
    assert load_results(path).records == (record,)


def test_a_full_disk_under_save_names_the_file_and_keeps_what_it_holds(tmp_path,
                                                                       monkeypatch):
    """The OSError of a full disk said '[Errno 28] No space left on device', naming no
    file, as every other writer does."""
    path = tmp_path / "points.jsonl"
    real_write, writes = os.write, []

    def fills_up(fd, data):
        writes.append(fd)
        if len(writes) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", fills_up)
    with pytest.raises(OSError, match=f"^\\[Errno 28\\] cannot write {path}: No space left "
                                      f"on device$"):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 3],
              sizes=[64], save=path)
    monkeypatch.setattr(os, "write", real_write)
    assert [r["nranks"] for r in load_results(path).records] == [2]


@LINUX
def test_ctrl_c_during_simcoll_run_leaves_with_one_line_and_status_130(tmp_path):
    # A large run (512 ranks sending to every other rank), through the console script's
    # entry (python -m simcoll): one line, status 130.
    proc = _start([sys.executable, "-m", "simcoll", "run", "--topology", "switch:512",
                   "--algorithm", "naive", "--size", "64M"], tmp_path)
    time.sleep(3)
    assert proc.poll() is None, proc.communicate()
    out, err = _interrupt(proc)
    assert (proc.returncode, err) == (130, "simcoll run: interrupted\n")


_CONSOLE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "simcoll")


@pytest.mark.skipif(not os.path.exists(_CONSOLE_SCRIPT), reason="simcoll is not installed")
def test_ctrl_c_while_the_console_script_imports_simcoll_leaves_with_one_line(tmp_path):
    """Ctrl-C in the first second of a command, while simcoll and numpy import, printed
    Python's traceback. The installed script, with the import of simcoll.cli stopped as
    a Ctrl-C would stop it (a site hook raises KeyboardInterrupt there)."""
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent("""
        import sys

        class CtrlC:
            def find_spec(self, name, path=None, target=None):
                if name == "simcoll.cli":
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, CtrlC())
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    done = subprocess.run([_CONSOLE_SCRIPT, "run", "--size", "1K"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "simcoll: interrupted\n")
    # and without the hook the same script runs the command
    done = subprocess.run([_CONSOLE_SCRIPT, "run", "--size", "1K"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "1024" in done.stdout, done


class _StoppedAtOnce(Executor):
    """Ctrl-C as the first point is handed out."""

    def submit(self, fn, /, *args, **kwargs):
        raise KeyboardInterrupt


def test_a_sweep_stopped_before_its_first_point_leaves_no_empty_save_file(tmp_path):
    """An empty PATH.partial.jsonl stayed behind, which nothing mentioned; a file that
    was there before the sweep stays, whatever it holds."""
    path = tmp_path / "points.jsonl"
    for before in (None, ""):
        if before is not None:
            path.write_text(before)
        with pytest.raises(KeyboardInterrupt):
            sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                  sizes=[64], save=path, executor=_StoppedAtOnce())
        assert path.exists() == (before is not None)
    assert path.read_text() == ""


def test_an_empty_output_is_refused_not_taken_for_standard_output(tmp_path, capsys):
    """--output "$OUT" with OUT unset printed the sweep to the screen and exited 0."""
    from simcoll.cli import main

    assert main(["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K",
                 "--output", ""]) == 2
    assert "--output : use a file ending in .csv, .json, .jsonl" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes any file")
def test_a_save_file_that_cannot_be_written_is_named(tmp_path):
    path = tmp_path / "points.jsonl"
    sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2], sizes=[64],
          save=path)
    path.chmod(0o444)
    with pytest.raises(OSError, match=f"cannot write {path}: Permission denied"):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2, 3],
              sizes=[64], save=path)


def test_a_stopped_sweep_keeps_the_users_link_to_its_save_file(tmp_path):
    """save= a link to a file yet to be made: a sweep stopped before its first point
    removed the link and left the empty file it had made through it."""
    link = tmp_path / "points.jsonl"
    link.symlink_to("real.jsonl")
    with pytest.raises(KeyboardInterrupt):
        sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2], sizes=[64],
              save=link, executor=_StoppedAtOnce())
    assert link.is_symlink() and not (tmp_path / "real.jsonl").exists()


@LINUX
def test_ctrl_c_during_simcoll_run_json_on_a_full_pipe_keeps_every_line_whole(tmp_path):
    """simcoll run --json prints a record per size (some 40 kB each on 256 ranks); a
    Ctrl-C while one waits on a full pipe lets it finish: every line printed parses (it
    was cut at 16 kB before)."""
    proc = _start([sys.executable, "-m", "simcoll", "run", "--collective", "all_to_all",
                   "--topology", "switch:256", "--algorithm", "direct", "-b", "256K",
                   "-e", "2M", "-f", "2", "--json"], tmp_path)
    _wait_for_output(proc, _pipe_nearly_full(proc))
    out, err = _interrupt(proc, unread=0.2)  # Ctrl-C while a write waits
    assert proc.returncode == 130, err
    assert err == "simcoll run: interrupted\n"
    assert out.endswith("\n")
    records = [json.loads(line) for line in out.splitlines()]
    assert 1 <= len(records) < 4
    assert [r["size"] for r in records] == [2**18 * 2**k for k in range(len(records))]


def test_ctrl_c_while_a_line_is_written_comes_once_it_is_written():
    from simcoll.cli.writing import ctrl_c_held

    before = signal.getsignal(signal.SIGINT)
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_held():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("the rest of the line")
    assert reached == ["the rest of the line"]
    with ctrl_c_held():   # nothing pressed: nothing raised
        reached.append("quiet")
    assert reached[-1] == "quiet" and signal.getsignal(signal.SIGINT) is before


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX")
def test_ctrl_c_is_blocked_while_a_line_is_written():
    from simcoll.cli.writing import ctrl_c_held

    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with ctrl_c_held():
        assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_a_file_system_without_locks_keeps_the_save_file(tmp_path, monkeypatch):
    """Where flock fails (a file system without locks), a sweep still saves its points,
    and a stopped one keeps the empty file it made (whether another sweep has it open
    cannot be known)."""
    from simcoll.sweep import storage

    class NoLocks:
        LOCK_SH, LOCK_EX, LOCK_NB = 1, 2, 4

        @staticmethod
        def flock(fd, operation):
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(storage, "fcntl", NoLocks)
    path = tmp_path / "points.jsonl"
    done = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                 sizes=[64], save=path)
    assert load_results(path).records == done.records
    empty = tmp_path / "empty.jsonl"
    storage.ResultFile(empty).close()
    assert empty.exists() and empty.read_bytes() == b""


@pytest.mark.skipif(sys.platform == "win32", reason="no file locks")
def test_a_save_file_removed_while_its_lock_was_awaited_is_made_again(tmp_path,
                                                                      monkeypatch):
    """Sweep B opens the save file while sweep A, stopped before its first point, holds it
    alone and removes it; B's shared lock is granted once A has closed it. B then held a
    file no longer in the folder, and its points went nowhere, without an error: it opens
    the path again (and closes what it opened first)."""
    from simcoll.sweep import storage
    from simcoll.sweep.storage import ResultFile

    path = tmp_path / "points.jsonl"
    record = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                   sizes=[64]).records[0]
    real = storage.fcntl

    class RemovedWhileAwaited:
        LOCK_SH, LOCK_EX, LOCK_NB = real.LOCK_SH, real.LOCK_EX, real.LOCK_NB
        removed = 0

        @classmethod
        def flock(cls, fd, how):
            if how == real.LOCK_SH and not cls.removed:  # A removes it meanwhile
                cls.removed += 1
                path.unlink()
            real.flock(fd, how)

    open_before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    monkeypatch.setattr(storage, "fcntl", RemovedWhileAwaited)
    store = ResultFile(path)
    assert RemovedWhileAwaited.removed == 1 and path.exists()
    store.append(record)
    store.close()
    if open_before is not None:
        assert len(os.listdir("/proc/self/fd")) == open_before   # no descriptor left open
    assert load_results(path).records == (record,)


def test_without_file_locks_a_stopped_sweep_keeps_the_empty_file_it_made(tmp_path,
                                                                         monkeypatch):
    """Where locks are not available (Windows) nothing tells whether another sweep has the
    file open: the empty file stays rather than being removed under that sweep."""
    from simcoll.sweep import storage
    from simcoll.sweep.storage import ResultFile

    monkeypatch.setattr(storage, "fcntl", None)
    path = tmp_path / "points.jsonl"
    ResultFile(path).close()
    assert path.exists() and path.read_bytes() == b""
    record = sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                   sizes=[64]).records[0]
    with ResultFile(path) as store:
        store.append(record)
    assert load_results(path).records == (record,)


def test_the_console_scripts_interrupted_status_is_the_command_lines():
    """_simcoll_cli cannot import simcoll.cli's constant (its point is to catch a Ctrl-C
    before simcoll is in): the two must say the same status, 128 + SIGINT."""
    import _simcoll_cli
    from simcoll.cli import INTERRUPTED

    assert _simcoll_cli.INTERRUPTED == INTERRUPTED == 128 + signal.SIGINT




def _ring_record():
    return _two_records()[0]


def _can_lock(path, how):
    """Whether a new open of ``path`` gets lock ``how`` at once (flock locks are per open
    file, so this process's other opens count as other sweeps)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@pytest.mark.parametrize("cut", [b'{"coll', b"{"])
def test_a_last_line_cut_inside_the_first_fields_name_is_a_truncated_record(tmp_path, cut):
    """A record cut off before its first field's name ended ('{"coll', a prefix of
    '{"collective": ') was only recognized as truncated when it ran past that name: the
    file could no longer be read or resumed."""
    from simcoll.sweep.storage import ResultFile

    ring, naive = _two_records()
    line = json.dumps(ring).encode() + b"\n"
    path = tmp_path / "points.jsonl"
    path.write_bytes(line + cut)
    with pytest.warns(UserWarning, match="truncated last line"):
        assert load_results(path).records == (ring,)
    path.write_bytes(line + cut + b"\n" + json.dumps(naive).encode() + b"\n")  # middle
    with pytest.warns(UserWarning, match="ignored line 2, a truncated record"):
        assert load_results(path).records == (ring, naive)
    path.write_bytes(line + cut)
    with pytest.warns(UserWarning, match="truncated last line"):
        ResultFile(path).close()
    assert path.read_bytes() == line


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock semantics")
def test_a_sweep_that_cut_a_truncated_line_still_lets_other_sweeps_open_the_file(tmp_path):
    """Cutting the line takes the exclusive lock (no other sweep may be writing it); the
    file is then held shared again, as any open save file is. Without going back to the
    shared lock another sweep saving to the file waited for this one to end."""
    from simcoll.sweep.storage import ResultFile

    line = json.dumps(_ring_record()).encode() + b"\n"
    path = tmp_path / "points.jsonl"
    path.write_bytes(line + line[:30])
    with pytest.warns(UserWarning, match="truncated last line"):
        first = ResultFile(path)
    try:
        assert path.read_bytes() == line
        assert _can_lock(path, fcntl.LOCK_SH)        # another sweep may open it
        assert not _can_lock(path, fcntl.LOCK_EX)    # but sees it in use
    finally:
        first.close()
    assert _can_lock(path, fcntl.LOCK_EX)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock semantics")
def test_a_save_file_that_is_refused_is_not_left_open(tmp_path):
    """A file holding a line that is no record is refused after it was opened (and
    locked shared); only an OSError closed it again, so the refusal left the descriptor
    open and the file marked in use: a later sweep saw another one holding it."""
    from simcoll.sweep.storage import ResultFile

    path = tmp_path / "points.jsonl"
    path.write_bytes(b"not a record\n")
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(sc.InvalidInputError, match="is not a simcoll sweep record"):
        ResultFile(path)
    assert len(os.listdir("/proc/self/fd")) == before
    assert _can_lock(path, fcntl.LOCK_EX)


def test_a_worker_of_the_callers_executor_that_dies_names_no_points(tmp_path):
    """The points a worker was running are named only for a pool the sweep made (which
    takes them in the order sent); a caller's executor may run them in any order, so the
    note says only that a worker died."""
    from concurrent.futures.process import BrokenProcessPool

    from simcoll.processes import DIED

    def factory(p):
        machine = sc.topology.switch(p)
        if p > 2:
            machine.__class__ = DiesInAWorker
        return machine

    with ProcessPoolExecutor(2) as executor, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(BrokenProcessPool) as caught:
            sweep(factory, "all_reduce", algorithms=["ring"], ranks=[2, 3, 4, 5],
                  sizes=[64], executor=executor)
    assert caught.value.__notes__ == [DIED]
