"""The public API as a user's type checker and a careless call see it: documented usage
passes mypy --strict, and wrong arguments get a SimCollError naming them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import simcoll as sc
import simcoll.numeric as nm

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("mypy") is None and not (Path(sys.executable).parent
                                                           / "mypy").exists(),
                    reason="mypy is a dev dependency")
def test_documented_usage_passes_mypy_strict(tmp_path):
    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent('''
        from __future__ import annotations
        from typing import Any
        import numpy as np
        import simcoll as sc
        from simcoll.comm import Comm
        from simcoll.trace import TraceEvent
        from simcoll.typing import Buffer, Program

        def chain(comm: Comm, x: Buffer, *, root: int, chunks: int) -> Program:
            pieces = comm.split_buffer(x, chunks)
            for k in range(chunks):
                if comm.rank != root:
                    pieces[k] = yield comm.recv(src=(comm.rank - 1) % comm.size)
                yield comm.send(pieces[k], dst=(comm.rank + 1) % comm.size)
            return comm.join(pieces)

        topo = sc.topology.switch(4)
        res = sc.simulate(topo, "broadcast", algorithm="binomial", nbytes=np.int64(1024),
                          root=np.int64(1))
        grid = sc.sweep(lambda p: sc.topology.switch(p), "all_reduce", algorithms=["ring"],
                        ranks=[2, 4], sizes=[1024])
        fig = sc.plot.scaling(grid)
        fig.savefig("x.png")
        events: list[TraceEvent] = []
        # counts from numpy (np.arange) where a builder or a cost query takes a count
        for p in np.arange(2, 5):
            machine = sc.topology.switch(p)
            t = sc.cost.predict("all_reduce", "ring", p=p, nbytes=1024, alpha=1e-6, beta=1e-9)
        nodes = np.int64(2)
        machines = [sc.topology.dgx_h100(nodes), sc.topology.fat_tree(nodes, np.int64(4)),
                    sc.topology.pcie_node(gpus=np.int64(4), gen=np.int64(5)),
                    sc.topology.cluster(nodes, np.int64(2)), sc.topology.ring(np.int64(3))]
        '''))
    mypy = shutil.which("mypy") or str(Path(sys.executable).parent / "mypy")
    # the package's own modules are checked by the project's mypy run (its settings);
    # here only what a user's strict run reports in the user's file
    done = subprocess.run([mypy, "--strict", "--no-incremental", "--follow-imports=silent",
                           str(user)], cwd=tmp_path,
                          capture_output=True, text=True, env={"MYPYPATH": str(ROOT),
                                                               "PATH": "/usr/bin:/bin"})
    errors = [line for line in done.stdout.splitlines()
              if line.split(":")[0].endswith("user.py") and ": error:" in line]
    assert errors == [], "\n".join(errors)
    assert done.returncode == 0 and "Success" in done.stdout, done.stdout[-2000:]


@pytest.mark.parametrize(("call", "words"), [
    (lambda: sc.run_program(sc.topology.switch(2), None),
     "program=None is not a generator function"),
    (lambda: nm.train_reference("job"), "job='job' is not accepted; use a "
                                        "simcoll.numeric.TrainingJob"),
    (lambda: sc.VirtualBuffer(4, "floaty"), "dtype='floaty' is not accepted"),
    (lambda: sc.VirtualBuffer.of(4, "floaty"), "dtype='floaty' is not accepted"),
    (lambda: sc.ReduceOp("median"), "unknown reduction op 'median'"),
])
def test_wrong_arguments_get_a_simcoll_error_naming_them(call, words):
    with pytest.raises(sc.SimCollError, match=words):
        call()


def test_reduce_ops_are_named_in_any_case_as_simulate_reads_them():
    assert sc.ReduceOp("SUM") is sc.ReduceOp.SUM and sc.ReduceOp("prod") is sc.ReduceOp.PRODUCT
    assert sc.ReduceOp("avg") is sc.ReduceOp.AVG
    assert np.array_equal(sc.ReduceOp("MAX")(np.array([1, 5]), np.array([3, 2])), [3, 5])


def test_a_virtual_buffer_of_a_dtype_numpy_refuses_with_a_value_error():
    dup = [("a", "f4"), ("a", "f4")]
    for make in (sc.VirtualBuffer, sc.VirtualBuffer.of):
        with pytest.raises(sc.InvalidInputError, match=r"dtype=.* is not accepted: "
                                                       r"field 'a' occurs more than once"):
            make(4, dup)
