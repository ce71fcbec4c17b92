"""Save a topology to JSON and load it back, so any machine can live in a file.

The format is one object: ``{"name": ..., "devices": [{"name", "kind", "node",
"reduce_bandwidth"}...], "links": [{"u", "v", "bandwidth", "latency", "kind"}...]}``,
devices in the order they were added (GPU order is rank order). ``reduce_bandwidth`` is
``null`` for infinity.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from simcoll.errors import TopologyError
from simcoll.topology.graph import DEVICE_KINDS, Topology

__all__ = ["to_dict", "from_dict", "save", "load"]


def to_dict(topology: Topology) -> dict[str, Any]:
    """The JSON-ready description of ``topology``."""
    return {
        "name": topology.name,
        "devices": [{"name": d.name, "kind": d.kind, "node": d.node,
                     "reduce_bandwidth": None if math.isinf(d.reduce_bandwidth)
                     else d.reduce_bandwidth} for d in topology.devices],
        "links": [{"u": link.u, "v": link.v, "bandwidth": link.bandwidth,
                   "latency": link.latency, "kind": link.kind} for link in topology.links],
    }


def from_dict(spec: dict[str, Any]) -> Topology:
    """Build a topology from :func:`to_dict`'s format.

    Raises:
        TopologyError: a missing field, an unknown device kind, or any bad link value.
    """
    try:
        topo = Topology(spec.get("name", "custom"))
        for i, dev in enumerate(spec["devices"]):
            kind = dev["kind"]
            if kind not in DEVICE_KINDS:
                raise TopologyError(f"devices[{i}] has kind {kind!r}; use one of "
                                    f"{', '.join(DEVICE_KINDS)}")
            rb = dev.get("reduce_bandwidth")
            rb = math.inf if rb is None else rb
            if kind == "gpu":
                topo.add_gpu(dev["name"], reduce_bandwidth=rb, node=dev.get("node", 0))
            elif kind == "host":
                topo.add_host(dev["name"], reduce_bandwidth=rb)
            else:
                getattr(topo, f"add_{kind}")(dev["name"])
        for link in spec["links"]:
            topo.add_link(link["u"], link["v"], bandwidth=link["bandwidth"],
                          latency=link.get("latency", 0.0), kind=link.get("kind", "custom"))
    except (KeyError, TypeError) as exc:
        raise TopologyError(f"topology description is missing or mistypes {exc}") from None
    return topo


def save(topology: Topology, path: str | os.PathLike) -> None:
    """Write ``topology`` as JSON to ``path`` (written to a temporary file, then renamed,
    so an existing file is never left half-written)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_dict(topology), indent=1))
    tmp.replace(path)


def load(path: str | os.PathLike) -> Topology:
    """Read a topology written by :func:`save`."""
    try:
        spec = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise TopologyError(f"{path} is not valid JSON: {exc}") from None
    return from_dict(spec)
