"""Parameter-server all-reduce: workers push to servers, servers reduce and push back.

Li et al., "Scaling distributed machine learning with the parameter server", OSDI 2014.
"""

from __future__ import annotations

from simcoll.algorithms.registry import register
from simcoll.errors import InvalidInputError
from simcoll.ops import ReduceOp

__all__ = ["parameter_server_all_reduce", "parameter_server_host"]


def _servers(comm, servers):
    """Ranks of the servers: the topology's hosts if it has any, else ranks 0..k-1."""
    if comm.hosts:
        k = len(comm.hosts) if servers is None else servers
        return comm.hosts[:k]
    return tuple(range(1 if servers is None else servers))


def _reduce_shard(comm, shard, workers, op):
    """Receive each worker's shard in rank order and reduce it into ``shard``."""
    acc = shard
    for w in workers:
        got = yield comm.recv(src=w)
        acc = got if acc is None else (yield comm.reduce(acc, got, op))
    return acc


def validate(p, count, hosts, *, servers=None):
    """Refuse server counts the topology cannot provide."""
    if servers is None:
        return
    if isinstance(servers, bool) or not isinstance(servers, int) or servers < 1:
        raise InvalidInputError(f"servers={servers!r} is not accepted; use an integer >= 1")
    limit, what = (hosts, "server hosts") if hosts else (p, "ranks")
    if servers > limit:
        raise InvalidInputError(
            f"servers={servers} but the topology has {limit} {what}; use 1..{limit}")


def parameter_server_host(comm, *, op=ReduceOp.SUM, servers=None):
    """A dedicated server host: reduce its shard from every worker, send the result back."""
    if comm.rank not in _servers(comm, servers):
        return None
    acc = yield from _reduce_shard(comm, None, range(comm.size), op)
    for w in range(comm.size):
        comm.send(acc, dst=w)
    return None


@register("all_reduce", "parameter_server", host=parameter_server_host, validate=validate)
def parameter_server_all_reduce(comm, x, *, op=ReduceOp.SUM, servers=None):
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
    bytes (hosts) or (p-1) n bytes (co-located).
    """
    p, r = comm.size, comm.rank
    server_ranks = _servers(comm, servers)
    k = len(server_ranks)
    shards = comm.split_buffer(x, k)
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
