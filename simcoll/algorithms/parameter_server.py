"""Parameter-server all-reduce: workers push to servers, servers reduce and push back.

Li et al., "Scaling distributed machine learning with the parameter server", OSDI 2014.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from simcoll.algorithms.params import Int, Optional
from simcoll.algorithms.registry import register
from simcoll.buffers import Buffer, block_bytes, split
from simcoll.comm import Comm
from simcoll.cost.model import CostModel, Traffic, gpu_traffic
from simcoll.errors import InvalidInputError
from simcoll.ops import ReduceOp
from simcoll.typing import BufferProgram, HostProgram, Steps

__all__ = ["parameter_server_all_reduce", "parameter_server_host"]

PARAMS = {"servers": Optional(Int(minimum=1), doc="number of servers k; default: every "
                                                  "server host, else rank 0 alone")}
MACHINE = {"hosts": Int(0, minimum=0, doc="server hosts in the topology; 0: the servers "
                                          "are ranks")}


def _server_count(servers: int | None, hosts: int, p: int) -> int:
    """Number of servers k: ``servers`` if given (one the machine has), else every host,
    else one rank."""
    if servers is not None:
        _validate(p, 0, hosts, servers=servers)
        return servers
    return hosts if hosts else 1


def _servers(comm: Comm, servers: int | None) -> tuple[int, ...]:
    """Ranks of the servers: the topology's hosts if it has any, else ranks 0..k-1."""
    k = _server_count(servers, len(comm.hosts), comm.size)
    return comm.hosts[:k] if comm.hosts else tuple(range(k))


def _reduce_shard(comm: Comm, shard: Buffer | None, workers: Iterable[int],
                  op: ReduceOp) -> Steps:
    """Receive each worker's shard in rank order and reduce it into ``shard``."""
    acc = shard
    for w in workers:
        got = yield comm.recv(src=w)
        acc = got if acc is None else (yield comm.reduce(acc, got, op))
    return acc


def _validate(p: int, count: int, hosts: int, *, servers: int | None) -> None:
    """Refuse server counts the topology cannot provide."""
    limit, what = (hosts, f"hosts={hosts} server hosts") if hosts else (p, f"p={p} ranks")
    if servers is not None and servers > limit:
        hint = "" if hosts else (", or a machine with server hosts (a topology's servers=, "
                                 "hosts= in simcoll.cost)")
        raise InvalidInputError(
            f"servers={servers} is more than the machine's {what}; use 1..{limit}{hint}")


def _time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
          servers: int | None, hosts: int) -> float:
    """Push, reduce, pull, with s = n / k the shard size of k servers.

    Server hosts (``hosts > 0``): 2 alpha + 2 max(p, k) s beta + (p-1) s gamma. Each
    server's link carries p concurrent pushes, then p concurrent pulls; when k > p the
    workers' links, carrying k shards each, are the bottleneck instead.
    Servers among the ranks: 2 alpha + 2 (p-1) s beta + (p-1) s gamma for every k <= p
    (0 for p = 1): a server's own shard stays local, and a worker's k <= p - 1 shards
    never outrun the servers' links.
    """
    k = _server_count(servers, hosts, p)
    s = nbytes / k
    if hosts:
        return 2 * alpha + 2 * max(p, k) * s * beta + (p - 1) * s * gamma
    if p == 1:
        return 0.0
    return 2 * alpha + (p - 1) * s * (2 * beta + gamma)


def _traffic(p: int, nbytes: int, itemsize: int, *, servers: int | None,
             hosts: int) -> Traffic:
    """Workers push and pull every shard held elsewhere; server j pulls and pushes shard j
    from and to every worker other than itself."""
    k = _server_count(servers, hosts, p)
    shards = block_bytes(nbytes, k, itemsize)
    sent = np.full(p, int(shards.sum()), dtype=np.int64)
    if hosts:
        on_hosts = np.zeros(hosts, dtype=np.int64)
        on_hosts[:k] = p * shards
        return Traffic(sent, sent.copy(), on_hosts, on_hosts.copy())
    sent[:k] += (p - 2) * shards
    return gpu_traffic(sent, sent)


def _exact(p: int, nbytes: int, itemsize: int, *, servers: int | None, hosts: int) -> bool:
    """Exact for equal shards; unequal shards use their mean size in ``time``."""
    return (nbytes // itemsize) % _server_count(servers, hosts, p) == 0


def parameter_server_host(comm: Comm, *, op: ReduceOp, servers: int | None) -> HostProgram:
    """A dedicated server host: reduce its shard from every worker, send the result back."""
    if comm.rank not in _servers(comm, servers):
        return None
    acc = yield from _reduce_shard(comm, None, range(comm.size), op)
    for w in range(comm.size):
        comm.send(acc, dst=w)
    return None


@register("all_reduce", "parameter_server", params=PARAMS, host=parameter_server_host,
          validate=_validate, cost=CostModel(time=_time, traffic=_traffic, exact=_exact,
                                             machine=MACHINE))
def parameter_server_all_reduce(comm: Comm, x: Buffer, *, op: ReduceOp,
                                servers: int | None) -> BufferProgram:
    """Parameter server: the buffer is cut into k shards, shard j lives on server j.

    Every worker pushes shard j to server j; server j reduces the p shards it receives (in
    worker rank order) and pushes the result to every worker. The servers are the
    topology's server hosts when it has some (``servers=k`` uses the first k, default all),
    otherwise ranks 0..k-1 double as servers (default k = 1, rank 0).

    Cost on the single-port alpha-beta network (derived here), with s = n/k the shard
    size (exact when the element count divides by k). With dedicated hosts, each server's
    link carries p concurrent pushes and each worker's link k (whichever is busier is the
    bottleneck), then the server makes p - 1 reductions, then the pulls mirror the pushes:
    2 alpha + 2 max(p, k) s beta + (p-1) s gamma. With servers among the ranks a server's
    own shard stays local, so p - 1 replaces p on its link: 2 alpha + 2 (p-1) s beta +
    (p-1) s gamma for every k <= p. Each worker sends and receives n bytes (a co-located
    server j sends and receives n + (p-2) s_j), and the servers together receive p n
    bytes of pushes (hosts) or (p-1) n (co-located; with the other servers' results,
    (p+k-2) n in all).
    """
    p, r = comm.size, comm.rank
    server_ranks = _servers(comm, servers)
    k = len(server_ranks)
    shards = split(x, k)
    for j, server in enumerate(server_ranks):
        if server != r:
            comm.send(shards[j], dst=server)
    if r in server_ranks:
        j = server_ranks.index(r)
        own = shards[j]
        reduced = yield from _reduce_shard(comm, None, range(r), op)
        reduced = own if reduced is None else (yield comm.reduce(reduced, own, op))
        reduced = yield from _reduce_shard(comm, reduced, range(r + 1, p), op)
        for w in range(p):
            if w != r:
                comm.send(reduced, dst=w)
        shards[j] = reduced
    for j, server in enumerate(server_ranks):
        if server != r:
            shards[j] = yield comm.recv(src=server)
    return comm.join(shards)
