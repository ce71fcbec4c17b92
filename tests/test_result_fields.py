"""Fields of a Result as a program reads them: types, the trace's order, the root."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import simcoll as sc


def test_a_run_of_no_time_has_a_float_time():
    for res in (sc.simulate(sc.topology.switch(1), "all_reduce", algorithm="ring", nbytes=16),
                sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="nccl", nbytes=0)):
        assert res.time == 0.0 and type(res.time) is float
        assert json.dumps(res.to_dict()["time"]) == "0.0"


def test_the_trace_is_in_the_order_things_ended():
    # A binomial reduce of 4096 B on 3 ranks whose reductions run at 1 GB/s: each
    # reduction is recorded when it starts, ends 4.096 us later, after messages that
    # arrive meanwhile; the trace lists every event by its end.
    res = sc.simulate(sc.topology.switch(3, reduce_bandwidth=1e9), "reduce",
                      algorithm="binomial", nbytes=4096, root=0, trace=True)
    ends = [event.end for event in res.trace]
    assert ends == sorted(ends)
    assert [e.kind for e in res.trace].count("reduce") == 2


def test_a_rooted_collective_keeps_its_root_through_a_sweep_file(tmp_path):
    res = sc.simulate(sc.topology.switch(4), "broadcast", algorithm="binomial", nbytes=64,
                      root=2)
    assert res.root == 2 and res.to_dict()["root"] == 2
    unrooted = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", nbytes=64)
    assert unrooted.root is None and "root" not in unrooted.to_dict()
    path = tmp_path / "points.jsonl"
    for root in (1, 3):
        sc.sweep(sc.topology.switch, "broadcast", algorithms=["binomial"], ranks=[4],
                 sizes=[64], root=root, save=path, progress=False)
    assert sorted(r.root for r in sc.load_results(path)) == [1, 3]


def test_the_repr_of_an_all_to_allv_leaves_out_its_split_matrix():
    splits = np.full((64, 64), 16)
    res = sc.simulate(sc.topology.switch(64), "all_to_allv", algorithm="direct",
                      nbytes=splits)
    assert res.splits is not None and len(repr(res)) < 1000


def test_load_results_refuses_a_csv_table_saying_what_it_reads(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("collective,algorithm\nall_reduce,ring\n")
    with pytest.raises(sc.InvalidInputError, match=r"is a CSV table .* load_results reads "
                                                   r"the \.jsonl a sweep saves"):
        sc.load_results(path)


def test_results_are_equal_field_by_field_arrays_by_value(tmp_path):
    """Equality compared the fields as tuples, and numpy's arrays raised ValueError: no
    ``a == b``, ``r in results`` or ``results.index(r)`` ever worked, and a sweep read
    back could not be checked against a fresh one."""
    topo = sc.topology.switch(3)
    a = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=12)
    b = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=12)
    other = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=24)
    assert a == b and a != other and a != a.to_dict()
    swept = sc.sweep(sc.topology.switch, "all_reduce", algorithms=["ring"], ranks=[3],
                     sizes=[12, 24], save=tmp_path / "points.jsonl", progress=False)
    assert a in swept and swept.index(other) == 1
    assert sc.load_results(tmp_path / "points.jsonl") == swept
    one = sc.simulate(sc.topology.switch(1), "all_reduce", algorithm="ring", nbytes=8)
    assert one == sc.simulate(sc.topology.switch(1), "all_reduce", algorithm="ring",
                              nbytes=8)
    data = [np.array([1.0, np.nan]), np.array([2.0, 3.0])]
    with_nan = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", data=data)
    assert with_nan == sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring",
                                   data=data)
    with pytest.raises(TypeError, match="unhashable type: 'Result'"):
        hash(a)


def test_a_result_s_dict_is_json_ready_with_numpy_inner_parameters():
    """bucketed's inner_params kept np.int64(2) as given, and json.dumps of to_dict()
    raised TypeError."""
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="bucketed",
                      nbytes=4096, buckets=2, inner_params={"chunks": np.int64(2)})
    assert type(res.params["inner_params"]["chunks"]) is int
    assert json.loads(json.dumps(res.to_dict()))["params"]["inner_params"] == {"chunks": 2}


def test_to_dict_names_the_machine_by_its_topology_hash():
    """to_dict() left the hash out, so two machines of one name read as one (a plot of
    their to_dict()s kept only the later machine's points)."""
    from simcoll.topology.io import to_dict as topology_dict

    fast, slow = (sc.simulate(sc.topology.switch(2, bandwidth=bw), "all_reduce",
                              algorithm="ring", nbytes=64) for bw in (100e9, 10e9))
    assert fast.topology == slow.topology
    assert fast.to_dict()["topology_hash"] != slow.to_dict()["topology_hash"]
    # the digest of the whole description, as a sweep's records and `simcoll run --json`
    # give it: SHA-256 of its canonical JSON, 16 hex digits
    described = json.dumps(topology_dict(sc.topology.switch(2, bandwidth=100e9)),
                           sort_keys=True, separators=(",", ":"))
    assert fast.to_dict()["topology_hash"] == hashlib.sha256(described.encode()).hexdigest()[:16]


def _nothing(comm):
    return None
    yield  # a generator function that sends nothing


def test_a_program_runs_dict_names_the_machine_by_its_topology_hash():
    """RunResult.to_dict() (run_program's) carries the same digest as Result.to_dict():
    SHA-256 of the topology's canonical JSON, 16 hex digits; two machines of one name
    get two hashes."""
    from simcoll.topology.io import to_dict as topology_dict

    fast, slow = (sc.run_program(sc.topology.switch(2, bandwidth=bw), _nothing).to_dict()
                  for bw in (100e9, 10e9))
    assert fast["topology"] == slow["topology"]
    described = json.dumps(topology_dict(sc.topology.switch(2, bandwidth=100e9)),
                           sort_keys=True, separators=(",", ":"))
    assert fast["topology_hash"] == hashlib.sha256(described.encode()).hexdigest()[:16]
    assert fast["topology_hash"] != slow["topology_hash"]
    assert json.loads(json.dumps(fast))["topology_hash"] == fast["topology_hash"]
