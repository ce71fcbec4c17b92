"""The registry: one registration per algorithm with its parameters and cost model.

Parameters are declared once as typed specs; every declared parameter of every registered
algorithm is checked here for normalization (numpy numbers become plain ones) and for
refusals that name the value and the accepted range, before any run starts.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
import sys
import time
import warnings
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
from conftest import NO_FORMULA, reference_network

import simcoll as sc
import simcoll.algorithms as algorithms_package
from simcoll import cost
from simcoll.algorithms import Choice, Int, Keywords, Names, Optional, Real, registry
from simcoll.cost import CostModel, gpu_traffic
from simcoll.errors import InvalidInputError

P, COUNT = 4, 64          # ranks and float32 elements per rank of every run below

SPECS = [(pair, name, spec) for pair in sc.list_algorithms()
         for name, spec in sc.get_algorithm(*pair).params.items()
         if sc.get_algorithm(*pair).fn.__module__.startswith("simcoll.")]


def ids(case):
    (coll, alg), name, _ = case
    return f"{coll}/{alg}:{name}"


def simulate(pair, **params):
    coll, alg = pair
    return sc.simulate(reference_network(P), coll, algorithm=alg, nbytes=4 * COUNT, **params)


def simulate_where_it_acts(pair, name, **params):
    """As :func:`simulate`, on a machine where parameter ``name`` can change the run:
    NCCL's ``collnet`` acts only across nodes joined by SHARP switches, and on two such
    DGX H100 nodes the tuner picks NVLS across them at 1 MiB (all_gather: of output);
    ``step_latency_scale`` where NCCL's step latency outweighs the links' (0.1 us each,
    under NCCL's 0.6 us for a step with LL over NVLink); ``nvls_channels`` where NVLS
    runs, on one DGX H100 node."""
    if pair[1] == "nccl" and name == "step_latency_scale":
        return sc.simulate(sc.topology.switch(P, latency=0.1 * sc.us), pair[0],
                           algorithm="nccl", nbytes=4 * COUNT, **params)
    if pair[1] == "nccl" and name == "nvls_channels":
        return sc.simulate(sc.topology.dgx_h100(1), pair[0], algorithm="nccl", algo="nvls",
                           nbytes=1 << 20, **params)
    if pair[1] == "nccl" and name == "collnet":
        return sc.simulate(sc.topology.dgx_h100(2, sharp=True), pair[0], algorithm="nccl",
                           nbytes=(1 << 20) // (16 if pair[0] == "all_gather" else 1),
                           **params)
    return simulate(pair, **params)


def other_value(spec):
    """A valid value other than the default, as the plain Python type."""
    if isinstance(spec, Optional):
        return other_value(spec.param) if spec.param.default is not None else \
            (spec.param.minimum or 0) + 1
    if isinstance(spec, Int):
        return spec.default + 1
    if isinstance(spec, Real):
        return spec.default + 1e-6
    raise AssertionError(f"no test value for {spec!r}: teach other_value this spec")


def bad_values(spec):
    """Values the spec must refuse, each with the words that must name what is accepted."""
    if isinstance(spec, Optional):
        inner = bad_values(spec.param)
        return [(v, "None or " + words) for v, words in inner]
    if isinstance(spec, Int):
        words = "an integer"
        cases = [True, "2", 1.5, 2.0, [1], np.float64(3.0)]
        if spec.minimum is not None and spec.maximum is not None:
            words += f" in {spec.minimum}..{spec.maximum}"
            cases += [spec.maximum + 1, np.int64(spec.maximum + 1)]
        elif spec.minimum is not None:
            words += f" >= {spec.minimum}"
        if spec.minimum is not None:
            cases += [spec.minimum - 1, np.int64(spec.minimum - 1), -(10**30)]
        return [(v, words) for v in cases]
    if isinstance(spec, Real):
        words = "a finite number" if not spec.allow_inf else "a number"
        cases = [True, np.bool_(False), "1e-3", math.nan, [0.0]]
        if not spec.allow_inf:
            cases += [math.inf, -math.inf, 10**400]   # past floats: an OverflowError
        if spec.minimum is not None:
            words += f" >= {spec.minimum:g}"
            cases += [spec.minimum - 1.0]
        return [(v, words) for v in cases]
    if isinstance(spec, Choice):
        words = "one of " + ", ".join(repr(c) for c in spec.options())
        return [(v, words) for v in (["ring"], ("ring",), 3, None, "no_such_name")]
    if isinstance(spec, Names):
        words = ("one of " + ", ".join(repr(c) for c in spec.choices)
                 + ", several of them separated by commas")
        return [(v, words) for v in (["ring"], ("ring",), 3, None, "no_such_name",
                                     f"{spec.choices[0]},no_such_name",
                                     "^" + ",".join(spec.choices))]
    if isinstance(spec, Keywords):
        words = "a dict of parameter names to values, or 'name=value;name=value'"
        return [(v, words) for v in (5, ["chunks"], ("chunks", 2), {1: 2}, "chunks",
                                     "chunks=2;=3", None)]
    raise AssertionError(f"no bad values for {spec!r}: teach bad_values this spec")


def test_every_algorithm_is_checked_here():
    assert {case[0] for case in SPECS} >= {("all_reduce", "ring"), ("all_reduce", "bucketed"),
                                           ("all_reduce", "parameter_server"),
                                           ("all_reduce", "hierarchical")}
    for _, _, spec in SPECS:
        bad_values(spec)
        if not isinstance(spec, (Choice, Names, Keywords)):
            other_value(spec)


@pytest.mark.parametrize("case", [c for c in SPECS
                                  if not isinstance(c[2], (Choice, Names, Keywords))],
                         ids=ids)
def test_numpy_numbers_give_the_same_result_as_plain_ones(case):
    pair, name, spec = case
    value = other_value(spec)
    numpy_value = np.int64(value) if isinstance(value, int) else np.float64(value)
    plain = simulate_where_it_acts(pair, name, **{name: value})
    numpy = simulate_where_it_acts(pair, name, **{name: numpy_value})
    assert plain.time == numpy.time and plain.messages == numpy.messages
    np.testing.assert_array_equal(plain.bytes_sent, numpy.bytes_sent)
    np.testing.assert_array_equal(plain.bytes_received, numpy.bytes_received)
    np.testing.assert_array_equal(plain.rank_times, numpy.rank_times)
    assert plain.link_bytes == numpy.link_bytes
    assert numpy.params[name] == value and type(numpy.params[name]) is type(value)
    assert json.loads(json.dumps(numpy.to_dict()))["params"][name] == value
    if sc.get_algorithm(*pair).resolve is None:
        assert numpy.params == {name: value}
    # The value took effect: the run differs from one with the default (unless the
    # algorithm's tuner chose that very value by itself).
    default = simulate_where_it_acts(pair, name)
    if default.params.get(name) == value:
        return
    assert (default.time, default.messages) != (plain.time, plain.messages) or \
        name == "compute" and default.time < plain.time


@pytest.mark.parametrize("case", SPECS, ids=ids)
def test_bad_values_are_refused_naming_the_value_and_what_is_accepted(case):
    pair, name, spec = case
    for value, words in bad_values(spec):
        with pytest.raises(sc.InvalidInputError) as info:
            simulate(pair, **{name: value})
        message = str(info.value)
        digits = str(value)
        plain = value.item() if isinstance(value, np.generic) else value  # shown as a number
        written = repr(plain) if type(value) is not int or len(digits.lstrip("-")) <= 30 \
            else f"{digits[:9 if value < 0 else 8]}..."   # long numbers are abbreviated
        assert f"{name}={written}" in message, message
        assert words in message, message
        # The cost model refuses it the same way.
        with pytest.raises(sc.InvalidInputError, match=f"{name}="):
            cost.predict(*pair, p=P, nbytes=4 * COUNT, alpha=1e-6, beta=1e-9, **{name: value})


@pytest.mark.parametrize("case", [c for c in SPECS if getattr(c[2], "at_most_elements", 0)],
                         ids=ids)
def test_more_pieces_than_elements_are_refused_naming_both_numbers(case):
    pair, name, spec = case
    with pytest.raises(sc.InvalidInputError, match=rf"{name}=1000 is more than the 16 "
                                                   rf"elements .*use 1\.\.16"):
        sc.simulate(reference_network(P), *pair[:1], algorithm=pair[1], nbytes=64,
                    **{name: 10**3})
    res = sc.simulate(reference_network(P), *pair[:1], algorithm=pair[1], nbytes=64,
                      **{name: 16})
    assert res.params == {name: 16}


def test_unknown_parameters_list_what_is_accepted_for_runs_and_models():
    with pytest.raises(sc.InvalidInputError, match=r"\['chunkz'\].*chunks \(pieces each ring "
                                                   r"block is cut into, default 1\)"):
        simulate(("all_reduce", "ring"), chunkz=2)
    with pytest.raises(sc.InvalidInputError, match=r"\['servers'\].*accepts none"):
        cost.predict("all_reduce", "naive", p=4, nbytes=8, alpha=1, beta=1, servers=2)
    with pytest.raises(sc.InvalidInputError, match=r"\['hosts'\]"):
        simulate(("all_reduce", "parameter_server"), hosts=1)   # a model parameter only
    with pytest.raises(sc.InvalidInputError, match=r"^root=-1 is not a rank; use 0\.\.3$"):
        sc.cost.traffic("scatter", "binomial", p=4, nbytes=16, root=-1)  # said ">= 0" only
    with pytest.raises(sc.InvalidInputError, match="root=4 is not a rank; use 0..3"):
        cost.traffic("broadcast", "binomial", p=4, nbytes=8, root=4)


def test_non_string_algorithm_names_are_refused_cleanly():
    for name in (["ring"], 3, None):
        with pytest.raises(sc.UnknownAlgorithmError, match=rf"unknown algorithm "
                                                           rf"{re.escape(repr(name))}.*known "
                                                           rf"algorithms: .*ring"):
            sc.simulate(reference_network(2), "all_reduce", algorithm=name, nbytes=8)
        with pytest.raises(sc.UnknownAlgorithmError, match="no cost model"):
            cost.predict("all_reduce", name, p=2, nbytes=8, alpha=1, beta=1)
    with pytest.raises(sc.UnknownCollectiveError, match="unknown collective 3"):
        sc.list_algorithms(3)


def test_numpy_sizes_are_accepted_by_the_models():
    plain = cost.predict("all_reduce", "rabenseifner", p=6, nbytes=600, alpha=1, beta=1)
    numpy = cost.predict("all_reduce", "rabenseifner", p=np.int64(6), nbytes=np.int32(600),
                         alpha=1, beta=1)
    assert plain == numpy
    for bad in (True, 0, 2.0, "4"):
        with pytest.raises(sc.InvalidInputError, match=f"p={bad!r}"):
            cost.predict("all_reduce", "ring", p=bad, nbytes=8, alpha=1, beta=1)


def test_compute_takes_seconds_as_any_finite_number():
    res = simulate(("all_reduce", "bucketed"), buckets=np.int16(2), compute=np.float32(0.5))
    assert res.params == {"buckets": 2, "compute": 0.5}
    assert [type(v) for v in res.params.values()] == [int, float]
    assert res.time > 0.5


# -- registration ----------------------------------------------------------------------

def _flat(comm, x):
    for peer in range(comm.size):
        if peer != comm.rank:
            comm.send(x, dst=peer)
    blocks = []
    for peer in range(comm.size):
        blocks.append(x if peer == comm.rank else (yield comm.recv(src=peer)))
    return comm.join(blocks)


def test_a_registration_without_a_cost_model_fails_naming_the_pair():
    with pytest.raises(TypeError, match=r"all_gather/test_no_cost: register\(\) needs "
                                        r"cost=CostModel"):
        sc.register("all_gather", "test_no_cost")(_flat)
    with pytest.raises(TypeError, match="all_gather/test_bad_cost: cost=.* is not a "
                                        "simcoll.cost.CostModel"):
        sc.register("all_gather", "test_bad_cost", cost=lambda p: 0.0)(_flat)
    assert ("all_gather", "test_no_cost") not in sc.list_algorithms()


@pytest.mark.parametrize("collective, name", [("all_reduce", 123), ("all_reduce", ""),
                                              (None, "x"), ("all_reduce", ("ring",))])
def test_names_must_be_non_empty_strings(collective, name):
    with pytest.raises(sc.InvalidInputError, match="use a non-empty string"):
        sc.register(collective, name, cost=NO_FORMULA)
    assert ("all_reduce", "ring") in sc.list_algorithms()   # the registry still works


@pytest.mark.parametrize("name", ["my ring", "ring,tree", "a=b", "a/b", "2ring", "ring:4"])
def test_a_name_the_command_line_could_not_pass_is_refused(name):
    with pytest.raises(sc.InvalidInputError, match=f"name={name!r} is not accepted; use "
                                                   f"letters, digits"):
        sc.register("all_reduce", name, cost=NO_FORMULA)
    assert ("all_reduce", name) not in sc.list_algorithms()


def test_a_program_takes_exactly_its_declared_parameters_without_defaults():
    chunks = {"chunks": Int(1, minimum=1)}

    def undeclared(comm, x, *, width):
        yield from ()

    def missing(comm, x):
        yield from ()

    def defaulted(comm, x, *, chunks=1):
        yield from ()

    with pytest.raises(TypeError, match=r"takes keyword-only \['width'\] but is passed \[\]"):
        sc.register("all_gather", "test_undeclared", cost=NO_FORMULA)(undeclared)
    with pytest.raises(TypeError, match=r"takes keyword-only \[\] but is passed \['chunks'\]"):
        sc.register("all_gather", "test_missing", params=chunks, cost=NO_FORMULA)(missing)
    with pytest.raises(TypeError, match=r"gives \['chunks'\] a default; declare defaults "
                                        r"once, in params="):
        sc.register("all_gather", "test_defaulted", params=chunks, cost=NO_FORMULA)(defaulted)
    with pytest.raises(TypeError, match=r"\['op'\] but is passed \['root'\]; take 'root' as "
                                        r"a keyword-only argument without a default: "
                                        r"broadcast passes it \(the root rank\); remove 'op': "
                                        r"broadcast does not pass it \(only collectives that "
                                        r"reduce do\)$"):
        sc.register("broadcast", "test_op", cost=NO_FORMULA)(
            lambda comm, x, *, op: (yield from ()))
    # The hint said to declare root in params=, which is then refused.
    with pytest.raises(TypeError, match=r"take 'root' as a keyword-only argument without a "
                                        r"default: reduce passes it"):
        sc.register("reduce", "test_no_root", cost=NO_FORMULA)(
            lambda comm, x, *, op: (yield from ()))
    with pytest.raises(TypeError, match=r"\['root'\] cannot be declared as parameters: root "
                                        r"comes from the collective \(take it as a "
                                        r"keyword-only argument where it passes it\)$"):
        sc.register("reduce", "test_no_root", params={"root": Int(0, minimum=0)},
                    cost=NO_FORMULA)(lambda comm, x, *, op: (yield from ()))
    # a name declared in params= and in the model's machine= too, and a collective's
    # keyword beside a parameter not declared: each told its own reason
    twice = CostModel(time=_one_second, traffic=_zero_traffic,
                      machine={"hosts": Int(0, minimum=0)})
    with pytest.raises(TypeError, match=r"\['hosts'\] cannot be declared as parameters: hosts "
                                        r"is declared in cost.machine= too$"):
        sc.register("all_reduce", "test_twice", params={"hosts": Int(0, minimum=0)},
                    cost=twice)(lambda comm, x, *, op, hosts: (yield from ()))
    with pytest.raises(TypeError, match=r"remove 'op': all_gather does not pass it \(only "
                                        r"collectives that reduce do\); declare each parameter "
                                        r"in params= and take it as a keyword-only argument$"):
        sc.register("all_gather", "test_both", params=chunks, cost=NO_FORMULA)(
            lambda comm, x, *, op: (yield from ()))


def test_specs_and_model_functions_are_checked_at_registration():
    with pytest.raises(TypeError, match="parameter chunks=1 is not a spec"):
        sc.register("all_gather", "test_spec", params={"chunks": 1}, cost=NO_FORMULA)
    with pytest.raises(TypeError, match="default of chunks is refused by its own spec"):
        sc.register("all_gather", "test_spec", params={"chunks": Int(0, minimum=1)},
                    cost=NO_FORMULA)
    with pytest.raises(TypeError, match=r"\['op'\] cannot be declared"):
        sc.register("all_reduce", "test_spec", params={"op": Int(1)}, cost=NO_FORMULA)

    def time(p, nbytes, alpha, beta, gamma, *, chunk):
        return 0.0

    with pytest.raises(TypeError, match=r"cost model function 'time' takes \['chunk'\], which "
                                        r"nobody passes; it may take \['chunks', 'itemsize'\]"):
        sc.register("all_gather", "test_spec", params={"chunks": Int(1, minimum=1)},
                    cost=CostModel(time=time, traffic=NO_FORMULA.traffic))
    assert ("all_gather", "test_spec") not in sc.list_algorithms()


@pytest.mark.parametrize("resolve, message", [
    (5, r"resolve 5 is not callable"),
    (lambda topology: {}, r"resolve '<lambda>' takes \(topology\) positionally but is "
                          r"called with \(topology, ranks, x\)"),
    (lambda topology, ranks, x, *, zz: {}, r"resolve '<lambda>' takes \['zz'\], which nobody "
                                           r"passes; it may take \['k', 'op', 'started'\]")])
def test_a_resolve_function_is_checked_at_registration(resolve, message):
    """resolve= was taken as given and failed in simulate with a raw TypeError."""
    with pytest.raises(TypeError, match=rf"^all_gather/test_resolve_bad: {message}"):
        sc.register("all_gather", "test_resolve_bad", params={"k": Int(1, minimum=1)},
                    cost=NO_FORMULA, resolve=resolve)
    assert ("all_gather", "test_resolve_bad") not in sc.list_algorithms()


def _flat_k(comm, x, *, k):
    return (yield from _flat(comm, x))


def _resolve_raising(topology, ranks, x, *, k):
    raise ValueError(f"no choice for k={k}")


@pytest.mark.parametrize("name, resolve, error, message", [
    ("test_resolve_none", lambda topology, ranks, x: None, sc.RegistrationError,
     r"its resolve function returned None; it returns a dict of the algorithm's parameters"),
    ("test_resolve_unknown", lambda topology, ranks, x: {"zz": 1}, sc.RegistrationError,
     r"its resolve function returned \{'zz': 1\} \(it takes no \['zz'\]\); it returns"),
    ("test_resolve_raising", _resolve_raising, InvalidInputError,
     r"its resolve function raised ValueError: no choice for k=1"),
    ("test_resolve_refused", lambda topology, ranks, x, **params: {"k": params["k"] - 1},
     sc.RegistrationError, r"its resolve function chose what the parameters refuse: k=0 is "
                           r"not accepted; use an integer >= 1")])
def test_what_a_resolve_function_does_wrong_is_named_with_the_algorithm(name, resolve, error,
                                                                        message):
    """A resolve function that returned None, a name the algorithm does not take, raised
    or chose a refused value gave a raw TypeError, its own exception, or a refusal that
    read as if the caller had passed the value: what it returns wrong is the algorithm's
    fault (RegistrationError), what it raises is named with it."""
    sc.register("all_gather", name, params={"k": Int(1, minimum=1)}, cost=NO_FORMULA,
                resolve=resolve)(_flat_k)
    with pytest.raises(error, match=rf"^all_gather/{name}: {message}"):
        sc.simulate(reference_network(3), "all_gather", algorithm=name, nbytes=12)


def test_a_resolve_function_is_passed_what_it_names_and_chooses():
    sc.register("all_gather", "test_resolve_right", params={"k": Int(1, minimum=1)},
                cost=NO_FORMULA, resolve=lambda topology, ranks, x, *, k: {"k": k + 2},
                replace=True)(_flat_k)
    assert sc.simulate(reference_network(3), "all_gather", algorithm="test_resolve_right",
                       nbytes=12, k=4).params == {"k": 6}


@pytest.mark.parametrize("make, message", [
    (lambda: Optional(5), r"Optional\(5\) is not accepted; give the spec of the value"),
    (lambda: Int(3, minimum="1"), r"Int\(minimum='1'\) is not accepted; give an integer"),
    (lambda: Int(3, maximum=4.5), r"Int\(maximum=4.5\) is not accepted; give an integer"),
    (lambda: Int(3, minimum=True), r"Int\(minimum=True\) is not accepted"),
    (lambda: Int(3, minimum=5, maximum=1), r"Int\(minimum=5, maximum=1\) accepts nothing"),
    (lambda: Real(0.5, minimum=math.nan), r"Real\(minimum=nan\) is not accepted; give a "
                                          r"number or None"),
    (lambda: Real(0.5, maximum="1"), r"Real\(maximum='1'\) is not accepted"),
    (lambda: Choice("a", ()), r"Choice\(choices=\(\)\) is not accepted; give at least one"),
    (lambda: Real(math.inf, minimum=math.inf), r"Real\(minimum=inf, maximum=None\) accepts "
                                               r"nothing: only inf reaches that bound"),
])
def test_malformed_specs_are_refused_when_made(make, message):
    """Optional(5) registered, then failed at its first value with an AttributeError;
    Int(minimum='1') raised a bare TypeError comparing its default; an empty Choice ended
    its refusal in 'use one of ' and nothing."""
    with pytest.raises(sc.RegistrationError, match=message):
        make()


def test_well_formed_specs_are_made():
    assert Int(3, minimum=np.int64(1), maximum=3).normalize("k", 2) == 2
    assert Real(0.5, minimum=0, maximum=math.inf).normalize("k", 7) == 7.0
    assert Optional(Int(1, minimum=1)).normalize("k", None) is None


def test_a_declared_parameter_taken_positionally_and_a_builtin_are_refused_at_registration():
    """Only keyword-only arguments are passed to a model: a time function taking chunks
    positionally with a default never got it (predict gave chunks=4's time for every
    chunks), nor a traffic function its root; a builtin (no signature Python reads) gave
    a bare ValueError naming neither the algorithm nor what it was for."""
    chunks = {"chunks": Int(4, minimum=1)}

    def chain_time(p, nbytes, alpha, beta, gamma, chunks=4):
        return 0.0

    def chain_traffic(p, nbytes, itemsize, root=0):
        return gpu_traffic(np.zeros(p, np.int64), np.zeros(p, np.int64))

    with pytest.raises(sc.RegistrationError,
                       match=r"^broadcast/test_unpassed: cost model function 'chain_time' "
                             r"takes \['chunks'\] positionally, so it is never passed them "
                             r"\(only keyword-only arguments are\) and keeps its default; "
                             r"make them keyword-only \(after a bare \*\)$"):
        sc.register("broadcast", "test_unpassed", params=chunks,
                    cost=CostModel(time=chain_time, traffic=NO_FORMULA.traffic))
    with pytest.raises(sc.RegistrationError, match=r"'chain_traffic' takes \['root'\] "
                                                   r"positionally"):
        sc.register("broadcast", "test_unpassed",
                    cost=CostModel(time=NO_FORMULA.time, traffic=chain_traffic))

    def only_positional(p, nbytes, alpha, beta, gamma, chunks=4, /):
        return 0.0

    with pytest.raises(sc.RegistrationError, match=r"'only_positional' takes \['chunks'\] "
                                                   r"positionally"):
        sc.register("broadcast", "test_unpassed", params=chunks,
                    cost=CostModel(time=only_positional, traffic=NO_FORMULA.traffic))
    with pytest.raises(sc.RegistrationError,
                       match=r"^all_reduce/test_unpassed: cost model function 'max' has no "
                             r"signature Python can read \(a builtin\?\); wrap it in a "
                             r"function of your own$"):
        sc.register("all_reduce", "test_unpassed",
                    cost=CostModel(time=max, traffic=NO_FORMULA.traffic))
    with pytest.raises(sc.RegistrationError, match="validate 'max' has no signature"):
        sc.register("all_reduce", "test_unpassed", validate=max, cost=NO_FORMULA)
    # with **kwargs every argument comes by keyword: a positional one with a default is
    # passed too (registered at 1ca282c, refused by the first form of this check)
    def open_time(p, nbytes, alpha, beta, gamma, chunks=4, **rest):
        return float(chunks)

    sc.register("broadcast", "test_open_model", params=chunks,
                cost=CostModel(time=open_time, traffic=NO_FORMULA.traffic))(
        lambda comm, x, *, root, chunks: (yield from ()))
    assert cost.predict("broadcast", "test_open_model", p=4, nbytes=8, alpha=0, beta=0,
                        chunks=7) == 7.0
    # a positional argument of the model's own without a default is refused as before;
    # keyword-only ones are passed
    def keyword_time(p, nbytes, alpha, beta, gamma, *, chunks):
        return float(chunks)

    sc.register("broadcast", "test_unpassed", params=chunks,
                cost=CostModel(time=keyword_time, traffic=NO_FORMULA.traffic))(
        lambda comm, x, *, root, chunks: (yield from ()))
    assert cost.predict("broadcast", "test_unpassed", p=4, nbytes=8, alpha=0, beta=0,
                        chunks=7) == 7.0
    assert ("all_reduce", "test_unpassed") not in sc.list_algorithms()


def test_programs_and_models_that_cannot_take_their_arguments_are_refused_at_registration():
    def no_buffer(comm, *, op):
        yield from ()

    def three(comm, x, y, *, op):
        yield from ()

    def flexible(comm, *args, op):
        yield from ()

    for program, shown in ((no_buffer, r"\(comm\)"), (three, r"\(comm, x, y\)")):
        with pytest.raises(sc.RegistrationError, match=f"program '{program.__name__}' "
                                                       f"takes {shown} positionally but is "
                                                       r"called with \(comm, x\)"):
            sc.register("all_reduce", "test_positional", cost=NO_FORMULA)(program)
    sc.register("all_reduce", "test_flexible", cost=NO_FORMULA)(flexible)

    def time(p):
        return 0.0

    with pytest.raises(sc.RegistrationError, match=r"cost model function 'time' takes \(p\) "
                                                   r"positionally but is called with \(p, "
                                                   r"nbytes, alpha, beta, gamma\)"):
        sc.register("all_reduce", "test_positional",
                    cost=CostModel(time=time, traffic=NO_FORMULA.traffic))
    with pytest.raises(sc.RegistrationError, match=r"'<lambda>' takes \(p, nbytes\) "
                                                   r"positionally but is called with \(p, "
                                                   r"nbytes, itemsize\)"):
        sc.register("all_reduce", "test_positional",
                    cost=CostModel(time=NO_FORMULA.time, traffic=lambda p, nbytes: None))
    with pytest.raises(sc.RegistrationError, match=r"params='k' is not accepted; give a dict"):
        sc.register("all_reduce", "test_positional", params="k", cost=NO_FORMULA)
    assert ("all_reduce", "test_positional") not in sc.list_algorithms()


def test_a_model_that_returns_the_wrong_type_is_named_when_asked():
    bad = CostModel(time=lambda p, nbytes, alpha, beta, gamma: "fast",
                    traffic=lambda p, nbytes, itemsize: [0] * p)
    sc.register("all_reduce", "test_bad_returns", cost=bad)(_flat_all_reduce)
    with pytest.raises(sc.RegistrationError, match=r"all_reduce/test_bad_returns: its cost "
                                                   r"model's time returned 'fast'"):
        sc.cost.predict("all_reduce", "test_bad_returns", p=4, nbytes=64, alpha=1, beta=1)
    with pytest.raises(sc.RegistrationError, match=r"traffic returned \[0, 0, 0, 0\]; "
                                                   r"return a simcoll.cost.Traffic"):
        sc.cost.traffic("all_reduce", "test_bad_returns", p=4, nbytes=64)


@pytest.mark.parametrize("seconds", [-1.0, float("nan"), float("inf")])
def test_a_model_that_returns_an_impossible_time_or_traffic_is_named(seconds):
    # predict returned -1.0 and nan as they came; traffic arrays of 5 and 2 entries for
    # 4 ranks passed.
    from simcoll.cost import gpu_traffic

    name = f"test_bad_values_{seconds}"
    bad = CostModel(time=lambda p, nbytes, alpha, beta, gamma: seconds,
                    traffic=lambda p, nbytes, itemsize: gpu_traffic(np.zeros(p + 1),
                                                                    np.zeros(2)))
    sc.register("all_reduce", name, cost=bad)(_flat_all_reduce)
    with pytest.raises(sc.RegistrationError, match=rf"all_reduce/{name}: its cost model's "
                                                   rf"time returned {seconds!r}; return a "
                                                   rf"finite number of seconds >= 0"):
        sc.cost.predict("all_reduce", name, p=4, nbytes=64, alpha=1, beta=1)
    with pytest.raises(sc.RegistrationError, match=r"traffic gave 5 bytes sent and 2 "
                                                   r"received for p=4 ranks"):
        sc.cost.traffic("all_reduce", name, p=4, nbytes=64)


def test_a_name_taken_is_refused_as_a_simcoll_error():
    with pytest.raises(sc.RegistrationError, match="'ring' is already registered"):
        sc.register("all_reduce", "ring", cost=NO_FORMULA)(_flat_all_reduce)
    assert issubclass(sc.RegistrationError, sc.SimCollError)
    assert issubclass(sc.RegistrationError, TypeError)
    assert issubclass(sc.RegistrationError, ValueError)


def _flat_all_reduce(comm, x, *, op):
    yield from ()
    return x


def _refuses(kind):
    def validate(p, count, hosts, *, width):
        if width > p:
            raise kind(f"width={width} is more than the {p} ranks")
    return validate


@pytest.mark.parametrize("kind", [ValueError, KeyError, ZeroDivisionError])
def test_a_validate_that_raises_is_reported_as_invalid_input(kind):
    name = f"test_validate_{kind.__name__}"

    @sc.register("all_gather", name, params={"width": Int(1, minimum=1)},
                 validate=_refuses(kind), cost=NO_FORMULA)
    def program(comm, x, *, width):
        return (yield from _flat(comm, x))

    with pytest.raises(sc.InvalidInputError, match=rf"all_gather/{name}: its validate function "
                                                   rf"raised {kind.__name__}: .*width=9 is more "
                                                   rf"than the 4 ranks") as info:
        simulate(("all_gather", name), width=9)
    assert isinstance(info.value.__cause__, kind)
    assert simulate(("all_gather", name), width=3).params == {"width": 3}


def test_a_validate_that_refuses_properly_is_passed_through():
    sc.register("all_gather", "test_validate_ok", params={"width": Int(1, minimum=1)},
                validate=_refuses(sc.InvalidInputError), cost=NO_FORMULA)(
        lambda comm, x, *, width: (yield from _flat(comm, x)))
    with pytest.raises(sc.InvalidInputError, match=r"^width=9 is more than the 4 ranks$"):
        simulate(("all_gather", "test_validate_ok"), width=9)


def test_a_validate_that_is_interrupted_stops_at_once():
    def interrupted(p, count, hosts):
        raise KeyboardInterrupt

    sc.register("all_gather", "test_validate_interrupt", validate=interrupted,
                cost=NO_FORMULA)(_flat)
    with pytest.raises(KeyboardInterrupt):
        simulate(("all_gather", "test_validate_interrupt"))


def _zero_traffic(p, nbytes, itemsize):
    return gpu_traffic(np.zeros(p), np.zeros(p))


def test_the_cost_queries_refuse_what_validate_refuses():
    """simulate refused width=9 on 4 ranks through validate, but predict, traffic and
    is_exact answered for it (a model that does not check its own arguments gave a
    number for a run that cannot happen). A validate that reads the ranks' nodes is
    left to simulate: a query knows no node layout. Hosts come from the model's machine
    parameter of that name."""
    seen = []

    def by_hosts(p, count, hosts, *, width):
        seen.append((p, count, hosts, width))
        if width > p:
            raise sc.InvalidInputError(f"width={width} is more than the {p} ranks")

    model = CostModel(time=_one_second, traffic=_zero_traffic, exact=lambda p, n, i: True,
                      machine={"hosts": Int(0, minimum=0)})
    sc.register("all_gather", "test_validate_cost", params={"width": Int(1, minimum=1)},
                validate=by_hosts, cost=model)(
        lambda comm, x, *, width: (yield from _flat(comm, x)))
    query = {"p": 4, "nbytes": 64, "width": 9}
    for ask, extra in ((cost.predict, {"alpha": 0, "beta": 0}), (cost.traffic, {}),
                       (cost.is_exact, {})):
        with pytest.raises(sc.InvalidInputError, match=r"^width=9 is more than the 4 ranks$"):
            ask("all_gather", "test_validate_cost", **query, **extra)
    assert cost.predict("all_gather", "test_validate_cost", p=4, nbytes=64, alpha=0, beta=0,
                        width=3, hosts=2) == 1.0
    assert seen[-1] == (4, 16, 2, 3)

    def by_nodes(p, count, hosts, *, nodes):
        raise sc.InvalidInputError("nodes read")

    sc.register("all_gather", "test_validate_nodes", validate=by_nodes,
                cost=CostModel(time=_one_second, traffic=_zero_traffic))(_flat)
    assert cost.predict("all_gather", "test_validate_nodes", p=4, nbytes=64, alpha=0,
                        beta=0) == 1.0
    with pytest.raises(sc.InvalidInputError, match="nodes read"):
        simulate(("all_gather", "test_validate_nodes"))


def _one_second(p, nbytes, alpha, beta, gamma):
    return 1.0


def _two_seconds(p, nbytes, alpha, beta, gamma):
    return 2.0


def test_a_name_taken_is_replaced_only_when_asked():
    # A notebook cell run again (a new function under the same name) was refused with no
    # way to replace it; the same function registered again with another cost silently
    # replaced its entry (predict went from 1.0 to 2.0).
    one = CostModel(time=_one_second, traffic=_zero_traffic)
    two = CostModel(time=_two_seconds, traffic=_zero_traffic)

    def cell():  # what the cell defines, again at every run
        def mine(comm, x, *, op):
            yield from ()
            return x
        return mine

    first = sc.register("all_reduce", "test_mine", cost=one)(cell())
    sc.register("all_reduce", "test_mine", cost=one)(first)  # the same again: no change
    with pytest.raises(sc.RegistrationError, match=r"'test_mine' is already registered for "
                                                   r"'all_reduce' \(by test_registry\..*mine\); "
                                                   r"pass replace=True to register\(\)"):
        sc.register("all_reduce", "test_mine", cost=one)(cell())
    with pytest.raises(sc.RegistrationError, match=r"'test_mine' is already registered for "
                                                   r"'all_reduce' with another cost; pass "
                                                   r"replace=True"):
        sc.register("all_reduce", "test_mine", cost=two)(first)
    assert cost.predict("all_reduce", "test_mine", p=4, nbytes=64, alpha=1, beta=1) == 1.0
    again = sc.register("all_reduce", "test_mine", cost=two, replace=True)(cell())
    assert sc.get_algorithm("all_reduce", "test_mine").fn is again
    assert cost.predict("all_reduce", "test_mine", p=4, nbytes=64, alpha=1, beta=1) == 2.0
    with pytest.raises(sc.RegistrationError, match=r"'ring' is already registered for "
                                                   r"'all_reduce' by simcoll itself, which "
                                                   r"replace=True does not replace"):
        sc.register("all_reduce", "ring", cost=two, replace=True)(cell())
    with pytest.raises(sc.InvalidInputError, match=r"replace='yes' is not accepted"):
        sc.register("all_reduce", "test_mine", cost=two, replace="yes")


def test_choices_given_as_a_list_or_set_are_taken_as_a_tuple():
    # A list of choices crashed registration: TypeError: 'list' object is not callable.
    def time(p, nbytes, alpha, beta, gamma, *, mode):
        return 0.0

    @sc.register("broadcast", "test_modes", params={"mode": Choice("fast", ["fast", "slow"])},
                 cost=CostModel(time=time, traffic=_zero_traffic))
    def modes(comm, x, *, root, mode):
        yield comm.sleep(0.0)
        return x

    assert sc.get_algorithm("broadcast", "test_modes").params["mode"].choices == ("fast",
                                                                                  "slow")
    assert simulate(("broadcast", "test_modes"), mode="slow").params == {"mode": "slow"}
    with pytest.raises(sc.InvalidInputError, match=r"mode='medium' is not accepted; use one "
                                                   r"of 'fast', 'slow'"):
        simulate(("broadcast", "test_modes"), mode="medium")
    assert Choice("b", {"c", "b", "a"}).choices == ("a", "b", "c")
    assert Names("auto", ["LL", "Simple"]).choices == ("LL", "Simple")
    for bad in ("fast", ["fast", 1], 3):
        with pytest.raises(sc.RegistrationError, match=rf"Choice\(choices={re.escape(repr(bad))}\) "
                                                       rf"is not accepted; give the names as a "
                                                       rf"tuple, list or set of strings or a "
                                                       rf"function returning them"):
            Choice("fast", bad)


def test_is_exact_takes_only_a_bool_from_a_model():
    # "no" was taken as exact: bool("no") is True.
    vague = CostModel(time=_one_second, traffic=_zero_traffic,
                      exact=lambda p, nbytes, itemsize: "no")
    sc.register("broadcast", "test_vague", cost=vague)(
        lambda comm, x, *, root: (yield from ()))
    with pytest.raises(sc.RegistrationError, match=r"broadcast/test_vague: its cost model's "
                                                   r"exact returned 'no'; return True or "
                                                   r"False"):
        cost.is_exact("broadcast", "test_vague", p=4, nbytes=64)


def test_a_model_that_raises_is_reported_as_invalid_input_as_validate_is():
    # predict let a ZeroDivisionError of the model out as it was.
    def time(p, nbytes, alpha, beta, gamma):
        return nbytes / (p - 4)

    sc.register("all_reduce", "test_divides", cost=CostModel(time=time,
                                                             traffic=_zero_traffic))(
        _flat_all_reduce)
    with pytest.raises(sc.InvalidInputError, match=r"all_reduce/test_divides: its cost "
                                                   r"model's time raised ZeroDivisionError: "
                                                   r"division by zero") as info:
        cost.predict("all_reduce", "test_divides", p=4, nbytes=64, alpha=1, beta=1)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert cost.predict("all_reduce", "test_divides", p=6, nbytes=64, alpha=1, beta=1) == 32


def test_a_validate_that_cannot_take_its_positional_arguments_is_refused_at_registration():
    # It registered, and failed only at the first run ("takes 2 positional arguments but
    # 3 were given").
    with pytest.raises(sc.RegistrationError, match=r"all_gather/test_two: validate "
                                                   r"'<lambda>' takes \(p, count\) "
                                                   r"positionally but is called with \(p, "
                                                   r"count, hosts\)"):
        sc.register("all_gather", "test_two", validate=lambda p, count: None,
                    cost=NO_FORMULA)
    assert ("all_gather", "test_two") not in sc.list_algorithms()


@pytest.mark.parametrize("params", ["k", {"chunks": 1}])
def test_params_refusals_list_every_spec(params):
    # Names, Keywords and Value were left out.
    with pytest.raises(sc.RegistrationError, match=r"Int, Real, Choice, Names, Optional, "
                                                   r"Keywords or Value"):
        sc.register("all_gather", "test_specs_listed", params=params, cost=NO_FORMULA)


# -- discovery -------------------------------------------------------------------------

def test_every_module_of_the_package_is_imported():
    here = Path(algorithms_package.__file__).parent
    on_disk = sorted([p.stem for p in here.glob("*.py") if p.stem != "__init__"]
                     + [p.parent.name for p in here.glob("*/__init__.py")])
    assert list(algorithms_package.MODULES) == on_disk
    for name in on_disk:
        assert f"simcoll.algorithms.{name}" in sys.modules
    families = {sc.get_algorithm(*pair).fn.__module__ or "" for pair in sc.list_algorithms()}
    for module in (m for m in families if m.startswith("simcoll.")):
        assert any(module == f"simcoll.algorithms.{name}"
                   or module.startswith(f"simcoll.algorithms.{name}.") for name in on_disk)


def test_a_family_module_added_to_the_package_is_found(tmp_path, monkeypatch):
    (tmp_path / "zz_new_family.py").write_text(
        "import numpy as np\n"
        "import simcoll as sc\n"
        "from simcoll.cost import CostModel, gpu_traffic\n"
        "def traffic(p, nbytes, itemsize):\n"
        "    return gpu_traffic(np.zeros(p), np.zeros(p))\n"
        "@sc.register('barrier', 'zz_found', cost=CostModel(time=lambda *a: 0.0,\n"
        "                                                    traffic=traffic))\n"
        "def found(comm, x):\n"
        "    yield from ()\n")
    monkeypatch.setattr(algorithms_package, "__path__", [*algorithms_package.__path__,
                                                         str(tmp_path)])
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.delitem(sys.modules, "simcoll.algorithms.zz_new_family", raising=False)
    assert ("barrier", "zz_found") not in sc.list_algorithms()
    assert "zz_new_family" in algorithms_package.import_all()
    assert ("barrier", "zz_found") in sc.list_algorithms()
    res = sc.simulate(reference_network(3), "barrier", algorithm="zz_found")
    assert res.messages == 0
    sys.modules.pop("simcoll.algorithms.zz_new_family", None)


def test_a_plugin_that_fails_to_load_is_skipped_with_a_warning_naming_it(tmp_path,
                                                                          monkeypatch):
    # The first lookup of any algorithm raised the plugin's raw RuntimeError, and the
    # plugins after it were never loaded.
    (tmp_path / "zz_badplug.py").write_text("raise RuntimeError('plugin import failed')\n")
    (tmp_path / "zz_goodplug.py").write_text(
        "import numpy as np\n"
        "import simcoll as sc\n"
        "from simcoll.cost import CostModel, gpu_traffic\n"
        "def traffic(p, nbytes, itemsize):\n"
        "    return gpu_traffic(np.zeros(p), np.zeros(p))\n"
        "@sc.register('broadcast', 'zz_from_plugin',\n"
        "             cost=CostModel(time=lambda *a: 0.0, traffic=traffic))\n"
        "def from_plugin(comm, x, *, root):\n"
        "    yield from ()\n"
        "    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = [EntryPoint(name, value, registry.ENTRY_POINT_GROUP)
               for name, value in (("a_bad", "zz_badplug"), ("b_good", "zz_goodplug"))]
    monkeypatch.setattr(registry, "entry_points", lambda group: plugins)
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.setattr(registry, "_plugin_failures", [])
    for module in ("zz_badplug", "zz_goodplug"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    failed = (r"algorithm plugin a_bad = zz_badplug \(entry point group "
              r"'simcoll.algorithms'\) failed to load: RuntimeError: plugin import failed")
    with pytest.warns(RuntimeWarning, match=rf"^{failed}; simcoll goes on without it"):
        res = sc.simulate(reference_network(2), "broadcast", algorithm="binomial", nbytes=8)
    assert res.messages == 1
    assert ("broadcast", "zz_from_plugin") in sc.list_algorithms()
    with pytest.raises(sc.UnknownAlgorithmError, match=rf"known algorithms: .*; the {failed}"):
        sc.get_algorithm("broadcast", "zz_missing")


def _the_one_plugin(monkeypatch, tmp_path, module: str) -> None:
    """Make ``module`` (written in ``tmp_path``) the one installed plugin, not loaded yet."""
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = EntryPoint(module, module, registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [plugin])
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_a_lookup_waits_for_the_plugins_another_thread_is_loading(tmp_path, monkeypatch):
    """Two threads' first lookups at once: the second found the plugins marked loaded
    while the first still imported them, and was told the plugin's algorithm was
    unknown. A plugin whose import takes 0.3 s, and which looks an algorithm up itself
    while it loads (that lookup must not wait for itself)."""
    import threading

    (tmp_path / "zz_slowplug.py").write_text(
        "import time\n"
        "import numpy as np\n"
        "import simcoll as sc\n"
        "from simcoll.cost import CostModel, gpu_traffic\n"
        "sc.get_algorithm('broadcast', 'binomial')\n"
        "time.sleep(0.3)\n"
        "def traffic(p, nbytes, itemsize):\n"
        "    return gpu_traffic(np.zeros(p), np.zeros(p))\n"
        "@sc.register('broadcast', 'zz_slow',\n"
        "             cost=CostModel(time=lambda *a: 0.0, traffic=traffic))\n"
        "def slow(comm, x, *, root):\n"
        "    yield from ()\n"
        "    return x\n")
    _the_one_plugin(monkeypatch, tmp_path, "zz_slowplug")
    found: list[object] = []

    def look_up():
        try:
            found.append(sc.get_algorithm("broadcast", "zz_slow").name)
        except sc.SimCollError as exc:
            found.append(exc)

    threads = [threading.Thread(target=look_up) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    sys.modules.pop("zz_slowplug", None)
    assert found == ["zz_slow", "zz_slow"]


def test_a_thread_importing_a_plugin_while_another_loads_the_plugins_does_not_hang(
        tmp_path, monkeypatch):
    """Thread B imports a plugin module itself, which looks up 'ring' as it is imported;
    thread A's first lookup loads the plugins and so imports that module too. Holding a
    lock of its own while importing, A waited for the module (B's import) and B for A's
    lock, for ever."""
    import threading

    (tmp_path / "zz_wrapplug.py").write_text(
        "import time\n"
        "import simcoll as sc\n"
        "time.sleep(0.3)\n"
        "RING = sc.get_algorithm('all_reduce', 'ring')\n")
    _the_one_plugin(monkeypatch, tmp_path, "zz_wrapplug")
    done: dict[str, str] = {}

    def importer():
        import zz_wrapplug

        done["B"] = zz_wrapplug.RING.name

    def looker():
        done["A"] = sc.get_algorithm("all_reduce", "ring").name

    b = threading.Thread(target=importer, daemon=True)
    b.start()
    time.sleep(0.1)   # B is inside its import
    a = threading.Thread(target=looker, daemon=True)
    a.start()
    a.join(20)
    b.join(20)
    sys.modules.pop("zz_wrapplug", None)
    assert done == {"A": "ring", "B": "ring"}


# -- the specs themselves --------------------------------------------------------------

@pytest.mark.parametrize("spec, value, normalized", [
    (Int(1, minimum=1, maximum=8), np.uint8(8), 8),
    (Int(1, minimum=-3), np.int64(-3), -3),
    (Real(0.0, minimum=0.0), np.float32(0.25), 0.25),
    (Real(0.0, allow_inf=True), math.inf, math.inf),
    (Real(0.0, maximum=1.0), 1, 1.0),
    (Optional(Int(minimum=1)), None, None),
    (Optional(Int(minimum=1)), np.int32(3), 3),
    (Choice("a", ("a", "b")), np.str_("b"), "b"),
    (Choice("ring", ("ring", "LL128", "Simple"), ignore_case=True), "simple", "Simple"),
    (Choice("ring", ("ring", "LL128", "Simple"), ignore_case=True), "ll128", "LL128"),
    (Choice("ring", ("ring", "nvls_tree"), ignore_case=True), "NVLSTree", "nvls_tree"),
])
def test_specs_normalize_to_plain_python_values(spec, value, normalized):
    got = spec.normalize("x", value)
    assert got == normalized and type(got) is type(normalized)


@pytest.mark.parametrize("spec, value, accepted", [
    (Int(1, minimum=1, maximum=8), 9, "an integer in 1..8"),
    (Int(1, maximum=8), np.int64(9), "an integer <= 8"),
    (Int(1), 1.0, "an integer"),
    (Real(0.5, minimum=0.25, maximum=2.0), 3.0, "a finite number in 0.25..2"),
    (Real(0.0, allow_inf=True), math.nan, "a number"),
    (Optional(Int(minimum=1)), 0, "None or an integer >= 1"),
    (Choice("a", ("a", "b")), "c", "one of 'a', 'b'"),
    (Choice("a", ("a", "B")), "b", "one of 'a', 'B'"),
    (Choice("a", ("a", "B"), ignore_case=True), "c", "one of 'a', 'B'"),
])
def test_specs_refuse_naming_the_value_and_the_accepted_range(spec, value, accepted):
    with pytest.raises(sc.InvalidInputError) as info:
        spec.normalize("x", value)
    plain = value.item() if isinstance(value, np.generic) else value  # np.int64(9) as 9
    assert str(info.value) == f"x={plain!r} is not accepted; use {accepted}"


@pytest.mark.parametrize("sent,shown", [([13.5, 13.5, 13.5, 13.5], "13.5"),
                                        ([-5, 0, 0, 0], "-5"),
                                        ([True, False, True, False], "True")])
def test_a_model_whose_traffic_is_not_whole_bytes_is_named(sent, shown):
    """gpu_traffic cut 13.5 bytes to 13 and took -5 or True: a float model's bytes came
    out short with no word, to show later as a traffic mismatch."""
    from simcoll.cost import gpu_traffic

    name = f"test_bad_bytes_{shown}"
    bad = CostModel(time=lambda p, nbytes, alpha, beta, gamma: 0.0,
                    traffic=lambda p, nbytes, itemsize: gpu_traffic(sent, [0] * p))
    sc.register("all_reduce", name, cost=bad)(_flat_all_reduce)
    with pytest.raises(sc.RegistrationError, match=rf"all_reduce/{name}: its cost model's "
                                                   rf"traffic gave sent bytes that are not "
                                                   rf"whole numbers >= 0: .*{shown}"):
        sc.cost.traffic("all_reduce", name, p=4, nbytes=64)


def test_cost_queries_give_validate_the_declared_defaults():
    """A query without servers= runs parameter_server's validate with the declared
    default (one server, on rank 0): each other rank pushes its 4096 bytes and pulls the
    sum back; rank 0 sends the sum to the 3 of them. A validate given only the asked
    parameters failed on the missing one."""
    moved = cost.traffic("all_reduce", "parameter_server", p=4, nbytes=4096)
    assert moved.sent.tolist() == moved.received.tolist() == [3 * 4096, 4096, 4096, 4096]
    assert cost.predict("all_reduce", "parameter_server", p=4, nbytes=4096, alpha=1e-6,
                        beta=1e-9) > 0


def test_a_positional_argument_with_a_default_that_is_no_declared_parameter_is_accepted():
    """Only the model's declared parameters must be keyword-only: a time function with
    an extra positional argument of its own with a default (never passed, keeps 2.0)
    registers, and predicts 2.0 s."""
    def own_default_time(p, nbytes, alpha, beta, gamma, scale=2.0):
        return scale

    sc.register("broadcast", "test_own_default",
                cost=CostModel(time=own_default_time, traffic=NO_FORMULA.traffic))(
        lambda comm, x, *, root: (yield from ()))
    assert cost.predict("broadcast", "test_own_default", p=4, nbytes=8, alpha=0,
                        beta=0) == 2.0


def test_a_declared_parameter_taken_positionally_without_a_default_is_named_as_a_call_mismatch():
    """A time function taking chunks positionally with no default cannot even be called
    with (p, nbytes, alpha, beta, gamma): the refusal says so, not "keeps its default"
    (it has none), which is only for a positional parameter that has one."""
    def no_default(p, nbytes, alpha, beta, gamma, chunks):
        return 0.0

    with pytest.raises(sc.RegistrationError) as info:
        sc.register("broadcast", "test_unpassed", params={"chunks": Int(4, minimum=1)},
                    cost=CostModel(time=no_default, traffic=NO_FORMULA.traffic))
    assert "positionally but is called with (p, nbytes, alpha, beta, gamma); anything " \
        "else comes by name: make 'chunks' keyword-only (after a bare *)" in str(info.value)
    assert "keeps its default" not in str(info.value)

    def with_itemsize(p, nbytes, alpha, beta, gamma, itemsize):
        return 0.0

    with pytest.raises(sc.RegistrationError, match=r"make 'itemsize' keyword-only \(after a "
                                                   r"bare \*\)"):
        sc.register("broadcast", "test_unpassed",
                    cost=CostModel(time=with_itemsize, traffic=NO_FORMULA.traffic))

    def in_the_middle(p, nbytes, chunks, alpha, beta, gamma):
        return 0.0

    # the parameter out of place is named, not the last one (gamma)
    with pytest.raises(sc.RegistrationError, match=r"make 'chunks' keyword-only"):
        sc.register("broadcast", "test_unpassed", params={"chunks": Int(4, minimum=1)},
                    cost=CostModel(time=in_the_middle, traffic=NO_FORMULA.traffic))


def test_a_spec_whose_minimum_is_its_maximum_takes_that_one_value():
    """minimum == maximum leaves one value, which is accepted: only minimum > maximum
    'accepts nothing' (mutant: >= refused these at registration)."""
    assert Int(3, minimum=3, maximum=3).normalize("k", 3) == 3
    assert Real(0.5, minimum=0.5, maximum=0.5).normalize("k", 0.5) == 0.5


def test_a_real_parameter_reads_integers_past_floats_range_as_signed_infinities():
    # 10^400 is larger than any float: +inf where inf is allowed, -10^400 is -inf
    assert Real(0.0, minimum=0.0, allow_inf=True).normalize("x", 10**400) == math.inf
    assert Real(0.0, allow_inf=True).normalize("x", -10**400) == -math.inf
    with pytest.raises(InvalidInputError, match=r"^x=-10000000\.\.\.0000 \(401 digits\) is "
                                                r"not accepted"):
        Real(0.0, minimum=0.0, allow_inf=True).normalize("x", -10**400)


def test_a_module_imported_again_replaces_its_own_registration(tmp_path):
    """pytest reads a conftest again in a second session of one process: its register()
    ran again with a new function object and was refused. The same definition (module,
    name, file, line) now replaces it; another file's function of that name does not."""
    import importlib.util

    source = ('import simcoll as sc\n'
              'from simcoll.cost import CostModel, gpu_traffic\n'
              'def none(p, nbytes, itemsize):\n'
              '    return gpu_traffic([0] * p, [0] * p)\n'
              '@sc.register("barrier", "again", cost=CostModel(\n'
              '    time=lambda p, nbytes, alpha, beta, gamma: 0.0, traffic=none))\n'
              'def again(comm, x):\n'
              '    return (yield comm.sleep(0))\n')

    def load(path):
        spec = importlib.util.spec_from_file_location("conftest_again", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    first = tmp_path / "a" / "conftest_again.py"
    first.parent.mkdir()
    first.write_text(source)
    one, two = load(first), load(first)
    assert one.again is not two.again
    assert sc.get_algorithm("barrier", "again").fn is two.again
    other = tmp_path / "b" / "conftest_again.py"
    other.parent.mkdir()
    other.write_text(source)
    with pytest.raises(sc.RegistrationError, match="'again' is already registered for "
                                                   "'barrier' .*pass replace=True"):
        load(other)


def test_simcoll_s_own_module_executed_again_does_not_replace_its_registrations(monkeypatch):
    """The same definition imported again replaces a user's registration (a conftest read
    again), never simcoll's own (simcoll's modules are imported once): executing
    simcoll/algorithms/dissemination.py as a second module object of the same name is
    refused, and the registry keeps simcoll's function."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    import simcoll.algorithms.dissemination as original

    kept = {key: spec.fn for key, spec in registry._REGISTRY.items()
            if spec.fn.__module__ == original.__name__}
    assert kept
    spec = importlib.util.spec_from_file_location(original.__name__, original.__file__)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(sc.RegistrationError, match="by simcoll itself"):
        spec.loader.exec_module(module)
    assert {key: registry._REGISTRY[key].fn for key in kept} == kept


def test_a_renamed_function_at_the_same_line_is_no_reimport(tmp_path):
    """The same module name, file and line but another function name (the file edited
    between two loads): not the same definition, so refused as any second registration
    is (the docstring: same module, name, file and line)."""
    head = ('import simcoll as sc\n'
            'from simcoll.cost import CostModel, gpu_traffic\n'
            'def none(p, nbytes, itemsize):\n'
            '    return gpu_traffic([0] * p, [0] * p)\n'
            '@sc.register("barrier", "renamed_probe", cost=CostModel(\n'
            '    time=lambda p, nbytes, alpha, beta, gamma: 0.0, traffic=none))\n')
    path = tmp_path / "conftest_renamed.py"

    def load():
        spec = importlib.util.spec_from_file_location("conftest_renamed", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    path.write_text(head + 'def first(comm, x):\n    return (yield comm.sleep(0))\n')
    one = load()
    path.write_text(head + 'def second(comm, x):\n    return (yield comm.sleep(0))\n')
    with pytest.raises(sc.RegistrationError, match="'renamed_probe' is already registered"):
        load()
    assert sc.get_algorithm("barrier", "renamed_probe").fn is one.first


def test_a_plugin_that_looks_up_while_loading_loads_the_others_once(tmp_path, monkeypatch):
    """A plugin whose import looks an algorithm up (that lookup goes through, it does
    not load the plugins again), then a plugin that fails: the failure is warned about
    and recorded once, and a later lookup loads nothing again."""
    (tmp_path / "zz_lookingplug.py").write_text(
        "import simcoll as sc\n"
        "sc.get_algorithm('broadcast', 'binomial')\n")
    (tmp_path / "zz_failingplug.py").write_text("raise RuntimeError('plugin import failed')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = [EntryPoint(name, value, registry.ENTRY_POINT_GROUP)
               for name, value in (("a_looking", "zz_lookingplug"),
                                   ("b_failing", "zz_failingplug"))]
    monkeypatch.setattr(registry, "entry_points", lambda group: plugins)
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.setattr(registry, "_plugin_failures", [])
    for module in ("zz_lookingplug", "zz_failingplug"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sc.get_algorithm("broadcast", "binomial")
        sc.simulate(reference_network(2), "broadcast", algorithm="binomial", nbytes=8)
        sc.list_algorithms()
    failed = [w for w in caught if "b_failing" in str(w.message)]
    assert len(failed) == 1, [str(w.message) for w in caught]
    assert len(registry._plugin_failures) == 1
    assert registry._plugins_loaded


@pytest.mark.parametrize(("collective", "algorithm", "words"), [
    ("allreduce", "ring", "unknown collective 'allreduce' (did you mean 'all_reduce'?); "),
    ("All-Reduce", "ring", "unknown collective 'All-Reduce' (did you mean 'all_reduce'?); "),
    ("all_reduce", "rng", "unknown algorithm 'rng' for 'all_reduce' (did you mean 'ring'?); "),
    ("all_reduce", "Ring", "unknown algorithm 'Ring' for 'all_reduce' (did you mean "
                           "'ring'?); "),
    # nothing close: no suggestion
    ("xyz", "ring", "unknown collective 'xyz'; known collectives: "),
    ("all_reduce", "", "unknown algorithm '' for 'all_reduce'; known algorithms: "),
])
def test_a_misspelt_name_is_told_the_closest_known_one(collective, algorithm, words):
    """The two likeliest slips of the commonest option had no suggestion, where a builder,
    a dtype or a parameter misspelt had one."""
    with pytest.raises(sc.InvalidInputError) as caught:
        sc.simulate(reference_network(2), collective, algorithm=algorithm, nbytes=8)
    assert str(caught.value).startswith(words)
    from simcoll.cli import main
    assert main(["run", "--collective", collective, "--algorithm", algorithm, "--size",
                 "8", "--topology", "switch:2"]) == 2


@pytest.mark.parametrize("name", ["recv", "reduce_all", "gather_all"])
def test_another_word_is_not_taken_for_a_slip(name):
    """recv, reduce_all and gather_all were told "did you mean 'reduce'" or 'gather'."""
    with pytest.raises(sc.InvalidInputError) as caught:
        sc.simulate(reference_network(2), name, algorithm="ring", nbytes=8)
    assert "did you mean" not in str(caught.value)
    with pytest.raises(sc.InvalidInputError) as caught:
        sc.simulate(reference_network(2), "all_reduce", algorithm="dbtree", nbytes=8)
    assert "did you mean" not in str(caught.value)


def test_a_root_given_to_a_collective_without_one_is_named_as_such():
    """root=5 on all_reduce said "not a rank; use 0..3" once the range came first."""
    for root in (5, -1):
        with pytest.raises(sc.InvalidInputError, match=r"does not take parameter"):
            sc.cost.traffic("all_reduce", "ring", p=4, nbytes=16, root=root)


@pytest.mark.parametrize(("collective", "algorithm", "words"), [
    # upper case is a slip of case: the docstring of suggestion() sets case aside
    ("ALL_REDUCE", "ring", "unknown collective 'ALL_REDUCE' (did you mean 'all_reduce'?); "),
    ("all_reduce", "RING", "unknown algorithm 'RING' for 'all_reduce' (did you mean 'ring'?); "),
    # MPI's name for broadcast: difflib's ratio of 'bcast' to 'broadcast' is
    # 2 x 5 / (5 + 9) = 0.714, below the cutoff 0.85 that keeps another word (recv)
    # from being taken for a slip: no suggestion
    ("bcast", "ring", "unknown collective 'bcast'; known collectives: "),
])
def test_mut_a_misspelt_name_in_capitals_or_mpis_short_form_is_told_the_known_one(
        collective, algorithm, words):
    with pytest.raises(sc.InvalidInputError) as caught:
        sc.simulate(reference_network(2), collective, algorithm=algorithm, nbytes=8)
    assert str(caught.value).startswith(words)


@pytest.mark.parametrize(("root", "p", "message"), [
    # numpy's integers are ranks as Python's are: -1 is below the range 0..3
    (np.int64(-1), 4, r"^root=-1 is not a rank; use 0\.\.3$"),
    (np.int64(4), 4, r"^root=4 is not a rank; use 0\.\.3$"),
    (4, 4, r"^root=4 is not a rank; use 0\.\.3$"),      # p itself is one past the last rank
    # a bool is no rank number at all, whatever p is (True is not "rank 1")
    (True, 1, r"^root=True is not accepted; use an integer >= 0"),
    (True, 2, r"^root=True is not accepted; use an integer >= 0"),
])
def test_mut_a_root_is_checked_as_a_rank_of_range_0_to_p_minus_1(root, p, message):
    with pytest.raises(InvalidInputError, match=message):
        cost.traffic("scatter", "binomial", p=p, nbytes=16, root=root)


@pytest.mark.parametrize(("collective", "closest"), [
    # difflib ratios: 'all_to_all_singel' to 'all_to_all_single' 2 x 16 / 34 = 0.94, to
    # 'all_to_all' 2 x 10 / 27 = 0.74; 'reduce_scatter_tensr' to 'reduce_scatter_tensor'
    # 2 x 20 / 41 = 0.98, to 'reduce_scatter' 2 x 14 / 34 = 0.82
    ("all_to_all_singel", "all_to_all_single"),
    ("reduce_scatter_tensr", "reduce_scatter_tensor"),
])
def test_mut_a_misspelt_torch_name_is_told_the_torch_name(collective, closest):
    """torch's names are known names too: the closest to a slip of one is that name."""
    with pytest.raises(sc.InvalidInputError) as caught:
        sc.simulate(reference_network(2), collective, algorithm="ring", nbytes=8)
    assert str(caught.value).startswith(
        f"unknown collective {collective!r} (did you mean {closest!r}?); ")


def test_keywords_must_name_the_choice_that_picks_their_algorithm():
    """A sweep reads Keywords(algorithm_param=...) to check the keywords against the algorithm
    that parameter names; one naming no parameter crashed the sweep with a KeyError."""
    def keywords_to_nothing(comm, x, *, op, sub_params, sub=1):
        return (yield comm.all_reduce(x, algorithm="ring", op=op))

    for specs in ({"sub_params": Keywords(algorithm_param="sub")},
                  {"sub_params": Keywords(algorithm_param="sub"), "sub": Int(1)}):
        with pytest.raises(sc.RegistrationError,
                           match=r"sub_params=Keywords\(algorithm_param='sub'\) names no "
                                 r"Choice parameter of this algorithm"):
            sc.register("all_reduce", "test_keywords_to_nothing", params=specs,
                        cost=NO_FORMULA)(keywords_to_nothing)


@pytest.mark.parametrize("dtype", ["int16"])
def test_a_resolve_functions_own_refusal_is_passed_on_as_it_is(dtype):
    """AlgorithmSpec.resolved wraps what a resolve function raises in an
    InvalidInputError naming the algorithm ("its resolve function raised ..."), but an
    InvalidInputError the function raises itself is already a refusal worded for the
    caller (NCCL's tuner: "NCCL has no int16 elements (ncclDataType_t in nccl.h)"): it
    comes through as it is, first word first."""
    with pytest.raises(sc.InvalidInputError, match=rf"^NCCL has no {dtype} elements "
                                                   r"\(ncclDataType_t in nccl.h\)"):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="nccl", nbytes=64,
                    dtype=dtype)


def _quiet_model():
    return CostModel(time=lambda p, nbytes, alpha, beta, gamma: 0.0, traffic=_no_traffic)


def _no_traffic(p, nbytes, itemsize):
    return gpu_traffic([0] * p, [0] * p)


def _returns_input(comm, x, *, op):
    yield comm.sleep(0.0)
    return x


def test_a_default_reaches_programs_and_models_normalized_as_a_given_value_would():
    # a float32 default kept float32 arithmetic in the program and the model: the same
    # value gave other times as a default than given
    seen = []

    def time(p, nbytes, alpha, beta, gamma, *, scale):
        return scale * (alpha + nbytes * beta)

    @sc.register("all_reduce", "test_float32_default",
                 params={"scale": Real(np.float32(0.1), minimum=0.0), "k": Int(np.int64(3))},
                 cost=CostModel(time=time, traffic=_no_traffic))
    def program(comm, x, *, op, scale, k):
        seen.append((type(scale), type(k)))
        yield comm.sleep(scale * 1e-6)
        return x

    kw = {"p": 2, "nbytes": 1000, "alpha": 1e-6, "beta": 1e-9}
    by_hand = float(np.float32(0.1)) * (1e-6 + 1000 * 1e-9)   # in float64
    assert cost.predict("all_reduce", "test_float32_default", **kw) == by_hand
    assert cost.predict("all_reduce", "test_float32_default", scale=np.float32(0.1),
                        **kw) == by_hand
    res = sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_float32_default",
                      nbytes=8)
    assert res.time == float(np.float32(0.1)) * 1e-6
    assert set(seen) == {(float, int)}


def test_a_program_that_changes_a_mutable_default_changes_neither_the_registry_nor_later_runs():
    """Each run gets the list and dict defaults copied one level deep (what they hold is
    shared, as between ranks: a started collective's ranks agree on them)."""
    runs = []

    @sc.register("all_reduce", "test_mutable_default",
                 params={"opts": Keywords(), "sched": algorithms_package.Value([1, 2])},
                 cost=_quiet_model())
    def program(comm, x, *, op, opts, sched):
        if comm.rank == 0:
            runs.append((dict(opts), list(sched)))
        opts.setdefault("first", comm.rank)
        sched.append(comm.rank)
        yield comm.sleep(0.0)
        return x

    for _ in range(2):
        sc.simulate(sc.topology.switch(3), "all_reduce", algorithm="test_mutable_default",
                    nbytes=12)
    assert runs == [({}, [1, 2]), ({}, [1, 2])]
    assert registry.get_algorithm("all_reduce", "test_mutable_default").defaults == {
        "opts": {}, "sched": [1, 2]}


def test_defaults_holding_objects_that_compare_by_identity_or_cannot_be_copied_still_run():
    """A deep copy per rank made a started collective's ranks disagree on a default of
    objects without ``__eq__``, and one holding a lock raised TypeError."""
    import threading

    class Stage:
        pass

    @sc.register("all_reduce", "test_object_defaults",
                 params={"stages": algorithms_package.Value([Stage(), Stage()]),
                         "guards": algorithms_package.Value({"lock": threading.Lock()})},
                 cost=_quiet_model())
    def program(comm, x, *, op, stages, guards):
        yield comm.sleep(0.0)
        return x

    def started(comm):
        return (yield comm.all_reduce(sc.VirtualBuffer.of(4, np.float32),
                                      algorithm="test_object_defaults"))

    assert sc.run_program(sc.topology.switch(2), started).outputs[0].count == 4
    assert sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_object_defaults",
                       nbytes=16).time == 0.0
    assert cost.predict("all_reduce", "test_object_defaults", p=2, nbytes=16, alpha=1e-6,
                        beta=1e-9) == 0.0


def test_a_default_that_a_choice_of_a_function_does_not_name_is_refused_at_the_run():
    @sc.register("all_reduce", "test_choice_default",
                 params={"c": Choice("zz", lambda: ["a", "b"])}, cost=_quiet_model())
    def program(comm, x, *, op, c):
        yield comm.sleep(0.0)
        return x

    with pytest.raises(sc.RegistrationError, match=r"test_choice_default: the default of c, "
                                                   r"'zz', is refused by its own spec now "
                                                   r"\(c='zz' is not accepted; use one of 'a', "
                                                   r"'b'\)"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_choice_default",
                    nbytes=8)
    assert sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_choice_default",
                       nbytes=8, c="b").params == {"c": "b"}


def _no_names():
    raise KeyError("the registry is not loaded")


@pytest.mark.parametrize("case, choices, match", [
    (1, _no_names, r"_no_names raised KeyError: "
                r"'the registry is not loaded'"),
    (2, lambda: [1, 2], r"returned \[1, 2\]; it must return a non-empty tuple, list or set "
                     r"of strings"),
    (3, lambda: 5, r"returned 5; it must"),
    (4, lambda: (), r"returned \(\); it must"),
])
def test_a_choice_of_a_function_that_fails_is_named_at_the_run(case, choices, match):
    # raw KeyError / TypeError before, or "use one of " and no name
    name = f"test_choice_fails_{case}"

    @sc.register("all_reduce", name, params={"c": Choice("a", choices)},
                 cost=_quiet_model())
    def program(comm, x, *, op, c):
        yield comm.sleep(0.0)
        return x

    for given in ({}, {"c": "a"}):
        with pytest.raises(sc.RegistrationError, match=rf"^all_reduce/{name}: parameter 'c': "
                                                       rf"Choice's choices function .*{match}"):
            sc.simulate(sc.topology.switch(2), "all_reduce", algorithm=name, nbytes=8,
                        **given)


def test_a_choice_of_a_function_returning_one_string_is_not_read_letter_by_letter():
    with pytest.raises(sc.RegistrationError, match=r"returned 'ab'; it must return"):
        Choice("a", lambda: "ab").normalize("c", "a")


def test_a_validate_that_returns_a_verdict_instead_of_raising_is_refused():
    @sc.register("all_reduce", "test_validate_returns", cost=_quiet_model(),
                 validate=lambda p, count, hosts: p % 2 == 0)
    def program(comm, x, *, op):
        yield comm.sleep(0.0)
        return x

    for p in (2, 3):   # even True is refused: the False of p=3 went through unseen
        with pytest.raises(sc.RegistrationError, match=f"validate function returned "
                                                       f"{p % 2 == 0}"):
            sc.simulate(sc.topology.switch(p), "all_reduce",
                        algorithm="test_validate_returns", nbytes=8 * p)
        with pytest.raises(sc.RegistrationError, match="returned"):
            cost.predict("all_reduce", "test_validate_returns", p=p, nbytes=8, alpha=1e-6,
                         beta=1e-9)


def test_a_partial_that_binds_a_parameter_is_refused_naming_the_partial():
    import functools

    def scaled(comm, x, *, op, factor):
        yield comm.sleep(factor * 1e-6)
        return x

    with pytest.raises(sc.RegistrationError, match="functools.partial"):
        sc.register("all_reduce", "test_partial_program",
                    cost=_quiet_model())(functools.partial(scaled, factor=2))


def test_a_traffic_model_of_two_dimensional_arrays_is_refused_by_cost_traffic():
    sc.register("all_reduce", "test_traffic_2d", cost=CostModel(
        time=lambda p, nbytes, alpha, beta, gamma: 0.0,
        traffic=lambda p, nbytes, itemsize: gpu_traffic(np.full((p, 1), nbytes),
                                                        np.full((p, 1), nbytes))))(
        _returns_input)
    with pytest.raises(sc.RegistrationError, match=r"sent of shape \(2, 1\), received of "
                                                   r"shape \(2, 1\).*one number per rank"):
        cost.traffic("all_reduce", "test_traffic_2d", p=2, nbytes=4096)


def test_hooks_and_models_that_raise_an_exception_whose_message_raises_are_named():
    class Broken(Exception):
        def __str__(self):
            raise RuntimeError("no message")

    def refuse(p, count, hosts):
        raise Broken

    def time(p, nbytes, alpha, beta, gamma):
        raise Broken

    sc.register("all_reduce", "test_broken_validate", cost=_quiet_model(),
                validate=refuse)(_returns_input)
    sc.register("all_reduce", "test_broken_model", cost=CostModel(
        time=time, traffic=_no_traffic))(_returns_input)
    with pytest.raises(InvalidInputError, match=r"test_broken_validate: its validate "
                                                r"function raised Broken: \(its message "
                                                r"could not be shown"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_broken_validate",
                    nbytes=8)
    with pytest.raises(InvalidInputError, match=r"test_broken_model: its cost model's time "
                                                r"raised Broken: \(its message could not"):
        cost.predict("all_reduce", "test_broken_model", p=2, nbytes=8, alpha=1e-6, beta=1e-9)


def test_a_ragged_traffic_of_the_model_is_refused_by_cost_traffic():
    from simcoll.cost import Traffic
    sc.register("all_reduce", "test_traffic_ragged", cost=CostModel(
        time=lambda p, nbytes, alpha, beta, gamma: 0.0,
        traffic=lambda p, nbytes, itemsize: Traffic([[1, 2], [3]], [0, 0], [], [])))(
        _returns_input)
    with pytest.raises(sc.RegistrationError, match=r"sent of shape ragged"):
        cost.traffic("all_reduce", "test_traffic_ragged", p=2, nbytes=8)


def test_validate_sees_defaults_normalized_as_the_program_does():
    """check() passes validate the run's defaults (run_defaults): an Int default given as
    np.int64(3) reaches validate as a plain int 3, as it reaches the program."""
    seen = []

    def validate(p, count, hosts, *, k):
        seen.append(type(k))

    @sc.register("all_reduce", "test_mut_validate_default", params={"k": Int(np.int64(3))},
                 validate=validate, cost=_quiet_model())
    def program(comm, x, *, op, k):
        yield comm.sleep(0.0)
        return x

    sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_mut_validate_default",
                nbytes=8)
    assert seen and set(seen) == {int}


@pytest.mark.parametrize("default, change, name", [
    ({"a": 1}, lambda v: v.__setitem__("b", 2), "dct"),
    ({1, 2}, lambda v: v.add(3), "st"),
])
def test_each_mutable_kind_of_default_is_a_runs_own_copy(default, change, name):
    """_fresh_defaults copies dict and set defaults (lists: above): a program that changes
    one leaves the next run's (and the registry's) as registered."""
    seen = []
    algo = f"test_mut_copy_{name}"

    @sc.register("all_reduce", algo, params={"v": algorithms_package.Value(default)},
                 cost=_quiet_model())
    def program(comm, x, *, op, v):
        if comm.rank == 0:
            seen.append(repr(v))
            change(v)
        yield comm.sleep(0.0)
        return x

    for _ in range(2):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm=algo, nbytes=8)
    assert seen[0] == seen[1] == repr(default)


def test_an_array_default_is_handed_out_read_only_and_the_registry_keeps_it():
    """An array default is a read-only view: a program's write into it is refused (it
    changed the registered default and every later run), and nothing is copied."""
    default = np.array([1, 2])

    @sc.register("all_reduce", "test_mut_array_default",
                 params={"v": algorithms_package.Value(default)}, cost=_quiet_model())
    def program(comm, x, *, op, v):
        assert np.shares_memory(v, default)
        v[0] = 99
        yield comm.sleep(0.0)
        return x

    with pytest.raises(sc.AlgorithmError, match="read-only"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="test_mut_array_default",
                    nbytes=8)
    assert default.tolist() == [1, 2] and default.flags.writeable


def test_a_taken_name_is_refused_naming_the_first_functions_qualified_name():
    """The message names the registered function by __qualname__ (outer.<locals>.prog),
    which tells nested functions apart, not by __name__ alone."""
    def outer():
        def prog(comm, x, *, op):
            yield comm.sleep(0.0)
            return x
        return prog

    def other(comm, x, *, op):
        yield comm.sleep(0.0)
        return x

    sc.register("all_reduce", "test_mut_qualname", cost=_quiet_model())(outer())
    with pytest.raises(sc.RegistrationError, match=r"\(by \S*outer\.<locals>\.prog\)"):
        sc.register("all_reduce", "test_mut_qualname", cost=_quiet_model())(other)


def _takes_k(comm, x, *, op, k):
    yield comm.sleep(0.0)
    return x


def test_a_taken_name_held_by_a_partial_is_refused_with_a_registration_error():
    """A functools.partial has no __qualname__: the refusal names it by its repr instead
    of raising AttributeError."""
    sc.register("all_reduce", "test_mut_partial_taken", params={"k": Int(1)},
                cost=_quiet_model())(functools.partial(_takes_k))

    def other(comm, x, *, op, k):
        yield comm.sleep(0.0)
        return x

    with pytest.raises(sc.RegistrationError, match=r"by [\w.]*functools\.partial"):
        sc.register("all_reduce", "test_mut_partial_taken", params={"k": Int(1)},
                    cost=_quiet_model())(other)


def test_a_partial_that_binds_a_declared_parameter_is_refused_naming_it_by_repr():
    """A partial binding a parameter declared in params= gives it a default: refused as a
    RegistrationError naming the partial by its repr (it has no __name__)."""
    with pytest.raises(sc.RegistrationError, match=r"functools\.partial.* gives \['k'\] a "
                                                   r"default"):
        sc.register("all_reduce", "test_mut_partial_default", params={"k": Int(1)},
                    cost=_quiet_model())(functools.partial(_takes_k, k=2))


def test_a_traffic_model_with_only_its_received_bytes_two_dimensional_is_refused():
    """One number per rank each way: sent of shape (2,) with received of shape (2, 1) (p=2)
    is refused too, though both have length p."""
    sc.register("all_reduce", "test_mut_traffic_recv_2d", cost=CostModel(
        time=lambda p, nbytes, alpha, beta, gamma: 0.0,
        traffic=lambda p, nbytes, itemsize: gpu_traffic(np.full(p, nbytes),
                                                        np.full((p, 1), nbytes))))(
        _returns_input)
    with pytest.raises(sc.RegistrationError, match=r"received of shape \(2, 1\)"):
        cost.traffic("all_reduce", "test_mut_traffic_recv_2d", p=2, nbytes=4096)


def test_a_choice_function_returning_a_set_lists_its_names_sorted():
    """A set returned by a choices function is read as a set given to Choice is: its
    names in sorted order (the set's own order varies from run to run)."""
    names = {"hotel", "delta", "alpha", "echo", "charlie", "bravo", "golf", "foxtrot"}
    choice = Choice("alpha", lambda: set(names))
    assert choice.options() == ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot",
                                "golf", "hotel")
    assert choice.accepted() == ("one of 'alpha', 'bravo', 'charlie', 'delta', 'echo', "
                                 "'foxtrot', 'golf', 'hotel'")
