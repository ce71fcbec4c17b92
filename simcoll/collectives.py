"""What each collective computes: its numpy reference, its buffer sizes and busbw factor.

Inputs and outputs follow torch.distributed, with ``np.array_split`` sizing wherever a
buffer is cut into p blocks that do not divide evenly:

* ``all_reduce``: x -> op over every rank's x.
* ``reduce_scatter``: x -> block ``rank`` of the op over every rank's x.
* ``all_gather``: x -> every rank's x, concatenated in rank order.
* ``broadcast(root)``: x -> root's x.
* ``reduce(root)``: x -> on root, the op over every rank's x (other ranks' outputs unchecked).
* ``all_to_all``: x cut into p blocks -> block ``rank`` of every rank's x, concatenated.
* ``gather(root)``: x -> on root, every rank's x concatenated (others unchecked).
* ``scatter(root)``: root's x cut into p blocks -> block ``rank``.
* ``barrier``: no data.

The v-collectives take sizes that differ between ranks (MPI's ``MPI_Allgatherv``,
``MPI_Reduce_scatter``, ``MPI_Alltoallv``; torch's ``all_to_all_single`` with split
sizes), given as ``splits`` in elements:

* ``all_gatherv``: rank r contributes c_r elements (``splits = (c_0, ..., c_{p-1})``) ->
  every rank's x concatenated in rank order.
* ``reduce_scatterv``: every rank's x has n = sum c_r elements -> rank r gets block r of
  the op over every rank's x, blocks of c_0, ..., c_{p-1} elements.
* ``all_to_allv``: a p x p matrix S, S[i][j] the elements rank i sends rank j; rank i's
  x is its blocks for j = 0..p-1 concatenated (sum_j S[i][j] elements) -> blocks from
  i = 0..p-1 concatenated (sum_i S[i][j] elements); torch's input and output split sizes
  are the rows and the columns of S.

torch.distributed's flat-tensor names ``all_gather_into_tensor``, ``reduce_scatter_tensor``
and ``all_to_all_single`` name all_gather, reduce_scatter and all_to_all (:data:`ALIASES`),
and its ``src=`` / ``dst=`` name the root (:func:`root_argument`).

algbw and busbw follow nccl-tests' PERFORMANCE.md: algbw = S / time with S the per-rank
buffer (``nbytes``) except for all_gather and gather, whose S is ``p * nbytes``; busbw =
algbw * factor(p). nccl-tests has no v-collectives; simcoll takes for S what reduces to
the even collective's S when every block is equal: all_gatherv the output (sum c_r),
reduce_scatterv the input (sum c_r), all_to_allv the mean input (sum of S over p), each
times the itemsize, with the even collective's factor (p-1)/p.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Union

import numpy as np

from simcoll.buffers import VirtualBuffer, block_size
from simcoll.dtypes import is_float
from simcoll.errors import AlgorithmError, InvalidInputError, UnknownCollectiveError
from simcoll.ops import ReduceOp

__all__ = ["Collective", "Shape", "Splits", "COLLECTIVES", "ALIASES", "ROOT_NAMES",
           "collective", "root_argument", "check_output"]

Arrays = Sequence[np.ndarray]
Outputs = list[np.ndarray | None]
Splits = Union[tuple[int, ...], tuple[tuple[int, ...], ...]]  # noqa: UP007 (runtime alias on 3.10)
"""A v-collective's sizes in elements: p counts, or a p x p matrix (tuple of rows)."""


@dataclass(frozen=True)
class Shape:
    """How a v-collective's sizes shape its buffers (all counts in elements).

    Attributes:
        matrix: ``splits`` is a p x p matrix (all_to_allv), else p counts.
        reference: ``reference(inputs, op, splits)``, every rank's output.
        inputs, outputs: each rank's input and output element counts for ``splits``.
        algbw_count: the elements S of algbw = S itemsize / time (module docstring).
    """

    matrix: bool
    reference: Callable[[Arrays, ReduceOp, Splits], Outputs]
    inputs: Callable[[Splits], list[int]]
    outputs: Callable[[Splits], list[int]]
    algbw_count: Callable[[Splits], float]


@dataclass(frozen=True)
class Collective:
    """A collective's contract. ``reference(inputs, op, root)`` gives every rank's output
    (``None`` where unchecked); ``out_count(p, count, rank, root)`` its element count."""

    name: str
    reduces: bool
    rooted: bool
    reference: Callable[[Arrays, ReduceOp, int], Outputs]
    out_count: Callable[[int, int, int, int], int | None]
    size_factor: Callable[[int], int]
    busbw_factor: Callable[[int], float]
    uneven: Shape | None = None

    def shaped(self, splits: Splits) -> Collective:
        """This v-collective for one run's ``splits``: its ``reference`` and
        ``out_count`` are bound to them (what the check of a run compares with)."""
        shape = self.uneven
        if shape is None:
            raise InvalidInputError(f"{self.name} takes no splits")
        counts = shape.outputs(splits)

        def reference(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
            assert shape is not None
            return shape.reference(inputs, op, splits)

        return replace(self, reference=reference,
                       out_count=lambda p, n, rank, root: counts[rank])


def _combine(inputs: Arrays, op: ReduceOp) -> np.ndarray:
    """The op over all inputs, in float64 for floats (bfloat16 and fp8 too; the dtype
    itself for wider ones), in the dtype (modular) for integers; AVG divides the sum once,
    integers toward zero, and where a float sum overflowed (float64 inputs near the
    largest number: 1e308 + 1e308) sums the inputs each divided first, so a mean that is
    finite stays so."""
    first = inputs[0]
    floating = is_float(first.dtype)
    wide = np.result_type(first.dtype, np.float64) if floating else first.dtype
    acc = first.astype(wide, copy=True)
    for i in range(1, len(inputs)):
        op.ufunc(acc, inputs[i].astype(wide, copy=False), out=acc)
    if op is not ReduceOp.AVG:
        return acc
    p = len(inputs)
    if floating:
        mean = acc / p
        if not np.isfinite(mean).all():
            scaled = inputs[0].astype(wide) / p
            for i in range(1, p):
                scaled += inputs[i].astype(wide) / p
            mean = np.where(np.isfinite(mean), mean, scaled)
        return mean
    # Written apart from ReduceOp.finish (the output path) so that the check does not
    # compare that code with itself: floor division, then one step back toward zero where
    # a negative sum did not divide evenly.
    total = acc.astype(np.uint64 if acc.dtype.kind == "u" else np.int64)
    floor = total // total.dtype.type(p)
    inexact = (floor * total.dtype.type(p) != total) & (total < 0)
    return (floor + inexact.astype(total.dtype)).astype(acc.dtype)


# The references cut buffers with numpy itself, not with simcoll.buffers (which the
# algorithms use), so that the check never compares that code with itself.


def _all_reduce(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    out = _combine(inputs, op)
    return [out] * len(inputs)


def _reduce_scatter(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    return [*np.array_split(_combine(inputs, op), len(inputs))]


def _all_gather(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    out = np.concatenate(inputs)
    return [out] * len(inputs)


def _broadcast(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    return [inputs[root]] * len(inputs)


def _reduce(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    out: list[np.ndarray | None] = [None] * len(inputs)
    out[root] = _combine(inputs, op)
    return out


def _all_to_all(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    p = len(inputs)
    blocks = [np.array_split(x, p) for x in inputs]
    return [np.concatenate([blocks[j][r] for j in range(p)]) for r in range(p)]


def _gather(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    out: list[np.ndarray | None] = [None] * len(inputs)
    out[root] = np.concatenate(inputs)
    return out


def _scatter(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    return [*np.array_split(inputs[root], len(inputs))]


def _barrier(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    return [None] * len(inputs)


def _fraction(p: int) -> float:
    return (p - 1) / p


def _cut(x: np.ndarray, counts: Sequence[int]) -> list[np.ndarray]:
    """x cut into consecutive blocks of ``counts`` elements, by numpy."""
    return np.split(x, np.cumsum(counts, dtype=np.int64)[:-1])


def _all_gatherv(inputs: Arrays, op: ReduceOp, splits: Splits) -> Outputs:
    out = np.concatenate(list(inputs))
    return [out] * len(inputs)


def _reduce_scatterv(inputs: Arrays, op: ReduceOp, splits: Splits) -> Outputs:
    return [*_cut(_combine(inputs, op), splits)]  # type: ignore[arg-type]


def _all_to_allv(inputs: Arrays, op: ReduceOp, splits: Splits) -> Outputs:
    p = len(inputs)
    blocks = [_cut(inputs[i], splits[i]) for i in range(p)]  # type: ignore[arg-type]
    return [np.concatenate([blocks[i][j] for i in range(p)]) for j in range(p)]


def _unshaped(name: str) -> InvalidInputError:
    return InvalidInputError(f"{name}'s reference and sizes need its splits: use "
                             f"collective({name!r}).shaped(splits)")


def _unshaped_reference(inputs: Arrays, op: ReduceOp, root: int) -> Outputs:
    raise _unshaped("a v-collective")


def _unshaped_count(p: int, count: int, rank: int, root: int) -> int | None:
    raise _unshaped("a v-collective")


def _vector(splits: Splits) -> list[int]:
    return [int(c) for c in splits]  # type: ignore[arg-type]


def _row_sums(splits: Splits) -> list[int]:
    return [sum(row) for row in splits]  # type: ignore[arg-type]


def _column_sums(splits: Splits) -> list[int]:
    return [int(c) for c in np.sum(np.array(splits, dtype=np.int64).reshape(len(splits), -1),
                                   axis=0)]


def _total(splits: Splits) -> list[int]:
    return [sum(_vector(splits))] * len(splits)


_ALL_GATHERV = Shape(False, _all_gatherv, _vector, _total, lambda s: sum(_vector(s)))
_REDUCE_SCATTERV = Shape(False, _reduce_scatterv, _total, _vector, lambda s: sum(_vector(s)))
_ALL_TO_ALLV = Shape(True, _all_to_allv, _row_sums, _column_sums,
                     lambda s: sum(_row_sums(s)) / len(s))


COLLECTIVES: dict[str, Collective] = {c.name: c for c in [
    Collective("all_reduce", True, False, _all_reduce, lambda p, n, r, root: n,
               lambda p: 1, lambda p: 2 * (p - 1) / p),
    Collective("reduce_scatter", True, False, _reduce_scatter,
               lambda p, n, r, root: block_size(n, p, r), lambda p: 1, _fraction),
    Collective("all_gather", False, False, _all_gather, lambda p, n, r, root: p * n,
               lambda p: p, _fraction),
    Collective("broadcast", False, True, _broadcast, lambda p, n, r, root: n,
               lambda p: 1, lambda p: 1.0),
    Collective("reduce", True, True, _reduce,
               lambda p, n, r, root: n if r == root else None, lambda p: 1, lambda p: 1.0),
    Collective("all_to_all", False, False, _all_to_all,
               lambda p, n, r, root: p * block_size(n, p, r), lambda p: 1, _fraction),
    Collective("gather", False, True, _gather,
               lambda p, n, r, root: p * n if r == root else None, lambda p: p, _fraction),
    Collective("scatter", False, True, _scatter,
               lambda p, n, r, root: block_size(n, p, r), lambda p: 1, _fraction),
    Collective("barrier", False, False, _barrier, lambda p, n, r, root: None,
               lambda p: 1, lambda p: 1.0),
    Collective("all_gatherv", False, False, _unshaped_reference, _unshaped_count, lambda p: 1,
               _fraction, _ALL_GATHERV),
    Collective("reduce_scatterv", True, False, _unshaped_reference, _unshaped_count, lambda p: 1,
               _fraction, _REDUCE_SCATTERV),
    Collective("all_to_allv", False, False, _unshaped_reference, _unshaped_count, lambda p: 1,
               _fraction, _ALL_TO_ALLV),
]}


ALIASES: dict[str, str] = {"all_gather_into_tensor": "all_gather",
                           "reduce_scatter_tensor": "reduce_scatter",
                           "all_to_all_single": "all_to_all"}
"""torch.distributed's names for the flat-tensor forms, accepted for the collective they
name; results and records carry the canonical name (the value)."""

ROOT_NAMES: dict[str, str] = {"broadcast": "src", "scatter": "src", "reduce": "dst",
                              "gather": "dst"}
"""torch.distributed's name for each rooted collective's root: the rank data comes from
(``src``) or goes to (``dst``)."""


def suggestion(name: Any, known: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` where ``name`` is close to one of ``known`` (case, ``-``
    for ``_`` and small slips aside: ``allreduce``, ``All-Reduce``, ``rng``), else ""."""
    if not isinstance(name, str) or not name.strip():
        return ""
    plain = name.strip().lower().replace("-", "_").replace(" ", "_")
    # 0.85: a slip of a letter or two (rng, allreduce), not another word (recv, dbtree)
    close = [plain] if plain in known else difflib.get_close_matches(plain, known, n=1,
                                                                      cutoff=0.85)
    return f" (did you mean {close[0]!r}?)" if close and close[0] != name else ""


def collective(name: str) -> Collective:
    """The collective called ``name``, or named by one of torch's :data:`ALIASES`.

    Raises:
        UnknownCollectiveError: listing the known collectives and aliases, and the
            closest where one is close.
    """
    try:
        return COLLECTIVES[ALIASES.get(name, name)]
    except (KeyError, TypeError):
        raise UnknownCollectiveError(
            f"unknown collective {name!r}{suggestion(name, [*COLLECTIVES, *ALIASES])}; "
            f"known collectives: {', '.join(COLLECTIVES)} (and torch's {', '.join(ALIASES)})"
        ) from None


def root_argument(coll: Collective, root: Any, src: Any = None, dst: Any = None) -> Any:
    """The root a caller gave, as ``root=`` or under torch's name (``src=`` for broadcast
    and scatter, ``dst=`` for reduce and gather); None if none was given. The value is
    checked as a rank by the caller.

    Raises:
        InvalidInputError: ``src=`` or ``dst=`` where torch does not use that name (a
            collective without a root, or the other one of the two), or a root given twice.
    """
    given = {k: v for k, v in (("root", root), ("src", src), ("dst", dst)) if v is not None}
    torch_name = ROOT_NAMES.get(coll.name)
    for name in ("src", "dst"):
        if name in given and name != torch_name:
            accepted = (f"{coll.name} takes root= or {torch_name}=" if torch_name else
                        f"{coll.name} has no root")
            raise InvalidInputError(f"{name}={given[name]!r} is not accepted: {accepted}")
    if len(given) > 1:
        both = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise InvalidInputError(f"the root is given twice ({both}); pass root= or "
                                f"{torch_name}=, not both")
    return next(iter(given.values()), None)


def check_output(value: Any, expected: int | None, dtype: np.dtype, who: str, *,
                 data: bool = False) -> None:
    """Refuse what ``who`` (a rank of an algorithm) returned where it is not its output: a
    buffer (an array in data mode, a ``VirtualBuffer`` without data) of ``expected``
    elements of ``dtype`` (``None``: an output the collective leaves undefined, such as a
    gather's non-roots, which may be anything); with ``data`` (a run of arrays), a
    ``VirtualBuffer`` is refused too: it holds no values to check.

    Raises:
        AlgorithmError: naming ``who``, what it returned and what was expected.
    """
    if expected is None:
        return
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and value.size == expected and value.dtype == dtype:
            return
        got = f"{'an' if value.dtype.name.startswith('i') else 'a'} {value.dtype} " \
              f"array of shape {value.shape}"
    elif isinstance(value, VirtualBuffer):
        if value.count == expected and value.dtype == dtype and not data:
            return
        got = f"{value.count} {value.dtype} elements" + (
            " of a VirtualBuffer, which holds no data, in a run of arrays" if data else "")
    else:
        got = "None" if value is None else f"a {type(value).__name__}"
    raise AlgorithmError(f"{who} returned {got}; its output is {expected} {dtype} elements "
                         f"(a 1-D array in data mode, a VirtualBuffer without data): return "
                         f"the buffer the collective leaves on the rank")
