"""AVG as NCCL's ncclAvg (``hostToDevRedOp`` in NCCL's src/enqueue.cc): floating inputs
are each multiplied by 1/p rounded to the dtype before they are summed
(``ncclDevPreMulSum``), integer sums are divided by p once at the end. The expected values
are worked out by hand in float16, whose sums of a few 10,000s overflow (65,504 is its
largest finite number) while their mean does not."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import STOCK_PAIRS

import simcoll as sc

REDUCING = [pair for pair in STOCK_PAIRS if sc.COLLECTIVES[pair[0]].reduces]


def _machine(algorithm: str) -> sc.Topology:
    # Eight GPUs in two nodes of four: every algorithm runs there (hierarchical ones
    # need nodes); NCCL's on one DGX H100 node, with NVLS's in-switch reduction.
    return sc.topology.dgx_h100(1) if algorithm == "nccl" else sc.topology.cluster(2, 4)


@pytest.mark.parametrize("pair", REDUCING, ids="/".join)
def test_a_float16_mean_that_its_sum_overflows_comes_out_exact(pair):
    # 1/8 is exact in float16, 12,288 / 8 = 1,536 too, and every partial sum of the
    # scaled inputs, k * 1,536 for k = 1..8, is exact (a multiple of 512 below 8,192,
    # of 8 above): each output element is 12,288 whatever the order. Summed first,
    # 98,304 overflowed to inf on every rank (and the check let it pass).
    collective, algorithm = pair
    topology = _machine(algorithm)
    p = topology.nranks
    data = [np.full(4 * p, 12_288, dtype=np.float16) for _ in range(p)]
    res = sc.simulate(topology, collective, algorithm=algorithm, data=data, op="avg")
    expected = {"all_reduce": 4 * p, "reduce_scatter": 4, "reduce": 4 * p}[collective]
    outputs = res.outputs[:1] if collective == "reduce" else res.outputs
    for out in outputs:
        assert out.dtype == np.float16
        assert out.tolist() == [12_288.0] * expected
    assert res.correct is True
    assert res.max_error == 0.0


def test_the_scale_is_one_over_p_rounded_to_the_dtype():
    # float16(1/3) = 1365 * 2^-12 = 0.333251953125 (1/3 = 1365.33 steps of 2^-12 in
    # [1/4, 1/2)). 30,000 times it is 9,997.56, which float16 (steps of 8 from 8,192)
    # rounds to 10,000; three of those sum to 30,000 exactly (steps of 16 from 16,384).
    # Summed first, 90,000 overflowed.
    data = [np.array([30_000.0], dtype=np.float16)] * 3
    res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="ring", data=data,
                      op="avg")
    assert [out.tolist() for out in res.outputs] == [[30_000.0]] * 3
    assert res.correct is True


def test_a_started_average_scales_its_inputs_too():
    def program(comm):
        x = np.full(8, 20_000.0, dtype=np.float16)
        return (yield comm.all_reduce(x, algorithm="ring", op="avg"))

    # 1/4 exact: 5,000 per rank, summed to 20,000 (80,000 summed first overflowed).
    res = sc.run_program(sc.topology.switch(4), program)
    assert [out.tolist() for out in res.outputs] == [[20_000.0] * 8] * 4


def test_integer_averages_still_divide_the_sum():
    # int32: (7 + 8 + 8) / 3 = 23 / 3, truncated to 7; scaled first, each input would
    # have truncated to 2, giving 6.
    data = [np.array([7], np.int32), np.array([8], np.int32), np.array([8], np.int32)]
    res = sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="ring", data=data,
                      op="avg")
    assert [out.tolist() for out in res.outputs] == [[7]] * 3


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_an_overflowing_sum_leaves_json_ready_records():
    # A sum of float16 60,000s overflows in some orders, which the check accepts (with no
    # numpy overflow warning, which the reductions printed); the record's max_error is
    # then not a number JSON can hold, and is written as null.
    data = [np.full(2, 60_000.0, dtype=np.float16)] * 2
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="ring", data=data)
    assert res.correct is True and res.max_error == np.inf
    record = res.to_dict()
    assert record["max_error"] is None and record["correct"] is True
    json.dumps(record, allow_nan=False)
