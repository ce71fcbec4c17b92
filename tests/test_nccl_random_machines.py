"""NCCL on random hand-built machines of several servers (``machines.random_nodes``):
every collective, with NCCL's own choice or a named algorithm, protocol and channel count,
on every network model, in data mode against numpy, and against the data-free run of the
same sizes (time, parameters, traffic), and never faster than its busiest link allows.

Running every collective this way on a few hundred such machines found the bugs fixed on
2026-12-04 (tests/test_nccl_hand_built.py): a node of one GPU taken for the machine's
inside, NVLS on nodes of one GPU or of different sizes, NVSwitch programs on SHARP
switches and reducing NICs, a lone GPU's NVLS switch left waiting, and a message with no
route around failed links.
"""

from __future__ import annotations

import numpy as np
import pytest
from machines import random_nodes
from reference import assert_outputs_match

import simcoll as sc

ALGOS = {"all_reduce": ["ring", "tree", "nvls", "nvls_tree", "collnet_direct",
                        "collnet_chain"],
         "reduce_scatter": ["ring", "nvls", "collnet_direct", "pat"],
         "all_gather": ["ring", "nvls", "collnet_direct", "pat"],
         "broadcast": ["ring"], "reduce": ["ring"], "all_to_all": ["p2p"]}


@pytest.mark.parametrize("seed", range(64))
def test_every_collective_on_random_servers(seed):
    topo = random_nodes(seed)
    p = topo.nranks
    rng = np.random.default_rng(1000 + seed)
    enable = np.random.default_rng(5000 + seed)  # collnet for reduce_scatter, all_gather
    costs = np.random.default_rng(9000 + seed)   # a run's costs beyond NCCL's model
    capacity = {}
    for link in topo.links:
        capacity[(link.u, link.v)] = capacity[(link.v, link.u)] = link.bandwidth
    for collective, algos in ALGOS.items():
        params = {}
        if rng.random() < 0.3:
            params["proto"] = str(rng.choice(
                ["LL", "Simple"] + ([] if collective == "all_to_all" else ["LL128"])))
        if rng.random() < 0.3:
            params["channels"] = int(rng.integers(1, 5))
        if rng.random() < 0.4:
            params["algo"] = str(rng.choice(algos))
        if collective == "all_reduce" and rng.random() < 0.3:
            params["collnet"] = 1
        if collective in ("reduce_scatter", "all_gather") and enable.random() < 0.3:
            params["collnet"] = 1
        if costs.random() < 0.3:
            params["step_latency_scale"] = float(costs.uniform(0.0, 4.0))
        count = int(rng.choice([1, 3, 7 * p + 3, int(rng.integers(1, 5000))]))
        if collective == "reduce_scatter":
            count = max(1, count // p) * p
        kwargs = {"root": int(rng.integers(p))} if sc.COLLECTIVES[collective].rooted else {}
        if sc.COLLECTIVES[collective].reduces:
            kwargs["op"] = str(rng.choice(["sum", "max", "min"]))
        network = str(rng.choice(["flow", "flow", "analytical", "flow_rtt"]))
        data = [np.random.default_rng(31 * seed + r).integers(-100, 100, count)
                for r in range(p)]
        try:
            res = sc.simulate(topo, collective, algorithm="nccl", data=data,
                              network=network, **kwargs, **params)
        except sc.InvalidInputError as refused:
            # Only a named algorithm may be refused (one that cannot run here, or a
            # flow_rtt run over a route of no latency), with the reason; NCCL's own
            # choice on the flow model then runs.
            assert "algo" in params or network == "flow_rtt", refused
            params.pop("algo", None)
            network = "flow"
            res = sc.simulate(topo, collective, algorithm="nccl", data=data,
                              network=network, **kwargs, **params)
        assert res.correct, (collective, params)
        # res.correct is simcoll's own check: numpy's reference too
        assert_outputs_match(res, data, sc.ReduceOp(kwargs.get("op", "sum")),
                             root=kwargs.get("root", 0))
        free = sc.simulate(topo, collective, algorithm="nccl", nbytes=count * 8,
                           dtype=np.int64, network=network, **kwargs, **params)
        assert free.time == pytest.approx(res.time, rel=1e-12, abs=0)
        assert free.params == res.params
        assert list(free.bytes_sent) == list(res.bytes_sent)
        assert free.link_bytes == res.link_bytes
        if network != "analytical":
            busiest = max(b / capacity[key] for key, b in res.link_bytes.items())
            assert res.time >= busiest * (1 - 1e-12)


@pytest.mark.parametrize("seed", range(16))
def test_a_launch_overhead_shifts_every_collective_on_random_servers(seed):
    # Everything happens later by the overhead, and nothing else changes: NCCL's choice,
    # the messages, the bytes on every link. A communicator of one GPU launches nothing
    # (simcoll, like NCCL, gives its collectives no time).
    topo = random_nodes(seed)
    rng = np.random.default_rng(7000 + seed)
    for collective in ALGOS:
        count = int(rng.integers(1, 1 << 16)) * topo.nranks
        kwargs = {"root": int(rng.integers(topo.nranks))} \
            if sc.COLLECTIVES[collective].rooted else {}
        overhead = float(rng.uniform(1e-6, 1e-4))
        plain = sc.simulate(topo, collective, algorithm="nccl", nbytes=4 * count, **kwargs)
        late = sc.simulate(topo, collective, algorithm="nccl", nbytes=4 * count, **kwargs,
                           launch_overhead=overhead)
        shift = overhead if topo.nranks > 1 else 0.0  # one rank: nothing is launched
        assert late.time - plain.time == pytest.approx(shift, rel=1e-9), collective
        assert late.params == {**plain.params, "launch_overhead": overhead}
        assert late.messages == plain.messages
        assert late.link_bytes == plain.link_bytes


@pytest.mark.parametrize("seed", range(24))
def test_started_collectives_on_random_servers(seed):
    """Rank programs split the GPUs into two random groups; each group starts an NCCL
    all_reduce (NCCL's choice, or a named algorithm, NVLS and NVLS-tree included, whose
    switch programs start with it) while the whole machine starts an all_gather: every
    output is numpy's, or a named algorithm that cannot run is refused with the
    reason."""
    topo = random_nodes(seed)
    p = topo.nranks
    if p < 2:
        return
    rng = np.random.default_rng(2000 + seed)
    order = [int(r) for r in rng.permutation(p)]
    cut = int(rng.integers(1, p))
    groups = [sorted(order[:cut]), sorted(order[cut:])]
    params = {}
    if rng.random() < 0.5:
        params["algo"] = str(rng.choice(["nvls", "nvls_tree", "ring", "tree"]))
    count = int(rng.choice([1, 5, 300, 20000]))
    x = [np.random.default_rng(7 * seed + r).integers(-50, 50, count) for r in range(p)]

    def program(comm):
        group = comm.group(groups[0] if comm.rank in groups[0] else groups[1])
        summed = group.all_reduce(x[comm.rank], algorithm="nccl", **params)
        gathered = comm.all_gather(x[comm.rank], algorithm="nccl")
        return (yield summed), (yield gathered)

    try:
        res = sc.run_program(topo, program)
    except sc.AlgorithmError as refused:
        assert "algo" in params and ("cannot run all_reduce" in str(refused) or (
            "can run all_reduce" in str(refused) and "NVLS graph has 1 channel" in str(refused))
            ), refused
        return
    for r in range(p):
        summed, gathered = res.outputs[r]
        members = groups[0] if r in groups[0] else groups[1]
        np.testing.assert_array_equal(summed, sum(x[q] for q in members))
        np.testing.assert_array_equal(gathered, np.concatenate(x))
