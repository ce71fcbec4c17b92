"""The ring and uneven all-to-all cases through SimGrid's Python API, for side-by-side figures.

Run by ``benchmarks/run.py`` in a subprocess of the interpreter that has the ``simgrid``
module (Debian's ``python3-simgrid``: ``/usr/bin/python3``); it prints one JSON line.
The machine is simcoll's ``switch(n)``: every host has one full-duplex link (split-duplex:
one link per direction) of ``bandwidth`` bytes/s and ``latency`` s to a star's centre, so a
message crosses the sender's up link and the receiver's down link. The flow model is
SimGrid's CM02 with its TCP correction factors off (latency and bandwidth factors 1,
weight-S 0, no cross traffic), which is what simcoll's "flow" model computes.

    /usr/bin/python3 benchmarks/simgrid_cases.py ring 256
    /usr/bin/python3 benchmarks/simgrid_cases.py alltoallv 64
"""

from __future__ import annotations

import json
import resource
import sys
import time

BANDWIDTH = 100e9
LATENCY = 1e-6


def star(bandwidths: list[float], latencies: list[float], config: tuple[str, ...] = ()):
    """SimGrid, its engine (CM02, factors off, plus ``config``) and the hosts of a star:
    host i on a split-duplex link of ``bandwidths[i]`` bytes/s and ``latencies[i]`` s."""
    import simgrid

    engine = simgrid.Engine(["bench", "--log=root.thres:critical",
                             "--cfg=network/model:CM02",
                             "--cfg=network/latency-factor:1",
                             "--cfg=network/bandwidth-factor:1",
                             "--cfg=network/weight-S:0",
                             "--cfg=network/crosstraffic:0",
                             *(f"--cfg={c}" for c in config)])
    zone = simgrid.NetZone.create_star_zone("switch")
    hosts = []
    for i, (bandwidth, latency) in enumerate(zip(bandwidths, latencies)):
        host = zone.create_host(f"gpu{i}", 1e9)
        link = zone.create_split_duplex_link(f"link{i}", bandwidth).set_latency(latency)
        zone.add_route(host.netpoint, None, None, None,
                       [simgrid.LinkInRoute(link, simgrid.LinkInRoute.UP)], True)
        hosts.append(host)
    zone.seal()
    return simgrid, engine, hosts


def _engine(n: int):
    return star([BANDWIDTH] * n, [LATENCY] * n)


def ring(n: int, nbytes: float) -> dict:
    """Ring all_reduce of ``nbytes`` per rank: 2(n-1) steps, each rank sending a chunk of
    nbytes/n to its right neighbour and receiving one from its left."""
    start = time.perf_counter()
    simgrid, engine, hosts = _engine(n)
    chunk = int(nbytes // n)
    boxes = [simgrid.Mailbox.by_name(f"rank{r}") for r in range(n)]

    def rank(r: int) -> None:
        right, mine = boxes[(r + 1) % n], boxes[r]
        for _ in range(2 * (n - 1)):
            sent = right.put_async(r, chunk)
            mine.get()
            sent.wait()

    for r in range(n):
        simgrid.Actor.create(f"rank{r}", hosts[r], rank, r)
    engine.run()
    wall = time.perf_counter() - start
    return {"case": "ring", "n": n, "wall": wall, "time": simgrid.Engine.clock,
            "messages": 2 * (n - 1) * n, "rss": _rss()}


def alltoallv(n: int) -> dict:
    """Every host i sends (1 + ((7i + 13j) mod 97) / 97) x 65536 float32 to every j != i,
    all at once."""
    start = time.perf_counter()
    simgrid, engine, hosts = _engine(n)

    def driver() -> None:
        comms = []
        for i in range(n):
            for j in range(n):
                if i != j:
                    size = int((1 + ((7 * i + 13 * j) % 97) / 97) * 65536) * 4
                    comms.append(simgrid.Comm.sendto_async(hosts[i], hosts[j], size))
        simgrid.Comm.wait_all(comms)

    simgrid.Actor.create("driver", hosts[0], driver)
    engine.run()
    wall = time.perf_counter() - start
    return {"case": "alltoallv", "n": n, "wall": wall, "time": simgrid.Engine.clock,
            "messages": n * (n - 1), "rss": _rss()}


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("ring", "alltoallv", "version") \
            or not sys.argv[2].isdigit():
        sys.exit("usage: simgrid_cases.py ring|alltoallv|version N (run by run.py with the "
                 "Python that has SimGrid's bindings)")
    kind, size = sys.argv[1], int(sys.argv[2])
    # loaded before any timer starts, as simcoll's cases import simcoll before theirs
    import simgrid

    if kind == "version":
        result = {"version": str(simgrid.simgrid_version)}
    else:
        result = ring(size, 2**30) if kind == "ring" else alltoallv(size)
    print(json.dumps(result))
