"""Topology specs: every field of a parsed spec against the builder called directly, units,
round trips through ``topology.spec``, and errors that name the bad key or value."""

from __future__ import annotations

import inspect
import math
from fractions import Fraction

import numpy as np
import pytest

import simcoll as sc
from simcoll.topology import builders as builder_module
from simcoll.topology.catalog import builders, parameters
from simcoll.topology.graph import Topology
from simcoll.topology.quantities import format_rate, format_time, parse_rate, parse_time

T = sc.topology
SPECS = [
    ("switch:8", lambda: T.switch(8)),
    ("switch:ranks=8,bandwidth=40GB/s,latency=500ns",
     lambda: T.switch(8, bandwidth=40e9, latency=500e-9)),
    ("switch:4,servers=2,server_bandwidth=5GB/s,server_latency=none,reduce_bandwidth=1TB/s",
     lambda: T.switch(4, servers=2, server_bandwidth=5e9, reduce_bandwidth=1e12)),
    ("cluster:nodes=2,gpus_per_node=8", lambda: T.cluster(2, 8)),
    ("cluster:2x8", lambda: T.cluster(2, 8)),
    ("cluster:3,2,inter_bandwidth=400Gbps,intra_latency=250ns,inter_kind=roce",
     lambda: T.cluster(3, 2, inter_bandwidth=400e9 / 8, intra_latency=250e-9,
                       inter_kind="roce")),
    ("torus:4x4", lambda: T.torus((4, 4))),
    ("torus:2x3,bandwidth=10GiB/s,latency=2us", lambda: T.torus((2, 3), bandwidth=10 * 2**30,
                                                                latency=2e-6)),
    ("ring:5,kind=pcie,latency=0", lambda: T.ring(5, kind="pcie", latency=0.0)),
    ("fully_connected:3,bandwidth=1e9", lambda: T.fully_connected(3, bandwidth=1e9)),
    ("dgx_a100:1", lambda: T.dgx_a100(1)),
    ("dgx_h100:nodes=2", lambda: T.dgx_h100(nodes=2)),
    ("dgx_h100", lambda: T.dgx_h100()),
    ("switch:n=8,", lambda: T.switch(8)),  # a trailing comma
    ("switch:8,latency=2us,", lambda: T.switch(8, latency=2e-6)),
    ("dgx:2,nvlink_bandwidth=1GB/s,pcie_bandwidth=2GB/s,nic_bandwidth=3Gbps,name=mine,"
     "gpus_per_node=2,network_latency=3us",
     lambda: T.dgx(2, nvlink_bandwidth=1e9, pcie_bandwidth=2e9, nic_bandwidth=3e9 / 8,
                   name="mine", gpus_per_node=2, network_latency=3e-6)),
]


def same_machine(a: Topology, b: Topology) -> None:
    """Every device (name, kind, reduce_bandwidth, node) and link (ends, bandwidth,
    latency, kind) in order, and the derived rank, host and node lists."""
    assert a.devices == b.devices
    assert a.links == b.links
    assert (a.nranks, a.gpus, a.hosts, a.gpu_nodes) == (b.nranks, b.gpus, b.hosts, b.gpu_nodes)


@pytest.mark.parametrize("spec, direct", SPECS, ids=[s for s, _ in SPECS])
def test_spec_builds_what_the_builder_builds(spec, direct):
    topo = sc.topology.from_spec(spec)
    same_machine(topo, direct())
    again = sc.topology.from_spec(topo.spec)
    same_machine(again, topo)
    assert again.spec == topo.spec


def test_hand_checked_values_of_a_spec():
    topo = sc.topology.from_spec("switch:ranks=4,bandwidth=1GB/s,latency=0")
    assert topo.nranks == 4 and len(topo.links) == 4
    assert {link.bandwidth for link in topo.links} == {1e9}
    assert {link.latency for link in topo.links} == {0.0}
    topo = sc.topology.from_spec("cluster:2x3,inter_bandwidth=400Gbps,intra_latency=250ns")
    assert topo.gpu_nodes == (0, 0, 0, 1, 1, 1)
    inter = [link for link in topo.links if link.kind == "ib"]
    assert [link.bandwidth for link in inter] == [5e10, 5e10]
    assert [link.latency for link in topo.links if link.kind == "nvswitch"] == [2.5e-7] * 6
    # canonical: every given argument by keyword, in the builder's signature order
    assert topo.spec == "cluster:nodes=2,gpus_per_node=3,intra_latency=250ns," \
                        "inter_bandwidth=400Gbps"


@pytest.mark.parametrize("text, value", [
    ("100GB/s", 1e11), ("400Gbps", 5e10), ("1 Gb/s", 1.25e8), ("25e9", 25e9),
    ("2GiB/s", 2 * 2**30), ("1.5TB/s", 1.5e12), ("8Kbps", 1000.0), ("512B/s", 512.0),
    ("3MBps", 3e6), ("inf", math.inf), (7, 7.0),
    # float() and JSON spell infinity so too; only 'inf' and 'infinity' were read.
    ("INF", math.inf), ("Infinity", math.inf), ("-Infinity", -math.inf), ("InfGB/s", math.inf)])
def test_parse_rate(text, value):
    assert parse_rate(text) == value


@pytest.mark.parametrize("text, value", [
    ("1us", 1e-6), ("500ns", 500e-9), ("2ms", 2e-3), ("0", 0.0), ("1e-6", 1e-6),
    ("936.25ns", 936.25e-9), ("0.5us", 0.5e-6),
    ("1µs", 1e-6), ("1\u03bcs", 1e-6), ("3s", 3.0), (0.5, 0.5)])
def test_parse_time(text, value):
    assert parse_time(text) == value


def test_an_unknown_builder_in_capitals_gets_the_hint():
    with pytest.raises(sc.TopologyError, match=r"unknown topology builder 'SWITCH' \(did you "
                                               r"mean 'switch'\?\)"):
        sc.topology.from_spec("SWITCH:4")


def test_a_quantity_is_the_float_nearest_the_number_as_written():
    """A number with a unit is rounded once, as the literal with the unit's power of ten
    is: 0.1us was 0.1 / 1e6 = 1.0000000000000001e-07, an ulp from 1e-07 (about 9% of
    4-digit rates and 25% of times were). Python's own literal is the reference; binary
    prefixes are exact powers of two, and a prefix's case is ignored ('1GIB/s' was
    refused)."""
    rng = np.random.default_rng(5)
    for m in rng.integers(1, 10**6, size=400):
        written = f"{m / 10**int(rng.integers(0, 5))}"
        for unit, exponent in (("ms", -3), ("us", -6), ("ns", -9)):
            assert parse_time(written + unit) == float(f"{written}e{exponent}")
        for unit, exponent in (("KB/s", 3), ("MB/s", 6), ("GB/s", 9), ("TB/s", 12)):
            assert parse_rate(written + unit) == float(f"{written}e{exponent}")
        assert parse_rate(written + "Gb/s") == float(Fraction(written) * 10**9 / 8)
        assert parse_rate(written + "GiB/s") == float(Fraction(written) * 2**30)
    assert parse_time("0.1us") == 1e-7
    assert parse_rate("1GIB/s") == parse_rate("1giB/s") == 8 * parse_rate("1Gib/s") == 2.0**30


def test_a_quantity_past_floats_range_is_infinite_whatever_the_decimal_context():
    """Read through Decimal, 1e9999999us raised decimal.Overflow and 1e300TiB/s an
    OverflowError (a traceback where a clear refusal of infinity was); a caller's own
    decimal context (3 digits, trapping inexact results) must change nothing."""
    import decimal

    with decimal.localcontext() as context:
        context.prec = 3
        context.traps[decimal.Inexact] = True
        assert parse_time("1e9999999us") == math.inf
        assert parse_time("-1e9999999us") == -math.inf
        assert parse_time("1e-9999999us") == 0.0
        assert parse_rate("1e300TiB/s") == math.inf
        assert parse_rate("3GiB/s") == 3 * 2.0**30 and parse_rate("1Kibps") == 128.0
        assert parse_time("1.23456789012345678901234567890123us") == \
            1.23456789012345678901234567890123e-6
    with pytest.raises(sc.TopologyError, match="bandwidth=inf is not accepted"):
        sc.topology.from_spec("ring:4,bandwidth=1e9999999GB/s")


def test_an_exponent_past_what_decimal_holds_reads_as_float_reads_it():
    """decimal takes exponents of up to 18 digits; one of 20 raised decimal.InvalidOperation
    (neither a ValueError nor a SimCollError: a traceback on the command line)."""
    huge = "1e99999999999999999999"
    assert parse_time("1e-99999999999999999999us") == float("1e-99999999999999999999") == 0.0
    assert parse_rate(huge + "GB/s") == float(huge) == math.inf
    with pytest.raises(sc.TopologyError, match="bandwidth=inf is not accepted"):
        sc.topology.from_spec(f"switch:2,bandwidth={huge}")


def test_integers_float_rounds_past_its_range_are_infinite():
    """The largest float is (2 - 2^-52) 2^1023 = 2^1024 - 2^971; integers from half an ulp
    above it, 2^1024 - 2^970, round to 2^1024, and float() raised OverflowError for those
    under 2^1024 (a traceback where 2^1024 itself was refused clearly)."""
    largest = 2**1024 - 2**971
    assert float(largest + 2**970 - 1) == float(largest)
    assert parse_rate(largest + 2**970 - 1) == float(largest)
    assert parse_rate(largest + 2**970) == parse_rate(2**1024 - 1) == math.inf
    topo = Topology()
    a, b = topo.add_gpu(), topo.add_gpu()
    with pytest.raises(sc.TopologyError, match=r"bandwidth of link .* is not accepted; use a "
                                               r"number > 0, finite"):
        topo.add_link(a, b, bandwidth=2**1024 - 1)
    with pytest.raises(sc.TopologyError, match=r"latency=17976931.* is not accepted"):
        sc.topology.switch(2, latency=largest + 2**970)


@pytest.mark.parametrize("text", ["1us", "fast", "1 parsec", "GB/s", True, "1 GB/h"])
def test_parse_rate_refuses(text):
    with pytest.raises(ValueError, match="rate"):
        parse_rate(text)


@pytest.mark.parametrize("text", ["1e-400GB/s", "1e-330", "2e-324B/s", "1e-400Gbps",
                                  # an exponent past decimal's 18 digits was read as 0.0
                                  "1e-99999999999999999999", "0.5e-99999999999999999999GB/s"])
def test_a_rate_that_is_not_zero_but_rounds_to_zero_is_refused_as_written(text):
    """It was read as 0.0, and the spec's message said bandwidth=0.0; the least float is
    about 4.9e-324 (which is read as itself)."""
    with pytest.raises(ValueError, match=rf"^'{text}' rounds to 0 bytes/s, below the least "
                                         rf"positive float \(about 4.9e-324\); write a rate"):
        parse_rate(text)
    with pytest.raises(sc.TopologyError, match=rf"bandwidth={text}: '{text}' rounds to 0"):
        sc.topology.from_spec(f"switch:4,bandwidth={text}")
    assert parse_rate("4.9e-324B/s") == 5e-324 and parse_rate("0GB/s") == 0.0
    assert parse_rate("0.0e-99999999999999999999") == 0.0


def test_renaming_a_spec_built_topology_forgets_its_spec():
    """The name is saved and hashed: a kept spec rebuilt a machine of another name and
    hash than the renamed one it was recorded with."""
    from simcoll.topology.io import topology_hash

    topology = sc.topology.from_spec("switch:4")
    topology.name = topology.name   # the same name keeps it
    assert topology.spec == "switch:n=4"
    assert topology_hash(sc.topology.from_spec(topology.spec)) == topology_hash(topology)
    topology.name = "renamed"
    assert topology.spec is None


def test_a_bad_torus_or_multi_dim_dimension_is_named():
    with pytest.raises(sc.TopologyError, match=r"torus dims\[2\] = 0 is not accepted"):
        sc.topology.from_spec("torus:4x4x0")
    with pytest.raises(sc.TopologyError, match="^dimension 1: building block 'Torus' is not "
                                               "one of Ring, FullyConnected, Switch"):
        sc.topology.multi_dim(["Ring", "Torus"], [2, 2], [1e9, 1e9], [0, 0])


@pytest.mark.parametrize("text", ["1GB/s", "soon", "1 min", True])
def test_parse_time_refuses(text):
    with pytest.raises(ValueError, match="time"):
        parse_time(text)


@pytest.mark.parametrize("value, text", [(1e11, "100GB/s"), (2.5e10, "25GB/s"),
                                         (512.0, "512B/s"), (math.inf, "inf")])
def test_format_rate_reads_back(value, text):
    assert format_rate(value) == text and parse_rate(text) == value


@pytest.mark.parametrize("value, text", [(1e-6, "1us"), (5e-7, "500ns"), (1.5e-6, "1.5us"),
                                         (2.0, "2s"), (0.0, "0")])
def test_format_time_reads_back(value, text):
    assert format_time(value) == text and parse_time(text) == value


def test_parameters_come_from_the_signature():
    for name, fn in builders().items():
        sig = inspect.signature(fn)
        params = parameters(name)
        assert [p.name for p in params] == list(sig.parameters)
        for p in params:
            assert p.required == (sig.parameters[p.name].default is inspect.Parameter.empty)
    kinds = {p.name: p.kind for p in parameters("switch")}
    assert kinds == {"n": "int", "bandwidth": "rate", "latency": "time", "kind": "str",
                     "servers": "int", "server_bandwidth": "rate", "server_latency": "time",
                     "reduce_bandwidth": "rate", "server_reduce_bandwidth": "rate"}
    assert {p.name: p.kind for p in parameters("torus")}["dims"] == "dims"


@pytest.mark.parametrize("spec, words", [
    ("swich:8", ["unknown topology builder 'swich'", "did you mean 'switch'"]),
    ("switch:8,bandwith=1GB/s", ["'switch:8,bandwith=1GB/s'", "no parameter 'bandwith'",
                                 "did you mean 'bandwidth'"]),
    ("switch:8,latency=1GB/s", ["latency=1GB/s", "not a time unit"]),
    ("switch:8,bandwidth=fast", ["bandwidth=fast", "not a rate"]),
    ("switch", ["n is missing"]),
    ("switch:latency=1us,8", ["positional value '8' comes after"]),
    ("cluster:2x8x3", ["too many positional values"]),
    # NxG is nodes x GPUs per node; pcie_node's second slot is its PCIe generation
    ("pcie_node:8x4", ["gpus=8x4", "'8x4' is not a whole number"]),
    ("dgx_h100:2x8", ["nodes=2x8", "'2x8' is not a whole number"]),
    ("switch:n=8,ranks=4", ["n is given twice"]),
    ("switch:8,latency=", ["latency= has no value"]),
    ("dgx_a100:nodes=1.5", ["nodes=1.5", "not a whole number"]),
    ("torus:4xa", ["dims=4xa", "joined by 'x'"]),
    ("switch:0", ["topology spec 'switch:0'", "n = 0 is not accepted"]),
    ("switch:8,,latency=1us", ["an argument between two commas is empty"]),
    # inf is refused for a link's bandwidth: the hint does not offer it
    ("switch:4,bandwidth=nan", ["bandwidth=nan", "not a rate such as 100GB/s, 400Gbps or 25e9"]),
    ("", ["write a builder such as 'switch:8'"]),
])
def test_bad_specs_name_the_problem_and_list_the_parameters(spec, words):
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.from_spec(spec)
    message = str(info.value)
    for word in words:
        assert word in message
    name = spec.partition(":")[0]
    if name in builders() and "is not accepted" not in message:
        for param in inspect.signature(builders()[name]).parameters:
            assert param in message


def _fewest_parts(name: str) -> dict[str, object]:
    """Arguments that build the machine using the fewest of ``name``'s parameters: every
    required one at 1 (one GPU, one dimension of 1), and one node."""
    values: dict[str, object] = {p.name: (1,) if p.kind == "dims" else 1
                                 for p in parameters(name) if p.required}
    if any(p.name == "nodes" for p in parameters(name)):
        values["nodes"] = 1
    return values


@pytest.mark.parametrize("name", sorted(builders()))
def test_every_rate_and_time_is_checked_where_the_machine_does_not_use_it(name):
    """A one-node DGX has no NICs and a one-socket PCIe box no link between sockets: a
    negative NIC bandwidth or socket latency given to them was taken without a word.
    Every rate (> 0; finite but for reduction rates) and time (>= 0, finite) is refused
    by its parameter's name, on the smallest machine each builder makes."""
    build, fewest = builders()[name], _fewest_parts(name)
    build(**fewest)
    tried = 0
    for param in parameters(name):
        if param.kind not in ("rate", "time"):
            continue
        bad = [-1.0, math.nan] + ([0.0] if param.kind == "rate" else [])
        bad += [] if "reduce" in param.name else [math.inf]
        for value in bad:
            with pytest.raises(sc.TopologyError, match=rf"^{param.name}={value!r} is not"):
                build(**{**fewest, param.name: value})
            tried += 1
    assert tried >= 3


def test_a_new_builder_needs_no_change(monkeypatch):
    def pair(n: int, *, bandwidth: float = 1e9, latency: float = 0.0) -> Topology:
        topo = Topology(f"pair{n}")
        gpus = [topo.add_gpu() for _ in range(n)]
        for a, b in zip(gpus, gpus[1:]):
            topo.add_link(a, b, bandwidth=bandwidth, latency=latency)
        return topo

    monkeypatch.setattr(builder_module, "pair", pair, raising=False)
    monkeypatch.setattr(builder_module, "__all__", [*builder_module.__all__, "pair"])
    topo = sc.topology.from_spec("pair:3,bandwidth=2GB/s,latency=1us")
    same_machine(topo, pair(3, bandwidth=2e9, latency=1e-6))
    assert topo.spec == "pair:n=3,bandwidth=2GB/s,latency=1us"
    assert "pair" in builders()


def test_changing_a_topology_clears_its_spec():
    topo = sc.topology.from_spec("switch:2")
    assert topo.spec == "switch:n=2"
    topo.add_gpu()
    assert topo.spec is None
    topo = sc.topology.from_spec("ring:3")
    topo.add_link("gpu0", topo.add_switch(), bandwidth=1e9)
    assert topo.spec is None
    assert sc.topology.switch(4).spec is None


def test_a_spec_may_name_a_file(tmp_path):
    path = tmp_path / "m.yaml"
    sc.topology.save(sc.topology.cluster(2, 2), path)
    topo = sc.topology.from_spec(str(path))
    same_machine(topo, sc.topology.cluster(2, 2))
    assert topo.spec == str(path)


@pytest.mark.parametrize("spec, message", [
    # A negative count is a whole number: the builder's own range is what it misses.
    ("dgx_h100:nodes=-1", "nodes=-1 is not accepted; use an integer >= 1"),
    ("switch:-3", "number of GPUs n = -3 is not accepted; use an integer >= 1"),
    ("dgx_h100:nodes=--1", "'--1' is not a whole number"),
    ("dgx_h100:nodes=-", "'-' is not a whole number"),
])
def test_counts_below_the_range_are_named_for_their_range(spec, message):
    with pytest.raises(sc.TopologyError, match=message):
        sc.topology.from_spec(spec)


def test_saving_a_spec_string_says_to_build_it_first(tmp_path):
    with pytest.raises(sc.InvalidInputError,
                       match=r"topology must be a simcoll Topology, got str; build it "
                             r"first: sc.topology.from_spec\('dgx_h100:2'\)"):
        sc.topology.save("dgx_h100:2", tmp_path / "m.yaml")
    assert not (tmp_path / "m.yaml").exists()


def test_setting_another_cpu_clears_the_spec():
    """``dgx_h100:2`` with ``cpu = "amd"`` kept its spec, which rebuilt an Intel machine
    (NCCL's tuner then ran LL 1.7 times faster)."""
    topo = sc.topology.from_spec("dgx_h100:2")
    topo.cpu = "intel"  # the vendor it has: still the machine the spec names
    assert topo.spec == "dgx_h100:nodes=2"
    topo.cpu = "amd"
    assert topo.spec is None


def test_a_preset_file_whose_argument_holds_a_comma_keeps_its_path(tmp_path):
    """A spec cannot write a comma inside a value (it separates arguments): the spec
    ``switch:n=4,kind=a,b`` was recorded and could not be read back. The file's path
    is recorded instead, and rebuilds the machine."""
    for name, args in (("switch", "{n: 4, kind: 'a,b'}"),
                       ("dgx", "{nodes: 1, name: 'x,y', nvlink_bandwidth: 1e11, "
                               "pcie_bandwidth: 2e10, nic_bandwidth: 1e10}")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"preset: {name}\nargs: {args}\n")
        topo = sc.topology.load(path)
        assert topo.spec == str(path)
        same_machine(sc.topology.from_spec(topo.spec), topo)
    assert {link.kind for link in sc.topology.load(tmp_path / "switch.yaml").links} == {"a,b"}
    plain = tmp_path / "plain.yaml"
    plain.write_text("preset: switch\nargs: {n: 4, kind: ab}\n")
    assert sc.topology.load(plain).spec == "switch:n=4,kind=ab"


@pytest.mark.parametrize("spec, kwargs", [
    ("switch:4,kind=link.yaml", dict(n=4, kind="link.yaml")),
    ("dgx:2,nvlink_bandwidth=1e11,pcie_bandwidth=2e10,nic_bandwidth=1e10,name=box.json",
     dict(nodes=2, nvlink_bandwidth=1e11, pcie_bandwidth=2e10, nic_bandwidth=1e10,
          name="box.json")),
])
def test_a_builder_spec_ending_in_a_file_extension_is_a_builder_spec(spec, kwargs):
    """Read as a file path for its last value's ending, it failed: 'cannot read topology
    file switch:4,kind=link.yaml'."""
    topo = sc.topology.from_spec(spec)
    same_machine(topo, builders()[spec.partition(":")[0]](**kwargs))
    same_machine(sc.topology.from_spec(topo.spec), topo)


@pytest.mark.parametrize("name", sorted(builders()))
def test_none_is_refused_for_every_required_rate_and_time(name):
    """None passed for any rate or time: ``pcie_node(pcie_latency=None)`` raised a raw
    TypeError, ``cluster(inter_bandwidth=None)`` named an internal link and
    ``dgx_a100(nic_bandwidth=None)`` was taken. Only the parameters that are Optional
    (a default that follows another) take it."""
    build, fewest = builders()[name], _fewest_parts(name)
    tried = 0
    for param in parameters(name):
        if param.kind not in ("rate", "time"):
            continue
        if param.optional:
            build(**{**fewest, param.name: None})
            continue
        with pytest.raises(sc.TopologyError, match=rf"^{param.name}=None is not accepted; "
                                                   rf"use a number"):
            build(**{**fewest, param.name: None})
        tried += 1
    assert tried >= 2


def test_a_long_misspelt_spec_is_an_unknown_builder_not_a_system_error():
    """A spec of more than 255 characters without a slash (rates in GBps) whose builder
    name is misspelt was tried as a file name: OSError, "File name too long"."""
    spec = "dgx-h100:nodes=2," + ",".join(f"nvlink_bandwidth={k}GBps" for k in range(30))
    assert len(spec) > 255 and "/" not in spec
    with pytest.raises(sc.TopologyError, match=r"unknown topology builder 'dgx-h100' "
                                               r"\(did you mean 'dgx_h100'\?\)"):
        sc.topology.from_spec(spec)


def test_a_latency_of_minus_zero_is_the_machine_of_zero():
    """-0.0 passed the latency check and was kept: one machine, two topology hashes
    (sweep records and plots tell machines apart by them)."""
    from simcoll.sweep.records import topology_hash

    assert topology_hash(sc.topology.from_spec("switch:4,latency=-0")) == topology_hash(
        sc.topology.from_spec("switch:4,latency=0"))


def test_a_plain_number_in_a_spec_is_a_float():
    """Numbers are read exactly (as Decimals) and must come out as floats: a Decimal
    passed on is refused by a builder ("oversubscription=Decimal('2')")."""
    from simcoll.topology.quantities import parse_number

    assert type(parse_number("2")) is float and parse_number("2") == 2.0
    spec = sc.topology.from_spec("dgx_h100:2,oversubscription=2")
    built = sc.topology.dgx_h100(2, oversubscription=2.0)
    assert [(link.u, link.v, link.bandwidth) for link in spec.links] == \
        [(link.u, link.v, link.bandwidth) for link in built.links]


def test_mut_rates_and_times_are_written_to_the_digits_asked():
    """format_rate / format_time round to ``digits`` significant digits, below the smallest
    unit too, and to 12 by default."""
    assert format_rate(100.0023456e9, 6) == "100.002GB/s"
    assert format_time(1.0000612e-6, 6) == "1.00006us"
    assert format_rate(0.123456, 3) == "0.123B/s"            # under 1 B/s
    assert format_time(1.23456789e-12, 3) == "0.00123ns"      # under 1 ns
    # defaults: 12 significant digits (123.4567890123 -> 123.456789012)
    assert format_rate(123.4567890123e9) == "123.456789012GB/s"
    assert format_time(123.4567890123e-6) == "123.456789012us"


def test_a_zero_with_a_capital_e_exponent_past_18_digits_is_zero():
    """Guards against the mantissa's digits found without lowering the text first. The
    quantity grammar takes 'e' and 'E' alike; 0E-99999999999999999999 is 0 as
    0e-99999999999999999999 is (float('0E-99999999999999999999') == 0.0 and its
    mantissa 0 has no non-zero digit); without lower() the whole text, exponent
    included, was searched for a non-zero digit and the zero refused as a rate that
    rounds to 0. A non-zero mantissa with 'E' is still refused."""
    assert float("0E-99999999999999999999") == 0.0
    assert parse_rate("0E-99999999999999999999GB/s") == 0.0
    assert parse_rate("0.000E-99999999999999999999") == 0.0
    with pytest.raises(ValueError, match="rounds to 0 bytes/s"):
        parse_rate("1E-99999999999999999999GB/s")


@pytest.mark.parametrize("spec", ["switch:010", "switch:n=010", "torus:4x04", "cluster:2x010",
                                  "switch:-07"])
def test_a_spec_refuses_a_whole_number_with_a_leading_zero(spec):
    """switch:010 built 10 GPUs, where --param chunks=010 is refused and an ASTRA-sim
    file's 010 is 8 (yaml-cpp reads it as C's strtol does)."""
    with pytest.raises(sc.TopologyError, match="has a leading zero"):
        sc.topology.from_spec(spec)
    # 0 and 00 are zero in every reading: refused as counts, not as written
    with pytest.raises(sc.TopologyError, match="n = 0 is not accepted"):
        sc.topology.from_spec("switch:00")


def test_every_listed_default_rate_and_time_reads_back_as_itself():
    """`simcoll list topologies` wrote defaults to 12 digits: dgx_a100's reduce_bandwidth
    (2039 GB/s / 3) as 679.666666667GB/s, which builds a machine 3e-13 off."""
    from simcoll.topology.catalog import format_value
    from simcoll.topology.quantities import parse_rate, parse_time

    read = {"rate": parse_rate, "time": parse_time}
    checked = 0
    for name in builders():
        for param in parameters(name):
            if param.kind in read and isinstance(param.default, float) \
                    and math.isfinite(param.default):
                assert read[param.kind](format_value(param, param.default)) == param.default, \
                    (name, param.name)
                checked += 1
    assert checked > 20
    a100 = {p.name: p for p in parameters("dgx_a100")}["reduce_bandwidth"]
    assert format_value(a100, 2039e9 / 3) == "679.6666666666666GB/s"
    assert format_value(a100, 100e9) == "100GB/s"   # as few digits as read back
