"""torch.distributed's spellings: ``all_gather_into_tensor``, ``reduce_scatter_tensor`` and
``all_to_all_single`` name all_gather, reduce_scatter and all_to_all, and ``src=`` / ``dst=``
name the root, in ``simulate``, ``comm.collective``, the registry, sweeps and the command
line; results carry the canonical name."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import make_data
from reference import assert_outputs_match, expected_outputs

import simcoll as sc
from simcoll.cli import main

ALIASES = [("all_gather_into_tensor", "all_gather", "ring"),
           ("reduce_scatter_tensor", "reduce_scatter", "ring"),
           ("all_to_all_single", "all_to_all", "pairwise")]
ROOTS = [("broadcast", "src", "binomial"), ("scatter", "src", "binomial"),
         ("reduce", "dst", "binomial"), ("gather", "dst", "binomial")]


def topo(p):
    return sc.topology.switch(p, bandwidth=10 * sc.GB, latency=1 * sc.us)


@pytest.mark.parametrize("alias, name, algorithm", ALIASES)
@pytest.mark.parametrize("p", [3, 4])
def test_an_alias_runs_the_collective_it_names(alias, name, algorithm, p):
    data = make_data(p, 4 * p + 1, "int32")
    res = sc.simulate(topo(p), alias, algorithm=algorithm, data=data)
    assert res.collective == name and res.correct
    assert_outputs_match(res, data, sc.ReduceOp.SUM)
    same = sc.simulate(topo(p), name, algorithm=algorithm, data=data)
    assert res.time == same.time and res.messages == same.messages
    np.testing.assert_array_equal(res.bytes_sent, same.bytes_sent)
    assert res.algbw == same.algbw and res.busbw == same.busbw
    assert res.to_dict()["collective"] == name
    # the registry answers for the alias as for the name
    assert sc.list_algorithms(alias) == sc.list_algorithms(name)
    assert sc.get_algorithm(alias, algorithm) is sc.get_algorithm(name, algorithm)
    # and the cost models: the same figures under either name
    model = dict(p=p, nbytes=4096, alpha=1e-6, beta=1e-9)
    assert sc.cost.predict(alias, algorithm, **model) == sc.cost.predict(name, algorithm,
                                                                         **model)
    assert sc.cost.lower_bound(alias, **model) == sc.cost.lower_bound(name, **model)


@pytest.mark.parametrize("collective, torch_name, algorithm", ROOTS)
def test_src_and_dst_name_the_root(collective, torch_name, algorithm):
    p, root = 5, 3
    data = make_data(p, 11, "int64")
    res = sc.simulate(topo(p), collective, algorithm=algorithm, data=data,
                      **{torch_name: root})
    assert res.correct
    assert_outputs_match(res, data, sc.ReduceOp.SUM, root)
    # and it is that root, not the default 0: rank 3's expected output differs from 0's
    expected = expected_outputs(collective, data, sc.ReduceOp.SUM, root)
    zero = expected_outputs(collective, data, sc.ReduceOp.SUM, 0)
    assert any(e is not None and (z is None or not np.array_equal(e, z))
               for e, z in zip(expected, zero))
    by_root = sc.simulate(topo(p), collective, algorithm=algorithm, data=data, root=root)
    for a, b in zip(res.outputs, by_root.outputs):
        if b is not None:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs, match", [
    ({"collective": "broadcast", "root": 1, "src": 2},
     r"the root is given twice \(root=1, src=2\); pass root= or src=, not both"),
    ({"collective": "reduce", "root": 0, "dst": 0},
     r"the root is given twice \(root=0, dst=0\)"),
    ({"collective": "broadcast", "dst": 1}, r"dst=1 is not accepted: broadcast takes root= "
                                            r"or src="),
    ({"collective": "gather", "src": 1}, r"src=1 is not accepted: gather takes root= or dst="),
    ({"collective": "all_reduce", "src": 1}, r"src=1 is not accepted: all_reduce has no root"),
    # named as given (it said root=4)
    ({"collective": "scatter", "src": 4}, r"src=4 is not accepted"),
    ({"collective": "allgather"}, r"unknown collective 'allgather' \(did you mean "
                                  r"'all_gather'\?\); known collectives: "
                                  r".*all_gather_into_tensor"),
])
def test_bad_spellings_are_refused_before_the_run(kwargs, match):
    collective = kwargs.pop("collective")
    algorithm = "ring" if collective == "all_reduce" else "binomial"
    with pytest.raises(sc.InvalidInputError, match=match):
        sc.simulate(topo(4), collective, algorithm=algorithm, nbytes=64, **kwargs)


def torch_style(comm, data):
    """A rank program in torch.distributed's words: a flat-tensor all-gather, then a
    broadcast from the last rank with src=, then a reduce to rank 1 with dst=."""
    x = data[comm.rank]
    gathered = yield comm.collective("all_gather_into_tensor", x, algorithm="ring")
    last = yield comm.broadcast(x, src=comm.size - 1)
    summed = yield comm.collective("reduce", x, algorithm="binomial", dst=1)
    return gathered, last, summed


def test_comm_collective_takes_the_same_spellings():
    p = 4
    data = make_data(p, 6, "int64")
    run = sc.run_program(topo(p), torch_style, data)
    for rank, (gathered, last, summed) in enumerate(run.outputs):
        np.testing.assert_array_equal(gathered, np.concatenate(data))
        np.testing.assert_array_equal(last, data[-1])
        if rank == 1:
            np.testing.assert_array_equal(summed, np.sum(data, axis=0))


@pytest.mark.parametrize("call, match", [
    (lambda comm, x: comm.broadcast(x, root=0, src=1), "the root is given twice"),
    (lambda comm, x: comm.collective("gather", x, algorithm="binomial", src=0),
     "src=0 is not accepted: gather takes root= or dst="),
    (lambda comm, x: comm.collective("all_to_all_single", x, algorithm="nope"),
     "unknown algorithm 'nope' for 'all_to_all'"),
])
def test_comm_refuses_bad_spellings(call, match):
    def program(comm):
        call(comm, np.zeros(4))
        yield comm.sleep(0)

    with pytest.raises(sc.AlgorithmError, match=match):
        sc.run_program(topo(2), program)


def test_sweeps_and_the_command_line_take_the_aliases(capsys):
    results = sc.sweep(sc.topology.switch, "reduce_scatter_tensor", algorithms=["ring"],
                       ranks=[2, 4], sizes=[4096], progress=False)
    assert [r.collective for r in results] == ["reduce_scatter", "reduce_scatter"]
    # (p-1)/p of the buffer leaves every rank of a ring reduce-scatter
    assert [int(r.bytes_sent[0]) for r in results] == [2048, 3072]
    assert main(["run", "--collective", "all_to_all_single", "--algorithm", "pairwise",
                 "--topology", "switch:4", "--size", "4K", "-c", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["collective"], record["wrong"], record["nranks"]) == ("all_to_all", 0, 4)
    assert main(["list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    for alias, name, _ in ALIASES:
        assert any(line.split()[0] == name and line.endswith(f"also {alias}")
                   for line in listed if line.startswith("  ") and line.split())
