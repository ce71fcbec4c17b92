"""simcoll's flow models against SimGrid's CM02 model, message by message, on random stars.

Each case is a star: hosts with one full-duplex link each (its own bandwidth and latency)
to a centre, and messages of random sizes between random hosts, each sent at its own
instant, many of them overlapping. simcoll runs the case with ``network="flow"`` or
``network="flow_rtt"``; SimGrid 3.x runs it through its Python API with the CM02 model
and its correction factors off (``network/latency-factor:1``, ``bandwidth-factor:1``,
``weight-S:0``, ``crosstraffic:0``) and its full update (``network/optim:Full``: every
rate re-solved at every change), split-duplex links, one ``Comm.sendto_async`` per
message. SimGrid's default lazy update (``network/optim:Lazy``) is not exact here: on the
first case of seed 0 it delivers a 1,715-byte message 0.39 us early (8.5%), and when the
messages are created in another order it agrees with its full update and with simcoll;
the full update gives the max-min rates worked out by hand for that message. SimGrid's
default precision (``surf/precision``, 1e-9: amounts and instants closer than that are
equal) moves some arrivals by up to a nanosecond (2.8e-5 relative on a 34 KB message of
the flow_rtt cases), so the script sets it to 1e-15. The script prints, per case, the
largest relative difference between the two arrival times of a message, and the largest
over all cases.

* ``flow``: every link has the same latency, so CM02's sharing penalty (a flow's route
  latency) is equal for all flows and its shares are plain max-min fair ones, which is
  what simcoll's flow model computes.
* ``flow_rtt``: latencies differ from link to link, so CM02 shares each link in
  proportion to 1 / route latency, which is what simcoll's flow_rtt model computes.

SimGrid is not a dependency of simcoll: this needs an interpreter with SimGrid's Python
bindings (Debian's ``python3-simgrid`` gives ``/usr/bin/python3``), which runs each case
in a process of its own (SimGrid allows one engine per process; that interpreter needs
nothing but SimGrid, so numpy is imported only on simcoll's side).

    python benchmarks/simgrid_crosscheck.py                 # 60 cases of each model
    python benchmarks/simgrid_crosscheck.py --cases 200 --seed 3
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from interrupts import run_main

SIMGRID_PYTHON = "/usr/bin/python3"
BANDWIDTHS = (1e9, 2.5e9, 1e10, 4e10)
LATENCIES = (0.5e-6, 1e-6, 2e-6, 5e-6, 10e-6)


def random_case(rng: Any, varied_latency: bool) -> dict[str, Any]:
    """A star of 3 to 8 hosts and 2 to 30 messages (source, destination, bytes, start)."""
    hosts = int(rng.integers(3, 9))
    bandwidth = [float(rng.choice(BANDWIDTHS)) for _ in range(hosts)]
    latency = ([float(rng.choice(LATENCIES)) for _ in range(hosts)] if varied_latency
               else [1e-6] * hosts)
    messages = []
    for _ in range(int(rng.integers(2, 31))):
        src, dst = (int(h) for h in rng.choice(hosts, size=2, replace=False))
        size = int(10 ** rng.uniform(3, 7))
        start = 0.0 if rng.random() < 0.4 else float(rng.uniform(0, 50e-6))
        messages.append((src, dst, size, start))
    return {"bandwidth": bandwidth, "latency": latency, "messages": messages}


def simcoll_arrivals(case: dict[str, Any], network: str) -> list[float]:
    """Each message's arrival time in simcoll (the end of its span in the trace)."""
    import numpy as np

    import simcoll as sc

    topo = sc.Topology("star")
    centre = topo.add_switch("centre")
    for bandwidth, latency in zip(case["bandwidth"], case["latency"]):
        topo.add_link(topo.add_gpu(), centre, bandwidth=bandwidth, latency=latency)
    messages = case["messages"]

    def program(comm: Any) -> Any:
        mine = sorted((start, i) for i, (src, _, _, start) in enumerate(messages)
                      if src == comm.rank)
        sent = []
        for start, i in mine:
            if start > comm.now:
                yield comm.sleep(start - comm.now)
            _, dst, size, _ = messages[i]
            sent.append(comm.send(sc.VirtualBuffer.of(size, np.uint8), dst, tag=i))
        received = [comm.recv(src, tag=i) for i, (src, dst, _, _) in enumerate(messages)
                    if dst == comm.rank]
        for event in sent + received:  # noqa: UP028 (a list cannot take SimPy's values)
            yield event

    result = sc.run_program(topo, program, network=network, trace=True)
    assert result.trace is not None
    arrivals = [math.nan] * len(messages)
    for event in result.trace:
        if event.kind == "message":
            arrivals[event.tag] = event.end
    return arrivals


def simgrid_arrivals(case: dict[str, Any]) -> list[float]:
    """Each message's arrival time in SimGrid (run in a process of its own)."""
    done = subprocess.run([SIMGRID_PYTHON, __file__, "--simgrid"], input=json.dumps(case),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _simgrid_main() -> None:
    """Run the case read from stdin in SimGrid; print the arrival times as JSON."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from simgrid_cases import star

    case = json.loads(sys.stdin.read())
    simgrid, engine, hosts = star(case["bandwidth"], case["latency"],
                                  ("network/optim:Full", "surf/precision:1e-15"))
    arrivals = [0.0] * len(case["messages"])

    def message(i: int, src: int, dst: int, size: int, start: float) -> None:
        if start > 0:
            simgrid.this_actor.sleep_until(start)
        simgrid.Comm.sendto_async(hosts[src], hosts[dst], size).wait()
        arrivals[i] = simgrid.Engine.clock

    for i, (src, dst, size, start) in enumerate(case["messages"]):
        simgrid.Actor.create(f"m{i}", hosts[src], message, i, src, dst, size, start)
    engine.run()
    print(json.dumps(arrivals))


def _without_simgrid() -> str | None:
    """Why SimGrid's Python bindings cannot run here, or None."""
    if not Path(SIMGRID_PYTHON).exists():
        return f"no {SIMGRID_PYTHON}: SimGrid's Python bindings are needed"
    found = subprocess.run([SIMGRID_PYTHON, "-c", "import simgrid"], capture_output=True,
                           text=True)
    if found.returncode:
        return (f"{SIMGRID_PYTHON} cannot import simgrid (SimGrid's Python bindings; on "
                f"Debian: apt install python3-simgrid)")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=60, help="cases per model (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error(f"--cases {args.cases}: use an integer >= 1")
    import numpy as np

    missing = _without_simgrid()
    if missing:
        print(f"simgrid_crosscheck.py: {missing}", file=sys.stderr)
        return 1
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    worst_all = {}
    for network, varied in (("flow", False), ("flow_rtt", True)):
        worst = 0.0
        messages = 0
        for k in range(args.cases):
            case = random_case(rng, varied)
            ours = np.array(simcoll_arrivals(case, network))
            theirs = np.array(simgrid_arrivals(case))
            difference = float(np.max(np.abs(ours - theirs) / theirs))
            # max() keeps its first argument against a NaN (a message one side lacks)
            worst = difference if math.isnan(difference) else max(worst, difference)
            messages += len(ours)
            print(f"{network:<9} case {k:>3}: {len(case['bandwidth'])} hosts, "
                  f"{len(ours):>2} messages, largest relative difference {difference:.1e}")
        worst_all[network] = (worst, messages)
    print(f"\n{args.cases} random stars per model, seed {args.seed}, "
          f"{time.perf_counter() - start:.0f} s:")
    for network, (worst, messages) in worst_all.items():
        print(f"  {network:<9} against SimGrid CM02: {messages} messages, largest relative "
              f"difference in arrival time {worst:.1e}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--simgrid"]:
        _simgrid_main()
    else:
        run_main(main)
