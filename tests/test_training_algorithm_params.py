"""Training steps pass ``algorithm_params`` to every collective they start: NCCL's
overrides (``algo``, ``proto``, ``collnet``, ...) reach each one, bad ones are refused
before the run."""

from __future__ import annotations

import pytest

import simcoll as sc
import simcoll.training as tr

# Every tensor of this model is a multiple of 64 elements.
SMALL = tr.gpt(3, 64, 8, 16, 128, batch=2)


def test_fsdp_runs_collnet_direct_through_sharp_when_asked():
    """ZeRO-3 on two SHARP-joined DGX H100 (p = 16, N = 2 nodes) with CollNet Direct for
    every collective. Per layer of n bytes of (padded) parameters: a reduce_scatter of n
    sends N n / p = n / 8 up a GPU's NIC and n / 16 down; each of the two all_gathers of
    a shard of m = n / 16 sends m up and N m = n / 8 down. Over the step GPU 0's NIC
    carries n / 4 up and 5 n / 16 down, summed over the layers; without collnet NCCL
    runs rings, whose traffic differs."""
    topo = sc.topology.dgx_h100(2, sharp=True)
    p = topo.nranks
    total = sum(-(-layer.params // p) * p for layer in SMALL.layers if layer.params) * 2
    res = tr.zero_step(SMALL, topo, stage=3, algorithm="nccl",
                       algorithm_params={"collnet": 1, "algo": "collnet_direct"})
    assert res.run.link_bytes[("gpu0", "nic0")] == total // 4
    assert res.run.link_bytes[("nic0", "gpu0")] == 5 * total // 16
    plain = tr.zero_step(SMALL, topo, stage=3, algorithm="nccl")
    assert plain.run.link_bytes[("gpu0", "nic0")] != total // 4


@pytest.mark.parametrize(("params", "match"), [
    ({"nope": 1}, r"does not take parameter\(s\) \['nope'\]"),
    ({"proto": "XX"}, "proto"),
    ({"collnet": 2}, "collnet"),
])
def test_bad_algorithm_params_are_refused_before_the_run(params, match):
    topo = sc.topology.dgx_h100(1)
    for run in (lambda: tr.data_parallel(SMALL, topo, algorithm="nccl",
                                         algorithm_params=params),
                lambda: tr.zero_step(SMALL, topo, stage=3, algorithm="nccl",
                                     algorithm_params=params),
                lambda: tr.tensor_parallel_layer(SMALL, topo, tp=4, algorithm="nccl",
                                                 algorithm_params=params),
                lambda: tr.step(SMALL, topo, dp=2, tp=4, algorithm="nccl",
                                algorithm_params=params)):
        with pytest.raises(sc.InvalidInputError, match=match):
            run()
    with pytest.raises(sc.InvalidInputError, match=r"does not take parameter\(s\) "
                                                   r"\['collnet'\]"):
        tr.data_parallel(SMALL, topo, algorithm="ring", algorithm_params={"collnet": 1})


def test_the_protocol_reaches_every_collective():
    """NCCL_PROTO=LL against Simple for the data-parallel all-reduce (one fused buffer),
    the tensor-parallel all-reduces and a 3D step: the step times differ, and each
    equals the step run again with the same parameters."""
    topo = sc.topology.dgx_h100(1)
    runs = {
        "ddp": lambda p: tr.data_parallel(SMALL, topo, strategy="fused", algorithm="nccl",
                                          algorithm_params=p).step_time,
        "tp": lambda p: tr.tensor_parallel_layer(SMALL, topo, tp=8, algorithm="nccl",
                                                 algorithm_params=p).forward_time,
        "3d": lambda p: tr.step(SMALL, topo, dp=2, tp=4, algorithm="nccl",
                                algorithm_params=p).step_time,
    }
    for name, run in runs.items():
        ll, simple = run({"proto": "LL"}), run({"proto": "Simple"})
        assert ll != simple, name
        assert run({"proto": "LL"}) == ll


def test_collnet_on_groups_smaller_than_the_machine_is_refused_before_the_run():
    """SHARP switches' programs see GPUs by world rank: a 3D step whose groups are 4 of
    16 GPUs, or a tensor-parallel group of 8, cannot ask for collnet=1; a 3D step whose
    data-parallel group is the whole machine can."""
    topo = sc.topology.dgx_h100(2, sharp=True)
    with pytest.raises(sc.InvalidInputError, match="collnet=1 needs collectives over "
                                                   "every GPU.*dp=4, tp=4, pp=1 does not"):
        tr.step(SMALL.with_batch(4), topo, dp=4, tp=4, algorithm="nccl",
                algorithm_params={"collnet": 1})
    with pytest.raises(sc.InvalidInputError, match="collnet=1 needs"):
        tr.tensor_parallel_layer(SMALL, topo, tp=8, algorithm="nccl",
                                 algorithm_params={"collnet": 1})
    whole = tr.step(SMALL.with_batch(16), topo, dp=16, algorithm="nccl",
                    algorithm_params={"collnet": 1, "algo": "collnet_direct"})
    assert whole.run.link_bytes[("gpu0", "nic0")] > 0


def _uneven_nodes() -> sc.Topology:
    """Three GPUs on node 0 and one on node 1, on one switch."""
    topo = sc.Topology("3 + 1")
    hub = topo.add_switch("hub")
    for node in (0, 0, 0, 1):
        topo.add_link(topo.add_gpu(node=node), hub, bandwidth=100 * sc.GB, latency=1e-6)
    return topo


def test_an_algorithm_a_group_refuses_is_refused_before_the_run():
    """hierarchical all_reduce needs as many GPUs on every node of its group. A 3D step on
    cluster(3, 4) with dp=6 and the replicas innermost puts data-parallel groups of 4 + 2
    GPUs over two nodes: the step ran its whole pipeline first and then failed with an
    AlgorithmError from inside the run; tensor_parallel_layer on GPUs 0, 1, 2 and 8 of two
    DGX H100 did the same. Each is now an InvalidInputError naming the group, and so for
    data_parallel and zero_step on a machine of 3 + 1 GPUs."""
    model = tr.gpt(4, 256, 4, 128, 1024, batch=48)
    with pytest.raises(sc.InvalidInputError,
                       match=r"the data-parallel group \[0, 1, 2, 3, 4, 5\] \(all_reduce\): "
                             r"hierarchical all_reduce needs the same number of GPUs on "
                             r"every node, got \[4, 2\] GPUs on the nodes, in order of "
                             r"their lowest rank;"):
        tr.step(model, sc.topology.cluster(3, 4), dp=6, pp=2, micro_batches=4,
                order=("dp", "pp", "tp"), algorithm="hierarchical")
    with pytest.raises(sc.InvalidInputError,
                       match=r"the tensor-parallel group \[0, 1, 2, 8\] \(all_reduce\).*"
                             r"got \[3, 1\]"):
        tr.tensor_parallel_layer(SMALL, sc.topology.dgx_h100(2), tp=4, ranks=[0, 1, 2, 8],
                                 algorithm="hierarchical")
    with pytest.raises(sc.InvalidInputError, match=r"the GPUs \[0, 1, 2, 3\] \(all_reduce\)"):
        tr.data_parallel(SMALL, _uneven_nodes(), algorithm="hierarchical")
    with pytest.raises(sc.InvalidInputError, match=r"the GPUs \[0, 1, 2, 3\] \(all_reduce\)"):
        tr.zero_step(SMALL, _uneven_nodes(), stage=0, algorithm="hierarchical")
    # the same groups on nodes of equal GPUs run
    assert tr.step(model, sc.topology.cluster(3, 4), dp=6, pp=2, micro_batches=4,
                   algorithm="hierarchical").step_time > 0


def _never_run(*args, **kwargs):
    raise AssertionError("the step was simulated before its algorithm_params were refused")


def test_a_choice_nccl_cannot_make_on_a_group_is_refused_before_the_run(monkeypatch):
    """algo='nvls' where NVLS cannot run (no in-network NVSwitch on a DGX A100; across
    the nodes of two DGX H100 without collnet) was refused by data_parallel_step only:
    the other steps failed inside the run with an AlgorithmError, a 3D step on two DGX
    H100 after its whole tensor-parallel work (118 s of wall time)."""
    for module in ("data_parallelism", "zero", "tensor", "parallel3d"):
        monkeypatch.setattr(f"simcoll.training.{module}.run_program", _never_run)
    a100, h100 = sc.topology.dgx_a100(1), sc.topology.dgx_h100(2)
    nvls = {"algorithm": "nccl", "algorithm_params": {"algo": "nvls"}}
    no_nvls = r"algo='nvls' cannot run {} on this machine; it can run ring"
    for run, where in (
            (lambda: tr.data_parallel(SMALL, a100, **nvls),
             r"the GPUs \[0, 1, 2, 3, 4, 5, 6, 7\] \(all_reduce\): "
             + no_nvls.format("all_reduce")),
            (lambda: tr.zero_step(SMALL, a100, stage=3, **nvls),
             r"the GPUs \[0, 1, 2, 3, 4, 5, 6, 7\] \(reduce_scatter\): "
             + no_nvls.format("reduce_scatter")),
            (lambda: tr.tensor_parallel_layer(SMALL, a100, tp=4, **nvls),
             r"the tensor-parallel group \[0, 1, 2, 3\] \(all_reduce\): "
             + no_nvls.format("all_reduce")),
            (lambda: tr.step(SMALL.with_batch(2), h100, dp=2, tp=8, **nvls),
             r"the data-parallel group \[0, 8\] \(all_reduce\): "
             + no_nvls.format("all_reduce") + r".*NVLS across nodes needs collnet=1")):
        with pytest.raises(sc.InvalidInputError, match=where):
            run()


def test_a_choice_nccl_cannot_make_on_a_step_s_element_type_is_refused_before_the_run(
        monkeypatch):
    """Gradients of one byte are all-reduced as 8-bit elements (no float type has that
    size), which NVLS's switches never sum: algo='nvls' on a DGX H100 is refused before
    the run, as the run's sum would refuse it (checked with no reduction, it passed)."""
    monkeypatch.setattr("simcoll.training.data_parallelism.run_program", _never_run)
    model = tr.gpt(3, 64, 8, 16, 128, batch=2,
                   precision=tr.Precision(param_bytes=2, grad_bytes=1))
    with pytest.raises(sc.InvalidInputError, match=r"^the GPUs \[0, 1, 2, 3, 4, 5, 6, 7\] "
                                                   r"\(all_reduce\): algo='nvls' cannot run "
                                                   r"all_reduce on this machine; .*never an "
                                                   r"average, a product or 8-bit elements"):
        tr.data_parallel(model, sc.topology.dgx_h100(1), algorithm="nccl",
                         algorithm_params={"algo": "nvls"})
