"""Cost models of the baseline all-reduces: ``naive`` and ``parameter_server``.

The derivations are in the algorithms' docstrings (``simcoll.algorithms.naive`` and
``simcoll.algorithms.parameter_server``); n = ``nbytes``, each rank's input.
"""

from __future__ import annotations

import numpy as np

from simcoll.cost import Traffic, cost_model

__all__ = ["naive_time", "parameter_server_time"]

_NONE = np.zeros(0, np.int64)


def _naive_traffic(p: int, nbytes: int, itemsize: int) -> Traffic:
    each = np.full(p, (p - 1) * (nbytes // itemsize) * itemsize, dtype=np.int64)
    return Traffic(each, each.copy(), _NONE, _NONE)


@cost_model("all_reduce", "naive", traffic=_naive_traffic)
def naive_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float) -> float:
    """alpha + (p-1) n beta + (p-1) n gamma: p-1 equal flows share each link, then the p-1
    reductions run one after another (0 for p = 1)."""
    if p == 1:
        return 0.0
    return alpha + (p - 1) * nbytes * (beta + gamma)


def _servers(servers: int | None, hosts: int) -> int:
    """Number of servers k: ``servers`` if given, else every host, else one rank."""
    if servers is not None:
        return servers
    return hosts if hosts else 1


def _shards(k: int, nbytes: int, itemsize: int) -> np.ndarray:
    """Bytes of each of the k shards, cut by elements as ``np.array_split`` does."""
    q, extra = divmod(nbytes // itemsize, k)
    return (q + (np.arange(k) < extra)).astype(np.int64) * itemsize


def _ps_traffic(p: int, nbytes: int, itemsize: int, *, servers: int | None = None,
                hosts: int = 0) -> Traffic:
    """Workers push and pull every shard held elsewhere; server j pulls and pushes shard j
    from and to every worker other than itself."""
    k = _servers(servers, hosts)
    shards = _shards(k, nbytes, itemsize)
    total = int(shards.sum())
    sent = np.full(p, total, dtype=np.int64)
    if hosts:
        on_hosts = np.zeros(hosts, dtype=np.int64)
        on_hosts[:k] = p * shards
        return Traffic(sent, sent.copy(), on_hosts, on_hosts.copy())
    sent[:k] += (p - 2) * shards
    return Traffic(sent, sent.copy(), _NONE, _NONE)


def _ps_exact(p: int, nbytes: int, itemsize: int, *, servers: int | None = None,
              hosts: int = 0) -> bool:
    """Exact for equal shards; unequal shards use their mean size in ``time``."""
    return (nbytes // itemsize) % _servers(servers, hosts) == 0


@cost_model("all_reduce", "parameter_server", traffic=_ps_traffic, exact=_ps_exact)
def parameter_server_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                          servers: int | None = None, hosts: int = 0) -> float:
    """Push, reduce, pull, with s = n / k the shard size of k servers.

    Server hosts (``hosts > 0``): 2 alpha + 2 max(p, k) s beta + (p-1) s gamma. Each
    server's link carries p concurrent pushes, then p concurrent pulls; when k > p the
    workers' links, carrying k shards each, are the bottleneck instead (the algorithm's
    docstring states only the p >= k case).
    Servers among the ranks: 2 alpha + 2 (p-1) s beta + (p-1) s gamma for every k <= p
    (0 for p = 1): a server's own shard stays local, and a worker's k <= p - 1 shards
    never outrun the servers' links. Args: ``servers`` (k, default every host, else 1)
    and ``hosts``, the number of server hosts in the topology.
    """
    k = _servers(servers, hosts)
    s = nbytes / k
    if hosts:
        return 2 * alpha + 2 * max(p, k) * s * beta + (p - 1) * s * gamma
    if p == 1:
        return 0.0
    return 2 * alpha + (p - 1) * s * (2 * beta + gamma)
