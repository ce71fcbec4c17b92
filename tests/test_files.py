"""Files simcoll writes for a user: refused before any work where they cannot be written,
written whole or not at all, and no temporary file left behind."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import simcoll as sc
from simcoll.cli import main
from simcoll.files import output_path, sibling, write_atomically
from simcoll.trace import save_chrome


def _traced():
    return sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", nbytes=8,
                       trace=True)


def test_output_paths_are_refused_by_name_before_any_work(tmp_path):
    with pytest.raises(sc.InvalidInputError, match="^path=5 is not a file path$"):
        output_path(5, "path")
    with pytest.raises(sc.InvalidInputError, match=f"^save='{tmp_path}' is a directory; "
                                                   f"give a file path, e.g. '{tmp_path}/a.b'"):
        output_path(tmp_path, "save", example="a.b")
    # Path("") is ".", which was called a directory
    with pytest.raises(sc.InvalidInputError, match="^save='' is an empty path; give a file "
                                                   "path, e.g. 'a.b'$"):
        output_path("", "save", example="a.b")
    # a raw ValueError (embedded null byte) from the probe's open before
    with pytest.raises(sc.InvalidInputError, match=r"^save='a\\x00\.json' holds a NUL "
                                                   r"character, which no file name can$"):
        output_path("a\0.json", "save")
    with pytest.raises(sc.InvalidInputError, match="holds a NUL character"):
        sc.topology.save(sc.topology.switch(2), tmp_path / "a\0.yaml")
    # a folder's name or the whole path too long for the system: a raw OSError before
    for too_long in (tmp_path / ("a" * 300) / "x.json",
                     tmp_path.joinpath(*["d" * 200] * 30, "x.json")):
        with pytest.raises(sc.InvalidInputError, match=r"x\.json': File name too long$"):
            output_path(too_long, "save")
        with pytest.raises(sc.InvalidInputError, match=r"File name too long$"):
            sc.load_results(too_long)
    missing = tmp_path / "no" / "x.json"
    with pytest.raises(sc.InvalidInputError, match=f"folder '{tmp_path}/no' does not exist"):
        output_path(missing, "path")
    # A file where the folder should be was called a folder that does not exist.
    (tmp_path / "afile").write_text("")
    with pytest.raises(sc.InvalidInputError, match=f"'{tmp_path}/afile' is a file, not a "
                                                   f"folder$"):
        output_path(tmp_path / "afile" / "x.json", "path")
    assert output_path(str(tmp_path / "x.json"), "path") == tmp_path / "x.json"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def half_then_fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomically(target, half_then_fail)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    write_atomically(target, lambda tmp: tmp.write_text("new"))
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.parametrize("write", [
    lambda path: save_chrome(_traced(), path),
    lambda path: sc.topology.save(sc.topology.switch(2), path),
    lambda path: sc.plot.timeline(_traced(), save=path),
])
def test_every_writer_refuses_a_directory_or_a_missing_folder(tmp_path, write):
    """save_chrome to a directory wrote '<dir>.tmp' beside it and raised
    IsADirectoryError; to a missing folder, FileNotFoundError."""
    folder = tmp_path / "results.json"
    folder.mkdir()
    with pytest.raises(sc.InvalidInputError, match="is a directory"):
        write(folder)
    with pytest.raises(sc.InvalidInputError, match="does not exist"):
        write(tmp_path / "no" / "x.json")
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("write", [
    lambda path: save_chrome(_traced(), path),
    lambda path: sc.topology.save(sc.topology.switch(2), path),
    lambda path: sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[2],
                          sizes=[1024], save=path),
])
def test_a_path_ending_in_a_separator_is_refused_as_a_folders(tmp_path, write):
    """'runs/' (no such folder yet) was written as a file named 'runs', where open()
    refuses it."""
    with pytest.raises(sc.InvalidInputError, match="ends in a separator, as a folder's "
                                                   "name does; give a file path, e.g. "):
        write(f"{tmp_path / 'runs.json'}/")
    for last in (".", ".."):
        with pytest.raises(sc.InvalidInputError, match=f"ends in '{re.escape(last)}', which "
                                                       f"names a folder; give a file path"):
            write(f"{tmp_path / 'runs.json'}/{last}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", ["runs.csv/", "runs.csv/.", "a/.."])
def test_the_command_line_refuses_an_output_that_names_a_folder(capsys, tmp_path,
                                                                 monkeypatch, path):
    """simcoll sweep --output runs.csv/ wrote a file runs.csv and exited 0."""
    monkeypatch.chdir(tmp_path)
    status = main(["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K",
                   "--output", path])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith(f"simcoll sweep: error: --output {path}: ends in ")
    assert err.endswith(("names a folder; give a file path\n",
                         "as a folder's name does; give a file path\n"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["trace", "--topology", "switch:2", "--size", "1K"],
                                     ["sweep", "--algorithms", "ring", "--ranks", "2",
                                      "--sizes", "1K"]])
def test_the_command_line_refuses_an_output_that_is_a_directory(capsys, tmp_path, command):
    folder = tmp_path / "out.json"
    folder.mkdir()
    assert main([*command, "--output", str(folder)]) == 2
    assert "is a directory; give a file path" in capsys.readouterr().err
    assert list(folder.iterdir()) == [] and [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("write", [
    lambda path: save_chrome(_traced(), path),
    lambda path: sc.topology.save(sc.topology.switch(2), path),
    lambda path: sc.plot.timeline(_traced(), save=path),
])
def test_every_writer_refuses_a_pipe_rather_than_replace_it(tmp_path, write):
    """A file renamed over a named pipe (or a device node: /dev/null, written by root)
    replaced it; only a sweep's save= refused them."""
    pipe = tmp_path / "out.json"
    os.mkfifo(pipe)
    with pytest.raises(sc.InvalidInputError, match=r"out.json': a device, pipe or socket, "
                                                   r"not a regular file: writing would "
                                                   r"replace it"):
        write(pipe)
    assert pipe.is_fifo() and [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_the_command_line_refuses_a_pipe_as_its_output(capsys, tmp_path):
    pipe = tmp_path / "trace.json"
    os.mkfifo(pipe)
    assert main(["trace", "--topology", "switch:2", "--size", "1K", "--output", str(pipe)]) == 2
    assert "a device, pipe or socket, not a regular file" in capsys.readouterr().err
    assert pipe.is_fifo()


# /proc takes no new file, whoever asks (root included, whom permissions do not stop).
PROC = Path("/proc")


@pytest.mark.skipif(not (PROC / "self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("write", [
    lambda path: save_chrome(_traced(), path),
    lambda path: sc.topology.save(sc.topology.switch(2), path),
    lambda path: sc.plot.timeline(_traced(), save=path),
])
def test_a_folder_that_takes_no_file_is_refused_by_its_path(write):
    with pytest.raises(sc.InvalidInputError, match=r"x.json': cannot write in folder '/proc'"):
        write(PROC / "x.json")


@pytest.mark.skipif(not (PROC / "self").is_dir(), reason="needs Linux's /proc")
def test_the_command_line_refuses_such_a_folder_before_the_run(capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(sys.modules["simcoll.cli.tracing"], "simulate",
                        lambda *a, **k: calls.append(1))
    assert main(["trace", "--topology", "switch:2", "--output", "/proc/x.json"]) == 2
    err = capsys.readouterr().err
    assert "--output /proc/x.json: cannot write in folder '/proc'" in err and calls == []


# --- the longest names a folder takes ------------------------------------------------------

def _name_max(folder):
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):
        pytest.skip("the folder does not say how long a name may be")


@pytest.mark.parametrize("write, ext", [
    (lambda path: save_chrome(_traced(), path), ".json"),
    (lambda path: sc.topology.save(sc.topology.switch(2), path), ".yaml"),
    (lambda path: sc.plot.timeline(_traced(), save=path), ".png"),
])
def test_a_name_as_long_as_the_folder_takes_is_written(tmp_path, write, ext):
    """The temporary file's name, '.NAME.part', was 6 bytes longer than the target's:
    a name of 250 to 255 bytes, which open() takes, was refused as 'cannot write in
    folder'."""
    path = tmp_path / ("a" * (_name_max(tmp_path) - len(ext)) + ext)
    write(path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name] and path.stat().st_size


def test_a_name_longer_than_the_folder_takes_is_refused_by_its_length(tmp_path):
    """It came out as a raw OSError (File name too long) from the check for a
    directory."""
    limit = _name_max(tmp_path)
    path = tmp_path / ("a" * (limit - 4) + ".yaml")
    with pytest.raises(sc.InvalidInputError, match=f"the file name is {limit + 1} bytes "
                                                   f"long, more than the {limit} its folder "
                                                   f"takes"):
        sc.topology.save(sc.topology.switch(2), path)
    assert main(["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K",
                 "--output", str(path.with_suffix(".json"))]) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_to_the_longest_name_keeps_its_points_under_a_shorter_one(capsys, tmp_path,
                                                                          monkeypatch):
    """PATH.partial.jsonl is 14 bytes longer than PATH: where that is too long, the
    name is cut and ends with a digest of PATH's (one name per PATH), and a sweep that
    fails at the end names it."""
    out = tmp_path / ("p" * (_name_max(tmp_path) - 5) + ".json")
    assert main(["sweep", "--algorithms", "ring", "--ranks", "2", "--sizes", "1K",
                 "--output", str(out)]) == 0
    assert [r.nranks for r in sc.load_results(out)] == [2]
    assert [p.name for p in tmp_path.iterdir()] == [out.name]
    capsys.readouterr()
    def full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    assert main(["sweep", "--algorithms", "ring", "--ranks", "4", "--sizes", "1K",
                 "--output", str(out)]) == 1  # a failed write
    kept = [p for p in tmp_path.iterdir() if p != out]
    assert len(kept) == 1 and kept[0].name.endswith(".partial.jsonl")
    assert kept[0].name.startswith("ppp") and len(os.fsencode(kept[0].name)) <= len(out.name)
    assert f"the finished points are kept in {kept[0]}" in capsys.readouterr().err
    assert [r.nranks for r in sc.load_results(kept[0])] == [4]


def test_siblings_of_long_names_fit_and_stay_apart(tmp_path):
    limit = _name_max(tmp_path)
    short = tmp_path / "x.json"
    assert sibling(short, ".", ".part") == tmp_path / ".x.json.part"
    one, two = (tmp_path / ("b" * (limit - 6) + tail) for tail in ("1.json", "2.json"))
    made = [sibling(path, suffix=".partial.jsonl") for path in (one, two)]
    assert made[0] != made[1]
    assert all(len(os.fsencode(m.name)) == limit and m.parent == tmp_path for m in made)
    assert sibling(one, suffix=".partial.jsonl") == made[0]  # the same every time


def test_a_symbolic_link_keeps_pointing_at_the_file_written(tmp_path):
    """Saving over a link replaced the link with a file of its own; the file it pointed
    to kept its old content."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "target.txt").write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real / "target.txt")
    write_atomically(link, lambda tmp: tmp.write_text("new"))
    assert link.is_symlink() and (real / "target.txt").read_text() == "new"
    assert sorted(p.name for p in real.iterdir()) == ["target.txt"]


def test_an_existing_files_permissions_are_kept(tmp_path):
    target = tmp_path / "private.txt"
    target.write_text("old")
    target.chmod(0o600)
    write_atomically(target, lambda tmp: tmp.write_text("new"))
    assert target.stat().st_mode & 0o777 == 0o600 and target.read_text() == "new"


def test_the_file_is_on_disk_before_it_replaces_the_old_one(tmp_path, monkeypatch):
    """The rename came without an fsync: a crash just after a sweep (which then deletes
    its synced partial file) could leave neither."""
    events = []
    real_fsync, real_replace = os.fsync, Path.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", os.readlink(
        f"/proc/self/fd/{fd}"))) or real_fsync(fd))
    monkeypatch.setattr(Path, "replace", lambda self, to: events.append(("replace", str(to)))
                        or real_replace(self, to))
    target = tmp_path / "out.txt"
    write_atomically(target, lambda tmp: tmp.write_text("new"))
    kinds = [kind for kind, _ in events]
    assert kinds[:2] == ["fsync", "replace"] and events[1][1] == str(target)
    assert Path(events[0][1]).parent == tmp_path and events[0][1].endswith(".part")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes in any folder")
def test_a_leftover_temporary_file_does_not_make_a_read_only_folder_look_writable(tmp_path):
    """A '.NAME.part' left by a killed writer passed the check (it said the folder was
    writable); the run then failed at its end, naming the hidden file."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / ".t.json.part").write_text("")
    folder.chmod(0o555)
    try:
        with pytest.raises(sc.InvalidInputError, match="cannot write in folder"):
            output_path(folder / "t.json", "output")
    finally:
        folder.chmod(0o755)


def test_a_file_of_another_user_in_a_sticky_folder_is_refused_before_any_work(
        tmp_path, monkeypatch):
    """In /tmp (the sticky bit) another user's file cannot be renamed over: the probe
    passed, and a trace or sweep failed after all its work."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "t.json").write_text("theirs")
    folder.chmod(0o1777)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(folder).st_uid + 1)
    with pytest.raises(sc.InvalidInputError, match="'.*t.json' belongs to another user in a "
                                                   "folder with the sticky bit"):
        output_path(folder / "t.json", "output")
    assert output_path(folder / "new.json", "output") == folder / "new.json"


def test_a_link_is_checked_where_its_file_is_written(tmp_path):
    """The check ran in the link's folder and the write went to the file it names: a
    link into a missing folder, or a link that loops, passed and failed after the work."""
    dangling = tmp_path / "out.json"
    dangling.symlink_to(tmp_path / "no" / "out.json")
    with pytest.raises(sc.InvalidInputError, match=f"a link to '{tmp_path}/no/out.json', "
                                                   f"whose folder does not exist"):
        output_path(dangling, "output")
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.symlink_to(second)
    second.symlink_to(first)
    with pytest.raises(sc.InvalidInputError, match="a symbolic link that loops"):
        output_path(first, "output")
    # a link to a file yet to be written, in a folder that exists: written there
    (tmp_path / "real").mkdir()
    ahead = tmp_path / "ahead.json"
    ahead.symlink_to(Path("real") / "later.json")
    write_atomically(output_path(ahead, "output"), lambda tmp: tmp.write_text("x"))
    assert ahead.is_symlink() and (tmp_path / "real" / "later.json").read_text() == "x"


def test_a_leftover_temporary_file_of_the_old_name_is_left_alone(tmp_path):
    """Another writer's temporary file (or one left by a killed writer): the output is
    still accepted and written through a name of its own, the other file untouched."""
    (tmp_path / ".t.json.part").write_text("someone else's")
    assert output_path(tmp_path / "t.json", "output") == tmp_path / "t.json"
    write_atomically(tmp_path / "t.json", lambda tmp: tmp.write_text("new"))
    assert (tmp_path / "t.json").read_text() == "new"
    assert (tmp_path / ".t.json.part").read_text() == "someone else's"


def test_the_temporary_file_is_read_not_written_to_flush_it(tmp_path, monkeypatch):
    """Reopened read-write to flush it, a temporary file made under umask 0222 could not
    be opened by its owner (EACCES for anyone but root)."""
    modes = []
    real_open = Path.open

    def recording(self, mode="r", *args, **kwargs):
        if self.name.endswith(".part"):
            modes.append(mode)
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", recording)
    write_atomically(tmp_path / "out.txt", lambda tmp: tmp.write_bytes(b"x"))
    assert modes[-1] == "rb" and not any("+" in mode for mode in modes)   # then flushed


def test_an_os_pathlike_of_an_empty_path_is_refused_by_name():
    """What a path object names is its os.fspath, not its str: one whose __fspath__ is ''
    is the empty path, refused as the string '' is."""
    class Empty(os.PathLike):
        def __fspath__(self):
            return ""

        def __repr__(self):
            return "Empty()"

    with pytest.raises(sc.InvalidInputError, match="^save='' is an empty path; give a file "
                                                   "path, e.g. 'a.b'$"):
        output_path(Empty(), "save", example="a.b")
