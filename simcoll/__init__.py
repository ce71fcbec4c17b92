"""simcoll: a collective-communication simulator that moves real numpy tensors.

Run a collective algorithm on a simulated machine and check, in one run, that its result
is right, its traffic is what the formula says, and its time is what the bandwidth model
predicts::

    import simcoll as sc
    topo = sc.topology.switch(8, bandwidth=100 * sc.GB, latency=1 * sc.us)
    res = sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=1 << 30)
"""

from __future__ import annotations

from simcoll import algorithms, lone_flows, nccl_tests, plot, topology, training
from simcoll.algorithms.registry import algorithms as list_algorithms
from simcoll.algorithms.registry import get_algorithm, register
from simcoll.buffers import VirtualBuffer
from simcoll.calibration import Calibration, calibrate
from simcoll.collectives import COLLECTIVES
from simcoll.comm import Comm
from simcoll.comparison import Comparison, compare
from simcoll.critical_path import CriticalPath, critical_path
from simcoll.errors import (
    AlgorithmError,
    CommUsageError,
    DeadlockError,
    InvalidInputError,
    LinkFailureError,
    RegistrationError,
    RunLimitError,
    SimCollError,
    TopologyError,
    UnknownAlgorithmError,
    UnknownCollectiveError,
    UnknownNetworkError,
    UnmatchedMessageError,
)
from simcoll.faults import Faults, LinkFault
from simcoll.network import NETWORKS
from simcoll.ops import ReduceOp
from simcoll.plot import plot_scaling
from simcoll.programs import run_program
from simcoll.result import Result, RunResult
from simcoll.simulate import simulate
from simcoll.sweep import FailedPoint, SweepResults, load_results, sweep
from simcoll.topology import Topology
from simcoll.units import GB, KB, MB, TB, Gbps, GiB, KiB, MiB, TiB, ms, ns, parse_size, us

__version__ = "0.1.0"

__all__ = [
    "simulate", "run_program", "RunResult", "sweep", "load_results", "SweepResults",
    "FailedPoint", "plot_scaling", "Result", "Topology", "Comm", "ReduceOp", "VirtualBuffer",
    "register",
    "get_algorithm", "list_algorithms", "COLLECTIVES", "NETWORKS", "topology", "algorithms",
    "training", "plot", "nccl_tests", "lone_flows", "calibrate", "Calibration", "compare",
    "Comparison",
    "critical_path", "CriticalPath",
    "SimCollError", "TopologyError", "InvalidInputError", "UnknownCollectiveError",
    "UnknownAlgorithmError", "UnknownNetworkError", "DeadlockError", "UnmatchedMessageError",
    "AlgorithmError", "CommUsageError", "RunLimitError", "LinkFailureError",
    "RegistrationError", "Faults", "LinkFault",
    "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "Gbps", "ms", "us", "ns",
    "parse_size", "__version__",
]
