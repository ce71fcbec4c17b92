"""NCCL's environment variables read by ``simcoll run --algorithm nccl``, as a command
copied from a real run sets them: the same choice as the matching --param, a note for
each variable, --param first, and values NCCL would refuse refused naming the variable."""

from __future__ import annotations

import json
import os

import pytest
from test_cli import cli, table_rows

H100 = ("run", "--topology", "dgx_h100:nodes=1", "--algorithm", "nccl")
RING = ("--param", "algo=ring")   # keeps a channel count's checks off NVLS, which has its own


@pytest.fixture(autouse=True)
def no_nccl_environment(monkeypatch):
    for name in [n for n in os.environ if n.startswith("NCCL_")]:
        monkeypatch.delenv(name)


def records(capsys, monkeypatch, env, *argv):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    status, out, err = cli(capsys, *H100, "--json", *argv)
    assert status == 0, err
    return [json.loads(line) for line in out.splitlines()], err


def test_nccl_algo_and_proto_choose_as_the_matching_params_do(capsys, monkeypatch):
    status, out, _ = cli(capsys, *H100, "-b", "1M", "-e", "16M", "-f", "4",
                         "--param", "algo=ring", "--param", "proto=Simple")
    assert status == 0
    monkeypatch.setenv("NCCL_ALGO", "Ring")       # NCCL's own spellings
    monkeypatch.setenv("NCCL_PROTO", "^LL,LL128")
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    status, from_env, _ = cli(capsys, *H100, "-b", "1M", "-e", "16M", "-f", "4")
    assert status == 0 and table_rows(from_env) == table_rows(out)
    notes = [line for line in from_env.splitlines() if "environment" in line]
    assert notes == ["# NCCL_ALGO in the environment: algo=ring",
                     "# NCCL_PROTO in the environment: proto=Simple",
                     "# NCCL_IB_HCA in the environment: not simulated"]
    assert from_env.splitlines()[0].endswith("params: algo=ring proto=Simple")


def test_a_param_wins_over_the_environment(capsys, monkeypatch):
    found, err = records(capsys, monkeypatch, {"NCCL_ALGO": "Ring"}, "--size", "1M",
                         "--param", "algo=tree")
    assert [r["params"]["algo"] for r in found] == ["tree"]
    assert err == "# NCCL_ALGO in the environment left aside: --param algo= given\n"


def test_nvls_disabled_leaves_nvls_out_of_ncclls_choice(capsys, monkeypatch):
    # one DGX H100 at 1 GiB: NCCL's tuner picks NVLS (the switch reduces); without it,
    # the ring
    found, _ = records(capsys, monkeypatch, {}, "--size", "1G")
    assert found[0]["params"]["algo"] == "nvls"
    found, err = records(capsys, monkeypatch, {"NCCL_NVLS_ENABLE": "0"}, "--size", "1G")
    assert found[0]["params"]["algo"] == "ring"
    assert err == ("# NCCL_NVLS_ENABLE=0 in the environment: "
                   "algo=ring,tree,collnet_direct,collnet_chain,pat\n")


@pytest.mark.parametrize("value", ["2", "1", " 2 ", "0x2"])
def test_nvls_enabled_or_auto_leaves_nvls_in(capsys, monkeypatch, value):
    """NCCL_NVLS_ENABLE is a whole number: 2 (NCCL's default, "use it where the driver
    has multicast") and 1 ("use it") leave NVLS in, as unset does; 2 was refused."""
    found, err = records(capsys, monkeypatch, {"NCCL_NVLS_ENABLE": value}, "--size", "1G")
    assert found[0]["params"]["algo"] == "nvls" and err == ""


def test_nvls_enable_read_as_strtoll_reads_it(capsys, monkeypatch):
    found, err = records(capsys, monkeypatch, {"NCCL_NVLS_ENABLE": "0x0"}, "--size", "1G")
    assert found[0]["params"]["algo"] == "ring"
    assert err.startswith("# NCCL_NVLS_ENABLE=0 in the environment: algo=ring,")


def test_empty_variables_are_read_as_unset_as_nccl_reads_them(capsys, monkeypatch):
    """NCCL takes a variable only where it is not empty (ncclLoadParam): an empty
    NCCL_NVLS_ENABLE, NCCL_COLLNET_ENABLE or channel count was refused. Blanks, which
    strtoll reads as 0, are refused."""
    plain, _ = records(capsys, monkeypatch, {}, "--size", "1G")
    found, err = records(capsys, monkeypatch, {"NCCL_NVLS_ENABLE": "", "NCCL_COLLNET_ENABLE": "",
                                               "NCCL_MIN_NCHANNELS": "",
                                               "NCCL_MAX_NCHANNELS": "8"}, "--size", "1G")
    assert [r["params"] for r in found] == [r["params"] for r in plain]
    assert err.splitlines() == [
        "# NCCL_NVLS_ENABLE='' in the environment: empty, read as unset (as NCCL reads it)",
        "# NCCL_COLLNET_ENABLE='' in the environment: empty, read as unset (as NCCL reads it)",
        "# NCCL_MIN_NCHANNELS='' in the environment: empty, read as unset (as NCCL reads it)",
        "# NCCL_MAX_NCHANNELS=8: a range of channel counts is not simulated (channels= is "
        "one count: give NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS the same, or --param "
        "channels=N)"]
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "  ")
    status, out, err = cli(capsys, *H100, "--size", "1M")
    assert (status, out) == (2, "") and "NCCL_NVLS_ENABLE='  ' in the environment is not " \
                                        "accepted; use a whole number" in err


def test_one_channel_count_from_the_environment(capsys, monkeypatch):
    found, err = records(capsys, monkeypatch, {"NCCL_MIN_NCHANNELS": "8",
                                               "NCCL_MAX_NCHANNELS": "8"}, "--size", "64M", *RING)
    assert found[0]["params"]["channels"] == 8
    assert err == "# NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS in the environment: channels=8\n"
    # NCCL reads them with strtoll(value, NULL, 0): 8, ' 0x8' and '010' are one count
    # (compared as text, a range); ' 08' is 0 to NCCL (octal), which is refused
    for low, high in (("8", " 0x8"), ("010", "8")):
        spelt, err = records(capsys, monkeypatch, {"NCCL_MIN_NCHANNELS": low,
                                                   "NCCL_MAX_NCHANNELS": high},
                             "--size", "64M", *RING)
        assert spelt == found and "channels=8" in err
    monkeypatch.setenv("NCCL_MAX_NCHANNELS", " 08")
    status, _, err = cli(capsys, *H100, "--size", "64M", *RING)
    assert status == 2 and "NCCL_MAX_NCHANNELS=' 08' in the environment is not accepted" in err
    monkeypatch.delenv("NCCL_MIN_NCHANNELS")
    monkeypatch.delenv("NCCL_MAX_NCHANNELS")
    chosen, _ = records(capsys, monkeypatch, {}, "--size", "64M", *RING)
    assert chosen[0]["params"]["channels"] != 8
    found, err = records(capsys, monkeypatch, {"NCCL_MAX_NCHANNELS": "16"}, "--size", "64M", *RING)
    assert found == chosen   # a range is not simulated: NCCL's own count, and a note
    # the variable not set is not named ("NCCL_MIN_NCHANNELS=None" before)
    assert err.startswith("# NCCL_MAX_NCHANNELS=16: a range of channel counts is not "
                          "simulated (channels= is one count: give NCCL_MIN_NCHANNELS and "
                          "NCCL_MAX_NCHANNELS the same, or --param channels=N)\n")


@pytest.mark.parametrize("env, said", [
    ({"NCCL_ALGO": "Rong"}, "NCCL_ALGO in the environment: algo='Rong' is not accepted"),
    ({"NCCL_PROTO": "^LL,LL128,Simple"}, "NCCL_PROTO in the environment: "
                                         "proto='^LL,LL128,Simple' leaves out every one"),
    ({"NCCL_NVLS_ENABLE": "no"}, "NCCL_NVLS_ENABLE='no' in the environment is not accepted; "
                                 "use a whole number (0 leaves NVLS out)"),
    ({"NCCL_COLLNET_ENABLE": "2"}, "NCCL_COLLNET_ENABLE='2' in the environment is not "
                                   "accepted; use 0 or 1"),
    ({"NCCL_ALGO": "NVLS", "NCCL_NVLS_ENABLE": "0"},
     r"NCCL_NVLS_ENABLE=0 in the environment leaves none of NCCL_ALGO's algorithms (nvls)"),
    # a bad NCCL_ALGO is named as such beside NCCL_NVLS_ENABLE=0
    ({"NCCL_ALGO": "Rong", "NCCL_NVLS_ENABLE": "0"},
     "NCCL_ALGO in the environment: algo='Rong' is not accepted"),
    ({"NCCL_MIN_NCHANNELS": "x", "NCCL_MAX_NCHANNELS": "x"},
     "NCCL_MIN_NCHANNELS='x' in the environment is not accepted; use a whole number"),
    ({"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "8x"},
     "NCCL_MAX_NCHANNELS='8x' in the environment is not accepted; use a whole number"),
    # NCCL reads a maximum of 0 as 1 channel; 0 was channels=0, NCCL's own count
    ({"NCCL_MIN_NCHANNELS": "0", "NCCL_MAX_NCHANNELS": "0"},
     "NCCL_MIN_NCHANNELS='0' NCCL_MAX_NCHANNELS='0' in the environment: NCCL runs a "
     "maximum below 1 as 1 channel (ncclMaxNchannels in src/graph/connect.cc), not 0"),
    ({"NCCL_NVLS_NCHANNELS": "4x"},
     "NCCL_NVLS_NCHANNELS='4x' in the environment is not accepted; use a whole number"),
])
def test_values_nccl_would_refuse_are_refused_naming_the_variable(capsys, monkeypatch, env,
                                                                  said):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    status, out, err = cli(capsys, *H100, "--size", "1M")
    assert (status, out) == (2, "") and err.startswith(f"simcoll run: error: {said}")


def test_other_algorithms_say_the_environment_is_not_theirs(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--size", "1M")
    assert status == 0
    assert "# NCCL_ALGO in the environment: read with --algorithm nccl only" in out
    # a variable no algorithm reads is not simulated, whichever runs (it was said to be
    # read with --algorithm nccl)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--size", "1M")
    assert "# NCCL_ALGO in the environment: read with --algorithm nccl only\n" \
        "# NCCL_DEBUG in the environment: not simulated\n" in out
    monkeypatch.delenv("NCCL_DEBUG")
    monkeypatch.delenv("NCCL_ALGO")
    monkeypatch.setenv("NCCL_COLLNET_ENABLE", "1")
    status, out, _ = cli(capsys, "run", "--topology", "dgx_h100:nodes=1", "--algorithm",
                         "nccl", "--collective", "broadcast", "--size", "1M")
    assert status == 0 and "# NCCL_COLLNET_ENABLE does not apply to broadcast" in out


def test_simcoll_trace_reads_the_environment_too(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    status, out, _ = cli(capsys, "trace", "--topology", "dgx_h100:nodes=1", "--algorithm",
                         "nccl", "--size", "1M", "--output", "a.json", "--json")
    assert status == 0 and json.loads(out)["params"]["algo"] == "ring"   # NCCL's choice
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    status, out, err = cli(capsys, "trace", "--topology", "dgx_h100:nodes=1", "--algorithm",
                           "nccl", "--size", "1M", "--output", "b.json", "--json")
    assert status == 0 and json.loads(out)["params"]["algo"] == "tree"
    assert err == "# NCCL_ALGO in the environment: algo=tree\n"


@pytest.mark.parametrize("value, algo, note", [
    # NCCL's parseList: a list for every collective, then lists for named ones
    ("ring;allreduce:tree", "tree", "# NCCL_ALGO in the environment: algo=tree"),
    ("tree;broadcast:ring", "tree", "# NCCL_ALGO in the environment: algo=tree"),
    ("AllReduce:^ring,nvls", "tree", "# NCCL_ALGO in the environment: "
                                     "algo=tree,nvls_tree,collnet_direct,collnet_chain,pat"),
    ("broadcast:tree", "ring", "# NCCL_ALGO='broadcast:tree' in the environment sets "
                               "nothing for all_reduce"),
    ("", "ring", "# NCCL_ALGO='' in the environment sets nothing for all_reduce"),
])
def test_nccl_algo_lists_per_collective(capsys, monkeypatch, value, algo, note):
    # one DGX H100, 1 MiB: NCCL's own choice is the ring
    found, err = records(capsys, monkeypatch, {"NCCL_ALGO": value}, "--size", "1M")
    assert found[0]["params"]["algo"] == algo and err == note + "\n"


@pytest.mark.parametrize("value, said", [
    ("ring;tree", "NCCL_ALGO='ring;tree' in the environment is not accepted: every list "
                  "after the first needs a prefix such as 'allreduce:'"),
    ("ring;bogus:tree", "NCCL_ALGO='ring;bogus:tree' in the environment names 'bogus', not "
                        "one of Broadcast, Reduce, AllGather, ReduceScatter, AllReduce"),
])
def test_nccl_algo_lists_nccl_refuses_are_refused(capsys, monkeypatch, value, said):
    monkeypatch.setenv("NCCL_ALGO", value)
    status, out, err = cli(capsys, *H100, "--size", "1M")
    assert (status, out) == (2, "") and err.startswith(f"simcoll run: error: {said}")


def test_nccl_algo_and_proto_leave_all_to_all_alone(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_PROTO", "LL")
    status, out, err = cli(capsys, *H100, "--collective", "all_to_all", "--size", "1M",
                           "--json")
    # 1 MiB is 128 KiB a peer: Simple by NCCL's threshold, NCCL_PROTO=LL not applied
    assert status == 0 and json.loads(out.splitlines()[-1])["params"]["proto"] == "Simple"
    assert err == ("# NCCL_PROTO does not apply to all_to_all (NCCL plans its sends and "
                   "receives without it)\n")


def test_an_algorithm_nccl_never_runs_for_the_collective_is_refused_naming_the_variable(
        capsys, monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    status, out, err = cli(capsys, *H100, "--collective", "broadcast", "--size", "1M")
    assert (status, out) == (2, "")
    assert err.startswith("simcoll run: error: NCCL_ALGO in the environment: algo='tree': "
                          "NCCL never runs broadcast with it; it runs broadcast with ring")


def test_a_param_wins_over_nccl_algo_with_nvls_disabled_and_the_note_names_both(
        capsys, monkeypatch):
    found, err = records(capsys, monkeypatch, {"NCCL_ALGO": "Ring,NVLS",
                                               "NCCL_NVLS_ENABLE": "0"},
                         "--size", "1M", "--param", "algo=tree")
    assert found[0]["params"]["algo"] == "tree"
    assert err == ("# NCCL_ALGO and NCCL_NVLS_ENABLE=0 in the environment left aside: "
                   "--param algo= given\n")
    found, err = records(capsys, monkeypatch, {}, "--size", "1M")
    assert err == "# NCCL_ALGO and NCCL_NVLS_ENABLE=0 in the environment: algo=ring\n"


def test_channel_counts_set_the_communicators_not_an_all_to_alls_parts(capsys, monkeypatch):
    # NCCL works each peer's channels out from the communicator's: all_to_all's
    # channels= (a send's parts) is left as NCCL's own planning gives it
    plain, _ = records(capsys, monkeypatch, {}, "--collective", "all_to_all", "--size", "4M")
    found, err = records(capsys, monkeypatch, {"NCCL_MIN_NCHANNELS": "32",
                                               "NCCL_MAX_NCHANNELS": "32"},
                         "--collective", "all_to_all", "--size", "4M")
    assert found == plain
    assert err.startswith("# NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS in the environment "
                          "set the communicator's channels")


def test_no_nccl_variable_no_note_whatever_the_algorithm(capsys, monkeypatch):
    for name in [n for n in os.environ if n.startswith("NCCL_")]:
        monkeypatch.delenv(name)
    for algorithm in ("ring", "nccl"):
        status, out, err = cli(capsys, "run", "--topology", "switch:4", "--algorithm",
                               algorithm, "--size", "1K")
        assert status == 0, err
        assert "environment" not in out + err


def test_collnet_enable_0_sets_nothing(capsys, monkeypatch):
    plain, _ = records(capsys, monkeypatch, {}, "--size", "1M")
    found, err = records(capsys, monkeypatch, {"NCCL_COLLNET_ENABLE": "0"}, "--size", "1M")
    assert err == ""    # read, and 0 is NCCL's default: nothing to say
    assert [r["params"] for r in found] == [r["params"] for r in plain]


def test_a_flag_is_read_with_blanks_around_it(capsys, monkeypatch):
    found, err = records(capsys, monkeypatch, {"NCCL_NVLS_ENABLE": " 0 "}, "--size", "1G")
    assert found[0]["params"]["algo"] == "ring"
    assert err.startswith("# NCCL_NVLS_ENABLE=0 in the environment: ")


def test_a_variable_that_only_starts_with_nccl_is_not_ncclls(capsys, monkeypatch):
    _, err = records(capsys, monkeypatch, {"NCCLX_HOME": "/opt/ncclx"}, "--size", "1M")
    assert err == ""


@pytest.mark.parametrize("env, said", [
    ({"NCCL_MIN_NCHANNELS": "2", "NCCL_MAX_NCHANNELS": "4"},
     "NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=4"),
    ({"NCCL_MIN_NCHANNELS": "2"}, "NCCL_MIN_NCHANNELS=2"),
])
def test_a_range_of_channel_counts_names_what_is_set_minimum_first(capsys, monkeypatch, env,
                                                                   said):
    _, err = records(capsys, monkeypatch, env, "--size", "64M")
    assert err.startswith(f"# {said}: a range of channel counts is not simulated "
                          f"(channels= is one count: give NCCL_MIN_NCHANNELS and "
                          f"NCCL_MAX_NCHANNELS the same, or --param channels=N)\n")


@pytest.mark.parametrize("algorithm", ["ring", "nccl"])
def test_nccl_tests_min_bw_fails_an_average_below_nine_tenths_of_it(capsys, monkeypatch,
                                                                   tmp_path, algorithm):
    """nccl-tests' own check (src/common.cu, util.cu): FAILED after the average and a
    failing exit where avg < 0.9 x NCCL_TESTS_MIN_BW; it was named 'not simulated' and
    the run exited 0."""
    args = ("run", "--topology", "switch:4", "--algorithm", algorithm, "-b", "1M", "-e", "4M",
            "-f", "2")
    status, out, _ = cli(capsys, *args)
    average = float(out.split("# Avg bus bandwidth    : ")[1].split()[0])
    for least, verdict in ((average / 0.9 * 0.999, "OK"), (average / 0.9 * 1.001, "FAILED")):
        monkeypatch.setenv("NCCL_TESTS_MIN_BW", repr(least))
        report = tmp_path / f"{verdict}.json"
        status, out, _ = cli(capsys, *args, "-J", str(report))
        assert status == (0 if verdict == "OK" else 1)
        assert f"# Avg bus bandwidth    : {average:g} {verdict}\n" in out
        assert "not simulated" not in out and "NCCL_TESTS_MIN_BW=" in out
        okay = json.loads(report.read_text())["average_bus_bandwidth"]["okay"]
        assert okay == ("true" if verdict == "OK" else "false")   # util.cu's jsonBool
    # with --csv the verdict goes to standard error, the exit status as the table's
    status, _, err = cli(capsys, *args, "--csv")
    assert status == 1 and f"# Avg bus bandwidth    : {average:g} FAILED" in err
    # -1 is nccl-tests' unset (no verdict, JSON "unchecked"); atof reads 1_000 as 1 and
    # fast as 0: refused rather than guessed
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "-1")
    status, out, _ = cli(capsys, *args, "-J", str(tmp_path / "unset.json"))
    assert status == 0 and f"# Avg bus bandwidth    : {average:g} \n" in out
    unset = json.loads((tmp_path / "unset.json").read_text())["average_bus_bandwidth"]
    assert unset["okay"] == "unchecked"
    for text in ("fast", "1_000", "inf"):
        monkeypatch.setenv("NCCL_TESTS_MIN_BW", text)
        status, out, err = cli(capsys, *args)
        assert status == 2 and f"NCCL_TESTS_MIN_BW='{text}' in the environment is not " \
            f"accepted" in err


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e999"])
def test_nccl_tests_min_bw_that_is_not_finite_is_refused(capsys, monkeypatch, text):
    """Only a finite NCCL_TESTS_MIN_BW is a check: inf would fail every run and -inf pass
    every one (mutant: isnan() alone let inf through, and the run exited 1)."""
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", text)
    status, out, err = cli(capsys, "run", "--topology", "switch:4", "--algorithm", "ring",
                           "--size", "1M")
    assert status == 2 and out == ""
    assert f"NCCL_TESTS_MIN_BW={text!r} in the environment is not accepted" in err


def test_other_algorithms_name_only_the_kinds_of_variable_set(capsys, monkeypatch):
    """Only variables nccl reads: one line, no 'not simulated' line for an empty list
    (mutant: both lines always, the second naming nothing)."""
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    status, out, _ = cli(capsys, "run", "--topology", "switch:4", "--size", "1M")
    assert status == 0
    notes = [line for line in out.splitlines() if "in the environment" in line]
    assert notes == ["# NCCL_ALGO in the environment: read with --algorithm nccl only"]


def test_nccl_tests_min_bw_note_gives_the_passing_average(capsys, monkeypatch):
    """NCCL_TESTS_MIN_BW=100: a run passes from an average of 0.9 x 100 = 90 GB/s
    (src/common.cu), as the note says (mutant: it said 100)."""
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "100")
    _, out, _ = cli(capsys, "run", "--topology", "switch:4", "--algorithm", "ring",
                    "--size", "1M")
    assert "# NCCL_TESTS_MIN_BW=100 in the environment: the average busbw passes from 90 " \
           "GB/s (0.9 times it, as nccl-tests checks)" in out


def test_channel_counts_leave_nvls_on_its_own_count_which_nccl_nvls_nchannels_sets(
        capsys, monkeypatch):
    """NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS bound the communicator's channels
    (comm->nChannels); NVLS on one node and NVLS-tree run on comm->nvlsChannels (16 on
    Hopper, NCCL_NVLS_NCHANNELS), NVLS across nodes on no more than the communicator's
    (topoGetAlgoInfo, src/enqueue.cc 2.30.7). The pair ran NVLS on their count."""
    own, _ = records(capsys, monkeypatch, {}, "--size", "64M")
    assert (own[0]["params"]["algo"], own[0]["params"]["channels"]) == ("nvls", 16)
    pinned, err = records(capsys, monkeypatch, {"NCCL_MIN_NCHANNELS": "4",
                                                "NCCL_MAX_NCHANNELS": "4"}, "--size", "64M")
    assert "channels=4" in err
    assert pinned[0]["params"]["channels"] == 16
    assert pinned[0]["time"] == own[0]["time"]
    monkeypatch.delenv("NCCL_MIN_NCHANNELS")
    monkeypatch.delenv("NCCL_MAX_NCHANNELS")
    fewer, err = records(capsys, monkeypatch, {"NCCL_NVLS_NCHANNELS": "4"}, "--size", "64M")
    assert err == "# NCCL_NVLS_NCHANNELS in the environment: nvls_channels=4\n"
    assert (fewer[0]["params"]["algo"], fewer[0]["params"]["channels"]) == ("nvls", 4)
    assert fewer[0]["time"] != own[0]["time"]
    # 0 or less: NCCL's own count (init.cc: "NCCL will decide the default value")
    for text in ("0", "-3"):
        same, err = records(capsys, monkeypatch, {"NCCL_NVLS_NCHANNELS": text}, "--size",
                            "64M")
        assert same[0]["params"]["channels"] == 16 and "nvls_channels=0" in err
    monkeypatch.setenv("NCCL_NVLS_NCHANNELS", "4")
    status, out, err = cli(capsys, "run", "--topology", "dgx_h100:nodes=1", "--algorithm",
                           "nccl", "--collective", "broadcast", "--size", "1M")
    assert status == 0 and "# NCCL_NVLS_NCHANNELS does not apply to broadcast" in out + err


def test_the_footer_names_the_channels_nvls_ran_on_where_the_variables_set_others(
        capsys, monkeypatch):
    """The pair given as the communicator's count left the footer silent on channels:
    a given parameter was never listed, though NVLS ran on its own 16."""
    monkeypatch.setenv("NCCL_MIN_NCHANNELS", "4")
    monkeypatch.setenv("NCCL_MAX_NCHANNELS", "4")
    status, out, _ = cli(capsys, *H100, "--size", "64M")
    assert status == 0
    assert "#   at every size: algo=nvls proto=Simple arch=hopper intra=nvlink channels=16" \
        in out.splitlines()
    # a ring runs the count given: not listed as chosen
    status, out, _ = cli(capsys, *H100, "--size", "64M", *RING)
    assert status == 0 and "channels=" not in out.split("parameters the algorithm chose")[-1]


def test_one_channel_from_the_pair_is_taken_as_channels_1(capsys, monkeypatch):
    """NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = 1 is a valid count (ncclMaxNchannels
    refuses only below 1): a ring on channels=1, not an error."""
    found, err = records(capsys, monkeypatch, {"NCCL_MIN_NCHANNELS": "1",
                                               "NCCL_MAX_NCHANNELS": "1"},
                         "--size", "64M", "--param", "algo=ring")
    assert found[0]["params"]["channels"] == 1 and "channels=1" in err


def test_nvls_nchannels_is_read_as_strtoll_reads_it(capsys, monkeypatch):
    """NCCL reads NCCL_NVLS_NCHANNELS with strtoll(value, NULL, 0): '0x4' is 4 channels."""
    found, err = records(capsys, monkeypatch, {"NCCL_NVLS_NCHANNELS": "0x4"}, "--size", "64M")
    assert found[0]["params"]["channels"] == 4 and "nvls_channels=4" in err


def test_sweep_notes_the_nccl_variables_it_does_not_read(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_PROTO", "Simple")   # set before NCCL_ALGO: named after it
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    status, out, err = cli(capsys, "sweep", "--algorithms", "nccl,ring", "--ranks", "4",
                           "--sizes", "4K")
    assert status == 0, err
    assert err.splitlines() == [
        "simcoll sweep: note: NCCL_ALGO, NCCL_PROTO in the environment: not read by a "
        "sweep (give nccl's choices with --param, such as --param proto=Simple)"]
    assert "NCCL_" not in out


def test_sweep_without_nccl_says_nothing_of_nccl_variables(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_PROTO", "Simple")
    status, out, err = cli(capsys, "sweep", "--algorithms", "ring", "--ranks", "4",
                           "--sizes", "4K")
    assert status == 0, err
    assert "NCCL_" not in err and "NCCL_" not in out


def test_run_names_the_nccl_variables_it_does_not_read_sorted(capsys, monkeypatch):
    """Set out of order, NCCL_SOCKET_IFNAME before NCCL_DEBUG: the note names them in
    alphabetical order."""
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    status, out, err = cli(capsys, *H100, "-b", "8", "-e", "8")
    assert status == 0, err
    assert "# NCCL_DEBUG, NCCL_SOCKET_IFNAME in the environment: not simulated" \
        in out.splitlines()
