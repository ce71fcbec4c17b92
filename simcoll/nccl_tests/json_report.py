"""nccl-tests' JSON report (``-J file``, nccl-tests 2.17.3 on), read into a run as its
printed table would be.

The keys follow ``src/util.cu`` of NVIDIA/nccl-tests 2.19.6 (``JSON_FILE_VERSION`` 3):
``args`` (the command line: the program is its first word), ``nccl_version`` (NCCL's
version code), ``config`` (``nthreads``, ``ngpus``, ``minimum_bytes``, ``maximum_bytes``,
``step_factor`` or ``step_bytes``, ``warmup_iters``, ``iterations``,
``aggregated_iterations``, ``validation``, ``graph`` ..., and ``devices``: ``rank``,
``group``, ``hostname``, ``device_info`` per rank), ``results`` (per size: ``size``,
``count``, ``type``, ``redop``, ``root`` as printed (``"%6i"``), ``out_of_place`` and
``in_place``, each ``time`` (or ``cpu_time`` with ``-C 1``) in microseconds, ``alg_bw``,
``bus_bw`` and ``nwrong`` (null without the check), or null), ``out_of_bounds.count`` and
``average_bus_bandwidth.bandwidth`` (``average_bus_bandwidith.bandwidith`` before
2.17.9, whose commit 85ca91d corrected the spelling). The numbers are the full ones, not
the table's
rounded digits. ``devices`` holds one entry per process, its first rank's (nccl-tests
gathers a line per process and reads its first rank from it): the process's T x G ranks
are taken to share its host and device name. A row's ``line`` is the line of its
``"size"`` key. ``simcoll run -J``'s report adds a ``simcoll`` object, whose
``collective`` and ``settings`` (what its table's first line says) are read too.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from simcoll.errors import InvalidInputError
from simcoll.nccl_tests.rows import Layout, algbw_fits, may_be_shortened
from simcoll.nccl_tests.scanning import Run, version_of
from simcoll.nccl_tests.tables import PROGRAMS, Measurement, NcclTestsRow

__all__ = ["looks_like_json", "read_json"]

_SETTINGS = {"nthreads": "nThread", "ngpus": "nGpus", "minimum_bytes": "minBytes",
             "maximum_bytes": "maxBytes", "warmup_iters": "warmup iters",
             "iterations": "iters", "aggregated_iterations": "agg iters",
             "validation": "validation", "graph": "graph"}
"""``config`` keys -> the names the printed settings line gives them."""


def looks_like_json(text: str) -> bool:
    """Whether ``text`` is a JSON document (its first character, past blanks, is ``{``)."""
    return text.lstrip("\ufeff \t\r\n").startswith("{")


def read_json(text: str) -> Run:
    """The run nccl-tests' JSON report ``text`` describes.

    Raises:
        InvalidInputError: text that is not JSON, a document without ``results`` or
            with no result in it (as a printed log without rows), a field of the wrong
            kind, or an ``alg_bw`` that is not size / time (to the 6 decimals nccl-tests
            writes), naming it.
    """
    text = text.lstrip("\ufeff")
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError) and exc.msg == "Extra data" \
                and _records(text[:exc.pos]):
            raise InvalidInputError(
                "the text holds JSON lines, one record per size (simcoll run --json's or "
                "simcoll sweep's), not nccl-tests' JSON report: write one with simcoll run "
                "-J FILE.json, or read a sweep's with simcoll.load_results") from None
        raise InvalidInputError(f"the text starts like nccl-tests' JSON report (-J) but is "
                                f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise InvalidInputError("a JSON document without a 'results' list: expected "
                                "nccl-tests' JSON report (-J file)")
    if not doc["results"]:
        errors = doc.get("errors")
        said = [e for e in errors if isinstance(e, str) and e] \
            if isinstance(errors, list) else []
        raise InvalidInputError(
            "no result rows found: the JSON report holds no results ('results' is empty: "
            "did the run stop before its first size?"
            + (f" its errors say {said[0]!r:.200}" if said else "")
            + "); expected nccl-tests' JSON report (-J file) with a result per size")
    run = Run(start=1)
    args, simcoll = doc.get("args"), doc.get("simcoll")
    if isinstance(args, list) and args and isinstance(args[0], str):
        stem = re.sub(r"_perf(?:_mpi)?$", "", os.path.basename(args[0]))
        run.program = stem if stem in PROGRAMS else None
    if isinstance(simcoll, dict):   # simcoll run -J's: what it simulated
        if isinstance(simcoll.get("collective"), str):
            run.program = simcoll["collective"]
        if isinstance(simcoll.get("settings"), str):
            run.simcoll_run = simcoll["settings"]
    code = doc.get("nccl_version")
    if isinstance(code, int) and not isinstance(code, bool) and code > 0:
        run.version = version_of(code)
    config = doc.get("config")
    if isinstance(config, dict):
        _read_config(run, config)
    # each result's line: where its "size" key is (nccl-tests' results hold the only ones)
    at = [m.start() for m in re.finditer(r'"size"\s*:', text)]
    lines = [text.count("\n", 0, pos) + 1 for pos in at] \
        if len(at) == len(doc["results"]) else None
    several = lines is not None and "\n" in text.strip()
    run.row_names = [f"results[{i}]" + (f" (line {lines[i]})" if several and lines else "")
                     for i in range(len(doc["results"]))]
    cputime = False
    for index, result in enumerate(doc["results"]):
        row, cpu = _row(result, index, index + 1 if lines is None else lines[index],
                        shortened=run.program in (None, "hypercube"))
        run.rows.append(row)
        cputime |= cpu
    run.layout = Layout(head=("size", "count", "type", "redop", "root"),
                        blocks=("out_of_place", "in_place"), cputime=cputime, titled=True)
    bounds = doc.get("out_of_bounds")
    if isinstance(bounds, dict) and isinstance(bounds.get("count"), int):
        run.out_of_bounds = bounds["count"]
    for key, field in (("average_bus_bandwidth", "bandwidth"),
                       ("average_bus_bandwidith", "bandwidith")):   # 2.17.3 to 2.17.8
        average = doc.get(key)
        if isinstance(average, dict) and isinstance(average.get(field), (int, float)):
            run.avg_busbw = float(average[field])
    run.finished = True
    return run


def _read_config(run: Run, config: dict[str, Any]) -> None:
    for key, name in _SETTINGS.items():
        value = config.get(key)
        if isinstance(value, (int, bool)):
            run.settings[name] = int(value)
    for key, kind in (("step_factor", "factor"), ("step_bytes", "bytes")):
        if isinstance(config.get(key), int):
            run.settings["step"], run.settings["step_kind"] = config[key], kind
    # one entry per process, its first rank's (util.cu's writeDeviceReport gathers a
    # line per process and parseRankInfo reads its first "#  Rank" of T x G)
    per = run.settings.get("nThread", 1) * run.settings.get("nGpus", 1)
    devices = config.get("devices")
    for device in devices if isinstance(devices, list) else ():
        if isinstance(device, dict) and isinstance(device.get("rank"), int):
            first = device["rank"]
            group = device.get("group", 0)
            if per > 1 and group:
                raise InvalidInputError(
                    f"the report lists a device per process of {per} ranks, and its "
                    f"communicators were split (NCCL_TESTS_SPLIT: group {group}), so the "
                    f"ranks of each cannot be told; read the printed log, whose '# Using "
                    f"devices' lists every rank")
            for rank in range(first, first + per):
                run.ranks[rank] = (str(device.get("hostname", "")),
                                   str(device.get("device_info", "")))
                if isinstance(group, int):
                    run.groups[rank] = group


def _records(text: str) -> bool:
    """Whether ``text`` is one JSON record of ``simcoll run --json`` or a sweep (an object
    with ``nranks``)."""
    try:
        first = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    return isinstance(first, dict) and "nranks" in first


_ROUNDING = 5e-7
"""Half a unit of the 6th decimal: nccl-tests writes a report's numbers with ``%lf``
(``jsonDouble`` in src/util.cu), so its time (us) and alg_bw (GB/s) are each within
this of the full ones (``simcoll run -J`` writes them to every digit)."""


def _row(result: Any, index: int, line: int, *,
         shortened: bool = True) -> tuple[NcclTestsRow, bool]:
    """results[index] as a row on ``line`` of the text, and whether its times are
    ``-C 1``'s CPU times. Each block's alg_bw is checked against size / time, to the
    rounding of the report's numbers (:data:`_ROUNDING`); with ``shortened`` (a report
    of hypercube, or of a program it does not name), as short as old nccl-tests
    printed all_gather's (:func:`~simcoll.nccl_tests.rows.algbw_fits`)."""
    where = f"results[{index}]"
    if not isinstance(result, dict):
        raise InvalidInputError(f"{where} is not an object: {result!r:.60}")
    size, count = _whole(result, "size", where), _whole(result, "count", where)
    kind, redop = result.get("type"), result.get("redop")
    if not isinstance(kind, str) or not isinstance(redop, str):
        raise InvalidInputError(f"{where}: expected 'type' and 'redop' strings, found "
                                f"{kind!r:.30} and {redop!r:.30}")
    root_text = result.get("root")
    try:
        root = int(str(root_text).strip())
    except ValueError:
        raise InvalidInputError(f"{where}.root: expected a rank (as printed, e.g. '    -1'), "
                                f"found {root_text!r:.30}") from None
    blocks: list[Measurement | None] = []
    cputime = False
    for place in ("out_of_place", "in_place"):
        block = result.get(place)
        if block is None:
            blocks.append(None)
            continue
        if not isinstance(block, dict):
            raise InvalidInputError(f"{where}.{place} is not an object or null")
        cpu = "cpu_time" in block and "time" not in block
        cputime |= cpu
        measurement = Measurement(
            _number(block, "cpu_time" if cpu else "time", f"{where}.{place}"),
            _bandwidth(block, "alg_bw", f"{where}.{place}"),
            _bandwidth(block, "bus_bw", f"{where}.{place}"),
            None if block.get("nwrong") is None
            else _number(block, "nwrong", f"{where}.{place}"))
        if not cpu:   # -C 1's CPU time is not what alg_bw comes from
            _check_algbw(measurement, size, shortened and may_be_shortened(
                size, count, kind, redop or None), f"{where}.{place}")
        blocks.append(measurement)
    return NcclTestsRow(size, count, kind, redop or None, root, blocks[0], blocks[1],
                        line), cputime


def _check_algbw(block: Measurement, size: int, shortened: bool, where: str) -> None:
    if algbw_fits(size, block.time_us, _ROUNDING, block.algbw, _ROUNDING, shortened):
        return
    implied = size / block.time_us / 1e3 if block.time_us else math.inf
    raise InvalidInputError(
        f"{where}.alg_bw: {block.algbw:.6g} GB/s is not size / time = {size} B / "
        f"{block.time_us:.6g} us = {implied:.4g} GB/s, to the 6 decimals nccl-tests writes "
        f"(a corrupted or hand-edited report?); fix or drop {where.partition('.')[0]}")


def _whole(entry: dict[str, Any], key: str, where: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{where}.{key}: expected a whole number >= 0, found "
                                f"{value!r:.30}")
    return value


def _number(entry: dict[str, Any], key: str, where: str, *, finite: bool = True) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or value < 0 or (finite and math.isinf(value)):
        raise InvalidInputError(f"{where}.{key}: expected a{' finite' if finite else ''} "
                                f"number >= 0, found {value!r:.30}")
    return float(value)


def _bandwidth(entry: dict[str, Any], key: str, where: str) -> float:
    """A bandwidth; null (``simcoll run -J``'s for a size simulated in no time) is
    infinite."""
    return math.inf if entry.get(key, 0) is None else _number(entry, key, where, finite=False)
