"""NCCL_ALGO and NCCL_PROTO as NCCL reads them: several names, or ``^`` and those to leave
out, narrowing the tuner's search (parseList and the protocol switches of NCCL 2.30.7's
src/graph/tuning.cc)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import simcoll as sc
from simcoll.algorithms.nccl.machine import Machine, describe
from simcoll.algorithms.nccl.tuner import candidates, choose, trim_channels
from simcoll.algorithms.params import Names
from simcoll.cli import main

US = 1e-6
PROTO = Names("auto", ("LL", "LL128", "Simple"))
ALGO = Names("auto", ("ring", "tree", "nvls", "nvls_tree"))


@pytest.mark.parametrize("spec, value, expected", [
    (PROTO, "^LL128", "LL,Simple"),           # every protocol but LL128
    (PROTO, "^ll", "LL128,Simple"),           # leaving out LL turns LL128 on, as in NCCL
    (PROTO, " simple , ll ", "LL,Simple"),    # any order, case and spacing
    (PROTO, "LL,LL", "LL"),
    (PROTO, "LL128", "LL128"),
    (PROTO, "AUTO", "auto"),
    (ALGO, "NVLSTree,Ring", "ring,nvls_tree"),  # NCCL's own spelling of NVLS-tree
    (ALGO, "^nvls,NVLS_TREE", "ring,tree"),
    (ALGO, "tree", "tree"),
])
def test_names_are_read_as_nccl_reads_its_lists(spec, value, expected):
    assert spec.normalize("x", value) == expected


def parse_list(text: str, elems: tuple[str, ...]) -> set[str]:
    """NCCL's parseList for one entry without a prefix, redone: every element is set to
    "unset" (1 after ``^``, else 0), then each listed one to "set", compared case-blind."""
    leave_out = text.startswith("^")
    enabled = {e: leave_out for e in elems}
    for token in (text[1:] if leave_out else text).split(","):
        match = [e for e in elems if e.lower() == token.lower()]
        assert match, token
        enabled[match[0]] = not leave_out
    return {e for e, on in enabled.items() if on}


@given(st.lists(st.sampled_from(["LL", "ll128", "SIMPLE", "Simple", "lL"]), min_size=1,
                max_size=4), st.booleans())
def test_names_choose_what_nccls_parse_list_enables(tokens, leave_out):
    text = ("^" if leave_out else "") + ",".join(tokens)
    enabled = parse_list(text, ("LL", "LL128", "Simple"))
    if not enabled:
        with pytest.raises(sc.InvalidInputError, match="leaves out every one"):
            PROTO.normalize("proto", text)
        return
    chosen = PROTO.normalize("proto", text)
    assert set(chosen.split(",")) == enabled
    assert PROTO.normalize("proto", chosen) == chosen     # the canonical form is stable


@pytest.mark.parametrize("value, says", [
    (42, "x=42 is not accepted"),
    ("", "x='' is not accepted"),
    ("Fast", "x='Fast' is not accepted"),
    ("LL,Fast", "names 'Fast', which is not accepted"),
    ("LL,", "names '', which is not accepted"),
    ("^", "names '', which is not accepted"),
    ("auto,LL", "names 'auto', which is not accepted"),
    ("^LL,LL128,Simple", "leaves out every one of LL, LL128, Simple"),
])
def test_bad_lists_are_refused_with_what_is_accepted(value, says):
    with pytest.raises(sc.InvalidInputError) as error:
        PROTO.normalize("x", value)
    assert says in str(error.value)
    assert "'^' followed by those to leave out" in str(error.value)


def test_leaving_ll128_out_picks_the_best_of_the_others():
    # dgx_h100(8) at 4 MiB: NCCL's model picks tree with LL128: bus bandwidth
    # min(8 graph channels x 48 x 0.92, 8 x 36.0) x 120/128 capped at 8 x 29.0 = 232
    # GB/s, times 0.85 for the plain tree pattern (one NIC per GPU) = 197.2, algorithm
    # bandwidth 98.6 x 0.8 (the tree's correction at 4 MiB), latency 14 + 2 (7 x 1.25 +
    # 3 x 8.5) = 82.5 us: 82.5 + 53.2 = 135.7 us. Without LL128, NVLS-tree
    # with Simple has bus bandwidth 8 NVLS graph channels x min(40 x 0.85 x 7/8 x 2, 48,
    # 45.5) = 364 GB/s, algorithm bandwidth 364 x 64 / 126, latency 25 + 2 log2(8) x 20.9
    # = 150.4 us: 150.4 + 22.7 = 173.1 us, ahead of tree with Simple (8.4 + 2 (7 x 4 + 3 x
    # 14) = 148.4
    # us + 4 MiB over 288 / 2 x 0.7 GB/s: 190 us) and everything with LL.
    machine = describe(sc.topology.dgx_h100(8), tuple(range(64)))
    nbytes = 4 * 2**20
    picked = choose(machine, "all_reduce", nbytes)
    assert (picked.algo, picked.proto) == ("tree", "LL128")
    assert picked.predicted == pytest.approx(
        (82.5 + nbytes / (1000 * 232 * 0.85 / 2 * 0.8)) * US, rel=1e-9)
    left = choose(machine, "all_reduce", nbytes, proto="LL,Simple")
    assert (left.algo, left.proto) == ("nvls_tree", "Simple")
    assert left.predicted == pytest.approx((150.4 + nbytes * 126 / (64 * 364e3)) * US,
                                           rel=1e-9)
    # Over a sweep, the narrowed search is the better of the two protocols alone.
    for size in [2**k for k in range(3, 33, 3)]:
        both = choose(machine, "all_reduce", size, proto="LL,Simple")
        alone = min((choose(machine, "all_reduce", size, proto=p) for p in ("LL", "Simple")),
                    key=lambda c: c.predicted)
        assert both == alone


def test_leaving_another_protocol_out_turns_ll128_on_over_pci():
    # NCCL enables every protocol a ^-list does not name, LL128 included where it would
    # stay off by default. pcie_node(8, gen=4) at 1 MiB (test_nccl's hand-worked figures):
    # LL128 132.1 us, Simple 164.7 us, LL 173.5 us; by default LL128 is off.
    machine = describe(sc.topology.pcie_node(8, gen=4), tuple(range(8)))
    mib = 2**20
    assert choose(machine, "all_reduce", mib).proto == "Simple"
    on = choose(machine, "all_reduce", mib, proto=PROTO.normalize("proto", "^LL"))
    assert on.proto == "LL128"
    assert on.predicted == pytest.approx((49 + mib * 14 / (8 * 0.92 * 24e3)) * US, rel=1e-9)


def test_algorithms_that_cannot_run_are_passed_over_in_a_list():
    # NVLS runs on one node only (without CollNet): on two nodes a list passes it over,
    # while naming it alone is refused.
    two = sc.topology.dgx_h100(2)
    listed = sc.simulate(two, "all_reduce", algorithm="nccl", nbytes="16MiB",
                         algo="nvls,ring")
    alone = sc.simulate(two, "all_reduce", algorithm="nccl", nbytes="16MiB", algo="ring")
    assert listed.params == alone.params and listed.params["algo"] == "ring"
    assert listed.time == alone.time
    assert listed.link_bytes == alone.link_bytes
    with pytest.raises(sc.InvalidInputError, match="algo='nvls' cannot run all_reduce"):
        sc.simulate(two, "all_reduce", algorithm="nccl", nbytes="16MiB", algo="nvls")
    with pytest.raises(sc.InvalidInputError,
                       match="algo='nvls,nvls_tree,collnet_direct,collnet_chain,pat' cannot "
                             "run all_reduce on this machine"):
        sc.simulate(sc.topology.dgx_a100(1), "all_reduce", algorithm="nccl", nbytes=64,
                    algo="^ring,tree")


def test_a_narrowed_run_is_the_run_of_what_it_chose():
    two = sc.topology.dgx_h100(2)
    for nbytes in (2**20, 16 * 2**20):
        narrowed = sc.simulate(two, "all_reduce", algorithm="nccl", nbytes=nbytes,
                               proto="^LL128")
        assert narrowed.params["proto"] in ("LL", "Simple")
        named = sc.simulate(two, "all_reduce", algorithm="nccl", nbytes=nbytes,
                            algo=narrowed.params["algo"], proto=narrowed.params["proto"])
        assert narrowed.params == named.params
        assert narrowed.time == named.time
        assert narrowed.bytes_sent.tolist() == named.bytes_sent.tolist()


def test_one_rank_runs_with_a_list():
    res = sc.simulate(sc.topology.switch(1), "all_reduce", algorithm="nccl", nbytes=64,
                      algo="tree,ring", proto="^Simple")
    assert res.time == 0
    assert (res.params["algo"], res.params["proto"]) == ("ring", "LL")


def test_the_command_line_takes_nccl_lists(capsys):
    status = main(["run", "--topology", "dgx_h100:nodes=2", "--algorithm", "nccl",
                   "--size", "16M", "--param", "proto=^LL128", "--param", "algo=ring,tree"])
    out = capsys.readouterr().out
    assert status == 0
    expected = sc.simulate(sc.topology.dgx_h100(2), "all_reduce", algorithm="nccl",
                           nbytes=16 * 2**20, proto="^LL128", algo="ring,tree")
    row = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert len(row) == 1
    assert float(row[0][5]) == pytest.approx(expected.time / US, rel=5e-3)


def test_the_cost_estimate_takes_a_list_as_the_tuner_does():
    # On the reference network the estimate runs rings; a list of protocols estimates
    # the one the tuner picks among them, so it is one of the single estimates. (algo
    # 'ring': with LL128 alone the tuner takes its tree at 8 B, which the model refuses.)
    def estimate(proto, nbytes):
        return sc.cost.predict("all_reduce", "nccl", p=8, nbytes=nbytes, alpha=1e-6,
                               beta=1 / 100e9, proto=proto, algo="ring")

    for nbytes in (8, 2**20, 2**30):
        singles = {estimate(proto, nbytes) for proto in ("LL", "Simple")}
        assert estimate("^LL128", nbytes) in singles
        assert estimate("Simple,LL", nbytes) == estimate("^LL128", nbytes)
        assert estimate("^LL,Simple", nbytes) == estimate("LL128", nbytes)


MACHINES = {
    "dgx_a100(1)": (lambda: sc.topology.dgx_a100(1), 8),
    "dgx_h100(1)": (lambda: sc.topology.dgx_h100(1), 8),
    "dgx_h100(2)": (lambda: sc.topology.dgx_h100(2), 16),
    "pcie_node(8)": (lambda: sc.topology.pcie_node(8, gen=4), 8),
}
DESCRIBED = {name: describe(build(), tuple(range(p))) for name, (build, p) in MACHINES.items()}


@given(st.sampled_from(sorted(DESCRIBED)), st.sampled_from(["all_reduce", "all_gather"]),
       st.sets(st.sampled_from(["ring", "tree", "nvls", "nvls_tree"]), min_size=1),
       st.sets(st.sampled_from(["LL", "LL128", "Simple"]), min_size=1),
       st.integers(3, 33))
# the refusals, which 2 - 3% of drawn examples reach: NVLS runs no LL; no NVLS over PCIe
@example("dgx_h100(1)", "all_reduce", {"nvls"}, {"LL"}, 20)
@example("pcie_node(8)", "all_reduce", {"nvls"}, {"Simple"}, 20)
def test_a_list_picks_the_best_of_its_runnable_members(name, collective, algos, protos, k):
    # The tuner with lists is the least predicted time over the pairs it names, each
    # pair as the tuner gives it when named alone (ties to the first in NCCL's order);
    # pairs NCCL would not run (NVLS with LL, say) are refused alone and skipped in a
    # list, which is refused only when none is left.
    machine, nbytes = DESCRIBED[name], 2**k
    algo = ALGO.normalize("algo", ",".join(algos))
    proto = PROTO.normalize("proto", ",".join(protos))
    runnable = [a for a in algo.split(",") if a in candidates(machine, collective)]
    if not runnable:
        with pytest.raises(sc.InvalidInputError, match="cannot run|never runs"):
            choose(machine, collective, nbytes, algo=algo, proto=proto)
        return
    singles = []
    for a in runnable:
        for p in proto.split(","):
            try:
                singles.append(choose(machine, collective, nbytes, algo=a, proto=p))
            except sc.InvalidInputError as refused:
                assert "no NCCL algorithm and protocol can run" in str(refused)
    if not singles:
        with pytest.raises(sc.InvalidInputError, match="no NCCL algorithm and protocol"):
            choose(machine, collective, nbytes, algo=algo, proto=proto)
        return
    best = min(singles, key=lambda c: c.predicted)
    assert choose(machine, collective, nbytes, algo=algo, proto=proto) == best


@pytest.mark.parametrize("topology, collective, algo, extra", [
    (sc.topology.dgx_h100(1), "all_reduce", "nvls", {}),
    (sc.topology.dgx_h100(2), "all_reduce", "nvls_tree", {}),
    (sc.topology.dgx_h100(2, sharp=True), "all_reduce", "collnet_chain", {"collnet": 1}),
    (sc.topology.dgx_h100(2, sharp=True), "all_reduce", "collnet_direct", {"collnet": 1}),
    (sc.topology.cluster(4, 1), "all_gather", "pat", {}),
])
@pytest.mark.parametrize("proto", ["LL", "LL128", "LL,LL128"])
def test_an_algorithm_forced_with_a_protocol_nccl_never_gives_it_says_why(
        topology, collective, algo, extra, proto):
    # tuning.cc (2.30.7) gives NVLS, NVLS-tree, CollNet and PAT no LL or LL128 bandwidth.
    with pytest.raises(sc.InvalidInputError, match=f"{algo} runs Simple only, as in NCCL; "
                                                   f"give proto='Simple' or 'auto'"):
        sc.simulate(topology, collective, algorithm="nccl", nbytes=1 << 20, algo=algo,
                    proto=proto, **extra)


@pytest.mark.parametrize("collective, dtype, op, runs_nvls", [
    # ncclNvlsSupported (src/include/device.h): sums of float16, bfloat16, float32,
    # float64 and 32/64-bit integers; min and max of the 16-bit floats and those
    # integers; nothing else. ncclAvg is PreMulSum (floats) or SumPostDiv (integers),
    # which the switches do not compute; all_gather reduces nothing and always may.
    ("all_reduce", "float32", "sum", True),
    ("all_reduce", "float32", "avg", False),
    ("all_reduce", "float32", "max", False),
    ("all_reduce", "float64", "min", False),
    ("all_reduce", "bfloat16", "max", True),
    ("all_reduce", "uint64", "max", True),
    ("all_reduce", "int32", "avg", False),
    ("all_reduce", "float16", "product", False),
    ("all_reduce", "int8", "sum", False),
    ("reduce_scatter", "float32", "avg", False),
    ("reduce_scatter", "bfloat16", "max", True),
    ("all_gather", "int8", None, True),
])
def test_nvls_runs_only_the_reductions_nvswitch_computes(collective, dtype, op, runs_nvls):
    topo = sc.topology.dgx_h100(1)
    kwargs = {} if op is None else {"op": op}
    if runs_nvls:
        res = sc.simulate(topo, collective, algorithm="nccl", nbytes=1 << 26, dtype=dtype,
                          algo="nvls", **kwargs)
        assert res.params["algo"] == "nvls"
    else:
        with pytest.raises(sc.InvalidInputError, match="NCCL's NVLS computes sums of"):
            sc.simulate(topo, collective, algorithm="nccl", nbytes=1 << 26, dtype=dtype,
                        algo="nvls", **kwargs)
        # Left to itself, the tuner picks what it can run: a float32 average of 1 GiB,
        # NVLS at 460 GB/s busbw with a sum, is a ring on one node.
        res = sc.simulate(topo, collective, algorithm="nccl", nbytes=1 << 30, dtype=dtype,
                          **kwargs)
        assert not res.params["algo"].startswith("nvls")


def test_fp8_never_chooses_a_ring_of_more_than_8_ranks_where_another_can_run():
    # updateCollCostTable (src/enqueue.cc) multiplies a ring's time by 1024 for FP8 on
    # more than 8 ranks: a long chain of lossy reductions. On two DGX H100 (16 ranks), a
    # 1 GiB all_reduce of a type NVLS does not compute runs a ring (float32 max), but in
    # FP8 a tree (NVLS-tree is out too: the switches do not reduce 8-bit types).
    topo = sc.topology.dgx_h100(2)
    assert sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 30,
                       op="max").params["algo"] == "ring"
    fp8 = sc.simulate(topo, "all_reduce", algorithm="nccl", nbytes=1 << 30,
                      dtype="float8_e4m3fn")
    assert fp8.params["algo"] == "tree"
    # On 8 ranks the ring keeps its time.
    machine = describe(sc.topology.dgx_h100(1), tuple(range(8)), "hopper")
    assert choose(machine, "all_reduce", 1 << 30, nvls_ok=False, fp8=True) == \
        choose(machine, "all_reduce", 1 << 30, nvls_ok=False)


@pytest.mark.parametrize("collective, algo", [("all_reduce", "tree"),
                                              ("all_reduce", "nvls,tree"),
                                              ("reduce_scatter", "pat")])
def test_the_cost_model_refuses_an_algo_that_leaves_the_ring_out(collective, algo):
    # The models are NCCL's ring's; a forced tree sends n from each end of its chain and
    # 2n from the ranks between (not the ring's 2(p-1)/p n), so no ring figure may stand
    # in for it.
    listed = ",".join(sorted(algo.split(","), key=("tree", "nvls", "pat").index))
    match = rf"model of {collective}/nccl is NCCL's ring .* algo='{listed}' leaves it out"
    with pytest.raises(sc.InvalidInputError, match=match):
        sc.cost.traffic(collective, "nccl", p=4, nbytes=4096, algo=algo)
    with pytest.raises(sc.InvalidInputError, match=match):
        sc.cost.predict(collective, "nccl", p=4, nbytes=4096, alpha=1e-6, beta=1e-10,
                        algo=algo)


def test_the_cost_model_takes_a_list_with_the_ring_in_it():
    n, p = 4096, 4
    ring = 2 * (p - 1) * (n // p)     # every block but its own and its successor's, twice
    for algo in ("auto", "ring", "ring,tree"):
        assert sc.cost.traffic("all_reduce", "nccl", p=p, nbytes=n, algo=algo).sent.tolist() \
            == [ring] * p


# enqueue.cc's channel trimming, ``while (nBytes < nc * nt * threadThreshold && nc >= 2)
# nc--``, with NCCL's thread counts (NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS
# 512, 256 for a ring graph of at most PCI_BW = 12 GB/s) and thresholds
# (NCCL_LL128_THREAD_THRESHOLD 8, NCCL_SIMPLE_THREAD_THRESHOLD 64) written out.


@pytest.mark.parametrize(("nbytes", "expected"), [
    (10 * 640 * 8 - 1, 9),
    (10 * 640 * 8, 10),
    (24 * 640 * 8, 24),
    (1, 1),
])
def test_ll128_trims_channels_by_640_threads_of_8_bytes(nbytes, expected):
    for algo in ("ring", "tree"):
        assert trim_channels(nbytes, algo, "LL128", 24, 8) == expected


@pytest.mark.parametrize(("graph_gbs", "nbytes", "expected"), [
    (12.0, 2 * 256 * 64, 2),        # at most PCI_BW: 256 threads a channel
    (12.0, 2 * 256 * 64 - 1, 1),
    (16.0, 2 * 512 * 64 - 1, 1),    # above PCI_BW: 512 threads a channel
    (16.0, 2 * 512 * 64, 2),
])
def test_slow_rings_run_simple_on_256_threads_up_to_pci_bw(graph_gbs, nbytes, expected):
    """tuning.cc: ``simpleDefaultThreads = (graphs[RING]->bwIntra * nChannels <= PCI_BW) ?
    256 : NCCL_SIMPLE_MAX_NTHREADS``; a PCI node of 4 GPUs, one graph channel."""
    machine = Machine(4, 1, "pci", graph_gbs * 1e9, 0.0, False, "ampere", channels=2,
                      graph_channels=1, graph_channel_bw=graph_gbs * 1e9,
                      tree_channel_bw=graph_gbs * 1e9)
    assert choose(machine, "all_reduce", nbytes, algo="ring", proto="Simple").channels \
        == expected
