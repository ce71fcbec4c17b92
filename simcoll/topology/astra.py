"""Multi-dimensional machines as ASTRA-sim builds them, and its network config files.

ASTRA-sim's analytical network backend reads a YAML file such as (the format of
``common/network-parser/NetworkParser.cpp`` in astra-sim/astra-network-analytical,
commit 599a047, and of the inputs in astra-sim/astra-sim ``inputs/network/*.yml``)::

    topology: [ Ring, FullyConnected, Switch ]   # one building block per dimension
    npus_count: [ 2, 8, 4 ]                      # NPUs along each dimension: 64 in all
    bandwidth: [ 200.0, 100.0, 50.0 ]            # GB/s per link and direction
    latency: [ 50.0, 500.0, 2000.0 ]             # ns per link

What it means, from the same code:

* NPU ids: dimension 0 varies fastest. ``MultiDimTopology::translate_address`` puts NPU
  47 of ``[2, 8, 4]`` at address ``[1, 7, 2]``: id = a0 + n0 (a1 + n1 a2).
* Along dimension d, the NPUs whose other coordinates agree form one group of n_d NPUs
  joined by that dimension's block: ``Ring`` (bidirectional, NPU k linked to k+1 mod n),
  ``FullyConnected`` (a link between every pair) or ``Switch`` (every NPU on one link
  to a switch of the group, so a message crosses two links and pays the latency twice,
  as ASTRA-sim's ``Switch::compute_hops_count`` returns 2).
* ``bandwidth`` is per link and direction, in GB/s with GB = 2^30 bytes
  (``bw_GBps_to_Bpns`` in ``common/NetworkFunction.cpp``: "1 GB is 2^30 B");
  ``latency`` is per link, in ns.

Where simcoll differs: a message between NPUs that differ in several coordinates follows
its shortest route through every dimension it crosses (ASTRA-sim's congestion-unaware
backend charges only the first differing dimension; its collectives send along one
dimension at a time, where the two agree). A ring of 2 NPUs is one link, as in
ASTRA-sim, whose congestion-aware ``Ring`` connects the pair twice but keeps one link
per peer (``Device::links`` is a map: in a release build the second replaces the first;
a build with asserts stops on ``Device::connect``'s ``assert(!connected(id))``). With two or more
dimensions a GPU's ``node`` is its dimension-0 group (rank // n0), so hierarchical
algorithms treat dimension 0 as the server. The machine is timed by simcoll's network
model (by default a message takes its route's summed latency plus its bytes over the
least bandwidth, links shared max-min fairly): on a free route that is the
congestion-unaware backend's hops x latency + size / bandwidth, not the congestion-aware
backend's, which forwards a chunk one link at a time, each link paying latency + size /
bandwidth, and queues chunks in order on a busy link (a 64 MiB message between the two
NPUs of a Switch of 400 GB/s and 500 ns links: 2 x 0.5 + 156.25 = 157.25 us here,
2 x (0.5 + 156.25) = 313.5 us there).

ASTRA-sim's older JSON configs (``"topology-name": "Hierarchical"``, ``units-count``,
``link-bandwidth``, ...) are refused by name; write them in the keys above.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from simcoll.checks import integer, real, shown
from simcoll.errors import TopologyError
from simcoll.topology.builders import _check_quantities, _check_size
from simcoll.topology.formats import Context, read
from simcoll.topology.graph import Topology

__all__ = ["multi_dim", "from_astra_sim", "from_astra_dict"]

_BLOCKS = {"ring": "Ring", "fullyconnected": "FullyConnected", "switch": "Switch"}
_KEYS = ("topology", "npus_count", "bandwidth", "latency")
GB = 2**30
"""ASTRA-sim's gigabyte."""
# what yaml-cpp's convert<T>::decode reads whole: no space before (std::noskipws), any
# after, an int's base from its prefix (std::dec unset)
_CPP_INT = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\s*")
# (a double's infinities and NaN as yaml-cpp's conversion::IsInfinity / IsNaN read them)
_CPP_REAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*"
                       r"|[+-]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
LEGACY_KEYS = ("topology-name", "topologies-per-dim", "units-count", "links-count",
               "link-latency", "link-bandwidth", "dimension-type", "dimensions-count")
"""Keys of ASTRA-sim's older JSON network configs (``"topology-name": "Hierarchical"``),
which simcoll does not read."""


def _block(name: Any) -> str:
    key = str(name).lower().replace("_", "") if isinstance(name, str) else ""
    if key not in _BLOCKS:
        raise TopologyError(f"building block {name!r} is not one of Ring, FullyConnected, "
                            f"Switch")
    return _BLOCKS[key]


_EXAMPLES = {"blocks": "['Ring', 'Switch']", "npus": "[4, 8]",
             "bandwidths": "[100e9, 25e9]", "latencies": "[1e-6, 2e-6]"}


def _per_dimension(value: Any, name: str) -> list[Any]:
    """``value`` (multi_dim's argument ``name``) as a list with one entry per dimension
    (a list, tuple or 1-d array).

    Raises:
        TopologyError: a scalar, a string or anything else that is no such sequence.
    """
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return list(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TopologyError(f"multi_dim {name}={shown(value)} is not accepted; give a "
                            f"sequence with one entry per dimension, e.g. {_EXAMPLES[name]}")
    return list(value)


def _dimensions(blocks: Any, npus: Any, bandwidths: Any, latencies: Any
                ) -> list[tuple[str, int, float, float]]:
    """Each dimension's block, NPUs, bandwidth and latency, checked as every builder
    checks its counts, rates and times.

    Raises:
        TopologyError: naming the list, or the dimension and the entry.
    """
    lists = {name: _per_dimension(value, name) for name, value in (
        ("blocks", blocks), ("npus", npus), ("bandwidths", bandwidths),
        ("latencies", latencies))}
    lengths = [len(values) for values in lists.values()]
    if not lengths[0] or len(set(lengths)) > 1:
        raise TopologyError(f"multi_dim needs one entry per dimension in blocks, npus, "
                            f"bandwidths and latencies; got {', '.join(map(str, lengths))}")
    dims = []
    for d, (block, n, bandwidth, latency) in enumerate(zip(*lists.values())):
        try:
            name = _block(block)
        except TopologyError as exc:
            raise TopologyError(f"dimension {d}: {exc}") from None
        try:
            n = integer(n, f"npus[{d}]", minimum=1, error=TopologyError, what="NPUs")
            bandwidth = real(bandwidth, f"bandwidths[{d}]", strict=True,
                             error=TopologyError, what="bytes/s")
            latency = real(latency, f"latencies[{d}]", error=TopologyError, what="seconds")
        except TopologyError as exc:
            raise TopologyError(f"dimension {d} ({name}): {exc}") from None
        dims.append((name, n, bandwidth, latency))
    return dims


def _size(dims: list[tuple[str, int, float, float]]) -> tuple[int, int]:
    """The devices and links of a multi-dimensional machine: its GPUs and a switch per
    group of each Switch dimension; a link per GPU and dimension (a ring of 2: one per
    pair; of 1: none), n - 1 per GPU over 2 in a FullyConnected one."""
    total = math.prod(n for _, n, _, _ in dims)
    switches = sum(total // n for block, n, _, _ in dims if block == "Switch")
    links = sum(total * (n - 1) // 2 if block == "FullyConnected"
                else (total if n > 2 else total // 2 if n == 2 else 0) if block == "Ring"
                else total for block, n, _, _ in dims)
    return total + switches, links


def multi_dim(blocks: Sequence[str], npus: Sequence[int], bandwidths: Sequence[float],
              latencies: Sequence[float], *, reduce_bandwidth: float = math.inf) -> Topology:
    """A multi-dimensional machine with ASTRA-sim's semantics (see the module docstring).

    Args:
        blocks: per dimension, ``"Ring"``, ``"FullyConnected"`` or ``"Switch"`` (case
            and underscores ignored).
        npus: NPUs (GPUs) along each dimension; dimension 0 varies fastest in rank order.
        bandwidths: bytes/s per link and direction, per dimension.
        latencies: seconds per link, per dimension.
        reduce_bandwidth: of every GPU (bytes of reduction output per second).

    Raises:
        TopologyError: an argument that is not a sequence, lists of different lengths, an
            unknown block, a count below 1, a bad bandwidth or latency (naming the
            dimension), or a machine of more than
            :data:`~simcoll.topology.builders.MAX_DEVICES` devices or links; all before
            anything is built.
    """
    dims = _dimensions(blocks, npus, bandwidths, latencies)
    _check_quantities(reduce_bandwidth=reduce_bandwidth)
    _check_size(*_size(dims), npus=[n for _, n, _, _ in dims])
    sizes = [n for _, n, _, _ in dims]
    total = math.prod(sizes)
    topo = Topology(f"{'_'.join(b for b, _, _, _ in dims)}({'x'.join(map(str, sizes))})")
    gpus = [topo.add_gpu(f"gpu{rank}", reduce_bandwidth=reduce_bandwidth,
                         node=rank // sizes[0] if len(dims) > 1 else 0) for rank in range(total)]
    for d, (block, n, bandwidth, latency) in enumerate(dims):
        stride = math.prod(sizes[:d])
        kind = f"dim{d}-{block.lower()}"
        starts = [r for r in range(total) if (r // stride) % n == 0]
        for group, start in enumerate(starts):
            members = [gpus[start + k * stride] for k in range(n)]
            if block == "Ring":
                links = n if n > 2 else n - 1
                pairs = [(members[k], members[(k + 1) % n]) for k in range(links)]
            elif block == "FullyConnected":
                pairs = list(itertools.combinations(members, 2))
            else:
                hub = topo.add_switch(f"dim{d}-switch{group}")
                pairs = [(m, hub) for m in members]
            for u, v in pairs:
                topo.add_link(u, v, bandwidth=bandwidth, latency=latency, kind=kind)
    return topo


def _numbers(data: dict[str, Any], key: str, ctx: Context, what: str) -> list[Any]:
    values = data[key]
    if not isinstance(values, list) or not values:
        raise ctx.error((key,), f"expected a non-empty list ({what}), got {values!r:.60}")
    if key == "topology":
        return values
    whole = key == "npus_count"
    numbers = []
    for i, v in enumerate(values):
        # ASTRA-sim reads the text written (yaml-cpp's as<int> / as<double>): a quoted
        # '4' or '5e1' too, a count in the base its prefix says, where YAML 1.2 reads 010
        # as 10, and no hex double (the text YAML read as a number: Context.texts)
        written = ctx.texts.get((key, i))
        text = written if written is not None else v if isinstance(v, str) else None
        if text is not None:
            read = _as_written(text, whole)
            if read is None:
                raise ctx.error((key, i), f"expected a number ({what}), got {text!r}: "
                                          f"ASTRA-sim (yaml-cpp) reads no "
                                          f"{'integer' if whole else 'number'} there")
            # a double YAML read keeps its value: decimal, as yaml-cpp reads it, and a
            # whole number past float's range still shown whole
            v = read if whole or isinstance(v, str) else v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ctx.error((key, i), f"expected a number ({what}), got {v!r}")
        numbers.append(v)
    return numbers


def _as_written(text: str, whole: bool) -> int | float | None:
    """What yaml-cpp's ``as<int>`` (``whole``) or ``as<double>`` reads ``text`` as, as
    ASTRA-sim reads its config: an int in the base its prefix says (``0x1F`` is 31,
    ``010`` octal 8: ``convert<int>::decode`` unsets ``std::dec``), a double in decimal;
    None where it reads none (``08``, ``0o17``, ``1_000``, ``2e0`` for an int, `` 4``); a
    double's ``.inf`` and ``.nan``, which yaml-cpp reads, are refused later as not finite."""
    if not whole:   # float() reads inf and nan without YAML's dot
        return float(text.replace(".", "", 1) if "n" in text.lower() else text) \
            if _CPP_REAL.fullmatch(text) else None
    match = _CPP_INT.fullmatch(text)
    if match is None:
        return None
    sign, digits = match.groups()
    base = 16 if digits[:2] in ("0x", "0X") else 8 if len(digits) > 1 and digits[0] == "0" \
        else 10
    return int(sign + digits[2:] if base == 16 else sign + digits, base)


def from_astra_dict(data: Any, ctx: Context) -> Topology:
    """The machine an ASTRA-sim network config (already parsed) describes. Block names are
    read as :func:`multi_dim` reads them (case and underscores ignored), where
    ASTRA-sim's ``NetworkParser::parse_topology_name`` takes ``Ring``,
    ``FullyConnected`` and ``Switch`` only.

    Raises:
        TopologyError: a missing or unknown key, lists of different lengths, a value
            that is not a number, naming the file, key and line.
    """
    if not isinstance(data, dict):
        raise ctx.error((), f"expected an ASTRA-sim network config (a mapping with "
                            f"{', '.join(_KEYS)}), got {type(data).__name__}")
    for key in data:
        if key in LEGACY_KEYS:
            raise ctx.error((key,), "a key of ASTRA-sim's older JSON network config "
                                    "(topology-name, units-count, link-bandwidth, ...), "
                                    "which simcoll does not read; write the machine with "
                                    f"the keys {', '.join(_KEYS)} (astra-network-analytical)")
        if key not in _KEYS:
            raise ctx.error((str(key),), f"unknown key in an ASTRA-sim network config; "
                                         f"expected {', '.join(_KEYS)}")
    for key in _KEYS:
        if key not in data:
            raise ctx.error((key,), "missing (an ASTRA-sim network config has "
                                    f"{', '.join(_KEYS)})")
    blocks = _numbers(data, "topology", ctx, "Ring, FullyConnected or Switch per dimension")
    for i, b in enumerate(blocks):
        try:
            _block(b)
        except TopologyError as exc:
            raise ctx.error(("topology", i), str(exc)) from None
    npus = _numbers(data, "npus_count", ctx, "NPUs per dimension")
    bandwidth = _numbers(data, "bandwidth", ctx, "GB/s per link, GB = 2^30 bytes")
    latency = _numbers(data, "latency", ctx, "ns per link")
    for key, values in (("npus_count", npus), ("bandwidth", bandwidth), ("latency", latency)):
        if len(values) != len(blocks):
            raise ctx.error((key,), f"has {len(values)} entries but topology has "
                                    f"{len(blocks)} dimensions")
    for i, n in enumerate(npus):
        if not isinstance(n, int) or n < 2:  # ASTRA-sim's NetworkParser refuses fewer
            written = ctx.texts.get(("npus_count", i), repr(data["npus_count"][i]))
            raise ctx.error(("npus_count", i), f"expected a whole number >= 2 (ASTRA-sim "
                                               f"refuses fewer), got {written}")
    for key, values, least, what in (("bandwidth", bandwidth, "> 0", "GB/s per link"),
                                     ("latency", latency, ">= 0", "ns per link")):
        for i, value in enumerate(values):
            try:
                number = float(value)   # a whole number past float's range overflows
            except OverflowError:
                number = math.inf
            if not (math.isfinite(number) and (number > 0 if least == "> 0" else number >= 0)):
                raise ctx.error((key, i), f"expected a finite number {least} ({what}), "
                                          f"got {shown(value)}")
            if key == "bandwidth" and not sys.float_info.min <= number * GB < math.inf:
                raise ctx.error((key, i), f"expected a number > 0 ({what}) whose bytes/s "
                                          f"(x 2^30) a float holds, from "
                                          f"{sys.float_info.min / GB:.3g} to "
                                          f"{sys.float_info.max / GB:.3g}; got {shown(value)}")
    try:
        return multi_dim(blocks, npus, [b * GB for b in bandwidth], [t / 1e9 for t in latency])
    except TopologyError as exc:   # what is left to refuse: a machine too large
        raise ctx.error(("npus_count",), str(exc)) from None


def from_astra_sim(path: str | os.PathLike) -> Topology:
    """Read an ASTRA-sim network config (YAML) into the equivalent simcoll machine.

    ``sc.topology.load`` does the same for any file whose content looks like one.

    Raises:
        TopologyError: the file is unreadable or not such a config; the message names the
            file, the key or line, and what was expected.
    """
    data, ctx = read(path)
    topology = from_astra_dict(data, ctx)
    topology.spec = str(path)
    return topology
