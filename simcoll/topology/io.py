"""Topology files: a machine in JSON, YAML or TOML, device by device or as a preset.

``load(path)`` and ``save(topology, path)`` choose the format by extension (``.json``,
``.yaml`` / ``.yml``, ``.toml``); any other extension is refused. The same keys serve
every format. A machine listed device by device (YAML shown)::

    name: two nodes                      # optional: the file's name without its extension
    cpu: amd                             # optional: intel, amd, arm (for NCCL's tuner)
    routing: ecmp                        # optional: link_order (default) or ecmp
    devices:                             # in order; GPUs are the ranks, in this order
      - {name: gpu0, kind: gpu, node: 0, reduce_bandwidth: 400GB/s}
      - {name: gpu1, kind: gpu, node: 1}
      - {name: sw, kind: switch}         # kinds: gpu, host, switch, nic
    links:                               # full duplex; bandwidth is per direction
      - {u: gpu0, v: sw, bandwidth: 300GB/s, latency: 0.5us, kind: nvlink}
      - {u: gpu1, v: sw, bandwidth: 400Gbps, latency: 1e-6}

``node`` (default 0) is the server a GPU sits in; ``staging`` (GPUs only) names the
device its messages to other GPUs pass through (host memory, without peer-to-peer
access); ``reduce_bandwidth`` (GPUs and hosts, default ``inf``: free reductions) is bytes
of reduction output per second; on a switch or NIC it makes the device compute in the
network (NVLS, SHARP: ``in_network: true`` marks one with free reductions, where JSON has
``null`` for ``inf``); a link's ``latency`` defaults to 0, its ``kind`` to ``"custom"``,
and its ``back_bandwidth`` (from ``v`` to ``u``) to its ``bandwidth``. Rates and times
are plain SI numbers or carry units (:mod:`simcoll.topology.quantities`). Or a builder or
preset with its arguments, exactly as a spec names them (:mod:`simcoll.topology.spec`)::

    preset: dgx_h100
    args: {nodes: 2}

A file holding an ASTRA-sim network config is read by :mod:`simcoll.topology.astra`.
Unknown keys are refused, so a misspelt key never goes unnoticed. ``save`` writes
devices and links (the JSON form keeps ``null`` for an infinite ``reduce_bandwidth``),
via a temporary file, so an existing file is never left half-written.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from simcoll.errors import InvalidInputError, TopologyError
from simcoll.files import output_path, write_atomically
from simcoll.topology.formats import Context, Key, check_suffix, dump, read
from simcoll.topology.graph import CPU_VENDORS, DEVICE_KINDS, ROUTINGS, Topology
from simcoll.topology.quantities import parse_rate, parse_time

__all__ = ["to_dict", "from_dict", "save", "load", "topology_hash"]

_TOP_KEYS = ("name", "cpu", "routing", "devices", "links")
_PRESET_KEYS = ("preset", "args")
_DEVICE_KEYS = ("name", "kind", "node", "reduce_bandwidth", "in_network", "staging")
_LINK_KEYS = ("u", "v", "bandwidth", "latency", "kind", "back_bandwidth")


def to_dict(topology: Topology) -> dict[str, Any]:
    """The JSON-ready description of ``topology`` (``null`` for infinite rates)."""
    if not isinstance(topology, Topology):
        hint = (f"; build it first: sc.topology.from_spec({topology!r})"
                if isinstance(topology, str) else "")
        raise InvalidInputError(f"topology must be a simcoll Topology, got "
                                f"{type(topology).__name__}{hint}")
    return {
        "name": topology.name,
        **({"cpu": topology.cpu} if topology.cpu != "unknown" else {}),
        **({"routing": topology.routing} if topology.routing != "link_order" else {}),
        "devices": [{"name": d.name, "kind": d.kind, "node": d.node,
                     "reduce_bandwidth": None if math.isinf(d.reduce_bandwidth)
                     else d.reduce_bandwidth,
                     **({"in_network": True} if d.in_network else {}),
                     **({"staging": d.staging} if d.staging is not None else {})}
                    for d in topology.devices],
        "links": [{"u": link.u, "v": link.v, "bandwidth": link.bandwidth,
                   "latency": link.latency, "kind": link.kind,
                   **({"back_bandwidth": link.back} if link.back is not None else {})}
                  for link in topology.links],
    }


_HASHES: weakref.WeakKeyDictionary[Topology, tuple[tuple[Any, ...], str]] = (
    weakref.WeakKeyDictionary())


def topology_hash(topology: Topology) -> str:
    """A short digest of everything that defines ``topology`` (its saved description:
    devices, links, bandwidths, latencies), kept until the machine changes."""
    state = (topology.generation, topology.name, topology.cpu)
    kept = _HASHES.get(topology)
    if kept is not None and kept[0] == state:
        return kept[1]
    text = json.dumps(to_dict(topology), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    _HASHES[topology] = state, digest
    return digest


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    """Drop what the defaults say (for YAML and TOML, which have no null)."""
    devices = []
    for d in data["devices"]:
        entry = {"name": d["name"], "kind": d["kind"]}
        if d["kind"] == "gpu":
            entry["node"] = d["node"]
        if d["reduce_bandwidth"] is not None:
            entry["reduce_bandwidth"] = d["reduce_bandwidth"]
        if d.get("in_network"):
            entry["in_network"] = True
        if d.get("staging") is not None:
            entry["staging"] = d["staging"]
        devices.append(entry)
    return {"name": data["name"], **{key: data[key] for key in ("cpu", "routing") if key in data},
            "devices": devices, "links": data["links"]}


def _mapping(value: Any, ctx: Context, path: Key, keys: tuple[str, ...],
             what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.error(path, f"expected {what}, got {type(value).__name__} {value!r:.60}")
    for key in value:
        if key not in keys:
            raise ctx.error(path + (str(key),), f"unknown key; expected one of "
                                                f"{', '.join(keys)}")
    return value


def _field(entry: dict[str, Any], key: str, ctx: Context, path: Key, *, kind: str,
           default: Any = ...) -> Any:
    """One field, checked and converted; a missing one takes ``default`` if given."""
    where = path + (key,)
    if key not in entry:
        if default is ...:
            raise ctx.error(where, "missing")
        return default
    value = entry[key]
    if kind == "name":
        if not isinstance(value, str) or not value:
            written = ctx.texts.get(where)
            hint = "" if written is None else \
                f" (YAML 1.2 reads {written} as a number: quote it, '{written}')"
            raise ctx.error(where, f"expected a non-empty string, got {value!r}{hint}")
        return value
    if kind == "int":   # numpy's integers too, as every count simcoll takes
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or value < 0:
            raise ctx.error(where, f"expected a whole number >= 0, got {value!r}")
        return int(value)
    if value is None and kind == "rate":
        # JSON has no infinity: a rate saved as null is infinite where infinity is the
        # field's default (a reduce_bandwidth), null stands for the default where that is
        # None (a back_bandwidth equal to the bandwidth), and a required rate (a link's
        # bandwidth, always finite) has no null.
        if default is ...:
            raise ctx.error(where, "null is not accepted; write a finite rate such as "
                                   "100GB/s, 400Gbps or 25e9 (bytes/s)")
        return default
    try:
        return parse_rate(value) if kind == "rate" else parse_time(value)
    except ValueError as exc:
        raise ctx.error(where, str(exc)) from None


def _build(data: Any, ctx: Context) -> Topology:
    topo_data = _mapping(data, ctx, (), _TOP_KEYS, "a mapping with 'devices' and 'links'")
    name = topo_data.get("name", "custom")
    # a number is a name, as written (YAML reads `name: 1e9` as a float); null or a list
    # is not
    if isinstance(name, bool) or not isinstance(name, (str, int, float)) or name == "":
        raise ctx.error(("name",), f"expected a non-empty string, got {name!r:.60}")
    topo = Topology(name if isinstance(name, str) else ctx.texts.get(("name",), str(name)))
    cpu = topo_data.get("cpu", "unknown")
    if cpu not in CPU_VENDORS:
        raise ctx.error(("cpu",), f"expected one of {', '.join(CPU_VENDORS)}, got {cpu!r:.60}")
    topo.cpu = cpu
    routing = topo_data.get("routing", "link_order")
    if not isinstance(routing, str) or routing not in ROUTINGS:
        raise ctx.error(("routing",), f"expected one of {', '.join(ROUTINGS)}, got "
                                      f"{routing!r:.60}")
    topo.routing = routing
    for key in ("devices", "links"):
        if key not in topo_data:
            raise ctx.error((key,), "missing (a topology file lists its devices and links, "
                                    "or names a preset)")
        if not isinstance(topo_data.get(key), list):
            raise ctx.error((key,), f"expected a list, got {topo_data.get(key)!r:.60}")
    for i, raw in enumerate(topo_data["devices"]):
        path: Key = ("devices", i)
        dev = _mapping(raw, ctx, path, _DEVICE_KEYS, "a mapping with name and kind")
        dev_name = _field(dev, "name", ctx, path, kind="name")
        kind = _field(dev, "kind", ctx, path, kind="name")
        if kind not in DEVICE_KINDS:
            raise ctx.error(path + ("kind",), f"kind {kind!r} is not a device kind; "
                                              f"expected one of {', '.join(DEVICE_KINDS)}")
        node = _field(dev, "node", ctx, path, kind="int", default=0)
        rb = _field(dev, "reduce_bandwidth", ctx, path, kind="rate", default=math.inf)
        in_network = dev.get("in_network", False)
        if not isinstance(in_network, bool):
            raise ctx.error(path + ("in_network",), f"expected true or false, got "
                                                    f"{in_network!r:.60}")
        if kind != "gpu" and node:
            raise ctx.error(path + ("node",), "node applies to GPUs only")
        if kind in ("gpu", "host") and in_network:
            raise ctx.error(path + ("in_network",), "applies to switches and NICs only")
        if kind in ("switch", "nic") and dev.get("in_network") is False and \
                dev.get("reduce_bandwidth") is not None:
            raise ctx.error(path + ("in_network",), "is false, but reduce_bandwidth makes "
                                                    "the device reduce in the network; "
                                                    "drop one of them")
        staging = _field(dev, "staging", ctx, path, kind="name", default=None)
        if kind != "gpu" and staging is not None:
            raise ctx.error(path + ("staging",), "applies to GPUs only")
        try:
            if kind == "gpu":
                topo.add_gpu(dev_name, reduce_bandwidth=rb, node=node, staging=staging)
            elif kind == "host":
                topo.add_host(dev_name, reduce_bandwidth=rb)
            elif in_network or "reduce_bandwidth" in dev and dev["reduce_bandwidth"] is not None:
                getattr(topo, f"add_{kind}")(dev_name, reduce_bandwidth=rb)
            else:
                getattr(topo, f"add_{kind}")(dev_name)
        except TopologyError as exc:
            raise ctx.error(path, str(exc)) from None
    for i, raw in enumerate(topo_data["links"]):
        path = ("links", i)
        link = _mapping(raw, ctx, path, _LINK_KEYS, "a mapping with u, v and bandwidth")
        ends = [_field(link, end, ctx, path, kind="name") for end in ("u", "v")]
        bandwidth = _field(link, "bandwidth", ctx, path, kind="rate")
        latency = _field(link, "latency", ctx, path, kind="time", default=0.0)
        kind = _field(link, "kind", ctx, path, kind="name", default="custom")
        back = _field(link, "back_bandwidth", ctx, path, kind="rate", default=None)
        try:
            topo.add_link(*ends, bandwidth=bandwidth, latency=latency, kind=kind,
                          back_bandwidth=back)
        except TopologyError as exc:
            raise ctx.error(path, str(exc)) from None
    return topo


def _preset(data: dict[str, Any], ctx: Context) -> Topology:
    from simcoll.topology.catalog import build, builder, parameters

    _mapping(data, ctx, (), _PRESET_KEYS, "a mapping with 'preset' and 'args'")
    name = data["preset"]
    if not isinstance(name, str):
        raise ctx.error(("preset",), f"expected a builder or preset name, got {name!r}")
    try:
        builder(name, files=False)
    except TopologyError as exc:
        raise ctx.error(("preset",), str(exc)) from None
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise ctx.error(("args",), f"expected a mapping of parameter: value, got {args!r:.60}")

    optional = {p.name: p.optional for p in parameters(name)}
    kinds = {p.name: p.kind for p in parameters(name)}

    def text(key: str, value: Any) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, (list, tuple)):
            if key in kinds and kinds[key] != "dims":   # an unknown key: build names it
                raise ctx.error(("args", key), f"a list {list(value)!r:.60} is not accepted "
                                               f"for {name}'s {key!r}; give one value (only "
                                               f"a dims parameter takes a list)")
            return "x".join(str(v) for v in value)
        if value is None and not optional.get(key, True):
            raise ctx.error(("args", key), f"null is not accepted for {name}'s {key!r}, "
                                           f"which has no 'none'; give a value or leave the "
                                           f"key out for its default")
        if isinstance(value, np.generic):   # numpy's numbers as Python's
            value = value.item()
        if value is not None and not isinstance(value, (str, int, float)):
            raise ctx.error(("args", key), f"a {type(value).__name__} {value!r:.60} is not "
                                           f"accepted for {name}'s {key!r}; give one value")
        if kinds.get(key) == "str" and not isinstance(value, str) and value is not None:
            written = ctx.texts.get(("args", key))
            hint = "quote it" if written is None else \
                f"YAML 1.2 reads {written} as a number: quote it, '{written}'"
            raise ctx.error(("args", key), f"expected a string for {name}'s {key!r}, got "
                                           f"{value!r} ({hint})")
        return "none" if value is None else str(value)

    place = ctx.place(("args",) if "args" in data else ("preset",))
    return build(name, {str(k): text(str(k), v) for k, v in args.items()}, place)


def _astra_config(data: Any) -> bool:
    """Whether ``data`` is (meant as) an ASTRA-sim network config: a mapping with
    ``npus_count``, a list of ``topology`` kinds or a key of the older JSON config."""
    from simcoll.topology.astra import LEGACY_KEYS

    return isinstance(data, dict) and (
        "npus_count" in data or isinstance(data.get("topology"), list)
        or any(key in data for key in LEGACY_KEYS))


def from_dict(data: Any, *, source: str = "topology description",
              context: Context | None = None) -> Topology:
    """Build a topology from the plain data of a topology file (any of its forms).

    Args:
        data: devices and links, a preset with ``args``, or an ASTRA-sim network config.
        source: what to call the data in errors (a file name).
        context: where each key came from (set by :func:`load`).

    Raises:
        TopologyError: naming the source, the key (and line, where known) and what was
            expected.
    """
    ctx = context or Context(source)
    if isinstance(data, dict) and "preset" in data:
        return _preset(data, ctx)
    if _astra_config(data):
        from simcoll.topology.astra import from_astra_dict

        return from_astra_dict(data, ctx)
    if not isinstance(data, dict):
        raise ctx.error((), f"expected a mapping with 'devices' and 'links' (or 'preset'), "
                            f"got {type(data).__name__} {data!r:.60}")
    return _build(data, ctx)


def save(topology: Topology, path: str | os.PathLike) -> None:
    """Write ``topology``'s devices and links to ``path``, in the format its extension
    names (via a temporary file, then renamed).

    Raises:
        TopologyError: an unknown extension, .toml without the optional tomli_w, or a
            machine that cannot run (no GPU, not connected, a staging device it lacks),
            which :func:`load` would refuse.
        InvalidInputError: not a Topology, or a path that is not a file path, a
            directory, or in a folder that does not exist.
    """
    data = to_dict(topology)   # refuses what is not a Topology
    try:
        topology.validate()
    except TopologyError as exc:
        raise TopologyError(f"not saved, as load() would refuse it: {exc}") from None
    path = output_path(path, "path", example="machine.yaml")
    check_suffix(path)
    text = dump(data if path.suffix.lower() == ".json" else _compact(data), path)
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def load(path: str | os.PathLike) -> Topology:
    """Read a topology file (:func:`save`'s output, a preset, or an ASTRA-sim config).

    ``topology.spec`` is the preset's spec for a preset file (unless an argument holds
    a comma, which a spec cannot write), else the path. A file of devices and links
    without a ``name`` names the machine after the file (``two_nodes.yaml``:
    ``two_nodes``; from :func:`from_dict` it is ``custom``).

    Raises:
        TopologyError: an unknown extension, an unreadable or malformed file, or a
            machine that cannot run (no GPU, not connected, a staging device it lacks);
            the message names the file, the key or line, and what was expected.
    """
    data, ctx = read(path)
    if isinstance(data, dict) and "devices" in data and not {"name", "preset"} & set(data) \
            and not _astra_config(data):
        data = {"name": Path(path).stem, **data}   # named before its errors name it
    topology = from_dict(data, context=ctx)
    try:
        topology.validate()
    except TopologyError as exc:
        raise TopologyError(f"{ctx.source}: {exc}") from None
    if topology.spec is None:
        topology.spec = str(path)
    return topology
