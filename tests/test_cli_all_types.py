"""``simcoll run -d all`` and ``-o all``: nccl-tests' whole type and op loops in one table,
which ``sc.nccl_tests.parse`` and ``simcoll compare`` read back row by row."""

from __future__ import annotations

import pytest

import simcoll as sc
from simcoll.cli import main

# nccl-tests' test_typenames and their element sizes, in its order
TYPES = (("int8", 1), ("uint8", 1), ("int32", 4), ("uint32", 4), ("int64", 8), ("uint64", 8),
         ("half", 2), ("float", 4), ("double", 8), ("bfloat16", 2), ("f8e4m3", 1),
         ("f8e5m2", 1))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["run", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_every_type_in_nccl_tests_order_each_checked(capsys):
    pytest.importorskip("ml_dtypes")
    status, out, _ = run(capsys, "--topology", "switch:4", "-b", "1K", "-e", "4K", "-f", "4",
                         "-d", "all", "-c", "1")
    assert status == 0
    table = sc.nccl_tests.parse(out)
    expected = [(name, size, size // itemsize) for name, itemsize in TYPES
                for size in (1024, 4096)]
    assert [(r.type, r.size, r.count) for r in table.rows] == expected
    assert {r.measurement().wrong for r in table.rows} == {0}
    # a data-free ring moves the same bytes whatever their type: one time per size
    assert len({(r.size, r.out_of_place.time_us) for r in table.rows}) == 2


def test_every_op_for_each_type_and_what_cannot_run_left_out_with_why(capsys):
    pytest.importorskip("ml_dtypes")
    status, out, _ = run(capsys, "--topology", "dgx_a100:nodes=1", "--algorithm", "nccl",
                         "--size", "1K", "-d", "all", "-o", "all")
    assert status == 0
    ops = ("sum", "prod", "max", "min", "avg")
    rows = sc.nccl_tests.parse(out).rows
    # NCCL reduces 8-bit floats only from Hopper on: those ten parts are left out
    assert [(r.type, r.redop) for r in rows] == [(name, op) for name, _ in TYPES[:10]
                                                 for op in ops]
    left = [line for line in out.splitlines() if line.startswith("# left out: ")]
    assert [line.split()[3:5] for line in left[:-1]] == [[t, o + ":"] for t in ("f8e4m3", "f8e5m2")
                                                         for o in ops]
    assert all("only on Hopper and newer GPUs" in line for line in left[:-1])
    assert left[-1].startswith("# left out: mulsum: a pre-multiplied sum")
    # with --csv and --json the same lines go to standard error (none did: a type left
    # the rows without a word)
    for form in ("--csv", "--json"):
        status, out, err = run(capsys, "--topology", "dgx_a100:nodes=1", "--algorithm",
                               "nccl", "--size", "1K", "-d", "all", "-o", "all", form)
        assert status == 0 and "# left out" not in out
        assert [line for line in err.splitlines() if line.startswith("# left out: ")] == left


def test_a_type_named_alone_that_cannot_run_is_still_an_error(capsys):
    pytest.importorskip("ml_dtypes")
    status, _, err = run(capsys, "--topology", "dgx_a100:nodes=1", "--algorithm", "nccl",
                         "--size", "1K", "-d", "f8e4m3")
    assert status == 2 and "only on Hopper and newer GPUs" in err
    # the way to Hopper as the command line takes it (it said pass arch='hopper')
    assert "--param arch=hopper on the command line" in err
    status, _, err = run(capsys, "--topology", "dgx_a100:nodes=1", "--algorithm", "nccl",
                         "--size", "1K", "-d", "f8e4m3", "--param", "arch=hopper")
    assert status == 0, err


def test_op_all_on_a_collective_that_does_not_reduce_is_ignored_as_nccl_tests_does(capsys):
    status, out, _ = run(capsys, "--collective", "all_gather", "-o", "all")
    assert status == 0
    assert "# -o all: all_gather does not reduce; ignored, as nccl-tests ignores it" in out
    assert {row.redop for row in sc.nccl_tests.parse(out).rows} == {"none"}


def test_every_root_in_turn(capsys):
    status, out, _ = run(capsys, "--topology", "switch:4", "--collective", "reduce",
                         "--size", "1K", "-r", "all", "-o", "all", "-c", "1")
    assert status == 0
    rows = sc.nccl_tests.parse(out).rows
    ops = ("sum", "prod", "max", "min", "avg")
    assert [(r.redop, r.root) for r in rows] == [(op, root) for op in ops for root in range(4)]
    assert {r.measurement().wrong for r in rows} == {0}
    status, out, _ = run(capsys, "--topology", "switch:4", "-r", "all")
    assert status == 0 and "# -r all: all_reduce has no root; ignored" in out
    assert {row.root for row in sc.nccl_tests.parse(out).rows} == {-1}
    status, _, err = run(capsys, "--topology", "switch:4", "--collective", "broadcast",
                         "-r", "first")
    assert status == 2 and "'first' is not a rank (an integer) or all" in err


def test_op_all_is_read_in_any_case_as_every_reduction_name_is(capsys):
    # -o SUM ran as sum, but -o ALL was refused as an unknown reduction
    status, out, err = run(capsys, "--topology", "switch:4", "--size", "1K", "-o", "ALL")
    assert status == 0, err
    assert [r.redop for r in sc.nccl_tests.parse(out).rows] == ["sum", "prod", "max", "min",
                                                               "avg"]
    status, out, err = run(capsys, "--topology", "switch:4", "--size", "1K", "-o", "Max")
    assert status == 0, err
    assert [r.redop for r in sc.nccl_tests.parse(out).rows] == ["max"]


def _err(capsys, *argv):
    status = main(list(argv))
    return status, capsys.readouterr().err


def test_run_names_an_unknown_reduction_as_typed(capsys):
    """_op_or_all reads only 'all' in any case; anything else goes on as typed, and the
    refusal quotes it so: 'FOO', not 'foo'."""
    status, err = _err(capsys, "run", "--topology", "switch:4", "--collective", "all_reduce",
                       "--algorithm", "ring", "--size", "1K", "-o", "FOO")
    assert status == 2 and "--op 'FOO' is not accepted" in err


def test_sweep_which_has_no_all_refuses_ALL_as_typed(capsys):
    """Only `run` takes -o all (every=True); sweep reads -o as typed: 'ALL' is refused
    under its own spelling."""
    status, err = _err(capsys, "sweep", "--topology", "switch", "--ranks", "4", "--sizes",
                       "1K", "--collective", "all_reduce", "--algorithm", "ring", "-o", "ALL")
    assert status == 2 and "--op 'ALL' is not accepted" in err
