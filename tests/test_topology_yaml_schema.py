"""YAML topology files are read by YAML 1.2's core schema (yaml.org/spec/1.2.2, section
10.3.2), not by PyYAML's YAML 1.1 rules: ``1:20`` is not 80, ``010`` is 10, ``yes`` is a
string, ``1e9`` is a float; and a saved file reads back exactly. Every expected value
below is worked by hand from the spec's table."""

from __future__ import annotations

import math

import pytest
import yaml

import simcoll as sc
from simcoll.topology.formats import read


@pytest.fixture(params=["libyaml", "python"])
def parser(request, monkeypatch):
    """Each test runs with libyaml's parser and with PyYAML's own (as the file tests do)."""
    if request.param == "python":
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    return request.param


def machine(tmp_path, *, name="m", a="g0", b="g1", node="0", bandwidth="100GB/s",
            latency="1us", file="m.yaml"):
    """A two-GPU file; the keyword arguments are written as given (plain scalars)."""
    path = tmp_path / file
    path.write_text(f"name: {name}\n"
                    f"devices:\n"
                    f"  - {{name: {a}, kind: gpu, node: {node}}}\n"
                    f"  - {{name: {b}, kind: gpu}}\n"
                    f"links:\n"
                    f"  - {{u: {a}, v: {b}, bandwidth: {bandwidth}, latency: {latency}}}\n")
    return path


def test_plain_scalars_resolve_by_the_yaml_1_2_core_schema(tmp_path, parser):
    cases = {   # text: YAML 1.2 core (PyYAML's YAML 1.1 reading in the comment)
        "sexagesimal": ("1:20", "1:20"),          # 80
        "octal_looking": ("010", 10),              # 8
        "octal": ("0o17", 15),                     # the string '0o17'
        "hex": ("0x1F", 31),
        "binary": ("0b101", "0b101"),              # 5
        "underscored": ("1_000", "1_000"),         # 1000
        "exponent": ("1e9", 1e9),                  # the string '1e9' (1.1 floats need a dot)
        "exponent_dot": ("1.5e9", 1.5e9),          # a string too (1.1 wants e+9)
        "signed": ("-2.5E-1", -0.25),
        "leading_dot": (".5", 0.5),
        "trailing_dot": ("3.", 3.0),
        "word_yes": ("yes", "yes"), "word_No": ("No", "No"),         # booleans
        "word_ON": ("ON", "ON"), "word_off": ("off", "off"),
        "bool_true": ("true", True), "bool_FALSE": ("FALSE", False),
        "date": ("2024-01-01", "2024-01-01"),      # datetime.date
        "equals": ("=", "="),                      # PyYAML cannot construct its 'value' tag
        "inf": (".inf", math.inf), "minus_inf": ("-.Inf", -math.inf),
        "plus_inf": ("+.INF", math.inf),
        "null_null": ("null", None), "tilde": ("~", None), "null_Null": ("Null", None),
        "empty": ("", None),
        "quoted": ("'010'", "010"),
        "tagged_int": ('!!int "010"', 10),         # 8
        "tagged_str": ("!!str 0x10", "0x10"),
    }
    path = tmp_path / "s.yaml"
    path.write_text("".join(f"{key}: {text}\n" for key, (text, _) in cases.items())
                    + "nan: .NaN\n")
    data, ctx = read(path)
    nan = data.pop("nan")
    assert isinstance(nan, float) and math.isnan(nan)
    assert data == {key: value for key, (_, value) in cases.items()}
    # 10 (int) is not 10.0 (float), nor True 1: the types are the spec's too
    assert [type(data[k]) for k in ("octal_looking", "exponent", "bool_true", "sexagesimal")] \
        == [int, float, bool, str]
    assert ctx.lines[("inf",)] == list(cases).index("inf") + 1   # lines are kept


@pytest.mark.parametrize("latency", ["1:20", "1_000", "0b101"])
def test_yaml_1_1_only_numbers_are_refused_as_times_not_read_as_80_1000_or_5(
        tmp_path, parser, latency):
    with pytest.raises(sc.TopologyError,
                       match=rf"m\.yaml, line 6: links\[0\]\.latency: '{latency}' is not a "
                             rf"time such as 1us"):
        sc.topology.load(machine(tmp_path, latency=latency))


def test_a_leading_zero_is_decimal_not_octal(tmp_path, parser):
    topo = sc.topology.load(machine(tmp_path, latency="010", node="010"))
    assert topo.links[0].latency == 10.0      # seconds; YAML 1.1 read 8
    assert topo.devices[0].node == 10


def test_octal_and_hex_integers_of_yaml_1_2(tmp_path, parser):
    topo = sc.topology.load(machine(tmp_path, bandwidth="0x10", latency="0o10", node="0o17"))
    assert (topo.links[0].bandwidth, topo.links[0].latency) == (16.0, 8.0)
    assert topo.devices[0].node == 15


@pytest.mark.parametrize("bandwidth, value", [("1e9", 1e9), ("1E+9", 1e9), ("1.5e9", 1.5e9),
                                              ("25e-1", 2.5)])
def test_a_bandwidth_in_exponent_form_is_a_number_and_the_same_machine(tmp_path, parser,
                                                                       bandwidth, value):
    path = machine(tmp_path, bandwidth=bandwidth)
    data, _ = read(path)
    assert data["links"][0]["bandwidth"] == value
    assert isinstance(data["links"][0]["bandwidth"], float)   # YAML 1.1 read a string
    topo = sc.topology.load(path)
    quoted = sc.topology.load(machine(tmp_path, bandwidth=f"'{bandwidth}'", file="q.yaml"))
    assert topo.links == quoted.links                 # as simcoll reads the string
    assert topo.links[0].bandwidth == value


@pytest.mark.parametrize("name", ["yes", "No", "ON", "off", "2024-01-01"])
def test_words_yaml_1_1_reads_as_booleans_or_dates_are_names(tmp_path, parser, name):
    other = "n0" if name != "off" else "on"
    topo = sc.topology.load(machine(tmp_path, name=name, a=name, b=other))
    assert topo.name == name
    assert [d.name for d in topo.devices] == [name, other]
    assert (topo.links[0].u, topo.links[0].v) == (name, other)


def test_infinite_rates_and_nulls_beside_yaml_1_2_numbers(tmp_path, parser):
    # .inf and null read alike by YAML 1.1 and 1.2; 010 (node 10, not 8) tells them apart
    path = tmp_path / "i.yaml"
    path.write_text("devices:\n"
                    "  - {name: g0, kind: gpu, reduce_bandwidth: .inf, node: 010}\n"
                    "  - {name: g1, kind: gpu, reduce_bandwidth: NULL}\n"
                    "  - {name: g2, kind: gpu, reduce_bandwidth: 1e9}\n"
                    "links:\n"
                    "  - {u: g0, v: g1, bandwidth: 1e9, back_bandwidth: ~}\n"
                    "  - {u: g1, v: g2, bandwidth: 1e9, back_bandwidth: null}\n")
    topo = sc.topology.load(path)
    assert [(d.reduce_bandwidth, d.node) for d in topo.devices] == [
        (math.inf, 10), (math.inf, 0), (1e9, 0)]
    assert [(link.bandwidth, link.back) for link in topo.links] == [(1e9, None)] * 2


def test_merge_keys_still_merge_the_yaml_1_2_values(tmp_path, parser):
    path = tmp_path / "merge.yaml"
    path.write_text("devices:\n  - {name: g0, kind: gpu}\n  - {name: g1, kind: gpu}\n"
                    "  - {name: s, kind: switch}\n"
                    "links:\n"
                    "  - &fast {u: g0, v: s, bandwidth: 1e9, latency: 010}\n"
                    "  - {<<: *fast, u: g1}\n"
                    "  - {<<: [*fast], u: g0, v: g1, latency: 0o10}\n")
    topo = sc.topology.load(path)
    assert [(link.u, link.v, link.bandwidth, link.latency) for link in topo.links] == [
        ("g0", "s", 1e9, 10.0), ("g1", "s", 1e9, 10.0), ("g0", "g1", 1e9, 8.0)]


AWKWARD = ["yes", "on", "Off", "1:20", "010", "09", "0o17", "1_000", "1e9", "1.5e9", "-.inf",
           "2024-01-01", "=", "~", "null", "True"]


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_awkward_names_are_quoted_when_saved_and_read_back_exactly(tmp_path, parser, suffix):
    topo = sc.topology.Topology("1e9")
    gpus = [topo.add_gpu(name) for name in AWKWARD]
    hub = topo.add_switch("0x10")
    for g in gpus:
        topo.add_link(g, hub, bandwidth=1e9, latency=1e-6)
    path = tmp_path / f"awkward{suffix}"
    sc.topology.save(topo, path)
    again = sc.topology.load(path)
    assert again.name == "1e9"
    assert [d.name for d in again.devices] == AWKWARD + ["0x10"]
    assert again.devices == topo.devices and again.links == topo.links
    # Every name is quoted: read alike by YAML 1.2 and by YAML 1.1 readers (PyYAML's).
    text = path.read_text()
    assert yaml.safe_load(text)["name"] == "1e9"
    assert [d["name"] for d in yaml.safe_load(text)["devices"]] == AWKWARD + ["0x10"]
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    entries = dict((k.value, v) for k, v in root.value)
    names = [v for device in entries["devices"].value for k, v in device.value
             if k.value == "name"] + [entries["name"]]
    assert [(n.value, n.style) for n in names if n.style not in ("'", '"')] == []


@pytest.mark.parametrize("name", ["1e9", "09", "0o17", "+.5", "2024"])
def test_a_topology_name_read_as_a_number_keeps_the_text_written(tmp_path, parser, name):
    assert sc.topology.load(machine(tmp_path, name=name)).name == name


@pytest.mark.parametrize("device, value", [("1e3", "1000.0"), ("09", "9"), ("0o17", "15")])
def test_a_device_name_read_as_a_number_is_refused_with_the_text_written(tmp_path, parser,
                                                                         device, value):
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(machine(tmp_path, a=device))
    assert (f"m.yaml, line 3: devices[0].name: expected a non-empty string, got {value} "
            f"(YAML 1.2 reads {device} as a number: quote it, '{device}')") in str(info.value)


@pytest.mark.parametrize("key, kind", [("010", "int"), ("1e9", "float"), ("yes: 1\n  no", "str"),
                                       ("true", "bool"), ("null", "null")])
def test_a_key_that_is_no_string_is_refused_on_its_line(tmp_path, parser, key, kind):
    """The file's keys are names: a key read as a number (once shown as 10 on line 1, the
    mapping's line, and free to repeat a key written 10) is refused where it stands."""
    path = tmp_path / "k.yaml"
    path.write_text(f"name: k\ndevices: []\nlinks: []\nextra:\n  a: 1\n  {key}: 2\n")
    if kind == "str":   # yes / no are names (strings) in YAML 1.2: only unknown keys
        with pytest.raises(sc.TopologyError, match=r"k.yaml, line 4: extra: unknown key"):
            sc.topology.load(path)
        return
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(path)
    assert str(info.value) == (f"{path}, line 6: extra.{key}: a key YAML 1.2 reads as "
                               f"{kind}, where keys are names; quote it")


@pytest.mark.parametrize("value, says", [
    ("!!int ''", "cannot read '' as int"),
    ("!!float ''", "cannot read '' as float"),
    ("!!bool maybe", "cannot read 'maybe' as bool"),
    ("!!int '-'", "cannot read '-' as int"),
    ("!!timestamp abc", "cannot read 'abc' as timestamp"),
    ("!!int abc", "cannot read 'abc' as int: invalid literal for int() with base 10: 'abc'"),
    ("!!int '" + "7" * 50 + "x'", "cannot read '" + "7" * 37 + "...' as int: invalid literal"),
])
def test_a_tagged_value_that_cannot_be_read_names_its_line(tmp_path, parser, value, says):
    """An explicit tag on a value it cannot hold raised IndexError, KeyError or
    AttributeError (Python's own words, 'string index out of range', say nothing here)."""
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(machine(tmp_path, node=value))
    assert f"m.yaml, line 3: not valid YAML: {says}" in str(info.value)


@pytest.mark.parametrize("tagged", ["!!float [1]", "!!int {a: 1}"])
def test_a_number_tag_on_a_list_or_mapping_is_refused_as_yaml(tmp_path, parser, tagged):
    path = tmp_path / "t.yaml"
    path.write_text(f"name: t\ndevices: {tagged}\nlinks: []\n")
    with pytest.raises(sc.TopologyError, match=r"t\.yaml, line 2: not valid YAML: expected a "
                                               r"scalar node, but found"):
        sc.topology.load(path)


def astra_config(tmp_path, npus, bandwidth="[50, 100]"):
    path = tmp_path / "net.yml"
    path.write_text(f"topology: [Ring, Switch]\nnpus_count: {npus}\nbandwidth: {bandwidth}\n"
                    f"latency: [1, 1]\n")
    return path


@pytest.mark.parametrize("npus, gpus", [
    ("[010, 2]", 16),     # octal 8, as yaml-cpp's as<int> reads it (YAML 1.2 reads 10)
    ("['010', 2]", 16),   # quoted: the same text to yaml-cpp
    ("[0x4, 2]", 8),
    ("[+3, 2]", 6),
    ("[4, 2]", 8),
])
def test_an_astra_sim_count_is_read_as_yaml_cpp_reads_its_text(tmp_path, parser, npus, gpus):
    assert len(sc.topology.load(astra_config(tmp_path, npus)).gpus) == gpus


@pytest.mark.parametrize("npus", ["[08, 2]", "[0o17, 2]", "[2e0, 2]", "[' 4', 2]"])
def test_an_astra_sim_count_yaml_cpp_cannot_read_is_refused(tmp_path, parser, npus):
    text = npus[1:].split(",")[0]
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(astra_config(tmp_path, npus))
    assert (f"net.yml, line 2: npus_count[0]: expected a number (NPUs per dimension), got "
            f"{text.strip(chr(39))!r}: ASTRA-sim (yaml-cpp) reads no integer there"
            ) in str(info.value)


def test_an_astra_sim_bandwidth_with_an_underscore_is_refused(tmp_path, parser):
    """Python's float() reads '1_0' as 10; yaml-cpp's as<double> reads nothing."""
    with pytest.raises(sc.TopologyError, match=r"bandwidth\[0\]: expected a number .*got "
                                               r"'1_0': ASTRA-sim \(yaml-cpp\) reads no "
                                               r"number there"):
        sc.topology.load(astra_config(tmp_path, "[2, 2]", "['1_0', 100]"))


def _values(tmp_path, cases):
    path = tmp_path / "v.yaml"
    path.write_text("".join(f"{key}: {text}\n" for key, (text, _) in cases.items()))
    data, _ = read(path)
    return data


def test_every_spelling_of_the_core_schemas_booleans(tmp_path, parser):
    """YAML 1.2's core schema: true, True, TRUE, false, False, FALSE."""
    cases = {"a": ("true", True), "b": ("True", True), "c": ("TRUE", True),
             "d": ("false", False), "e": ("False", False), "f": ("FALSE", False),
             "g": ("tRUE", "tRUE"), "h": ("y", "y")}
    data = _values(tmp_path, cases)
    assert data == {key: value for key, (_, value) in cases.items()}
    assert [type(data[k]) for k in "abcdef"] == [bool] * 6


def test_signed_decimal_integers_are_integers(tmp_path, parser):
    """The core schema's int is [-+]?[0-9]+: a sign is part of an integer, not a float."""
    cases = {"minus": ("-3", -3), "plus": ("+5", 5), "plus_zero": ("+0", 0),
             "minus_leading_zero": ("-010", -10)}
    data = _values(tmp_path, cases)
    assert data == {key: value for key, (_, value) in cases.items()}
    assert {key: type(value) for key, value in data.items()} == dict.fromkeys(cases, int)


def test_octal_and_hex_digits_outside_their_base_make_a_string(tmp_path, parser):
    """0o[0-7]+ and 0x[0-9a-fA-F]+: 0o18 and 0x1G are no integers, so strings."""
    cases = {"octal": ("0o7", 7), "octal_8": ("0o18", "0o18"), "hex": ("0xfF", 255),
             "hex_g": ("0x1G", "0x1G"), "signed_hex": ("-0x10", "-0x10")}
    data = _values(tmp_path, cases)
    assert data == {key: value for key, (_, value) in cases.items()}


def test_an_explicit_tag_reads_yaml_1_1_forms(tmp_path, parser):
    """With an explicit !!int, !!float or !!bool the YAML 1.1 forms still read:
    0b101 = 5, 1:20 = 1 x 60 + 20 = 80, 1:30 = 90.0, 1_000 = 1000, yes = true."""
    cases = {"binary": ("!!int 0b101", 5), "base60": ("!!int 1:20", 80),
             "underscored": ("!!int 1_000", 1000), "float_base60": ("!!float 1:30", 90.0),
             "word": ("!!bool yes", True)}
    data = _values(tmp_path, cases)
    assert data == {key: value for key, (_, value) in cases.items()}
    assert type(data["float_base60"]) is float


@pytest.mark.skipif(not getattr(yaml, "__with_libyaml__", False),
                    reason="PyYAML built without libyaml")
def test_libyaml_parses_where_pyyaml_has_it_and_pyyaml_itself_where_not(tmp_path, parser):
    """The two parsers word a flow sequence left open differently: libyaml 'did not find
    expected', PyYAML's own 'expected ..., but got'."""
    path = tmp_path / "open.yaml"
    path.write_text("a: [1, 2\nb: 3\n")
    wording = {"libyaml": r"did not find expected ',' or '\]'",
               "python": r"expected ',' or '\]', but got ':'"}[parser]
    with pytest.raises(sc.TopologyError, match=rf"open\.yaml, line 2: not valid YAML: {wording}"):
        read(path)


GiB_BYTES = 2**30
"""ASTRA-sim's GB (bandwidths are GB/s with GB = 2^30 bytes)."""


@pytest.mark.parametrize("written, shown", [("true", "True"), ("FALSE", "False"),
                                            ("null", "None"), ("~", "None")])
def test_a_device_name_read_as_a_boolean_or_null_gets_no_number_hint(tmp_path, parser,
                                                                     written, shown):
    """Only a value YAML read as a number is said to be read as one."""
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(machine(tmp_path, a=written))
    message = str(info.value)
    assert message.endswith(f"m.yaml, line 3: devices[0].name: expected a non-empty "
                            f"string, got {shown}")
    assert "as a number" not in message


@pytest.mark.parametrize("written, shown", [("!!float '1e3'", "1000.0"),
                                            ('!!int "5"', "5")])
def test_a_quoted_device_name_tagged_as_a_number_is_not_told_to_be_quoted(
        tmp_path, parser, written, shown):
    """A quoted name is a string to YAML 1.2; only its explicit tag makes it a number,
    so the refusal does not tell to quote what is quoted already."""
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(machine(tmp_path, a=written))
    message = str(info.value)
    assert message.endswith(f"devices[0].name: expected a non-empty string, got {shown}")
    assert "quote it" not in message


def test_a_tagged_value_past_a_floats_range_names_its_line(tmp_path, parser):
    """YAML 1.1's base 60 under an explicit !!float: 200 fields of 1 make a whole
    number past 60^199 > 10^353, which no float holds (Python raises OverflowError)."""
    value = "!!float " + ":".join(["1"] * 200)
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(machine(tmp_path, node=value))
    assert "m.yaml, line 3: not valid YAML: cannot read" in str(info.value)
    assert " as float: " in str(info.value)


@pytest.mark.parametrize("npus, gpus", [
    ("[0X4, 2]", 8),      # an upper-case prefix: hex 4 (a string to YAML 1.2)
    ("[0xA, 2]", 20),     # an upper-case hex digit: 10
    ("[0xb, 2]", 22),     # a lower-case one: 11
    ("['4 ', 2]", 8),     # trailing white space: yaml-cpp reads past it (stream >> ws)
    ("['4\t', 2]", 8),
    ("['0', 2]", None),   # a lone 0 is 0 in any base: refused as fewer than 2 NPUs
])
def test_an_astra_sim_count_in_more_forms_yaml_cpp_reads(tmp_path, parser, npus,
                                                         gpus):
    """yaml-cpp's as<int> reads a count as C++'s stream does with std::dec unset: the
    base from its prefix (0x or 0X: hex, any case of digit), white space after it."""
    path = astra_config(tmp_path, npus)
    if gpus is None:
        with pytest.raises(sc.TopologyError, match=r"npus_count\[0\]: expected a whole "
                                                   r"number >= 2"):
            sc.topology.load(path)
        return
    assert len(sc.topology.load(path).gpus) == gpus


def test_an_astra_sim_count_with_an_underscore_is_refused(tmp_path, parser):
    """yaml-cpp's stream stops at '_' (1_0 is 1 with '_0' left over): no integer."""
    with pytest.raises(sc.TopologyError) as info:
        sc.topology.load(astra_config(tmp_path, "[1_0, 2]"))
    assert ("net.yml, line 2: npus_count[0]: expected a number (NPUs per dimension), got "
            "'1_0': ASTRA-sim (yaml-cpp) reads no integer there") in str(info.value)


def test_a_negative_hex_astra_sim_count_is_negative(tmp_path, parser):
    """-0x4 is -4 to C++'s stream (a sign, then the base from the prefix): fewer than
    2 NPUs, refused; not the 4 NPUs of 0x4."""
    with pytest.raises(sc.TopologyError, match=r"net\.yml, line 2: npus_count\[0\]: expected "
                                               r"a whole number >= 2 \(ASTRA-sim refuses "
                                               r"fewer\)"):
        sc.topology.load(astra_config(tmp_path, "[-0x4, 2]"))


@pytest.mark.parametrize("bandwidth, first", [
    ("['5e+1', 100]", 50.0),   # a signed exponent
    ("['5E-1', 100]", 0.5),
    ("['.5', 100]", 0.5),      # no digit before the point
    ("['50.', 100]", 50.0),    # none after it
    ("['50 ', 100]", 50.0),    # white space after
    ("['50\t', 100]", 50.0),
])
def test_a_quoted_astra_sim_bandwidth_is_read_as_yaml_cpp_reads_a_double(
        tmp_path, parser, bandwidth, first):
    """yaml-cpp's as<double> reads a decimal number as C++'s stream does: a signed
    exponent, a point with digits on either side only, white space after."""
    topo = sc.topology.load(astra_config(tmp_path, "[2, 2]", bandwidth))
    assert sorted({link.bandwidth for link in topo.links}) == sorted(
        {first * GiB_BYTES, 100 * GiB_BYTES})


def test_a_quoted_astra_sim_bandwidth_with_space_before_is_refused(tmp_path,
                                                                   parser):
    """yaml-cpp reads with std::noskipws: a space before the number reads no double."""
    with pytest.raises(sc.TopologyError, match=r"bandwidth\[0\]: expected a number .*got "
                                               r"' 50': ASTRA-sim \(yaml-cpp\) reads no "
                                               r"number there"):
        sc.topology.load(astra_config(tmp_path, "[2, 2]", "[' 50', 100]"))


def test_an_aliased_astra_sim_count_is_read_as_written_at_each_use(tmp_path, parser):
    """yaml-cpp reads the anchored 010 as octal 8 wherever it is used: 8 x 8 NPUs (the
    second use read YAML's 10: 80)."""
    assert len(sc.topology.load(astra_config(tmp_path, "[&n 010, *n]")).gpus) == 64


@pytest.mark.parametrize("bandwidth", ["[0x10, 100]", "[0o10, 100]"])
def test_an_astra_sim_bandwidth_in_hex_or_0o_is_refused(tmp_path, parser, bandwidth):
    """yaml-cpp's as<double> (libstdc++) reads neither 0x10 nor 0o10, where YAML 1.2
    reads 16 and 8."""
    text = bandwidth[1:].split(",")[0]
    with pytest.raises(sc.TopologyError, match=rf"line 3: bandwidth\[0\]: expected a number "
                                               rf"\(GB/s per link, GB = 2\^30 bytes\), got "
                                               rf"'{text}': ASTRA-sim \(yaml-cpp\) reads no "
                                               rf"number there"):
        sc.topology.load(astra_config(tmp_path, "[2, 2]", bandwidth))


@pytest.mark.parametrize("bandwidth, shown", [("[.inf, 100]", "inf"), ("['-.Inf', 100]", "-inf"),
                                              ("[.NaN, 100]", "nan")])
def test_an_astra_sim_infinite_or_nan_bandwidth_is_refused_as_not_finite(tmp_path, parser,
                                                                       bandwidth, shown):
    """yaml-cpp reads .inf, -.Inf and .NaN (conversion::IsInfinity, IsNaN): the value is
    refused for what it is, not as unreadable."""
    with pytest.raises(sc.TopologyError, match=rf"line 3: bandwidth\[0\]: expected a finite "
                                               rf"number > 0 \(GB/s per link\), got {shown}$"):
        sc.topology.load(astra_config(tmp_path, "[2, 2]", bandwidth))


def test_an_astra_sim_count_below_two_is_shown_as_written(tmp_path, parser):
    with pytest.raises(sc.TopologyError, match=r"line 2: npus_count\[0\]: expected a whole "
                                               r"number >= 2 \(ASTRA-sim refuses fewer\), got "
                                               r"0x1$"):
        sc.topology.load(astra_config(tmp_path, "[0x1, 2]"))


def test_a_list_key_is_named_by_its_kind_not_by_its_nodes(tmp_path):
    """A flow-sequence key was named by PyYAML's node repr ([ScalarNode(tag=...), ...])."""
    path = tmp_path / "key.yaml"
    path.write_text("devices:\n  - {name: g0, kind: gpu}\nlinks: []\n? [a, b]\n: c\n")
    with pytest.raises(sc.TopologyError) as caught:
        sc.topology.load(path)
    assert str(caught.value) == (f"{path}, line 4: a list: a key YAML 1.2 reads as seq, "
                                 f"where keys are names; quote it")
