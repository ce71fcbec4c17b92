"""Topology builders and routes."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
from conftest import compensated_sum

import simcoll as sc
from simcoll.topology.catalog import builders, parameters
from simcoll.topology.quantities import parse_number, parse_rate, parse_time


def route_names(topo, src, dst):
    return [topo.directed_link(d) for d in topo.route(src, dst).links]


def test_switch_routes_through_the_switch():
    topo = sc.topology.switch(4, servers=2, bandwidth=10e9, latency=1e-6,
                              server_bandwidth=5e9)
    assert topo.nranks == 4 and topo.hosts == ("server0", "server1")
    assert route_names(topo, 0, 3) == [("gpu0", "switch"), ("switch", "gpu3")]
    route = topo.route(2, 5)
    assert route.latency == pytest.approx(2e-6) and route.bandwidth == 5e9
    assert route_names(topo, 5, 1) == [("server1", "switch"), ("switch", "gpu1")]


def test_ring_routes_take_the_shorter_way_round():
    topo = sc.topology.ring(6)
    assert route_names(topo, 0, 2) == [("gpu0", "gpu1"), ("gpu1", "gpu2")]
    assert route_names(topo, 0, 4) == [("gpu0", "gpu5"), ("gpu5", "gpu4")]
    assert len(topo.route(0, 3).links) == 3


def test_cluster_routes_stay_inside_a_node_when_they_can():
    topo = sc.topology.cluster(2, 4, intra_bandwidth=300e9, inter_bandwidth=25e9)
    assert topo.nranks == 8
    assert route_names(topo, 0, 3) == [("gpu0", "node0"), ("node0", "gpu3")]
    assert route_names(topo, 1, 6) == [("gpu1", "node0"), ("node0", "network"),
                                       ("network", "node1"), ("node1", "gpu6")]
    assert topo.route(1, 6).bandwidth == 25e9


def test_torus_and_fully_connected_link_counts():
    assert len(sc.topology.torus((4, 4)).links) == 32
    assert len(sc.topology.torus((2, 3)).links) == 3 + 2 * 3
    assert len(sc.topology.fully_connected(5).links) == 10
    assert len(sc.topology.ring(2).links) == 1 and len(sc.topology.ring(1).links) == 0


def test_hand_built_machine_with_a_cycle_uses_fewest_hops():
    topo = sc.Topology("diamond")
    a, b = topo.add_gpu("a"), topo.add_gpu("b")
    s1, s2, s3 = topo.add_switch("s1"), topo.add_switch("s2"), topo.add_switch("s3")
    topo.add_link(a, s1, bandwidth=1e9)
    topo.add_link(s1, s2, bandwidth=1e9)
    topo.add_link(s2, b, bandwidth=1e9)
    topo.add_link(a, s3, bandwidth=1e9)
    topo.add_link(s3, b, bandwidth=2e9, latency=3e-6)
    assert route_names(topo, 0, 1) == [("a", "s3"), ("s3", "b")]
    assert topo.route(0, 1).latency == pytest.approx(3e-6)


@pytest.mark.parametrize("text, value", [("256MiB", 256 << 20), ("1G", 10**9), ("4096", 4096),
                                         ("1.5KB", 1500), (" 2 GIB ", 2 << 30), ("3kB", 3000),
                                         (7, 7)])
def test_parse_size(text, value):
    assert sc.parse_size(text) == value


@pytest.mark.parametrize("text", ["1.5B", "12 parsecs", "", "-3", None, "1e400GB", -3])
def test_parse_size_refuses(text):
    with pytest.raises(sc.InvalidInputError, match="size"):  # a ValueError too
        sc.parse_size(text)


@pytest.mark.parametrize("text, value", [
    # read exactly, never through a double (2^53 + 1 was read as 2^53)
    ("9007199254740993", 2**53 + 1), ("8" + "0" * 30 + "B", 8 * 10**30),
    ("1e3", 1000), ("0.3e1KB", 3000), ("5e-1K", 500), ("2.5E+2KiB", 256000),
    # numbers: whole ones, exactly, whatever their type
    (1e16, 10**16), (np.float64(2.0**56), 2**56), (np.int64(5), 5), (-0.0, 0),
    # a sign: + or a negative zero read as the numbers are
    ("+5KiB", 5120), ("-0", 0), (" -0.0e3 MB ", 0),
])
def test_parse_size_reads_exactly(text, value):
    got = sc.parse_size(text)
    assert got == value and type(got) is int


@pytest.mark.parametrize("text, words", [
    ("1.00000000000000001KiB", "is 1024.00000000000001024 bytes, not a whole number"),
    ("1.5e-3", "is 0.0015 bytes, not a whole number"),
    ("1e999999999", "has an exponent beyond +-40"), ("1e-50", "has an exponent beyond"),
    (1.5, "size 1.5 is not a whole number of bytes"),
    (float("inf"), "size inf is not a finite number of bytes"),
    (float("nan"), "size nan is not a finite number"), (-2.0, "size -2.0 is negative"),
    # as strings, the same words as the numbers get (they said "cannot read size")
    ("-1", "size '-1' is negative; sizes are >= 0 bytes"), ("-1KiB", "size '-1KiB' is negative"),
    ("-1e-3KB", "size '-1e-3KB' is negative"), ("inf", "size 'inf' is not a finite number"),
    ("-Infinity", "is not a finite number"), ("NaN", "size 'NaN' is not a finite number"),
    # digits 0-9 only, as on the command line (Arabic-Indic 12 was read as 12)
    ("\u0661\u0662", "cannot read size"), ("\u0661\u0662KiB", "cannot read size"),
])
def test_parse_size_says_why_it_refuses(text, words):
    with pytest.raises(sc.InvalidInputError, match=re.escape(words)):
        sc.parse_size(text)


@pytest.mark.parametrize("text, instead", [("1Gb", "1GB or 1GiB"), ("2 gib", "2GB or 2GiB"),
                                           ("100Mb", "100MB or 100MiB"), ("64b", "64B")])
def test_a_size_in_bits_is_refused_not_read_as_bytes(text, instead):
    """'1Gb' was read as 10^9 bytes, eight times what it names; rates read a lowercase b
    as a bit (parse_rate('100Gb/s') is 12.5e9 bytes/s), and sizes now refuse it."""
    with pytest.raises(ValueError, match=f"a lowercase b is a bit, and sizes are bytes; "
                                         f"write {instead}$"):
        sc.parse_size(text)


def test_dgx_a100_cluster_routes_inside_over_nvlink_and_across_over_ib():
    topo = sc.topology.dgx_a100(nodes=2)
    assert topo.nranks == 16
    inside = topo.route(0, 7)
    assert [topo.directed_link(d) for d in inside.links] == [("gpu0", "nvswitch0"),
                                                             ("nvswitch0", "gpu7")]
    assert inside.bandwidth == 240 * sc.GB  # NCCL's 12 x 20 GB/s
    across = topo.route(0, 8)
    assert route_names(topo, 0, 8) == [("gpu0", "nic0"), ("nic0", "leaf0"), ("leaf0", "nic8"),
                                       ("nic8", "gpu8")]
    assert across.bandwidth == 24 * sc.GB  # PCIe Gen4 x16 as NCCL counts it, < HDR's 25
    assert across.latency == pytest.approx(2 * 1e-6 + 2 * 1.5e-6)
    assert len(sc.topology.dgx_h100().links) == 8


def test_topology_survives_a_round_trip_through_a_file(tmp_path):
    topo = sc.topology.switch(3, servers=1, reduce_bandwidth=5e9)
    path = tmp_path / "machine.json"
    sc.topology.save(topo, path)
    again = sc.topology.load(path)
    assert again.devices == topo.devices and again.links == topo.links
    a = sc.simulate(topo, "all_reduce", algorithm="parameter_server", nbytes=1200)
    b = sc.simulate(again, "all_reduce", algorithm="parameter_server", nbytes=1200)
    assert a.time == b.time and a.link_bytes == b.link_bytes


def test_bad_topology_file_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"devices": [{"name": "g", "kind": "tpu"}], "links": []}')
    with pytest.raises(sc.TopologyError, match="kind 'tpu'"):
        sc.topology.load(path)
    path.write_text("{not json")
    with pytest.raises(sc.TopologyError, match="not valid JSON"):
        sc.topology.load(path)


def test_gpus_know_their_node():
    assert sc.topology.cluster(3, 2).gpu_nodes == (0, 0, 1, 1, 2, 2)
    assert sc.topology.dgx_h100(2).gpu_nodes == (0,) * 8 + (1,) * 8
    assert sc.topology.switch(4).gpu_nodes == (0, 0, 0, 0)
    again = sc.topology.from_dict(sc.topology.to_dict(sc.topology.cluster(2, 2)))
    assert again.gpu_nodes == (0, 0, 1, 1)
    with pytest.raises(sc.TopologyError, match="node of 'g' = -1 is not accepted"):
        sc.Topology().add_gpu("g", node=-1)


@pytest.fixture
def nothing_built(monkeypatch):
    """Fails the test at the first device added: what it calls must refuse first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a device was added before the arguments were refused")

    monkeypatch.setattr(sc.Topology, "_add", refuse)


def _fewest_parts(name: str) -> dict[str, object]:
    """Builder ``name``'s required arguments, each at 1 (one dimension of 1 for dims)."""
    return {p.name: (1,) if p.kind == "dims" else 1 for p in parameters(name) if p.required}


@pytest.mark.parametrize("kind", ["", None, ["nvlink"], 3])
def test_a_link_kind_is_a_non_empty_string_as_files_take_it(kind):
    """add_link stored ``str(kind)``: None became 'None', and '' was saved to a file
    that load then refused (``links[0].kind: expected a non-empty string``)."""
    topo = sc.Topology()
    a, b = topo.add_gpu(), topo.add_gpu()
    with pytest.raises(sc.TopologyError, match=r"^kind of link \('gpu0', 'gpu1'\) = .* is "
                                               r"not accepted; use a non-empty string"):
        topo.add_link(a, b, bandwidth=1e9, kind=kind)
    assert not topo.links


@pytest.mark.parametrize(("name", "param"), [
    (name, p.name) for name in sorted(builders()) for p in parameters(name)
    if p.name.endswith("kind")])
@pytest.mark.parametrize("kind", ["", None])
def test_builders_refuse_a_bad_link_kind_by_its_parameter(name, param, kind, nothing_built):
    with pytest.raises(sc.TopologyError,
                       match=rf"^{param}={kind!r} is not accepted; use a non-empty string"):
        builders()[name](**{**_fewest_parts(name), param: kind})


@pytest.mark.parametrize(("build", "words"), [
    (lambda: sc.topology.from_spec("switch:99999999999999999999999999999"),
     "n=99999999999999999999999999999, servers=0 is not accepted: the machine would have "
     "100000000000000000000000000000 devices"),
    (lambda: sc.topology.ring(2**1100), "n=13582985...5376 (332 digits) is not accepted"),
    (lambda: sc.topology.switch(2**21), "would have 2097153 devices and 2097152 links"),
    (lambda: sc.topology.fully_connected(2100), "2100 devices and 2203950 links"),
    (lambda: sc.topology.torus((2048, 1025)), "dims=(2048, 1025) is not accepted"),
    (lambda: sc.topology.cluster(2**20, 2), "nodes=1048576, gpus_per_node=2"),
    (lambda: sc.topology.multi_dim(["Ring"], [10**30], [1e9], [1e-6]),
     "npus=[10000000...0000 (31 digits)] is not accepted"),
    (lambda: sc.topology.pcie_node(2**20), "gpus=1048576"),
    (lambda: sc.topology.fat_tree(2**20, 1), "nodes=1048576, gpus_per_node=1"),
    (lambda: sc.topology.dgx_h100(2, nics_per_node=2**40),
     "nodes=2, gpus_per_node=8, nics_per_node=1099511627776"),
    # A torus counts its links exactly (a dimension of 2 has one per pair, of 1 none):
    # (2,) * 21 has 2^21 GPUs and 21 x 2^20 links; the bound said 21 x 2^21.
    (lambda: sc.topology.torus((2,) * 21), "the machine would have 2097152 devices and "
                                           "22020096 links"),
    (lambda: sc.topology.pcie_node(2**20), "would have up to 2097154 devices"),
])
def test_machines_beyond_the_bound_are_refused_before_anything_is_built(build, words,
                                                                        nothing_built):
    """``switch:99999999999999999999999999999`` and ``ring(2**1100)`` built device after
    device until memory ran out. Now every builder counts (or bounds) the devices and
    links it would make and refuses more than 2,097,152 of either at once."""
    assert sc.topology.builders.MAX_DEVICES == 2**21
    with pytest.raises(sc.TopologyError,
                       match="a topology builder makes at most 2,097,152 of each") as info:
        build()
    assert words in str(info.value)


def test_an_unlinked_in_network_switch_is_named_as_one():
    """It was named like a GPU, and the hint asked for links to every GPU and host."""
    topo = sc.topology.switch(2)
    topo.add_switch("iso", reduce_bandwidth=1e12)
    with pytest.raises(sc.TopologyError, match=r"not connected: in-network switch 'iso' "
                                               r"cannot reach 'gpu0'; add links so every "
                                               r"GPU, host and in-network device"):
        topo.validate()


def test_huge_integers_are_abbreviated_in_messages():
    """2**1100 was printed whole: 332 digits."""
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.dgx_a100(2, oversubscription=2**1100)
    assert str(info.value).startswith("oversubscription=13582985...5376 (332 digits) is not "
                                      "accepted; use a number >= 1, finite")
    topo = sc.Topology()
    with pytest.raises(sc.TopologyError, match=r"^cpu=13582985\.\.\.5376 \(332 digits\) is "
                                               r"not accepted; use one of 'intel'"):
        topo.cpu = 2**1100


@pytest.mark.parametrize(("build", "words"), [
    (lambda: sc.topology.from_spec("cluster:2x"), "'2x' is not nodes x GPUs per node; "
                                                  "write NxG, e.g. 2x8"),
    (lambda: sc.topology.from_spec("torus:²"), "'²' is not a list of whole numbers"),
    (lambda: sc.topology.switch(4).route(0, 1, via=["gpu2"]),
     r"via=\['gpu2'\] is not accepted; give a device name or a tuple of them"),
    (lambda: sc.topology.switch(4).route(0, 1, via=2), "via=2 is not accepted"),
    (lambda: sc.topology.switch(4).route(0, 1, via=("switch", ["x"])),
     r"via=\('switch', \['x'\]\) is not accepted"),
])
def test_odd_specs_and_vias_are_refused_saying_what_is_accepted(build, words):
    """They met a spec slot the user never wrote, int()'s own message, and raw
    TypeErrors from the route cache."""
    with pytest.raises(sc.TopologyError, match=words):
        build()


def test_a_route_takes_a_via_of_a_str_subclass():
    """numpy's str_, which Comm accepts, must pass the route's own check."""
    assert sc.topology.switch(4).route(0, 1, via=np.str_("switch")).links == \
        sc.topology.switch(4).route(0, 1).links


def test_a_torus_takes_its_dimensions_as_a_numpy_array():
    topo = sc.topology.torus(np.array([4, 3]))
    assert (topo.nranks, len(topo.links)) == (12, 24)   # 12 links along each dimension


@pytest.mark.parametrize(("text", "value"), [
    ("1e40", 10**40),                          # the largest power of ten it names
    (np.int64(2**53 + 1), 2**53 + 1),          # numpy's integers exactly, not via a float
    (np.uint64(2**63 + 1), 2**63 + 1),
    (np.float32(1024.0), 1024),
])
def test_parse_size_reads_these(text, value):
    got = sc.parse_size(text)
    assert got == value and type(got) is int


@pytest.mark.parametrize(("text", "words"), [
    (-1, "size -1 is negative"),
    (-1.0, "size -1.0 is negative"),
    (-2.0, "size -2.0 is negative"),
    (np.float32(np.inf), "is not a finite number of bytes"),
    (Fraction(1, 2), "is not a whole number of bytes"),
    ("1e41", "has an exponent beyond"),
    ("1e-7", "is 0.0000001 bytes, not a whole number"),
    ("1e3Mb", "write 1e3MB or 1e3MiB"),
    ("-1Kb", "size '-1Kb' is negative"),   # not told to write -1KB, refused next
])
def test_parse_size_refuses_these_saying_why(text, words):
    with pytest.raises(sc.InvalidInputError, match=words):
        sc.parse_size(text)


@pytest.mark.parametrize("flag", [True, False, np.True_])
def test_parse_size_refuses_a_bool(flag):
    with pytest.raises(sc.InvalidInputError, match="cannot read size"):
        sc.parse_size(flag)


def test_parse_size_reads_fractions_exactly():
    # "numbers by their value", exactly: Fraction(2^53 + 1) was read through a float
    assert sc.parse_size(Fraction(2**53 + 1)) == 2**53 + 1
    assert sc.parse_size(Fraction(10**400)) == 10**400   # was an OverflowError
    with pytest.raises(sc.InvalidInputError, match="is not a whole number of bytes"):
        sc.parse_size(Fraction(3, 2))


@pytest.mark.parametrize("text", ["1" * 5000, "1e" + "1" * 5000])
def test_a_size_of_thousands_of_digits_is_refused_saying_why(text):
    # Python reads at most 4300 digits into an int: its ValueError escaped
    with pytest.raises(sc.InvalidInputError, match="more than 4000 significant digits|"
                                                   "exponent beyond"):
        sc.parse_size(text)


@pytest.mark.parametrize(("text", "value"), [("0" * 4001 + "1", 1), ("1." + "0" * 5000, 1),
                                             ("0." + "0" * 5000, 0)])
def test_zeros_that_do_not_count_do_not_count_towards_the_digit_limit(text, value):
    assert sc.parse_size(text) == value


@pytest.mark.parametrize("text", ["0e41", "0e-50", "0.0e99"])
def test_zero_with_any_exponent_is_zero(text):
    # strtod (nccl-tests) and float() read 0e50 as 0; the exponent cap is for counts
    assert sc.parse_size(text) == 0


@pytest.mark.parametrize(("text", "shown"), [
    ("1.0000000000000000000000000000001", "1.0000000000000000000000000000001"),
    ("0.99999999999999999999999999999B", "0.99999999999999999999999999999"),
])
def test_a_fraction_of_a_byte_is_shown_in_full(text, shown):
    # the message was rounded to 28 digits: "is 1 bytes"
    with pytest.raises(sc.InvalidInputError, match=re.escape(f"is {shown} bytes, not a whole")):
        sc.parse_size(text)


@pytest.mark.parametrize("index", [4, -1, True, 1.0, "0"])
def test_a_directed_link_outside_the_topology_is_refused_by_name(index):
    """Two links have directed links 0..3: 4 raised IndexError, -1 read the last link
    backwards."""
    topo = sc.Topology("three")
    a, b, c = topo.add_gpu(), topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=1e9)
    topo.add_link(b, c, bandwidth=2e9, back_bandwidth=3e9)
    assert [topo.directed_link(d) for d in range(4)] == [(a, b), (b, a), (b, c), (c, b)]
    assert [topo.bandwidth_of(d) for d in range(4)] == [1e9, 1e9, 2e9, 3e9]
    for lookup in (topo.directed_link, topo.bandwidth_of):
        with pytest.raises(sc.TopologyError, match=rf"directed link {index!r} is not one of "
                                                   rf"this topology's: use 0\.\.3"):
            lookup(index)


@pytest.mark.parametrize("direction", [2, -1, True, 1.0, "0", None])
def test_a_links_rate_takes_only_its_two_directions(direction):
    """Link.rate(2) and rate(-1) read the back bandwidth as if they were direction 1."""
    link = sc.topology.Link("a", "b", bandwidth=1e9, latency=0.0, kind="nvlink", back=3e9)
    assert (link.rate(0), link.rate(np.int64(1))) == (1e9, 3e9)
    with pytest.raises(sc.TopologyError, match=rf"^direction={direction!r} is not accepted; "
                                               r"use 0 \(u to v\) or 1 \(v to u\)$"):
        link.rate(direction)


def test_the_topology_docstring_example_runs_as_shown():
    import doctest

    finder = doctest.DocTestFinder()
    (example,) = [t for t in finder.find(sc.Topology, "Topology") if t.name == "Topology"]
    assert doctest.DocTestRunner().run(example).failed == 0


def test_a_directed_link_index_may_be_a_numpy_integer():
    """Routes are numpy arrays: their entries (np.int64) index directed links as ints do.
    One link a-b of 50 GB/s: index 0 is a->b, 1 is b->a, both at 50e9 bytes/s."""
    t = sc.Topology("two GPUs")
    a, b = t.add_gpu(), t.add_gpu()
    t.add_link(a, b, bandwidth=50e9, latency=1e-6, kind="nvlink")
    names = (t.endpoint_name(0), t.endpoint_name(1))
    assert t.directed_link(np.int64(0)) == names
    assert t.directed_link(np.int64(1)) == names[::-1]
    assert t.bandwidth_of(np.int64(1)) == 50e9
    assert t.bandwidth_of(np.int32(0)) == 50e9


def test_gpu_nodes_follow_the_gpus_added_after_they_were_read():
    # the tuple is kept between reads (routes ask for it per message); a GPU added later
    # must show
    topo = sc.Topology("grows")
    topo.add_gpu(node=0)
    topo.add_gpu(node=0)
    assert topo.gpu_nodes == (0, 0)
    topo.add_host()
    topo.add_gpu(node=2)
    assert topo.gpu_nodes == (0, 0, 2)


@pytest.mark.parametrize("parse, text", [
    (parse_rate, "\u0661\u0660GB/s"), (parse_rate, "\u0661\u0660"),
    (parse_rate, "10\u00a0GB/s"), (parse_time, "\u0661\u0660us"),
    (parse_time, "10\u00a0us"), (parse_number, "\u0661\u0660"),
])
def test_rates_and_times_read_ascii_digits_and_spaces_only(parse, text):
    """Arabic-Indic digits (float and Decimal read them: 10 GB/s) and a no-break space
    are refused, as parse_size and the command line refuse them."""
    with pytest.raises(ValueError, match="is not a"):
        parse(text)


def test_a_topology_without_links_says_so_where_a_link_index_is_asked():
    """The accepted range read "<= -1" and "0..-1"."""
    topology = sc.Topology("one GPU")
    topology.add_gpu()
    with pytest.raises(sc.TopologyError, match=r"^avoid=\{0\} is not accepted: this "
                                               r"topology has no links to avoid$"):
        topology.route(0, 0, avoid={0})
    with pytest.raises(sc.TopologyError, match=r"^directed link 0 is not one of this "
                                               r"topology's: it has no links$"):
        topology.bandwidth_of(0)
    route = topology.route(0, 0, avoid=set())
    assert route.links == () and type(route.latency) is float and route.latency == 0.0


@pytest.mark.parametrize("name", [[1], {"a": 1}, {1}])
def test_a_device_name_no_dict_can_hold_is_unknown(name):
    """device([1]) and neighbors({...}) raised TypeError: unhashable type."""
    topo = sc.topology.switch(2)
    with pytest.raises(sc.TopologyError, match=re.escape(f"unknown device {name!r}")):
        topo.device(name)
    with pytest.raises(sc.TopologyError, match=re.escape(f"unknown device {name!r}")):
        topo.neighbors(name)


def test_a_route_latency_is_summed_link_by_link_on_every_python(monkeypatch):
    """Python 3.12's sum() compensates its rounding: 1e-6 + 3e-7 + 1e-7 gave 1.4e-06
    there and 1.3999999999999997e-06 on 3.11, so a run's times differed in the last bit
    between versions. Routes add their links' latencies one at a time, in route order:
    with a correctly rounded sum() in the module (3.12's gives the same here), the
    route's latency is still the left-to-right sum, worked out by hand:
    (1e-6 + 3e-7) + 1e-7 = 1.3999999999999997e-06, (1e-7 + 3e-7) + 1e-6 = 1.4e-06."""
    import simcoll.topology.graph as graph

    monkeypatch.setattr(graph, "sum", compensated_sum, raising=False)
    topo = sc.Topology("chain")
    names = [topo.add_gpu(), topo.add_switch(), topo.add_switch(), topo.add_gpu()]
    for (u, v), latency in zip(zip(names, names[1:]), [1e-6, 3e-7, 1e-7]):
        topo.add_link(u, v, bandwidth=1e9, latency=latency)
    assert topo.route(0, 1).latency == 1.3999999999999997e-06
    assert topo.route(1, 0).latency == 1.4e-06
