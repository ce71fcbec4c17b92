"""Topology files (JSON, YAML, TOML; devices and links, or a preset), their errors, and
ASTRA-sim network configs."""

from __future__ import annotations

import json
import math
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
import yaml

import simcoll as sc
from simcoll.topology.graph import Device, Link

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "topologies"
GiB = 2**30


def same_machine(a, b):
    assert a.devices == b.devices and a.links == b.links
    assert (a.gpus, a.hosts, a.gpu_nodes) == (b.gpus, b.hosts, b.gpu_nodes)


def two_nodes_by_hand() -> sc.Topology:
    topo = sc.Topology("two nodes")
    gpus = [topo.add_gpu(f"gpu{i}", reduce_bandwidth=400e9, node=i // 2) for i in range(4)]
    nvs = [topo.add_switch("nvswitch0"), topo.add_switch("nvswitch1")]
    ib = topo.add_switch("ib")
    for i, g in enumerate(gpus):
        topo.add_link(g, nvs[i // 2], bandwidth=300e9, latency=0.5e-6, kind="nvlink")
    for s in nvs:
        topo.add_link(s, ib, bandwidth=400e9 / 8, latency=2e-6, kind="ib")
    return topo


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["two_nodes.yaml", "two_nodes.toml"])
def test_example_files_describe_the_hand_built_machine(name):
    topo = sc.topology.load(EXAMPLES / name)
    same_machine(topo, two_nodes_by_hand())
    assert topo.name == "two nodes" and topo.spec == str(EXAMPLES / name)
    assert topo.devices[0] == Device("gpu0", "gpu", 4e11, 0)
    assert topo.links[4] == Link("nvswitch0", "ib", 5e10, 2e-6, "ib")


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml", ".toml"])
@pytest.mark.parametrize("make", [lambda: sc.topology.switch(3, servers=1, reduce_bandwidth=5e9),
                                  lambda: sc.topology.dgx_h100(2), two_nodes_by_hand,
                                  lambda: sc.topology.torus((2, 3))])
def test_every_format_round_trips(tmp_path, suffix, make):
    topo = make()
    path = tmp_path / f"machine{suffix}"
    sc.topology.save(topo, path)
    again = sc.topology.load(path)
    same_machine(again, topo)
    assert again.name == topo.name and again.spec == str(path)
    a = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1200)
    b = sc.simulate(again, "all_reduce", algorithm="ring", nbytes=1200)
    assert a.time == b.time and a.link_bytes == b.link_bytes


def test_yaml_is_written_as_yaml_and_toml_as_toml(tmp_path):
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    topo = sc.topology.switch(2, reduce_bandwidth=1e9)
    sc.topology.save(topo, tmp_path / "x.yaml")
    text = (tmp_path / "x.yaml").read_text()
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    data = yaml.safe_load(text)
    assert data["devices"][1] == {"name": "gpu0", "kind": "gpu", "node": 0,
                                  "reduce_bandwidth": 1e9}
    assert data["devices"][0] == {"name": "switch", "kind": "switch"}
    sc.topology.save(topo, tmp_path / "x.toml")
    assert tomllib.loads((tmp_path / "x.toml").read_text())["links"][0]["bandwidth"] == 1e11


def test_unknown_extensions_are_refused_before_writing(tmp_path):
    with pytest.raises(sc.TopologyError, match=r"unknown topology file type '\.txt'.*\.yaml"):
        sc.topology.save(sc.topology.ring(2), tmp_path / "x.txt")
    assert not list(tmp_path.iterdir())
    path = write(tmp_path, "x.cfg", "{}")
    with pytest.raises(sc.TopologyError, match="unknown topology file type '.cfg'"):
        sc.topology.load(path)


def test_toml_writing_without_tomli_w_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tomli_w", None)
    with pytest.raises(sc.TopologyError, match=r"simcoll\[toml\]"):
        sc.topology.save(sc.topology.ring(2), tmp_path / "x.toml")
    assert not (tmp_path / "x.toml").exists()


@pytest.mark.parametrize("name, text, direct, spec", [
    ("p.yaml", "preset: dgx_h100\nargs: {nodes: 2}\n", lambda: sc.topology.dgx_h100(2),
     "dgx_h100:nodes=2"),
    ("p.toml", 'preset = "cluster"\n[args]\nnodes = 2\ngpus_per_node = 4\n'
               'inter_bandwidth = "400Gbps"\nintra_latency = 2.5e-7\n',
     lambda: sc.topology.cluster(2, 4, inter_bandwidth=5e10, intra_latency=2.5e-7),
     "cluster:nodes=2,gpus_per_node=4,intra_latency=2.5e-07,inter_bandwidth=400Gbps"),
    ("p.json", '{"preset": "torus", "args": {"dims": [2, 3], "latency": "3us"}}',
     lambda: sc.topology.torus((2, 3), latency=3e-6), "torus:dims=2x3,latency=3us"),
    ("p.yml", "preset: switch\nargs: {ranks: 3, servers: 1, server_latency: null}\n",
     lambda: sc.topology.switch(3, servers=1), "switch:n=3,servers=1,server_latency=none"),
])
def test_preset_files(tmp_path, name, text, direct, spec):
    topo = sc.topology.load(write(tmp_path, name, text))
    same_machine(topo, direct())
    assert topo.spec == spec
    assert sc.topology.from_spec(spec).links == topo.links
    same_machine(sc.topology.load(EXAMPLES / "dgx_h100x2.yaml"), sc.topology.dgx_h100(2))


@pytest.mark.parametrize("name, text, words", [
    ("e.json", "[]", ["e.json: expected a mapping with 'devices' and 'links'", "got list"]),
    ("e.yaml", "[]\n", ["e.yaml", "got list"]),
    ("e.yaml", "", ["e.yaml", "holds nothing"]),
    ("k.yaml", "devices:\n  - {name: g, kind: gpu}\n  - name: s\n    kind: swtch\nlinks: []\n",
     ["k.yaml, line 4: devices[1].kind", "'swtch' is not a device kind", "gpu, host"]),
    ("l.yaml", "devices:\n  - {name: g, kind: gpu}\n  - {name: h, kind: gpu}\nlinks:\n"
               "  - {u: g, v: h, bandwith: 1GB/s}\n",
     ["l.yaml, line 5: links[0].bandwith: unknown key", "u, v, bandwidth, latency, kind"]),
    ("m.yaml", "devices:\n  - {name: g, kind: gpu}\n  - {name: h, kind: gpu}\nlinks:\n"
               "  - {u: g, v: h}\n", ["links[0].bandwidth: missing"]),
    ("u.yaml", "devices:\n  - {name: g, kind: gpu}\n  - {name: h, kind: gpu}\nlinks:\n"
               "  - {u: g, v: h, bandwidth: 1GB/s, latency: 1GB/s}\n",
     ["line 5: links[0].latency", "not a time unit"]),
    ("n.yaml", "devices:\n  - {name: g, kind: gpu, node: -1}\nlinks: []\n",
     ["devices[0].node: expected a whole number >= 0, got -1"]),
    ("v.yaml", "devices:\n  - {name: g, kind: gpu}\nlinks:\n  - {u: g, v: x, bandwidth: 1}\n",
     ["links[0]", "unknown device 'x'"]),
    ("s.yaml", "devices:\n  - {name: g, kind: gpu, in_network: true}\nlinks: []\n",
     ["devices[0].in_network: applies to switches and NICs only"]),
    ("t.yaml", "devices:\n  - {name: s, kind: switch, in_network: 1}\nlinks: []\n",
     ["devices[0].in_network: expected true or false, got 1"]),
    ("y.yaml", "devices: [\n  {name: g\nlinks: []\n", ["y.yaml, line", "not valid YAML"]),
    ("t.toml", "name = \n", ["t.toml: not valid TOML", "line 1"]),
    ("j.json", '{\n"devices": [,]}', ["j.json, line 2: not valid JSON"]),
    ("d.yaml", "devices: {}\nlinks: []\n", ["d.yaml, line 1: devices: expected a list"]),
    ("x.yaml", "preset: switch\nargs: {n: 2, bandwith: 1GB/s}\n",
     ["x.yaml, line 2: args", "no parameter 'bandwith'", "did you mean 'bandwidth'"]),
    ("z.yaml", "preset: switch\nargs: {n: 2}\ndevices: []\n",
     ["z.yaml, line 3: devices: unknown key", "preset, args"]),
    ("w.yaml", "preset: warp_drive\n", ["unknown topology builder 'warp_drive'"]),
    # null for a parameter without 'none' became the text "none": a link kind of "none"
    ("k.yaml", "preset: switch\nargs: {n: 2, kind: null}\n",
     ["k.yaml, line 2: args.kind: null is not accepted for switch's 'kind', which has no "
      "'none'"]),
    ("a.yaml", "!!python/object/apply:os.system ['echo unsafe']\n",
     ["a.yaml", "not valid YAML", "python/object/apply"]),
    # A 400-digit bandwidth is as infinite as 1e400 (it raised a raw OverflowError).
    ("h.json", '{"devices": [{"name": "g", "kind": "gpu"}, {"name": "h", "kind": "gpu"}], '
               '"links": [{"u": "g", "v": "h", "bandwidth": ' + "9" * 400 + "}]}",
     ["h.json: links[0]: bandwidth of link ('g', 'h') = inf is not accepted"]),
    # A key given twice: YAML and JSON keep the last one, silently dropping the first.
    ("r.yaml", "devices:\n  - {name: g, kind: gpu}\n  - {name: h, kind: gpu}\nlinks:\n"
               "  - {u: g, v: h, bandwidth: 1GB/s}\nlinks:\n  - {u: g, v: h, bandwidth: 2GB/s}\n",
     ["r.yaml, line 6: links: given twice"]),
    ("q.yaml", "devices:\n  - {name: g, kind: gpu}\n  - {name: h, kind: gpu}\nlinks:\n"
               "  - {u: g, v: h, bandwidth: 1GB/s, bandwidth: 2GB/s}\n",
     ["q.yaml, line 5: links[0].bandwidth: given twice"]),
    ("q.json", '{"devices": [], "devices": [], "links": []}',
     ["q.json: key 'devices' given twice"]),
    # A machine that cannot run is named with its file, at load.
    ("c.yaml", "devices:\n  - {name: g, kind: gpu}\n  - {name: h, kind: gpu}\nlinks: []\n",
     ["c.yaml: topology 'c' is not connected: h cannot reach 'g'"]),
    ("o.yaml", "devices: []\nlinks: []\n", ["o.yaml: topology 'o' has no GPU",
                                            "a device of kind gpu in a file"]),
    ("p.yaml", "preset: dgx_h200\n", ["p.yaml, line 1: preset: unknown topology builder "
                                      "'dgx_h200' (did you mean 'dgx_h100'?)"]),
    # in_network: false beside a reduction rate loaded as an in-network device.
    ("n.yaml", "devices:\n  - {name: s, kind: switch, reduce_bandwidth: 1TB/s, "
               "in_network: false}\nlinks: []\n",
     ["n.yaml, line 2: devices[0].in_network: is false, but reduce_bandwidth makes the "
      "device reduce in the network"]),
    # A name of null or a list became the machine's name 'None' or "['a', 'b']"; a
    # missing list read "expected a list, got None".
    ("m.yaml", "name: null\ndevices: []\nlinks: []\n",
     ["m.yaml, line 1: name: expected a non-empty string, got None"]),
    ("m2.yaml", "name: [a, b]\ndevices: []\nlinks: []\n",
     ["m2.yaml, line 1: name: expected a non-empty string, got ['a', 'b']"]),
    ("m3.yaml", "devices:\n  - {name: g, kind: gpu}\n",
     ["m3.yaml, line 1: links: missing (a topology file lists its devices and links"]),
    # An alias's error names the line of the node it stands for (its first path's)
    ("al.yaml", "devices:\n  - &d {name: g, kind: gpu}\n  - *d\nlinks: []\n",
     ["al.yaml, line 2: devices[1]: device 'g' already exists"]),
    # Aliases nested 30 deep name 3^30 paths: recording each one's line ran for ever.
    ("l.yaml", "a0: &a0 [x, x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
                                           for i in range(1, 30)),
     ["l.yaml, line 1: a0: unknown key"]),
    # Python's own limits raised RecursionError and ValueError (status 1 on the command
    # line, which means a failed check).
    ("k.json", "[" * 100_000 + "]" * 100_000, ["k.json: nested too deeply to read as JSON"]),
    ("k.toml", "a = " + "[" * 100_000 + "]" * 100_000,
     ["k.toml: nested too deeply to read as TOML"]),
    ("i.yaml", "devices: " + "9" * 5000 + "\n",
     ["i.yaml, line 1: not valid YAML: cannot read '9999", "as int: Exceeds the limit "
      "(4300 digits)"]
     if hasattr(sys, "get_int_max_str_digits") else ["i.yaml, line 1: devices"]),
])
def test_malformed_files_name_file_key_line_and_expectation(tmp_path, name, text, words):
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(write(tmp_path, name, text))
    for word in words:
        assert word in str(info.value)
    # named once: a parser's TopologyError (a ValueError) was wrapped again
    assert str(info.value).count(name) == 1, str(info.value)


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(sc.TopologyError, match="cannot read topology file .*nope.yaml"):
        sc.topology.load(tmp_path / "nope.yaml")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(sc.TopologyError, match="bin.json"):
        sc.topology.load(tmp_path / "bin.json")


@pytest.mark.parametrize("read", [sc.topology.load, sc.topology.from_spec,
                                  sc.topology.from_astra_sim])
def test_a_path_no_file_can_have_is_named(tmp_path, read):
    # a raw OSError (name too long, from is_dir) or ValueError (embedded null byte) before
    long = str(tmp_path / ("x" * 300)) + ".yaml"
    with pytest.raises(sc.TopologyError, match=r"^cannot read topology file '.{60}\.\.\.': "
                                               r"File name too long$"):
        read(long)
    with pytest.raises(sc.TopologyError, match=r"^cannot read topology file 'a\\x00\.yml': "
                                               r"embedded null byte$"):
        read("a\0.yml")


def astra(tmp_path, blocks, npus, bandwidth, latency, name="net.yml"):
    return write(tmp_path, name, f"topology: {blocks}\nnpus_count: {npus}\n"
                                 f"bandwidth: {bandwidth}  # GB/s\nlatency: {latency}  # ns\n")


def test_astra_sim_config_in_three_dimensions():
    topo = sc.topology.from_astra_sim(EXAMPLES / "astra_ring_fc_switch.yml")
    assert topo.nranks == 64
    # ring of 2: one link per pair (32 groups); fully connected 8: 28 links in 8 groups;
    # switch of 4: 4 links and one switch in 16 groups
    assert len(topo.links) == 32 + 8 * 28 + 16 * 4
    assert len(topo.devices) == 64 + 16
    assert topo.gpu_nodes == tuple(r // 2 for r in range(64))
    # NPU 47 sits at [1, 7, 2] (ASTRA-sim's translate_address example): its dimension-0
    # neighbour is 46, dimension 1 joins it to 33, 35, ..., 45, dimension 2 to 15, 31, 63
    route = topo.route(47, 46)
    assert len(route.links) == 1
    assert (route.bandwidth, route.latency) == (200 * GiB, 50e-9)
    for peer in range(33, 47, 2):
        route = topo.route(47, peer)
        assert len(route.links) == 1 and route.bandwidth == 100 * GiB
        assert route.latency == 500e-9
    for peer in (15, 31, 63):
        route = topo.route(47, peer)
        assert len(route.links) == 2 and route.bandwidth == 50 * GiB
        assert route.latency == 2 * 2000e-9
    assert len(topo.route(47, 0).links) == 1 + 1 + 2  # one hop per dimension crossed
    assert topo.spec == str(EXAMPLES / "astra_ring_fc_switch.yml")


def test_astra_two_rings_are_a_torus_with_dimension_0_fastest(tmp_path):
    topo = sc.topology.load(astra(tmp_path, "[Ring, Ring]", "[4, 8]", "[80.0, 80.0]",
                                  "[1000.0, 1000.0]"))
    torus = sc.topology.torus((8, 4), bandwidth=80 * GiB, latency=1e-6)

    def pairs(t):
        return {frozenset((link.u, link.v)) for link in t.links}

    assert pairs(topo) == pairs(torus) and len(topo.links) == 64
    assert {(link.bandwidth, link.latency) for link in topo.links} == {(80 * GiB, 1e-6)}


def test_astra_switch_matches_the_switch_builder(tmp_path):
    topo = sc.topology.load(astra(tmp_path, "[ Switch ]", "[ 8 ]", "[ 400.0 ]", "[ 936.25 ]"))
    ref = sc.topology.switch(8, bandwidth=400 * GiB, latency=936.25e-9)
    for algorithm in ("ring", "direct", "tree"):
        a = sc.simulate(topo, "all_reduce", algorithm=algorithm, nbytes=1 << 20)
        b = sc.simulate(ref, "all_reduce", algorithm=algorithm, nbytes=1 << 20)
        assert a.time == b.time and list(a.bytes_sent) == list(b.bytes_sent)
    full = sc.topology.load(astra(tmp_path, "[FullyConnected]", "[5]", "[1]", "[0]", "f.yml"))
    assert {frozenset((x.u, x.v)) for x in full.links} == \
        {frozenset(p) for p in combinations(full.gpus, 2)}


def test_astra_numbers_in_exponent_form_without_a_dot_are_numbers(tmp_path):
    # PyYAML reads 5e1 (no dot) as a string; ASTRA-sim reads 50. It was refused.
    topo = sc.topology.load(astra(tmp_path, "[ Switch ]", "[ 4 ]", "[ 5e1 ]", "[ 1e3 ]"))
    assert {(link.bandwidth, link.latency) for link in topo.links} == {(50 * GiB, 1e-6)}


def test_astra_quoted_whole_numbers_are_numbers(tmp_path):
    # yaml-cpp's as<int> reads a quoted '4' as 4; it was refused ("a whole number, got '4'")
    topo = sc.topology.load(astra(tmp_path, "[ Ring ]", "[ '4' ]", "[ '200' ]", "[ '5' ]"))
    assert len(topo.gpus) == 4
    assert {(link.bandwidth, link.latency) for link in topo.links} == {(200 * GiB, 5e-9)}


@pytest.mark.parametrize("text, words", [
    ("topology: [Ring]\nnpus_count: [8]\nbandwidth: [tbd]\nlatency: [1]\n",
     ["line 3: bandwidth[0]: expected a number", "'tbd'"]),
    ("topology: [Ring, Ring]\nnpus_count: [8]\nbandwidth: [1, 1]\nlatency: [1, 1]\n",
     ["npus_count: has 1 entries but topology has 2 dimensions"]),
    ("topology: [Torus]\nnpus_count: [8]\nbandwidth: [1]\nlatency: [1]\n",
     ["line 1: topology[0]", "'Torus' is not one of Ring, FullyConnected, Switch"]),
    ("topology: [Ring]\nnpus_count: [0]\nbandwidth: [1]\nlatency: [1]\n",
     ["npus_count[0]: expected a whole number >= 2 (ASTRA-sim refuses fewer), got 0"]),
    # ASTRA-sim's NetworkParser refuses a dimension of one NPU: it built "Ring_Ring(4x1)"
    ("topology: [Ring, Ring]\nnpus_count: [4, 1]\nbandwidth: [1, 1]\nlatency: [1, 1]\n",
     ["npus_count[1]: expected a whole number >= 2 (ASTRA-sim refuses fewer), got 1"]),
    # the value as the file gives it, not as converted ("got 4.0")
    ("topology: [Ring]\nnpus_count: ['4.0']\nbandwidth: [1]\nlatency: [1]\n",
     ["npus_count[0]: expected a number (NPUs per dimension), got '4.0': ASTRA-sim "
      "(yaml-cpp) reads no integer there"]),
    # ASTRA-sim's older JSON format is named as such (it was "unknown key ... devices")
    ('{"topology-name": "Hierarchical", "units-count": [2, 8], "link-bandwidth": [25, 25]}',
     ["topology-name: a key of ASTRA-sim's older JSON network config", "npus_count"]),
    # Named at line 1, under the builder's own argument, in bytes/s: -1073741824.
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [0]\nlatency: [1]\n",
     ["line 3: bandwidth[0]: expected a finite number > 0 (GB/s per link), got 0"]),
    ("topology: [Ring, Switch]\nnpus_count: [4, 2]\nbandwidth: [100, -1]\nlatency: [1, 1]\n",
     ["line 3: bandwidth[1]: expected a finite number > 0 (GB/s per link), got -1"]),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [-5]\n",
     ["line 4: latency[0]: expected a finite number >= 0 (ns per link), got -5"]),
    # past float's range as written (a whole number: OverflowError) or once in bytes/s;
    # a rate below the smallest normal float once in bytes/s
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1" + "0" * 400 + "]\nlatency: [1]\n",
     ["line 3: bandwidth[0]: expected a finite number > 0 (GB/s per link), got 1000",
      "0000 (401 digits)"]),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1" + "0" * 400 + "]\n",
     ["line 4: latency[0]: expected a finite number >= 0 (ns per link), got 1000",
      "(401 digits)"]),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1.0e+300]\nlatency: [1]\n",
     ["line 3: bandwidth[0]: expected a number > 0 (GB/s per link) whose bytes/s (x 2^30) "
      "a float holds, from 2.07e-317 to 1.67e+299; got 1e+300"]),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1.0e-320]\nlatency: [1]\n",
     ["line 3: bandwidth[0]: expected a number > 0 (GB/s per link) whose bytes/s (x 2^30) "
      "a float holds, from 2.07e-317 to 1.67e+299; got 1e-320"]),
    # a machine too large, named where its NPU counts are (it was line 1)
    ("topology: [Ring, Ring]\nnpus_count: [4096, 4096]\nbandwidth: [1, 1]\nlatency: [1, 1]\n",
     ["line 2: npus_count: npus=[4096, 4096] is not accepted: the machine would have"]),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\n", ["latency: missing"]),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\nlinks: 3\n",
     ["links: unknown key in an ASTRA-sim network config"]),
])
def test_bad_astra_configs(tmp_path, text, words):
    path = write(tmp_path, "bad.yml", text)
    for reader in (sc.topology.load, sc.topology.from_astra_sim):
        with pytest.raises(sc.TopologyError) as info:
            reader(path)
        for word in ["bad.yml", *words]:
            assert word in str(info.value)


def test_a_misspelt_preset_is_named_at_preset_without_a_files_advice(tmp_path):
    """The name is refused where it is written (it was reported at args, on its line),
    and without "or the path of a topology file", which preset: does not take."""
    path = write(tmp_path, "typo.yaml", "preset: dgx_h10\nargs: {nodes: 2}\n")
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(path)
    text = str(info.value)
    assert "typo.yaml, line 1: preset: unknown topology builder 'dgx_h10' (did you mean " \
           "'dgx_h100'?); use one of " in text
    assert "path" not in text and "args" not in text
    with pytest.raises(sc.TopologyError, match="or the path of a topology file"):
        sc.topology.from_spec("dgx_h10:2")


def test_latencies_whose_sum_overflows_and_rates_whose_times_do_are_refused(tmp_path):
    """Each link's value passes its own check, but two latencies of 1e308 s sum to inf
    on a route, and 512 B at 3e-308 B/s take longer than the largest float: the run
    gave time nan, busbw inf and exit status 0. The route is refused, naming it, and a
    time past the float's range stops the run as a time past until= does."""
    devices = "devices:\n  - {name: g0, kind: gpu}\n  - {name: g1, kind: gpu}\n" \
              "  - {name: s, kind: switch}\nlinks:\n"
    path = write(tmp_path, "far.yaml", devices + "  - {u: g0, v: s, bandwidth: 1GB/s, "
                 "latency: 1e308}\n  - {u: g1, v: s, bandwidth: 1GB/s, latency: 1e308}\n")
    far = sc.topology.load(path)
    with pytest.raises(sc.TopologyError,
                       match=r"^the route from 'g0' to 'g1' has a latency past the float "
                             r"range: its links' latencies \(1e\+308, 1e\+308 s\) sum to "
                             r"inf; give latencies whose sum is finite$"):
        sc.simulate(far, "all_reduce", algorithm="ring", nbytes=1024)
    slow = sc.topology.switch(2, bandwidth=3e-308)
    for network in ("flow", "analytical", "flow_rtt"):
        for algorithm in ("ring", "naive"):
            for until in (1e6, math.inf):   # an inf time is past until=inf too
                with pytest.raises(sc.RunLimitError,
                                   match=r"reached times past the float range \(its next "
                                         r"event falls at t=inf s\) with rank 0, rank 1 "
                                         r"still running: link latencies or bandwidths so "
                                         r"extreme .*; give values a run's times can hold$"):
                    sc.simulate(slow, "all_reduce", algorithm=algorithm, nbytes=1024,
                                network=network, until=until)


def test_from_astra_sim_refuses_other_files(tmp_path):
    path = tmp_path / "m.yaml"
    sc.topology.save(sc.topology.ring(3), path)
    with pytest.raises(sc.TopologyError, match="m.yaml, line 1: name: unknown key in an ASTRA-sim"):
        sc.topology.from_astra_sim(path)


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".toml"])
def test_in_network_devices_round_trip(tmp_path, suffix):
    topo = sc.Topology("nvls")
    sw = topo.add_switch("nvswitch", reduce_bandwidth=4e11)
    free = topo.add_switch("sharp", reduce_bandwidth=float("inf"))
    plain = topo.add_switch("plain")
    for _ in range(2):
        topo.add_link(topo.add_gpu(), sw, bandwidth=1e11)
    topo.add_link(sw, free, bandwidth=1e11)
    topo.add_link(free, plain, bandwidth=1e11)
    path = tmp_path / f"m{suffix}"
    sc.topology.save(topo, path)
    again = sc.topology.load(path)
    assert again.in_network == ("nvswitch", "sharp")
    assert [(d.name, d.in_network, d.reduce_bandwidth) for d in again.devices] == [
        ("nvswitch", True, 4e11), ("sharp", True, float("inf")),
        ("plain", False, float("inf")), ("gpu0", False, float("inf")),
        ("gpu1", False, float("inf"))]


def test_a_null_back_bandwidth_is_the_bandwidth(tmp_path):
    text = ("devices:\n  - {name: g, kind: gpu}\n  - {name: h, kind: gpu}\nlinks:\n"
            "  - {u: g, v: h, bandwidth: 1GB/s, back_bandwidth: %s}\n")
    given = sc.topology.load(write(tmp_path, "n.yaml", text % "null"))
    omitted = sc.topology.load(write(tmp_path, "o.yaml", text.replace(", back_bandwidth: %s",
                                                                     "")))
    assert given.links == omitted.links and given.links[0].back is None


def test_a_spec_may_be_a_path_object():
    path = Path(__file__).parents[1] / "examples" / "topologies" / "two_nodes.yaml"
    assert (sc.topology.to_dict(sc.topology.from_spec(path))
            == sc.topology.to_dict(sc.topology.load(path)))


def test_a_topology_file_is_named_by_a_path():
    with pytest.raises(sc.TopologyError, match="a topology file is named by a path; got dict"):
        sc.topology.from_astra_sim({"topology": ["Ring"], "npus_count": [4]})


@pytest.mark.parametrize(("args", "message"), [
    ((["Ring"], [4], 1e9, [1e-6]), "multi_dim bandwidths=1000000000.0 is not accepted; give "
                                   "a sequence with one entry per dimension"),
    ((["Ring"], 4, [1e9], [1e-6]), "multi_dim npus=4 is not accepted; give a sequence"),
    (("Ring", [4], [1e9], [1e-6]), "multi_dim blocks='Ring' is not accepted"),
    ((["Ring"], [4], [1e9], 1e-6), "multi_dim latencies=1e-06 is not accepted"),
    # A bandwidth no link uses (one NPU) is checked all the same, as every builder does.
    ((["FullyConnected"], [1], [-5.0], [1e-6]),
     "dimension 0 (FullyConnected): bandwidths[0] = -5.0 is not accepted; use a number > 0"),
    ((["Ring", "Switch"], [2, 1], [1e9, 1e9], [1e-6, None]),
     "dimension 1 (Switch): latencies[1] = None is not accepted; use a number >= 0"),
    ((["Ring"], [4.0], [1e9], [1e-6]),
     "dimension 0 (Ring): npus[0] = 4.0 is not accepted; use an integer >= 1"),
])
def test_multi_dim_refuses_what_is_not_one_number_per_dimension(args, message, monkeypatch):
    """A scalar for a list raised a raw TypeError (no len()), and a negative rate that no
    link used was taken; each is now refused before anything is built."""
    monkeypatch.setattr(sc.Topology, "_add", lambda *a, **k: pytest.fail("built first"))
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.multi_dim(*args)
    assert str(info.value).startswith(message)


def test_multi_dim_takes_numpy_numbers_as_every_builder_does():
    """np.int64(4) NPUs were refused ('use a whole number >= 1')."""
    plain = sc.topology.multi_dim(["Ring", "Switch"], [4, 2], [1e9, 2e9], [1e-6, 0.0])
    same_machine(sc.topology.multi_dim(["Ring", "Switch"], np.array([4, 2]),
                                       np.array([1e9, 2e9]), (np.float64(1e-6), 0)), plain)
    assert plain.nranks == 8 and len(plain.links) == 8 + 8


def test_a_null_link_bandwidth_is_named_as_null():
    """It was read as inf: 'bandwidth of link ('a', 'b') = inf is not accepted'."""
    data = {"devices": [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"}],
            "links": [{"u": "a", "v": "b", "bandwidth": None}]}
    with pytest.raises(sc.TopologyError, match=r"^n.json: links\[0\].bandwidth: null is not "
                                               r"accepted; write a finite rate"):
        sc.topology.from_dict(data, source="n.json")


@pytest.mark.parametrize("libyaml", [True, False])
def test_yaml_reads_alike_with_and_without_libyaml(tmp_path, monkeypatch, libyaml):
    """The file is parsed once, by libyaml's loader where PyYAML has it, else by its
    Python one: the same machine, and the same line in an error."""
    if not libyaml:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    good = write(tmp_path, "g.yaml", "devices:\n  - {name: g, kind: gpu}\n"
                                     "  - {name: h, kind: gpu}\nlinks:\n"
                                     "  - {u: g, v: h, bandwidth: 2GB/s, latency: 1us}\n")
    topo = sc.topology.load(good)
    assert [(link.u, link.v, link.bandwidth, link.latency) for link in topo.links] == [
        ("g", "h", 2e9, 1e-6)]
    bad = write(tmp_path, "b.yaml", "devices:\n  - {name: g, kind: gpu}\n"
                                    "  - {name: h, kind: gpu}\nlinks:\n"
                                    "  - {u: g, v: h, bandwidth: fast}\n")
    with pytest.raises(sc.TopologyError, match=r"b.yaml, line 5: links\[0\].bandwidth"):
        sc.topology.load(bad)


@pytest.mark.parametrize("name, text", [
    ("b.json", '{"preset": "switch", "args": {"n": 3}}'),
    ("b.yaml", "preset: switch\nargs: {n: 3}\n"),
    ("b.toml", 'preset = "switch"\n[args]\nn = 3\n'),
])
def test_a_file_that_starts_with_a_byte_order_mark_reads_in_every_format(tmp_path, name, text):
    """Editors on Windows write UTF-8 with a byte-order mark: YAML read it, JSON refused
    it ("decode using utf-8-sig") and TOML said "Invalid statement"."""
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert sc.topology.load(path).nranks == 3


@pytest.mark.parametrize("libyaml", [True, False])
def test_yaml_merge_keys_take_an_anchored_entry_with_keys_overridden(tmp_path, monkeypatch,
                                                                     libyaml):
    # Building the data rewrote the merged mapping in place, so an overridden key read as
    # "given twice"; a key written twice by hand still is.
    if not libyaml:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    head = ("devices:\n  - {name: g0, kind: gpu}\n  - {name: g1, kind: gpu}\n"
            "  - {name: s, kind: switch}\nlinks:\n"
            "  - &nvl {u: g0, v: s, bandwidth: 100GB/s, latency: 1us, kind: nvlink}\n")
    topo = sc.topology.load(write(tmp_path, "m.yaml", head + "  - {<<: *nvl, u: g1}\n"))
    assert [(link.u, link.v, link.bandwidth, link.latency, link.kind) for link in topo.links] \
        == [("g0", "s", 1e11, 1e-6, "nvlink"), ("g1", "s", 1e11, 1e-6, "nvlink")]
    with pytest.raises(sc.TopologyError, match=r"^.*t.yaml, line 7: links\[1\].u: given "
                                               r"twice; give each key once$"):
        sc.topology.load(write(tmp_path, "t.yaml", head + "  - {u: g1, v: s, u: g0}\n"))


@pytest.mark.parametrize("kind", ["gpu", "host"])
def test_an_endpoint_that_does_not_reduce_in_the_network_keeps_its_own_reduction_rate(
        tmp_path, kind):
    # in_network: false is true of every GPU and host; their reduce_bandwidth is their
    # own reduction rate, not an in-network one.
    text = (f"devices:\n  - {{name: g0, kind: gpu}}\n  - {{name: g1, kind: gpu}}\n"
            f"  - {{name: e, kind: {kind}, in_network: false, reduce_bandwidth: 4GB/s}}\n"
            f"  - {{name: s, kind: switch}}\nlinks:\n"
            f"  - {{u: g0, v: s, bandwidth: 1GB/s}}\n  - {{u: g1, v: s, bandwidth: 1GB/s}}\n"
            f"  - {{u: e, v: s, bandwidth: 1GB/s}}\n")
    device = sc.topology.load(write(tmp_path, "e.yaml", text)).device("e")
    assert (device.kind, device.reduce_bandwidth, device.in_network) == (kind, 4e9, False)


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".toml"])
def test_a_file_without_a_name_names_the_machine_after_itself(tmp_path, suffix):
    # it was "custom" in every plot title and table header
    data = {"devices": [{"name": "g0", "kind": "gpu"}, {"name": "g1", "kind": "gpu"}],
            "links": [{"u": "g0", "v": "g1", "bandwidth": 1e9}]}
    text = {".yaml": yaml.safe_dump(data), ".json": json.dumps(data),
            ".toml": '[[devices]]\nname = "g0"\nkind = "gpu"\n[[devices]]\nname = "g1"\n'
                     'kind = "gpu"\n[[links]]\nu = "g0"\nv = "g1"\nbandwidth = 1e9\n'}[suffix]
    assert sc.topology.load(write(tmp_path, f"two_gpus{suffix}", text)).name == "two_gpus"
    assert sc.topology.from_dict(data).name == "custom"
    named = {**data, "name": "mine"}
    assert sc.topology.load(write(tmp_path, "other.json", json.dumps(named))).name == "mine"


def test_a_preset_file_keeps_the_presets_name_not_the_files(tmp_path):
    # only a file of devices and links is named after itself; a preset names its machine
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"preset": "switch", "args": {"ranks": 4}}))
    topo = sc.topology.load(path)
    assert topo.name == "switch(4)"
    assert topo.nranks == 4


def test_a_nic_with_in_network_false_and_a_reduction_rate_is_refused_as_a_switch_is(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text("devices:\n  - {name: n, kind: nic, reduce_bandwidth: 1TB/s, "
                    "in_network: false}\nlinks: []\n")
    with pytest.raises(sc.TopologyError, match=r"n.yaml, line 2: devices\[0\].in_network: is "
                                               r"false, but reduce_bandwidth makes the "
                                               r"device reduce in the network"):
        sc.topology.load(path)


def test_a_folder_or_an_empty_file_is_said_to_be_so(tmp_path):
    """A folder given as a spec was "unknown topology builder '/tmp'" (one named .yaml
    was already refused as a directory); an empty YAML file "expected a mapping ...,
    got NoneType None"."""
    folder = tmp_path / "machines"
    folder.mkdir()
    for spec in (str(folder), str(tmp_path / "machines.yaml")):
        if spec.endswith(".yaml"):
            Path(spec).mkdir()
        with pytest.raises(sc.TopologyError,
                           match=rf"^cannot read topology file {spec}: Is a directory$"):
            sc.topology.from_spec(spec)
    for text in ("", "# nothing yet\n", "null\n"):
        empty = tmp_path / "empty.yaml"
        empty.write_text(text)
        with pytest.raises(sc.TopologyError,
                           match=rf"^{empty} holds nothing \(it is empty, or only comments or "
                                 rf"null\); a topology file holds 'devices' and 'links' "
                                 rf"\(or 'preset'\)$"):
            sc.topology.load(empty)


def test_the_smallest_astra_bandwidth_a_float_holds_is_accepted(tmp_path):
    """The refusal says "from float_info.min / 2^30": 2^-1052 GB/s is exactly
    2^-1022 bytes/s, the smallest normal float, and is accepted; one subnormal step
    below it (2^-1052 - 2^-1074) is refused."""
    least = 2.0 ** -1052
    assert least * 2 ** 30 == sys.float_info.min
    ok = write(tmp_path, "least.yml", f"topology: [Ring]\nnpus_count: [4]\n"
                                      f"bandwidth: [{least!r}]\nlatency: [1]\n")
    assert len(sc.topology.from_astra_sim(ok).gpus) == 4
    below = write(tmp_path, "below.yml", f"topology: [Ring]\nnpus_count: [4]\n"
                                         f"bandwidth: [{least - 2.0 ** -1074!r}]\n"
                                         f"latency: [1]\n")
    with pytest.raises(sc.TopologyError, match="whose bytes/s"):
        sc.topology.from_astra_sim(below)


def test_null_for_an_unknown_preset_argument_names_the_unknown_parameter(tmp_path):
    """null is refused only for a known parameter without 'none'; for a key the builder
    does not have, the refusal is the unknown parameter's, listing the builder's
    parameters (mutant: optional.get(key, False) said "null is not accepted for switch's
    'bogus', which has no 'none'"); a parameter with 'none' takes null."""
    with pytest.raises(sc.TopologyError, match=r"switch has no parameter 'bogus'; switch: n, "):
        sc.topology.from_dict({"preset": "switch", "args": {"n": 2, "bogus": None}})
    topo = sc.topology.from_dict({"preset": "switch",
                                  "args": {"n": 2, "server_bandwidth": None}})
    assert topo.nranks == 2


def test_astra_quoted_signed_whole_numbers_are_numbers(tmp_path):
    topo = sc.topology.load(astra(tmp_path, "[ Ring ]", "[ '+4' ]", "[ '200' ]",  # noqa: F821
                                  "[ '5' ]"))
    assert len(topo.gpus) == 4


@pytest.mark.parametrize("where", ["device", "kind", "topology"])
def test_a_name_utf8_cannot_encode_is_refused_when_added(where, tmp_path):
    """A lone surrogate in a device name, a link's kind or the topology's name was
    accepted: saving to TOML then raised a raw UnicodeEncodeError and YAML wrote a file
    load refused. It is refused where it is given, naming it."""
    bad = "a\ud800"
    with pytest.raises(sc.TopologyError, match="UTF-8 cannot encode"):
        topo = sc.Topology(bad if where == "topology" else "t")
        first = topo.add_gpu(bad if where == "device" else "g0")
        topo.add_link(first, topo.add_gpu("g1"), bandwidth=1e9,
                      kind=bad if where == "kind" else "nvlink")
    renamed = sc.topology.switch(2)
    with pytest.raises(sc.TopologyError, match="UTF-8 cannot encode"):
        renamed.name = bad
    with pytest.raises(sc.TopologyError, match="is not accepted; use a non-empty string"):
        renamed.name = ""
    fine = sc.Topology("t")
    fine.add_link(fine.add_gpu("a\u00e9"), fine.add_gpu("g1"), bandwidth=1e9)
    for suffix in ("toml", "yaml", "json"):
        sc.topology.save(fine, tmp_path / f"m.{suffix}")
        assert sc.topology.load(tmp_path / f"m.{suffix}").devices == fine.devices


@pytest.mark.parametrize("value", [[4], [4, 4]])
def test_a_list_is_taken_only_by_a_dims_parameter_of_a_preset_file(value, tmp_path):
    """``args: {n: [4]}`` built switch(4): every list was joined with 'x', meant for
    dims. A list for a parameter of another kind is refused, naming it."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"preset": "switch", "args": {"n": value}}))
    with pytest.raises(sc.TopologyError, match=r"args\.n.*a list \[4.*is not accepted for "
                                                r"switch's 'n'; give one value"):
        sc.topology.load(path)
    path.write_text(json.dumps({"preset": "torus", "args": {"dims": [2, 2]}}))
    assert sc.topology.load(path).nranks == 4
    # a misspelled key is told as one, with its list
    path.write_text(json.dumps({"preset": "torus", "args": {"dim": [2, 2]}}))
    with pytest.raises(sc.TopologyError, match="did you mean 'dims'"):
        sc.topology.load(path)


def test_a_second_link_between_a_pair_is_refused_with_what_to_do():
    topo = sc.Topology("dup")
    a, b = topo.add_gpu(), topo.add_gpu()
    topo.add_link(a, b, bandwidth=25e9)
    with pytest.raises(sc.TopologyError, match="already linked: one link joins a pair .*"
                                               "one link of their summed bandwidth"):
        topo.add_link(b, a, bandwidth=25e9)


def test_a_topology_name_is_kept_as_given_when_set_or_assigned(tmp_path):
    """The name setter checks the name and keeps it as given (spaces and case too)."""
    topo = sc.Topology(" Rack A ")
    assert topo.name == " Rack A "
    topo.name = "  b\u00e9 "
    assert topo.name == "  b\u00e9 "
    with pytest.raises(sc.TopologyError, match="is not accepted; use a non-empty string"):
        topo.name = 3
    assert topo.name == "  b\u00e9 "


def test_an_astra_config_with_a_key_of_simcolls_own_names_that_key(tmp_path):
    """A stray devices: key was blamed on a 'name' key load() had added (line 1)."""
    path = tmp_path / "ring.yml"
    path.write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [100]\nlatency: [500]\n"
                    "devices: []\n")
    with pytest.raises(sc.TopologyError, match=r"ring.yml, line 5: devices: unknown key in "
                                               r"an ASTRA-sim network config"):
        sc.topology.load(path)


@pytest.mark.parametrize("written, match", [
    ("{a: 1}", r"line 2: args.kind: a dict \{'a': 1\} is not accepted for switch's 'kind'"),
    ("1e9", r"line 2: args.kind: expected a string for switch's 'kind', got 1000000000.0 "
            r"\(YAML 1.2 reads 1e9 as a number: quote it, '1e9'\)"),
    ("100", r"args.kind: expected a string for switch's 'kind', got 100 \(YAML 1.2 reads "
            r"100 as a number"),
])
def test_a_preset_files_text_parameter_refuses_what_is_no_text(tmp_path, written, match):
    """kind: {a: 1} made links of kind "{'a': 1}", and kind: 1e9 of kind
    '1000000000.0', where a device list's kind: 1e9 is refused with the same hint."""
    path = tmp_path / "preset.yaml"
    path.write_text(f"preset: switch\nargs: {{n: 4, kind: {written}}}\n")
    with pytest.raises(sc.TopologyError, match=match):
        sc.topology.load(path)
    path.write_text("preset: switch\nargs: {n: 4, kind: '1e9', bandwidth: 1e9}\n")
    topo = sc.topology.load(path)
    assert {link.kind for link in topo.links} == {"1e9"}
    assert {link.bandwidth for link in topo.links} == {1e9}


def test_a_preset_description_takes_numpy_numbers_as_python_ones():
    """np.int64(4) and np.float32 were refused as 'a int64 ... is not accepted'."""
    topo = sc.topology.from_dict({"preset": "switch",
                                  "args": {"n": np.int64(4), "bandwidth": np.float32(1e9)}})
    assert topo.nranks == 4 and {link.bandwidth for link in topo.links} == {1e9}


def test_an_astra_config_without_npus_count_is_told_by_its_list_of_topology_kinds(tmp_path):
    """A list of topology kinds marks an ASTRA-sim config without its npus_count: the
    missing key is named as ASTRA-sim's, not 'topology: unknown key' of simcoll's own
    format; and with a stray devices: key load() adds no name and blames that key."""
    path = tmp_path / "ring.yml"
    path.write_text("topology: [Ring]\nbandwidth: [100]\nlatency: [500]\n")
    with pytest.raises(sc.TopologyError, match=r"ring.yml, line 1: npus_count: missing \(an "
                                               r"ASTRA-sim network config"):
        sc.topology.load(path)
    with pytest.raises(sc.TopologyError, match=r"npus_count: missing \(an ASTRA-sim"):
        sc.topology.from_dict({"topology": ["Ring"], "bandwidth": [100], "latency": [500]})
    path.write_text("topology: [Ring]\nbandwidth: [100]\nlatency: [500]\ndevices: []\n")
    with pytest.raises(sc.TopologyError, match=r"ring.yml, line 4: devices: unknown key in "
                                               r"an ASTRA-sim network config"):
        sc.topology.load(path)


def test_a_machine_load_would_refuse_is_not_saved(tmp_path):
    """save wrote a machine with an unlinked GPU, which load then refused."""
    half = sc.Topology("half built")
    a, b, c = half.add_gpu(), half.add_gpu(), half.add_gpu()
    half.add_link(a, b, bandwidth=1e9)
    path = tmp_path / "half.yaml"
    with pytest.raises(sc.TopologyError, match=r"^not saved, as load\(\) would refuse it: "
                                               r"topology 'half built' is not connected"):
        sc.topology.save(half, path)
    assert not path.exists()
    half.add_link(b, c, bandwidth=1e9)
    sc.topology.save(half, path)
    assert sc.topology.to_dict(sc.topology.load(path)) == sc.topology.to_dict(half)


def test_a_numpy_integer_node_is_read_as_every_count_is():
    """A device's node of np.int64(1) was refused; add_gpu takes it."""
    machine = sc.topology.from_dict(
        {"devices": [{"name": "g0", "kind": "gpu", "node": np.int64(1)},
                     {"name": "g1", "kind": "gpu", "node": np.uint8(0)}],
         "links": [{"u": "g0", "v": "g1", "bandwidth": 1e9}]})
    assert machine.gpu_nodes == (1, 0) and type(machine.gpu_nodes[0]) is int
    with pytest.raises(sc.TopologyError, match=r"node: expected a whole number >= 0, got "
                                               r"np.True_"):
        sc.topology.from_dict({"devices": [{"name": "g0", "kind": "gpu",
                                            "node": np.bool_(True)}], "links": []})


def test_link_index_finds_each_link_of_a_large_switch():
    machine = sc.topology.switch(300)
    names = [link.u if link.u != "switch" else link.v for link in machine.links]
    assert [machine.link_index("switch", name) for name in names] == list(range(300))
    assert [machine.link_index(name, "switch") for name in names] == list(range(300))
    with pytest.raises(sc.TopologyError, match=r"no link between 'gpu0' and 'gpu1'"):
        machine.link_index("gpu0", "gpu1")


@pytest.mark.parametrize("read", [sc.topology.load, sc.topology.from_spec,
                                  sc.topology.from_astra_sim])
def test_a_short_path_with_a_nul_byte_is_named_whole(read):
    # quoted for the NUL, and whole: 20 characters are far from the 100 that are cut
    with pytest.raises(sc.TopologyError, match=r"^cannot read topology file "
                                               r"'machines\\x00file\.yaml': embedded null "
                                               r"byte$"):
        read("machines\0file.yaml")
