"""Random hand-built machines for property tests, and an independent max-min reference.

The machines are built with the public ``Topology`` API only: trees of switches, rings with
chords, leaf-spine fabrics with several equal-cost paths, and random connected graphs,
with uneven bandwidths and latencies (zero included) and, sometimes, server hosts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import simcoll as sc
from simcoll.topology.graph import Route

BANDWIDTHS = [1e9, 2.5e9, 1e10, 4e10, 1e11]
LATENCIES = [0.0, 0.0, 1e-7, 1e-6, 3e-6]
KINDS = ("tree", "cycle", "leaf_spine", "graph")


def _link(topo: sc.Topology, rng: np.random.Generator, u: str, v: str) -> None:
    topo.add_link(u, v, bandwidth=float(rng.choice(BANDWIDTHS)),
                  latency=float(rng.choice(LATENCIES)))


def _chords(topo: sc.Topology, rng: np.random.Generator, names: list[str], count: int) -> None:
    """Up to ``count`` extra links between random pairs not linked yet."""
    linked = {frozenset((link.u, link.v)) for link in topo.links}
    for _ in range(count if len(names) > 1 else 0):
        a, b = (names[i] for i in rng.choice(len(names), 2, replace=False))
        if frozenset((a, b)) not in linked:
            linked.add(frozenset((a, b)))
            _link(topo, rng, a, b)


def random_machine(kind: str, seed: int, *, gpus: int | None = None,
                   hosts: int = 0) -> sc.Topology:
    """A random connected machine of ``kind`` with ``gpus`` GPUs (2..9 if not given)."""
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 10)) if gpus is None else gpus
    topo = sc.Topology(f"{kind}-{seed}")
    gamma_free = rng.random() < 0.5
    names = [topo.add_gpu(reduce_bandwidth=np.inf if gamma_free
                          else float(rng.choice(BANDWIDTHS)) * 4) for _ in range(p)]
    names += [topo.add_host(reduce_bandwidth=float(rng.choice(BANDWIDTHS)) * 4)
              for _ in range(hosts)]
    if kind == "tree":
        switches = [topo.add_switch()]
        for _ in range(int(rng.integers(0, 4))):
            s = topo.add_switch()
            _link(topo, rng, s, switches[int(rng.integers(len(switches)))])
            switches.append(s)
        attached: list[str] = []
        for name in names:
            # A device hangs below a switch or below a device already placed (then that
            # device forwards its traffic), so routes of several hops appear.
            parents = switches + attached
            _link(topo, rng, name, parents[int(rng.integers(len(parents)))])
            attached.append(name)
    elif kind == "cycle":
        for a, b in zip(names, names[1:]):
            _link(topo, rng, a, b)
        if len(names) > 2:
            _link(topo, rng, names[-1], names[0])
        _chords(topo, rng, names, int(rng.integers(0, 3)))
    elif kind == "leaf_spine":
        leaves = [topo.add_switch() for _ in range(int(rng.integers(2, 4)))]
        spines = [topo.add_switch() for _ in range(int(rng.integers(1, 4)))]
        for leaf in leaves:
            for spine in spines:
                _link(topo, rng, leaf, spine)
        for i, name in enumerate(names):
            _link(topo, rng, name, leaves[i % len(leaves)])
    elif kind == "graph":
        order = list(rng.permutation(len(names)))
        for i in range(1, len(order)):
            _link(topo, rng, names[order[i]], names[order[int(rng.integers(i))]])
        _chords(topo, rng, names, int(rng.integers(0, len(names))))
    else:
        raise ValueError(kind)
    topo.validate()
    return topo


def random_nodes(seed: int) -> sc.Topology:
    """A random machine of 1 to 5 servers (``node=``) of 1 to 5 GPUs each, sometimes all
    of one size: each server's GPUs on one switch over NVLink or PCIe (an NVLink SHARP
    switch that reduces, for all servers at once, in two machines of five), 1 to 3 NICs
    per server hanging off a GPU or the server's switch, every NIC on one network switch
    (a SHARP switch that reduces, in three machines of ten), uneven bandwidths and
    latencies: the shapes NCCL's tuner and algorithms meet on hand-built machines."""
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 6))
    sizes = [int(rng.integers(1, 6)) for _ in range(nodes)]
    if rng.random() < 0.5:
        sizes = [sizes[0]] * nodes
    nvls = rng.random() < 0.4
    topo = sc.Topology(f"nodes-{seed}")
    core = topo.add_switch("core", reduce_bandwidth=1e12 if rng.random() < 0.3 else None)
    for node, size in enumerate(sizes):
        kind = "nvlink" if nvls or rng.random() < 0.5 else "pcie"
        switch = topo.add_switch(f"sw{node}", reduce_bandwidth=float(rng.choice(
            [5e11, 2e12])) if nvls else None)
        nics = [topo.add_nic(f"nic{node}_{k}") for k in range(int(rng.integers(1, 4)))]
        gpus = [topo.add_gpu(node=node, reduce_bandwidth=float(rng.choice(
            [np.inf, 1e11, 1e12]))) for _ in range(size)]
        for gpu in gpus:
            topo.add_link(gpu, switch, bandwidth=float(rng.choice([2.4e10, 1e11, 3e11])),
                          latency=float(rng.choice([0, 5e-7, 1e-6])), kind=kind)
        for k, nic in enumerate(nics):
            host = gpus[k % len(gpus)] if rng.random() < 0.5 else switch
            topo.add_link(nic, host, bandwidth=float(rng.choice([2e10, 5e10])),
                          latency=1e-7, kind="pcie")
            topo.add_link(nic, core, bandwidth=float(rng.choice([1.25e10, 2.5e10, 5e10])),
                          latency=float(rng.choice([1e-6, 2e-6])), kind="ib")
    topo.validate()
    return topo


def maxmin_arrivals(topo: sc.Topology, flows: list[tuple[float, int, int, int]],
                    rates_of: Callable[[list[Route], list[float]], list[float]] | None = None
                    ) -> list[float]:
    """Arrival times of ``(start, src, dst, nbytes)`` flows under the flow model, computed
    the slow, obvious way: a fluid simulation that, between consecutive events, gives
    every draining flow its max-min fair rate by progressive filling over all links
    (``rates_of(routes, capacity)``, one rate per route, for another sharing rule).
    A flow waits its route's latency from its start, then drains."""
    capacity = [link.bandwidth if direction == 0 or link.back is None else link.back
                for link in topo.links for direction in (0, 1)]
    routes = [topo.route(src, dst) for _, src, dst, _ in flows]
    begins = [start + route.latency for (start, *_), route in zip(flows, routes)]
    remaining = [float(n) for *_, n in flows]
    arrival: list[float | None] = [None] * len(flows)
    now = 0.0
    while any(a is None for a in arrival):
        draining = [i for i, a in enumerate(arrival) if a is None and begins[i] <= now]
        for i in draining:
            if remaining[i] <= 0:
                arrival[i] = now
        draining = [i for i in draining if arrival[i] is None]
        if rates_of is None:
            rates = _fair_rates({i: routes[i].links for i in draining}, capacity)
        else:
            rates = dict(zip(draining, rates_of([routes[i] for i in draining], capacity)))
        upcoming = [begins[i] for i, a in enumerate(arrival) if a is None and begins[i] > now]
        ends = {i: now + remaining[i] / rates[i] for i in draining}
        if not upcoming and not ends:
            continue
        nxt = min(upcoming + list(ends.values()))
        for i in draining:
            if ends[i] <= nxt * (1 + 1e-12):
                remaining[i] = 0.0
            else:
                remaining[i] -= rates[i] * (nxt - now)
        now = nxt
    return [float(a) for a in arrival]  # type: ignore[arg-type]


def _fair_rates(routes: dict[int, tuple[int, ...]], capacity: list[float]) -> dict[int, float]:
    """Progressive filling: raise every unfrozen flow's rate together; freeze the flows of
    each link that fills up."""
    rates: dict[int, float] = {}
    left = {d: capacity[d] for links in routes.values() for d in links}
    level = 0.0
    while len(rates) < len(routes):
        users = {d: [i for i, links in routes.items() if d in links and i not in rates]
                 for d in left}
        step = min((left[d] / len(u) for d, u in users.items() if u))
        level += step
        for d, u in users.items():
            left[d] -= step * len(u)
        full = {d for d, u in users.items() if u and left[d] <= 1e-9 * capacity[d]}
        for d in full:
            for i in users[d]:
                rates.setdefault(i, level)
    return rates


def last_activity(res: sc.Result) -> float:
    """The last thing that happened in a traced run: a rank's return or a message's
    arrival (what ``Result.time`` must be)."""
    ends = [e.end for e in res.trace if e.kind == "message"]
    return max([*res.rank_times.tolist(), *ends])


def planned_sends(comm, x, *, plan):
    """Rank-level script: ``plan`` holds (start, src, dst, nbytes); each rank sends and
    receives its messages, in plan order."""
    for start, src, dst, nbytes in plan:
        if comm.rank == src:
            yield comm.compute(start - comm.now) if start > comm.now else comm.compute(0)
            yield comm.send(sc.VirtualBuffer.of(nbytes, np.uint8), dst)
        elif comm.rank == dst:
            yield comm.recv(src)
    return x
