"""Sweep records: one JSON-ready dict per point, and what a sweep returns for them.

A record is a flat dict. Its first fields say what ran and identify the point::

    collective, algorithm, network, topology, nranks, nbytes, dtype, op, root, params,
    topology_hash, topology_factory, simcoll_version, error

``topology`` is the topology's name, ``topology_hash`` a digest of its full description
(devices, links, bandwidths, latencies; see :func:`topology_hash`), ``topology_factory``
the factory's importable ``module:qualname`` (``None`` for a lambda or a partial), ``op``
is ``None`` for collectives that do not reduce and ``root`` ``None`` for unrooted ones.
``error`` is ``None`` for a point that ran, else ``{"type": ..., "message": ...}``.

A point that ran also carries the fields of :meth:`Result.to_dict` (``time``, ``correct``,
``max_error``, ``bytes_sent``, ..., ``algbw``, ``busbw``), except that ``link_bytes`` is a
list of ``[from, to, bytes]`` over every directed link, idle ones included, and
``chosen``, the run's ``Result.params`` (the parameters asked for, with what the
algorithm chose for the others: NCCL's algorithm, protocol and channels), so that a
record decodes to a :class:`Result` equal to the one simulated. Records written before
``chosen`` existed decode with the parameters asked for, and those written before
``hosts`` (2026-12-07) with every endpoint past the GPUs taken as a server host.

The identity of a point (:func:`point_key`) is its collective, algorithm, network,
topology hash, nranks, nbytes, dtype, op, root and params: two runs that agree on these
simulate the same thing, whatever the factory was called and whichever simcoll version
ran them. Run limits (``until``, ``max_events``) are not part of it: a point that failed
on a limit is run again with a higher one through ``retry_failed=True``.
"""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from simcoll import optional
from simcoll.errors import InvalidInputError
from simcoll.result import Result
from simcoll.topology.io import topology_hash

if TYPE_CHECKING:
    import pandas  # type: ignore[import-untyped]

__all__ = ["FailedPoint", "SweepResults", "IDENTITY", "RUN_ROW", "point_key",
           "topology_hash", "result_fields", "decode"]

IDENTITY = ("collective", "algorithm", "network", "topology_hash", "nranks", "nbytes",
            "dtype", "op", "root", "params")

# The scalar fields of Result.to_dict, in its order: the columns of to_pandas (with root,
# the parameters as JSON text and the topology's hash, which tell points apart).
_SCALARS = ("collective", "algorithm", "network", "topology", "nranks", "nbytes", "dtype",
            "op", "root", "time", "correct", "max_error", "hosts", "messages", "algbw",
            "busbw")
_ARRAYS = ("bytes_sent", "bytes_received", "host_bytes_sent", "host_bytes_received")
_REQUIRED = (*IDENTITY, "topology", "error")
_RESULT = ("time", "correct", "max_error", *_ARRAYS, "link_bytes", "messages", "rank_times",
           "algbw", "busbw")
# Written since 2026-12-07; a record without it is read as having no in-network device.
_RESULT_SINCE = ("hosts",)
# The nccl-tests columns a line of `simcoll run --json` has and a sweep record has not.
RUN_ROW = ("time_us", "algbw_GBps", "busbw_GBps")
# Result fields that to_dict writes as null where not finite: to_pandas takes the Result's.
_FLOATS = ("max_error", "algbw", "busbw")


def _integer(v: Any, least: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= least


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _or_none(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or test(v)


def _list_of(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(test(x) for x in v)


def _link(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 3 and _integer(v[2]) \
        and all(isinstance(end, (str, int)) for end in v[:2])


# What each field of a record holds (a test, and what it says when the test fails).
_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{k: (_text, "a string") for k in ("collective", "algorithm", "network", "dtype",
                                        "simcoll_version")},
    **{k: (_or_none(_text), "a string or null") for k in ("topology", "op",
                                                           "topology_hash",
                                                           "topology_factory")},
    "nranks": (lambda v: _integer(v, 1), "an integer >= 1"),
    "nbytes": (_integer, "an integer >= 0"),
    "root": (_or_none(_integer), "an integer >= 0 or null"),
    **{k: (lambda v: isinstance(v, dict), "an object") for k in ("params", "chosen")},
    "error": (lambda v: v is None or (isinstance(v, dict) and _text(v.get("type"))
                                      and _text(v.get("message"))),
              'null or {"type": ..., "message": ...} (strings)'),
    "time": (_number, "a number"),
    "correct": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
    **{k: (_or_none(_number), "a number or null") for k in _FLOATS},
    **{k: (_list_of(_integer), "a list of integers >= 0") for k in _ARRAYS},
    "rank_times": (_list_of(_number), "a list of numbers"),
    "link_bytes": (_list_of(_link), "a list of [from, to, bytes]"),
    "messages": (_integer, "an integer >= 0"),
    "hosts": (_integer, "an integer >= 0"),
}


@dataclass(frozen=True)
class FailedPoint:
    """A sweep point whose simulation raised a :class:`~simcoll.SimCollError`.

    It stands in the results where the point's :class:`~simcoll.Result` would be, with
    the same identifying fields (``topology`` is ``None`` when the topology factory
    itself failed for that rank count).

    Attributes:
        error_type: the exception's class name, e.g. ``"InvalidInputError"``.
        error_message: its message.
    """

    collective: str
    algorithm: str
    network: str
    topology: str | None
    nranks: int
    nbytes: int
    dtype: str
    op: str | None
    root: int | None
    params: dict[str, Any]
    error_type: str
    error_message: str

    @property
    def error(self) -> str:
        """``"ErrorType: message"``."""
        return f"{self.error_type}: {self.error_message}"


class SweepResults(list["Result | FailedPoint"]):
    """The points of a sweep (in grid order; read back by :func:`load_results`, in the
    order they were saved, which is the order they finished): a :class:`Result` for each
    point that ran, a :class:`FailedPoint` for each that failed. A plain list in every
    other respect.

    Attributes:
        records: each point's record (see the module docstring), in the same order: what
            ``save=`` holds, and what ``simcoll sweep --output`` writes.
    """

    def __init__(self, items: Iterable[Result | FailedPoint] = (),
                 records: Iterable[dict[str, Any]] = ()):
        super().__init__(items)
        self.records: tuple[dict[str, Any], ...] = tuple(records)

    @property
    def ok(self) -> list[Result]:
        """The results of the points that ran (what ``plot_scaling`` takes)."""
        return [r for r in self if isinstance(r, Result)]

    @property
    def failed(self) -> list[FailedPoint]:
        """The points that failed."""
        return [r for r in self if isinstance(r, FailedPoint)]

    def to_pandas(self) -> pandas.DataFrame:
        """One row per point: every scalar field of ``Result.to_dict`` (``root`` None where
        the collective has none), ``params`` as JSON text (what the point asked for, as
        its record holds them), ``topology_hash`` (None for a failed point) and
        ``error``.

        ``error`` is None for a point that ran (NaN where pandas types the column as
        text, or reads the frame back: ``df.error.isna()`` tells both) and
        ``"ErrorType: message"`` for one that failed (its time, bandwidths and traffic
        are then missing). ``algbw``,
        ``busbw`` and ``max_error`` are the Result's (``algbw`` is ``inf`` for a
        zero-time run, as on one rank, where ``to_dict`` and the saved record write
        ``null``; ``busbw`` is 0 there where the collective's bus factor is (p - 1) / p
        or 2 (p - 1) / p, and ``inf`` for broadcast and reduce, whose factor is 1).

        Raises:
            ImportError: pandas is not installed (``pip install simcoll[pandas]``).
        """
        pd = optional.pandas("SweepResults.to_pandas")
        rows = []
        for item in self:
            asked = item.requested if isinstance(item, Result) and item.requested is not None \
                else item.params   # as the point's record holds them
            identity = {"params": json.dumps(asked, sort_keys=True),
                        "topology_hash": getattr(item, "topology_hash", None)}
            if isinstance(item, Result):
                summary = {**item.to_dict(), "root": item.root,
                           **{k: getattr(item, k) for k in _FLOATS}}
                rows.append({**{k: summary[k] for k in _SCALARS}, **identity, "error": None})
            else:
                rows.append({**{k: getattr(item, k, None) for k in _SCALARS}, **identity,
                             "error": item.error})
        return pd.DataFrame(rows, columns=[*_SCALARS, "params", "topology_hash", "error"])


def point_key(record: dict[str, Any]) -> tuple[Any, ...]:
    """The identity of the point a record (or a record head) describes (its dicts and
    lists, ``params`` or a hand-written file's ``[0]``, as JSON text: hashable)."""
    return tuple(json.dumps(record[k], sort_keys=True)
                 if isinstance(record[k], (dict, list)) else record[k] for k in IDENTITY)


def result_fields(result: Result) -> dict[str, Any]:
    """The record fields of a simulated point (see the module docstring)."""
    summary = result.to_dict()
    links = [[u, v, int(b)] for (u, v), b in result.link_bytes.items()]
    return {**{k: links if k == "link_bytes" else summary[k]
               for k in (*_RESULT, *_RESULT_SINCE)},
            "chosen": summary["params"]}


def check_record(record: Any, where: str) -> dict[str, Any]:
    """``record`` if it has the fields of a sweep record, else an error naming ``where``."""
    if not isinstance(record, dict):
        raise InvalidInputError(f"{where} is not a simcoll sweep record (a JSON object)")
    missing = [k for k in _REQUIRED if k not in record]
    error = record.get("error")
    if error is None:
        missing += [k for k in _RESULT if k not in record]
    elif not isinstance(error, dict) or not {"type", "message"} <= set(error):
        missing.append("error type and message")
    if missing:
        if all(k in record for k in RUN_ROW):
            raise InvalidInputError(
                f"{where} is a line of `simcoll run --json` (one size's nccl-tests columns "
                f"and its result), not a simcoll sweep record; load_results reads what "
                f"sweep(save=...) and `simcoll sweep --output` write (read run lines with "
                f"json.loads, one per line)")
        raise InvalidInputError(f"{where} is not a simcoll sweep record: it lacks {missing}")
    for key, (test, what) in _TYPES.items():
        if key in record and not test(record[key]):
            raise InvalidInputError(f"{where} is not a simcoll sweep record: its {key} is "
                                    f"{reprlib.repr(record[key])}, not {what}")
    if error is None:
        if record.get("hosts", 0) > len(record["host_bytes_sent"]):
            raise InvalidInputError(
                f"{where} is not a simcoll sweep record: its hosts={record['hosts']} is more "
                f"than host_bytes_sent's {len(record['host_bytes_sent'])} endpoint(s)")
        for key in ("bytes_sent", "bytes_received", "rank_times"):
            if len(record[key]) != record["nranks"]:
                raise InvalidInputError(
                    f"{where} is not a simcoll sweep record: its {key} has "
                    f"{len(record[key])} values for nranks={record['nranks']}")
    return record


def decode(record: dict[str, Any]) -> Result | FailedPoint:
    """The :class:`Result` (or :class:`FailedPoint`) that ``record`` describes."""
    error = record["error"]
    if error is not None:
        return FailedPoint(
            collective=record["collective"], algorithm=record["algorithm"],
            network=record["network"], topology=record["topology"],
            nranks=record["nranks"], nbytes=record["nbytes"], dtype=record["dtype"],
            op=record["op"], root=record["root"], params=dict(record["params"]),
            error_type=error["type"], error_message=error["message"])

    def rate(value: float | None) -> float:
        # Result.to_dict writes an infinite rate (a zero-time run) as null.
        return math.inf if value is None else value

    return Result(
        collective=record["collective"], algorithm=record["algorithm"],
        network=record["network"], topology=record["topology"], nranks=record["nranks"],
        nbytes=record["nbytes"], dtype=record["dtype"], op=record["op"],
        params=dict(record.get("chosen", record["params"])), time=record["time"],
        correct=record["correct"], requested=dict(record["params"]),
        outputs=None, bytes_sent=np.array(record["bytes_sent"], dtype=np.int64),
        bytes_received=np.array(record["bytes_received"], dtype=np.int64),
        host_bytes_sent=np.array(record["host_bytes_sent"], dtype=np.int64),
        host_bytes_received=np.array(record["host_bytes_received"], dtype=np.int64),
        hosts=record.get("hosts", len(record["host_bytes_sent"])),
        link_bytes={(u, v): b for u, v, b in record["link_bytes"]},
        messages=record["messages"],
        rank_times=np.array(record["rank_times"], dtype=np.float64),
        topology_hash=record.get("topology_hash"),
        algbw=rate(record["algbw"]), busbw=rate(record["busbw"]),
        max_error=record["max_error"], root=record["root"])
