"""benchmarks/nccl_tests_compare.py and nccl_calibrated.py on a small table: the errors
they report are the simulated against the measured times, size by size, and the
calibrated script holds out the sizes it says it holds out. benchmarks/figures.py writes
each figure whole or not at all, and checks --out before computing any."""

from __future__ import annotations

import errno
import inspect
import math
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import simcoll as sc

sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))

import figures  # noqa: E402
import nccl_calibrated  # noqa: E402
import nccl_tests_compare  # noqa: E402
from nccl_public import TABLES  # noqa: E402

pytest.importorskip("scipy")

PUBLIC = next(t for t in TABLES if t.id == "rtx5090x4_genoa_shm")
LARGEST = 64 * 1024     # 8 B to 64 KiB: 14 sizes, a second of simulation


def measured(largest: int) -> list[tuple[int, float]]:
    return [(size, time_us * 1e-6) for size, time_us, _, _ in PUBLIC.rows if size <= largest]


def simulated(size: int, **params: float) -> float:
    topo, _, _ = nccl_tests_compare.machine(PUBLIC)
    return sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size, arch="blackwell",
                       **params).time


def test_compare_reports_each_size_with_the_extra_parameters(capsys):
    logs, summary = nccl_tests_compare.compare(PUBLIC, "nccl", "flow", max_size=1024,
                                               extra={"launch_overhead": 5e-6})
    rows = measured(1024)
    assert logs == pytest.approx([math.log(simulated(size, launch_overhead=5e-6) / true)
                                  for size, true in rows], rel=1e-12)
    assert summary.startswith(PUBLIC.id) and f"{len(rows)} of {len(PUBLIC.rows)}" in summary
    assert "launch_overhead" in capsys.readouterr().out


def test_compare_shows_each_run_s_critical_path_by_kind(capsys):
    nccl_tests_compare.compare(PUBLIC, "nccl", "flow", max_size=64, path=True)
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "size (B)" in line)
    assert header.split()[12:16] == ["launch", "steps", "bytes", "reduce"]
    table = lines[lines.index(header) + 1:]
    rows = [line.split() for line in table if line.split() and line.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == [size for size, _ in measured(64)]
    for row, (size, _) in zip(rows, measured(64)):
        topo, _, _ = nccl_tests_compare.machine(PUBLIC)
        res = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size,
                          arch="blackwell", trace=True)
        totals = sc.critical_path(res).totals()
        # A ring of 4 with LL at a few bytes: NCCL's 6.6 us launch (wait) and 6 steps.
        assert totals["wait"] > 0 and totals["latency"] > totals["transfer"]
        shown = [float(cell.rstrip("%")) for cell in row[6:10]]
        assert shown == pytest.approx([round(100 * totals[k] / res.time) for k in
                                       ("wait", "latency", "transfer", "reduce")], abs=0.5)
        assert sum(shown) == pytest.approx(100, abs=2)


def test_calibrated_fits_the_even_sizes_and_checks_the_odd_ones(capsys):
    (before, fitted, held), costs = nccl_calibrated.calibrate_table(PUBLIC, LARGEST)
    rows = measured(LARGEST)
    assert set(costs) == {"launch_overhead", "step_latency_scale"}
    assert (len(before), len(fitted), len(held)) == (len(rows), len(rows[::2]),
                                                     len(rows[1::2]))
    assert before == pytest.approx([math.log(simulated(s) / t) for s, t in rows], rel=1e-12)
    for logs, part in ((fitted, rows[::2]), (held, rows[1::2])):
        assert logs == pytest.approx([math.log(simulated(s, **costs) / t) for s, t in part],
                                     rel=1e-9)
    out = capsys.readouterr().out
    # one per held-out row, the header and the total
    assert out.count("held out") == len(rows[1::2]) + 2
    assert f"fitted on {len(rows[::2])} sizes, {len(rows[1::2])} held out" in out


def test_calibrated_refuses_bad_arguments(capsys):
    for argv in (["--tables", "nope"], ["--starts", "0"]):
        with pytest.raises(SystemExit) as stop:
            nccl_calibrated.main(argv)
        assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "unknown table ids ['nope']; known: a100x8_oci" in err
    assert "--starts 0: use an integer >= 1" in err


# --- benchmarks/figures.py: figures written whole, --out checked first ------------------------

def _read_only_folders(monkeypatch):
    """Make every folder refuse new files, as a read-only file system does (for root
    too, whom permissions do not stop)."""
    real_open = Path.open

    def refusing(self, mode="r", *args, **kwargs):
        if set(mode) & set("wxa+"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refusing)


@pytest.mark.parametrize("folder", ["read-only", "a file"])
def test_figures_refuses_an_out_it_cannot_write_before_computing(monkeypatch, capsys,
                                                                 tmp_path, folder):
    """A read-only --out was found only once the figure was computed (pat_vs_ring: 4 s,
    the others longer), with a raw traceback; a file as --out, by mkdir's."""
    made = []
    monkeypatch.setitem(figures.FIGURES, "pat_vs_ring", made.append)
    out = tmp_path / "out"
    if folder == "a file":
        out.write_text("not a folder")
    else:
        out.mkdir()
        _read_only_folders(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        figures.main(["--out", str(out), "--only", "pat_vs_ring"])
    assert stop.value.code == 2 and made == []
    err = capsys.readouterr().err
    assert (f"--out {out}: cannot write in folder '{out}' (Read-only file system)"
            if folder == "read-only" else f"--out {out}: cannot make folder {out}") in err


def test_a_figure_that_cannot_be_written_leaves_the_old_one(monkeypatch, capsys, tmp_path):
    """pat_vs_ring, nccl_tests and critical_path were saved straight onto their files: a
    full disk left a cut-off PNG where the old figure was."""
    old = tmp_path / "pat_vs_ring.png"
    old.write_bytes(b"the old figure")
    monkeypatch.setattr(sc, "simulate", lambda *args, **kwargs: SimpleNamespace(
        time=1e-5, params={"proto": "LL", "algo": "pat"}))

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(SystemExit) as stop:
        figures.main(["--out", str(tmp_path), "--only", "pat_vs_ring"])
    assert stop.value.code == 1
    assert old.read_bytes() == b"the old figure"
    assert [p.name for p in tmp_path.iterdir()] == ["pat_vs_ring.png"]
    assert f"cannot write {old}: No space left on device" in capsys.readouterr().err
    assert ".savefig(" not in inspect.getsource(figures)  # every figure goes through finish


@pytest.mark.parametrize("size", [8, 4096, 1 << 20, 1 << 28])
def test_nccl_s_model_is_its_tuner_s_prediction_before_channels_are_trimmed(size):
    """The "NCCL model" column is the time NCCL's tuner predicts for what it chose: on
    the communicator's channels, which it trims for a small buffer only afterwards (a
    4 KiB forced ring/Simple on two DGX H100 runs one channel, whose count would bring in
    the ring's "plateau" factor 1.4 that NCCL's test of nBytes / (nChannels nRanks) >= 64
    leaves out at the communicator's count). With channels fixed, NCCL reasons on them."""
    from simcoll.algorithms.nccl.machine import describe
    from simcoll.algorithms.nccl.tuner import choose

    topo = sc.topology.dgx_h100(2)
    machine = describe(topo, tuple(range(16)))
    for forced in ({}, {"algo": "ring", "proto": "Simple"}):
        ran = dict(sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size,
                               **forced).params)
        chose = choose(machine, "all_reduce", size, **forced)
        assert (ran["algo"], ran["proto"]) == (chose.algo, chose.proto)
        assert nccl_tests_compare.nccl_model(topo, size, ran) == \
            pytest.approx(chose.predicted * 1e6, rel=1e-12)
    ran = dict(sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=size, algo="ring",
                           proto="Simple", channels=2).params)
    fixed = choose(machine, "all_reduce", size, algo="ring", proto="Simple", channels=2)
    assert ran["channels"] == fixed.channels == 2
    assert nccl_tests_compare.nccl_model(topo, size, ran, 2) == \
        pytest.approx(fixed.predicted * 1e6, rel=1e-12)
