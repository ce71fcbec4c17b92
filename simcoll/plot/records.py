"""Scaling-plot input: ``Result`` objects or their ``to_dict()`` form, read alike."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Union

import numpy as np

from simcoll.collectives import collective
from simcoll.errors import InvalidInputError
from simcoll.result import Result
from simcoll.sweep.records import FailedPoint, SweepResults
from simcoll.uneven import check_splits, whole_number

Record = Union[Result, FailedPoint, Mapping[str, Any]]  # noqa: UP007 (a runtime alias on 3.10)
"""What the plots read: a Result, a sweep's failed point, or a record as a dict
(``Result.to_dict()``, a saved sweep's line)."""

__all__ = ["Point", "Failure", "Record", "read_points", "read_all", "topology_templates",
           "from_mapping", "is_failed_record"]

_REQUIRED = ("collective", "algorithm", "nranks", "nbytes")


@dataclass(frozen=True)
class Point:
    """One simulated point: what ran, and its time and bandwidths (``None`` if unknown)."""

    collective: str
    algorithm: str
    topology: str
    network: str
    dtype: str
    nranks: int
    nbytes: int
    hosts: int
    time: float | None
    algbw: float | None
    busbw: float | None
    params: dict[str, Any] = field(default_factory=dict)
    """The parameters asked for (``Result.requested`` where known): one line each."""
    machine: str | None = None
    """What tells machines of one name apart, where a record says: ``topology_hash=...``
    (a Result's, its ``to_dict()``'s, a sweep's and the command line's), else
    ``spec=...`` (the command line's before it wrote the hash), else None."""
    from_result: bool = False
    """Read from a ``Result`` object: two of one line at one x that took different times
    differ in something their fields do not show (an algorithm registered again), and
    are not a rerun."""
    spec: str | None = None
    """The topology spec a record gives (the command line's), to name its machine."""
    settings: str = ""
    """A root other than 0 and an op other than a sum, as ``root=5, op=max``: points that
    differ in them are different lines."""
    faults: str = ""
    """The run's faults in words (``faults: late rank 0 +5e-05 s``), ``""`` for a healthy
    machine: points that differ in them are different lines."""
    bytes_sent: int | None = None
    """The most bytes one GPU rank or server host sent (``bytes_sent``, the server hosts'
    ``host_bytes_sent``; not an in-network device's, which no cost model counts), where the
    record lists them."""
    splits: Any = None
    """A v-collective's sizes in elements (``Result.splits``: p counts, or all_to_allv's
    p x p), where the record gives them: what its cost model takes."""

    def value(self, name: str) -> float | None:
        """``nranks``, ``nbytes``, ``time``, ``algbw``, ``busbw`` or ``bytes_sent``."""
        v = getattr(self, name)
        return None if v is None else float(v)


def _number(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _machine(r: Mapping[str, Any]) -> str | None:
    """``topology_hash=...`` (a digest of the whole machine, which ``Result.to_dict()``,
    sweeps and the command line write), else ``spec=...`` (the command line's older
    records), or None."""
    for key in ("topology_hash", "spec"):
        if not _none(r.get(key)):
            return f"{key}={r[key]}"
    return None


def _settings(root: Any, op: Any) -> str:
    """``root=5, op=max`` for a root other than 0 and an op other than a sum; ``""``
    for those (and where a collective has neither: null, or nccl-tests' root -1 in
    ``simcoll run`` records written before 2026-12-05)."""
    if isinstance(root, float) and root.is_integer():   # pandas' float column of roots
        root = int(root)
    parts = [f"root={root}"] if isinstance(root, int) and root > 0 else []
    if not _none(op) and op != "SUM":
        parts.append(f"op={str(op).lower()}")
    return ", ".join(parts)


def _faults_text(faults: Any) -> str:
    """A run's faults as ``Result.faults`` holds them, in words a legend can show and
    exact enough to tell runs apart (``faults: late rank 0 +5e-05 s, slow rank 1 x2.0``);
    ``""`` for none."""
    if not isinstance(faults, Mapping) or not faults:
        return ""
    words = []
    for change in faults.get("links") or ():
        link = "<->".join(str(end) for end in change.get("link", ()))   # either way round
        factor = change.get("factor")
        words.append(f"link {link} {'failed' if factor == 0 else f'x{factor}'} at "
                     f"{change.get('at')} s")
    for kind, how in (("slow", "x"), ("late", "+")):
        for rank, value in (faults.get(kind) or {}).items():
            words.append(f"{kind} rank {rank} {how}{value}{' s' if kind == 'late' else ''}")
    if faults.get("jitter"):
        words.append(f"jitter {faults['jitter']} (seed {faults.get('seed')})")
    return "faults: " + ", ".join(words)


def _most_sent(*lists: Any) -> int | None:
    """The largest count of the lists (a record's ``bytes_sent`` and its server hosts'
    ``host_bytes_sent``), or None where no list of whole numbers is given."""
    counts = [v for values in lists if isinstance(values, (list, tuple)) for v in values]
    if not counts or not all(isinstance(v, int) and not isinstance(v, bool) for v in counts):
        return None
    return max(counts)


def _none(value: Any) -> bool:
    """None, or NaN: pandas' null."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_failed_record(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a failed sweep point: its ``error`` is a sweep record's
    ``{"type": ..., "message": ...}`` or ``to_pandas``' ``"Type: message"`` text (null,
    NaN, as pandas reads null, and an empty text: it ran)."""
    error = record.get("error")
    return (isinstance(error, str) and error != "") or (
        isinstance(error, Mapping) and isinstance(error.get("type"), str))


def _params(where: str, r: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters asked for: ``requested`` where a record has it, else ``params``;
    an object, or the JSON text of one (``SweepResults.to_pandas`` writes them so)."""
    key = "params" if _none(r.get("requested")) else "requested"
    value = r.get(key)
    if _none(value):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where} has {key}={r.get(key)!r:.60}; expected an object "
                                f"of parameters (or its JSON text), as Result.to_dict() "
                                f"writes it")
    return dict(value)


def _counts(where: str, r: Mapping[str, Any], key: str) -> list[Any]:
    """A record's per-endpoint byte counts, a list (none where it has none; what they
    hold is :func:`_most_sent`'s to judge)."""
    value = r.get(key)
    if _none(value):
        return []
    if not isinstance(value, (list, tuple)):
        raise InvalidInputError(f"{where} has {key}={value!r:.60}; expected a list of "
                                f"bytes per endpoint, as Result.to_dict() writes it")
    return list(value)


def from_mapping(where: str, r: Mapping[str, Any]) -> Point:
    """The point a record of a run gives (``where`` names it in errors: ``record 3``).

    Raises:
        InvalidInputError: a field missing or of the wrong type, named with ``where``.
    """
    for key in _REQUIRED:
        if key not in r:
            raise InvalidInputError(
                f"{where} has no {key!r} field; records are Result objects or dicts as "
                f"Result.to_dict() writes them (a sweep file's lines)")
    nranks, nbytes = (int(v) if isinstance(v, np.integer) else v
                      for v in (r["nranks"], r["nbytes"]))
    if (isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1
            or isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0):
        raise InvalidInputError(f"{where} has nranks={nranks!r}, nbytes={nbytes!r}; "
                                f"expected integers >= 1 and >= 0")
    for key in ("time", "algbw", "busbw"):
        value = r.get(key)
        # None where a run has no such figure (one rank's algbw; NaN once pandas read
        # it); anything else but a number >= 0 is a damaged record, not a point with
        # nothing to draw
        if value is not None and (isinstance(value, bool) or not isinstance(value, Real)
                                  or float(value) < 0):
            raise InvalidInputError(f"{where} has {key}={value!r}; expected a number >= 0 "
                                    f"(seconds, bytes/s), or null or NaN for none, as "
                                    f"Result.to_dict() writes it")
    endpoints = _counts(where, r, "host_bytes_sent")
    hosts = _server_hosts(where, r.get("hosts"),
                          len(endpoints) if "host_bytes_sent" in r else None)
    return Point(str(r["collective"]), str(r["algorithm"]), str(r.get("topology", "?")),
                 str(r.get("network", "flow")), str(r.get("dtype", "?")), nranks, nbytes,
                 hosts, _number(r.get("time")),
                 _number(r.get("algbw")), _number(r.get("busbw")), _params(where, r),
                 _machine(r), spec=None if _none(r.get("spec")) else str(r["spec"]),
                 settings=_settings(r.get("root"), r.get("op")),
                 faults=_faults_text(r.get("faults")),
                 bytes_sent=_most_sent(_counts(where, r, "bytes_sent"), endpoints[:hosts]),
                 splits=_splits(where, r.get("splits"), str(r["collective"]), nranks))


def _server_hosts(where: str, hosts: Any, endpoints: int | None) -> int:
    """A record's count of server hosts (``Result.hosts``); where it has none (written
    before 2026-12-07), all ``endpoints`` past its GPUs (``None`` where the record lists
    none: a ``to_pandas`` row, whose hosts may then be any count).

    Raises:
        InvalidInputError: not a whole number in 0..endpoints, naming ``where``.
    """
    if _none(hosts):
        return endpoints or 0
    count = whole_number(hosts)   # pandas' float column and numpy's integers too
    if count is None or (endpoints is not None and count > endpoints):
        bound = f"in 0..{endpoints} (the endpoints of its host_bytes_sent)" \
            if endpoints is not None else ">= 0"
        raise InvalidInputError(f"{where} has hosts={hosts!r:.60}; expected an integer "
                                f"{bound}, as Result.to_dict() writes it")
    return count


def _splits(where: str, splits: Any, name: str, p: int) -> Any:
    """A record's ``splits`` (the v-collective ``name``'s sizes in elements: p counts, or
    p lists of p) as :func:`~simcoll.uneven.check_splits` reads them, or None where it
    has none.

    Raises:
        InvalidInputError: anything else, naming the record.
    """
    if splits is None:
        return None
    try:
        return check_splits(collective(name), splits, p)
    except InvalidInputError:
        raise InvalidInputError(f"{where} has splits={splits!r:.60}; expected {p} element "
                                f"counts (all_to_allv: {p} lists of {p}), as "
                                f"Result.to_dict() writes them") from None


@dataclass(frozen=True)
class Failure:
    """A sweep point that failed (a ``FailedPoint``, or a record with an ``error``)."""

    collective: str
    algorithm: str
    nranks: Any
    nbytes: Any
    error_type: str
    topology: str | None = None
    """The machine's name, where the failure says (None where its factory failed)."""
    network: str | None = None
    dtype: str | None = None
    params: dict[str, Any] | None = None
    """The parameters asked for, where the failure says."""

    def of_line(self, point: Point, params: str) -> bool:
        """Whether this failure is of the line that ``point`` is on (its parameters
        written as ``params``): the same collective, algorithm, network, element type
        and parameters, on a machine of the same family of names (``switch(3)`` among
        ``switch(2)``, ``switch(4)``), where the failure says them."""
        return ((self.collective, self.algorithm) == (point.collective, point.algorithm)
                and self.network in (None, point.network)
                and self.dtype in (None, point.dtype)
                and (self.params is None or params_text(self.params) == params)
                and (self.topology is None
                     or _family(self.topology) == _family(point.topology)))


def _family(topology: str) -> tuple[str, ...]:
    """A topology name without its numbers: ``switch(3)`` and ``switch(8)`` are one."""
    return tuple(re.split(r"(\d+)", topology)[0::2])


def params_text(params: dict[str, Any]) -> str:
    """Parameters as a line's key writes them."""
    return ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))


def _error_type(error: Any) -> str:
    if isinstance(error, Mapping):
        return str(error.get("type") or "error")
    return str(error).split(":", 1)[0] or "error"


def read_points(records: Iterable[Record]) -> list[Point]:
    """Every record as a :class:`Point`; failed sweep points (a ``FailedPoint``, or a
    dict marked with an ``error``) are left out (:func:`read_all` returns them too).

    A sweep's results (``sc.sweep``'s or ``sc.load_results``' :class:`SweepResults`)
    are read from their records, which tell machines of one name apart.

    Raises:
        InvalidInputError: ``records`` is a path or text, or not a collection of them; a
            record is neither a Result nor a mapping, lacks a field, or has a time,
            algbw or busbw that is not a number >= 0 (None or NaN: none).
    """
    return read_all(records)[0]


def read_all(records: Iterable[Record]
             ) -> tuple[list[Point], list[Failure]]:
    """``(points, failures)``: the records that ran as :class:`Point` objects, and the
    failed sweep points as :class:`Failure` objects, so a plot can say what it lacks.

    Raises:
        InvalidInputError: ``records`` is a path or text, or not a collection of them; a
            record is neither a Result nor a mapping, lacks a field, or has a time,
            algbw or busbw that is not a number >= 0 (None or NaN: none).
    """
    if isinstance(records, (str, bytes, os.PathLike)):
        raise InvalidInputError(f"records={records!r} is not accepted: give Result objects "
                                f"or dicts; read a file of them with "
                                f"simcoll.load_results(path)")
    if isinstance(records, (Result, Mapping)):
        records = [records]
    elif not isinstance(records, Iterable):
        raise InvalidInputError(f"records={records!r} is not accepted: give Result objects "
                                f"or dicts from Result.to_dict() (a list, or a sweep's "
                                f"results)")
    elif isinstance(records, SweepResults) and len(records.records) == len(records):
        records = records.records
    points: list[Point] = []
    failures: list[Failure] = []
    for i, r in enumerate(records):
        if isinstance(r, Result):
            points.append(Point(r.collective, r.algorithm, r.topology, r.network, r.dtype,
                                r.nranks, r.nbytes, r.hosts, _number(r.time),
                                _number(r.algbw), _number(r.busbw),
                                dict(r.params if r.requested is None else r.requested),
                                machine=None if r.topology_hash is None
                                else f"topology_hash={r.topology_hash}",
                                from_result=True,
                                settings=_settings(r.root, r.op),
                                faults=_faults_text(r.faults),
                                bytes_sent=_most_sent(r.bytes_sent.tolist(),
                                                      r.host_bytes_sent[:r.hosts].tolist()),
                                splits=r.splits))
        elif isinstance(r, Mapping):
            if is_failed_record(r):
                said = {k: None if _none(r.get(k)) else str(r[k])
                        for k in ("topology", "network", "dtype")}
                failures.append(Failure(
                    str(r.get("collective", "?")), str(r.get("algorithm", "?")),
                    r.get("nranks"), r.get("nbytes"), _error_type(r["error"]), **said,
                    params=_params(f"record {i}", r) if "params" in r or "requested" in r
                    else None))
            else:
                points.append(from_mapping(f"record {i}", r))
        elif isinstance(r, FailedPoint):
            failures.append(Failure(r.collective, r.algorithm, r.nranks, r.nbytes,
                                    r.error_type, r.topology, r.network, r.dtype,
                                    dict(r.params)))
        else:
            raise InvalidInputError(f"record {i} is a {type(r).__name__}; records are "
                                    f"Result objects or dicts from Result.to_dict()")
    return points, failures


def _listed(numbers: list[int]) -> str:
    """``{1,2,4}``, or ``{1,...,64}`` for more than four numbers."""
    values = sorted(set(numbers))
    if len(values) > 4:
        return f"{{{values[0]},...,{values[-1]}}}"
    return "{" + ",".join(str(v) for v in values) + "}"


def topology_templates(points: list[Point]) -> list[str]:
    """Each point's topology name with the numbers that change across the records made
    into placeholders: ``p`` where the number is the rank count, else the list of the
    numbers the name takes.

    So ``switch(2)``, ``switch(4)``, ... all read ``switch(p)``, and ``dgx_a100x1``,
    ``dgx_a100x2`` read ``dgx_a100x{1,2}``; a name that never changes stays as it is.
    """
    parts = [re.split(r"(\d+)", p.topology) for p in points]   # _family's split
    families: dict[tuple[str, ...], list[int]] = {}
    for i, tokens in enumerate(parts):
        families.setdefault(tuple(tokens[0::2]), []).append(i)
    names = [p.topology for p in points]
    for members in families.values():
        numbers = [parts[i][1::2] for i in members]
        for position in range(len(numbers[0])):
            if len({n[position] for n in numbers}) == 1:
                continue
            is_p = all(int(parts[i][2 * position + 1]) == points[i].nranks for i in members)
            text = "p" if is_p else _listed([int(n[position]) for n in numbers])
            for i in members:
                parts[i][2 * position + 1] = text
        for i in members:
            names[i] = "".join(parts[i])
    return names
