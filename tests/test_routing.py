"""How a topology chooses between equally short routes (``Topology.routing``): the first
links added ("link_order") or a hash per route and device ("ecmp"). Expectations come
from a breadth-first search and the documented hash written here, on hand-built
leaf-spines, tori and random graphs, and from times worked out by hand."""

from __future__ import annotations

import struct
import zlib
from collections import deque

import numpy as np
import pytest

import simcoll as sc
from simcoll.comm import Comm
from simcoll.errors import NoRouteError

GB = 10**9


def leaf_spine(leaves: int, spines: int, per_leaf: int, *, routing: str = "link_order",
               up: float = 50 * GB) -> sc.Topology:
    """``leaves`` leaves of ``per_leaf`` GPUs (100 GB/s), every leaf linked to every spine
    at ``up``; GPUs first, then leaves, then spines, in that order."""
    topo = sc.Topology("leaf-spine", routing=routing)
    gpus = [topo.add_gpu(node=i // per_leaf) for i in range(leaves * per_leaf)]
    leaf = [topo.add_switch(f"leaf{i}") for i in range(leaves)]
    spine = [topo.add_switch(f"spine{i}") for i in range(spines)]
    for i, gpu in enumerate(gpus):
        topo.add_link(gpu, leaf[i // per_leaf], bandwidth=100 * GB, latency=1e-6)
    for lf in leaf:
        for sp in spine:
            topo.add_link(lf, sp, bandwidth=up, latency=1e-6)
    return topo


def adjacency(topo: sc.Topology) -> dict[str, list[tuple[str, int]]]:
    """Each device's neighbours with the directed link to them, in the order links were
    added (directed link 2k runs u -> v of link k, 2k + 1 back)."""
    adj: dict[str, list[tuple[str, int]]] = {d.name: [] for d in topo.devices}
    for k, link in enumerate(topo.links):
        adj[link.u].append((link.v, 2 * k))
        adj[link.v].append((link.u, 2 * k + 1))
    return adj


def hops_to(topo: sc.Topology, dst: str, avoid: frozenset[int] = frozenset()) -> dict[str, int]:
    adj = adjacency(topo)
    hops = {dst: 0}
    queue = deque([dst])
    while queue:
        node = queue.popleft()
        for nbr, d in adj[node]:
            if nbr not in hops and d >> 1 not in avoid:
                hops[nbr] = hops[node] + 1
                queue.append(nbr)
    return hops


def ecmp_reference(topo: sc.Topology, src: int, dst: int,
                   avoid: frozenset[int] = frozenset()) -> tuple[int, ...]:
    """The documented choice: at each device, the links leading on a shortest path, in
    the order they were added, picked by CRC-32 of (source, destination, device) as
    little-endian 64-bit device indexes, modulo their number."""
    index = {d.name: i for i, d in enumerate(topo.devices)}
    a, b = topo.endpoint_name(src), topo.endpoint_name(dst)
    hops, adj = hops_to(topo, b, avoid), adjacency(topo)
    path, node = [], a
    while node != b:
        onward = [(n, d) for n, d in adj[node]
                  if hops.get(n, -1) == hops[node] - 1 and d >> 1 not in avoid]
        key = struct.pack("<3q", index[a], index[b], index[node])
        node, d = onward[zlib.crc32(key) % len(onward)]
        path.append(d)
    return tuple(path)


def spine_of(topo: sc.Topology, route: sc.topology.Route) -> str:
    (spine,) = {end for d in route.links for end in topo.directed_link(d)
                if end.startswith("spine")}
    return spine


def random_graph(seed: int, routing: str) -> sc.Topology:
    """A connected graph with cycles: a random spanning tree of GPUs and switches plus
    extra links, uneven bandwidths and latencies."""
    rng = np.random.default_rng(seed)
    topo = sc.Topology(f"random{seed}", routing=routing)
    names = [topo.add_gpu() for _ in range(int(rng.integers(3, 7)))]
    names += [topo.add_switch() for _ in range(int(rng.integers(2, 6)))]
    order = list(rng.permutation(len(names)))
    pairs = {frozenset((names[order[i]], names[order[int(rng.integers(0, i))]]))
             for i in range(1, len(order))}
    while len(pairs) < len(names) - 1 + int(rng.integers(2, 7)):
        u, v = rng.choice(len(names), size=2, replace=False)
        pairs.add(frozenset((names[u], names[v])))
    for pair in sorted(pairs, key=sorted):
        u, v = sorted(pair)
        topo.add_link(u, v, bandwidth=float(rng.uniform(1, 100)) * GB,
                      latency=float(rng.uniform(0, 2e-6)))
    return topo


def test_link_order_sends_every_route_between_leaves_through_the_first_spine():
    topo = leaf_spine(4, 3, 2)
    spines = {spine_of(topo, topo.route(s, d))
              for s in range(8) for d in range(8) if s // 2 != d // 2}
    assert spines == {"spine0"}


@pytest.mark.parametrize("build", [
    lambda r: leaf_spine(3, 4, 3, routing=r),
    lambda r: sc.topology.torus((4, 3), routing=r),
    lambda r: sc.topology.torus((2, 4, 3), routing=r),
    lambda r: sc.topology.ring(8, routing=r),
    *[lambda r, s=seed: random_graph(s, r) for seed in range(12)],
])
def test_ecmp_routes_are_the_documented_hash_over_shortest_paths(build):
    topo, plain = build("ecmp"), build("link_order")
    for src in range(topo.nranks):
        hops = hops_to(topo, topo.endpoint_name(src))
        for dst in range(topo.nranks):
            route = topo.route(src, dst)
            assert route.links == ecmp_reference(topo, src, dst)
            assert len(route.links) == hops[topo.endpoint_name(dst)]
            assert len(plain.route(src, dst).links) == len(route.links)
            ends = [topo.directed_link(d) for d in route.links]
            assert all(x[1] == y[0] for x, y in zip(ends, ends[1:]))
            if ends:
                assert ends[0][0] == topo.endpoint_name(src)
                assert ends[-1][1] == topo.endpoint_name(dst)
            assert route.latency == pytest.approx(
                sum(topo.links[d >> 1].latency for d in route.links), rel=1e-12, abs=0)


def test_ecmp_spreads_routes_between_leaves_over_every_spine():
    topo = leaf_spine(8, 4, 4, routing="ecmp")
    count = dict.fromkeys(("spine0", "spine1", "spine2", "spine3"), 0)
    for s in range(32):
        for d in range(32):
            if s // 4 != d // 4:
                count[spine_of(topo, topo.route(s, d))] += 1
    # 896 routes over 4 spines: 224 each if even; a hash gives each 15-35% of them
    assert sum(count.values()) == 32 * 28
    assert all(0.15 * 896 < c < 0.35 * 896 for c in count.values()), count


def test_ecmp_routes_around_failed_links_on_the_remaining_shortest_paths():
    topo = leaf_spine(2, 3, 2, routing="ecmp")
    spine0 = frozenset(k for k, link in enumerate(topo.links) if link.v == "spine0")
    for s, d in [(0, 2), (1, 3), (2, 0), (3, 1), (0, 3)]:
        route = topo.route(s, d, avoid=spine0)
        assert route.links == ecmp_reference(topo, s, d, spine0)
        assert spine_of(topo, route) != "spine0"


def test_setting_routing_drops_routes_computed_the_other_way_and_the_spec():
    topo = sc.topology.from_spec("torus:4x4")
    before = {(s, d): topo.route(s, d).links for s in range(16) for d in range(16)}
    topo.routing = "ecmp"
    after = {(s, d): topo.route(s, d).links for s in range(16) for d in range(16)}
    assert topo.spec is None
    assert after == {(s, d): ecmp_reference(topo, s, d) for s in range(16) for d in range(16)}
    assert after != before
    topo.routing = "link_order"
    assert {(s, d): topo.route(s, d).links for s in range(16) for d in range(16)} == before


def _two_sends(comm: Comm, pairs):
    """Every (src, dst) of ``pairs`` sends 1 GB at once."""
    events = [comm.send(sc.VirtualBuffer.of(GB, np.uint8), dst, tag=i)
              for i, (src, dst) in enumerate(pairs) if src == comm.rank]
    events += [comm.recv(src, tag=i) for i, (src, dst) in enumerate(pairs) if dst == comm.rank]
    for event in events:
        yield event


def test_two_flows_between_leaves_share_a_spine_uplink_only_where_routed_together():
    # Four 1 us hops; 1 GB alone on a 50 GB/s uplink takes 20 ms, two on one 40 ms. The
    # GPUs' 100 GB/s links carry one flow each.
    plain, ecmp = leaf_spine(2, 2, 3), leaf_spine(2, 2, 3, routing="ecmp")
    shared = []
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        for x, y in [(3, 4), (4, 3), (3, 5), (5, 3), (4, 5), (5, 4)]:
            pairs = [(a, x), (b, y)]
            assert sc.run_program(plain, _two_sends, pairs).time == \
                pytest.approx(4e-6 + 2 * GB / (50 * GB), rel=1e-12)
            ways = {ecmp_reference(ecmp, s, d)[1] for s, d in pairs}  # leaf0 -> a spine
            shared.append(len(ways) == 1)
            assert sc.run_program(ecmp, _two_sends, pairs).time == \
                pytest.approx(4e-6 + (2 if shared[-1] else 1) * GB / (50 * GB), rel=1e-12)
    assert 0 < sum(shared) < len(shared)  # the hash put some pairs together, some apart


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".toml"])
def test_files_keep_the_routing(tmp_path, suffix):
    topo = leaf_spine(2, 2, 2, routing="ecmp")
    sc.topology.save(topo, tmp_path / f"m{suffix}")
    again = sc.topology.load(tmp_path / f"m{suffix}")
    assert again.routing == "ecmp"
    assert [again.route(s, d).links for s in range(4) for d in range(4)] == \
        [topo.route(s, d).links for s in range(4) for d in range(4)]
    plain = leaf_spine(2, 2, 2)
    sc.topology.save(plain, tmp_path / f"p{suffix}")
    assert "routing" not in (tmp_path / f"p{suffix}").read_text()
    assert sc.topology.load(tmp_path / f"p{suffix}").routing == "link_order"


def test_bad_routing_is_refused_naming_the_value_and_the_choices(tmp_path):
    with pytest.raises(sc.TopologyError, match=r"routing='spray' is not accepted; use one "
                                               r"of 'link_order', 'ecmp'"):
        sc.Topology("x", routing="spray")
    topo = sc.Topology("x")
    with pytest.raises(sc.TopologyError, match="routing=None is not accepted"):
        topo.routing = None  # type: ignore[assignment]
    assert topo.routing == "link_order"
    path = tmp_path / "m.yaml"
    path.write_text("routing: adaptive\ndevices: [{name: g, kind: gpu}]\nlinks: []\n")
    with pytest.raises(sc.TopologyError, match=r"routing.*expected one of link_order, ecmp, "
                                               r"got 'adaptive'"):
        sc.topology.load(path)
    with pytest.raises(sc.TopologyError, match="routing='spray'"):
        sc.topology.from_spec("ring:6,routing=spray")


def tree_reference(topo: sc.Topology, src: int, dst: int) -> tuple[int, ...]:
    """The documented multicast tree: from the destination back to the source, each
    device's way in is one of the links arriving on a shortest path from the source (in
    the order links were added), picked by CRC-32 of (source, device) modulo their
    number."""
    index = {d.name: i for i, d in enumerate(topo.devices)}
    a, b = topo.endpoint_name(src), topo.endpoint_name(dst)
    hops, adj = hops_to(topo, a), adjacency(topo)
    path, node = [], b
    while node != a:
        inward = [(n, d ^ 1) for n, d in adj[node] if hops.get(n, -1) == hops[node] - 1]
        node, d = inward[zlib.crc32(struct.pack("<2q", index[a], index[node])) % len(inward)]
        path.append(d)
    return tuple(path[::-1])


@pytest.mark.parametrize("build", [
    lambda: leaf_spine(3, 4, 3, routing="ecmp"),
    lambda: sc.topology.torus((4, 4), routing="ecmp"),
    *[lambda s=seed: random_graph(s, "ecmp") for seed in range(8)],
])
def test_ecmp_multicast_routes_from_one_source_form_one_tree(build):
    topo = build()
    for src in range(topo.nranks):
        into: dict[str, set[int]] = {}
        hops = hops_to(topo, topo.endpoint_name(src))
        for dst in range(topo.nranks):
            route = topo.route(src, dst, multicast=True)
            assert route.links == tree_reference(topo, src, dst)
            assert len(route.links) == hops[topo.endpoint_name(dst)]
            for d in route.links:
                into.setdefault(topo.directed_link(d)[1], set()).add(d)
        assert all(len(ways) == 1 for ways in into.values())  # one way into each device


def _multicast_from_0(comm: Comm, dsts):
    if comm.rank == 0:
        yield comm.multicast(sc.VirtualBuffer.of(GB, np.uint8), list(dsts))
    elif comm.rank in dsts:
        yield comm.recv(0)


def test_ecmp_multicast_crosses_the_fabric_once_and_trees_of_sources_spread():
    # Two leaves of 4 GPUs, 4 spines: GPU 0 to the other leaf's 4 GPUs sends 1 GB into
    # leaf1 once (hashed per destination, the routes met again there: 4 GB).
    topo = leaf_spine(2, 4, 4, routing="ecmp")
    res = sc.run_program(topo, _multicast_from_0, (4, 5, 6, 7))
    assert sum(v for (u, w), v in res.link_bytes.items() if w == "leaf1") == GB
    assert sum(1 for (u, w), v in res.link_bytes.items() if v and u.startswith("spine")) == 1
    # four 1 us hops; 1 GB at the 50 GB/s uplink's rate
    assert res.time == pytest.approx(4e-6 + GB / (50 * GB), rel=1e-12)
    wide = leaf_spine(2, 4, 8, routing="ecmp")
    spines = {spine_of(wide, wide.route(s, 8 + s % 8, multicast=True)) for s in range(8)}
    assert len(spines) > 1


def tree_reference_avoiding(topo, src, dst, avoid):
    """The documented multicast tree (tree_reference) over the links not in ``avoid``."""
    index = {d.name: i for i, d in enumerate(topo.devices)}
    a, b = topo.endpoint_name(src), topo.endpoint_name(dst)
    hops, adj = hops_to(topo, a, avoid), adjacency(topo)
    path, node = [], b
    while node != a:
        inward = [(n, d ^ 1) for n, d in adj[node]
                  if hops.get(n, -1) == hops[node] - 1 and d >> 1 not in avoid]
        node, d = inward[zlib.crc32(struct.pack("<2q", index[a], index[node])) % len(inward)]
        path.append(d)
    return tuple(path[::-1])


def test_link_order_multicast_routes_are_its_unicast_routes():
    # docstring: "link_order" routes from one source form a tree already, and a
    # leaf-spine built by hand sends every flow between leaves through its first spine
    topo = leaf_spine(4, 3, 2)
    for s in range(8):
        for d in range(8):
            route = topo.route(s, d, multicast=True)
            assert route.links == topo.route(s, d).links
            if s // 2 != d // 2:
                assert spine_of(topo, route) == "spine0"


def test_unicast_and_multicast_routes_are_kept_apart():
    topo = leaf_spine(3, 4, 3, routing="ecmp")
    differ = 0
    for s in range(9):
        for d in range(9):
            uni = topo.route(s, d).links           # cached first
            multi = topo.route(s, d, multicast=True).links
            assert uni == ecmp_reference(topo, s, d)
            assert multi == tree_reference(topo, s, d)
            assert topo.route(s, d).links == uni
            differ += uni != multi
    assert differ > 0   # the two hashes part somewhere, or this test shows nothing


@pytest.mark.parametrize("leaf, spine", [(lf, s) for lf in ("leaf0", "leaf1") for s in range(3)])
def test_ecmp_routes_around_one_failed_uplink(leaf, spine):
    topo = leaf_spine(2, 3, 3, routing="ecmp")
    (k,) = [k for k, link in enumerate(topo.links) if (link.u, link.v) == (leaf, f"spine{spine}")]
    avoid = frozenset({k})
    for s in range(6):
        into: dict[str, set[int]] = {}
        for d in range(6):
            uni = topo.route(s, d, avoid=avoid)
            assert uni.links == ecmp_reference(topo, s, d, avoid)
            multi = topo.route(s, d, avoid=avoid, multicast=True)
            assert multi.links == tree_reference_avoiding(topo, s, d, avoid)
            for route in (uni, multi):
                assert all(d_ >> 1 != k for d_ in route.links)
                assert len(route.links) == (0 if s == d else 2 if s // 3 == d // 3 else 4)
            for d_ in multi.links:
                into.setdefault(topo.directed_link(d_)[1], set()).add(d_)
        assert all(len(ways) == 1 for ways in into.values())   # still one tree


def test_ecmp_with_no_way_around_the_failed_links_raises_no_route():
    topo = leaf_spine(2, 2, 2, routing="ecmp")
    cut = frozenset(k for k, link in enumerate(topo.links) if link.u == "leaf0"
                    and link.v.startswith("spine"))
    for multicast in (False, True):
        with pytest.raises(NoRouteError, match="around the failed links"):
            topo.route(0, 2, avoid=cut, multicast=multicast)
        assert len(topo.route(0, 1, avoid=cut, multicast=multicast).links) == 2


@pytest.mark.parametrize("multicast", [False, True])
def test_ecmp_route_around_a_failed_ring_link_goes_the_long_way(multicast):
    # ring(6): link k joins gpu k and gpu k+1 (link 5: gpu5 -> gpu0); directed 2k runs
    # u -> v, 2k + 1 back. Without link 0, gpu0 reaches gpu1 the long way round.
    topo = sc.topology.ring(6, routing="ecmp")
    assert topo.route(0, 1, multicast=multicast).links == (0,)       # hop counts kept
    assert topo.route(0, 1, avoid=frozenset({0}), multicast=multicast).links == \
        (11, 9, 7, 5, 3)
    assert topo.route(1, 0, avoid=frozenset({0}), multicast=multicast).links == \
        (2, 4, 6, 8, 10)
    assert topo.route(1, 0, multicast=multicast).links == (1,)       # none kept from avoid


def test_adding_a_link_drops_the_kept_hop_counts():
    topo = sc.topology.ring(6, routing="ecmp")
    assert len(topo.route(0, 3).links) == 3
    assert len(topo.route(0, 3, multicast=True).links) == 3
    topo.add_link("gpu0", "gpu3", bandwidth=1e9)                     # link 6
    assert topo.route(0, 3).links == (12,)
    assert topo.route(0, 3, multicast=True).links == (12,)


def test_repr_names_the_routing_only_where_it_is_not_the_default():
    assert repr(sc.Topology("x")) == "Topology('x', gpus=0, hosts=0, devices=0, links=0)"
    assert repr(sc.Topology("x", routing="ecmp")) == \
        "Topology('x', gpus=0, hosts=0, devices=0, links=0, routing='ecmp')"


def test_a_fat_tree_of_several_spines_hashes_its_routes_over_them():
    # 8 nodes of one GPU, 2 to a leaf (leaf_radix 4): 4 leaves, each joined to each of 3
    # spines by a third of its 2 x 12.5 GB/s uplink
    topo = sc.topology.fat_tree(8, gpus_per_node=1, leaf_radix=4, spines=3)
    assert topo.routing == "ecmp"
    ups = [link for link in topo.links if link.v.startswith("spine")]
    assert sorted({link.v for link in ups}) == ["spine0", "spine1", "spine2"]
    assert len(ups) == 12 and {link.bandwidth for link in ups} == {2 * 12.5e9 / 3}
    one = sc.topology.fat_tree(8, gpus_per_node=1, leaf_radix=4)
    assert one.routing == "link_order" and [link.v for link in one.links
                                           if "spine" in link.v] == ["spine"] * 4
    # every byte of the all-to-all crosses the spines its routes hash to
    res = sc.simulate(topo, "all_to_all", algorithm="direct", nbytes=8 * 2**20)
    block = 2**20
    expected: dict[tuple[str, str], int] = {}
    for s in range(8):
        for d in range(8):
            if s // 2 != d // 2:
                for link in ecmp_reference(topo, s, d):
                    u, v = topo.directed_link(link)
                    if "spine" in u + v:
                        expected[u, v] = expected.get((u, v), 0) + block
    assert {k: v for k, v in res.link_bytes.items() if "spine" in k[0] + k[1] and v} == \
        expected
    assert len({v for (u, v) in expected if v.startswith("spine")}) == 3   # all used


def link_order_reference(topo: sc.Topology, src: str, dst: str) -> tuple[int, ...]:
    """A breadth-first search from ``src`` through each device's links in the order they
    were added, afresh for this one destination: the parent a device is first reached
    from gives the path."""
    adj = adjacency(topo)
    parent: dict[str, tuple[str, int]] = {src: (src, -1)}
    queue = deque([src])
    while queue and dst not in parent:
        node = queue.popleft()
        for nbr, d in adj[node]:
            if nbr not in parent:
                parent[nbr] = (node, d)
                queue.append(nbr)
    path, node = [], dst
    while node != src:
        node, d = parent[node]
        path.append(d)
    return tuple(reversed(path))


@pytest.mark.parametrize("seed", range(25))
def test_link_order_routes_are_a_fresh_search_in_any_order_of_queries(seed):
    """A source's breadth-first search is kept and resumed for its next destination; the
    route must be the one a search afresh finds, whatever order the pairs come in, with
    routes around failed links asked in between, and after the machine grows."""
    rng = np.random.default_rng(seed)
    topo = random_graph(seed, "link_order")
    if topo._is_tree():
        pytest.skip("a tree is routed by its common ancestor, not searched")
    for grown in (False, True):
        if grown:   # a new link drops the kept searches: routes may now be shorter
            a, b = rng.choice([d.name for d in topo.devices], size=2, replace=False)
            if frozenset((a, b)) not in {frozenset((lk.u, lk.v)) for lk in topo.links}:
                topo.add_link(str(a), str(b), bandwidth=GB, latency=0.0)
        pairs = [(s, t) for s in range(topo.nranks) for t in range(topo.nranks) if s != t]
        for k in rng.permutation(len(pairs)):
            s, t = pairs[k]
            if rng.random() < 0.2:   # a route around a link, searched apart
                cut = frozenset({int(rng.integers(0, len(topo.links)))})
                try:
                    topo.route(s, t, avoid=cut)
                except NoRouteError:
                    pass
            expected = link_order_reference(topo, topo.gpus[s], topo.gpus[t])
            assert topo.route(s, t).links == expected, (s, t)
