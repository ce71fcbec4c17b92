"""Buffers in the two run modes: real numpy arrays, or sizes only.

In data mode an algorithm's buffers are numpy arrays. In data-free mode they are
:class:`VirtualBuffer` objects that carry an element count and a dtype and nothing else,
so that the same algorithm code simulates a 1 GiB all_reduce on 4096 ranks in O(ranks)
memory. ``split`` and ``join`` cut and glue buffers of either kind; in data-free mode a
split is a :class:`VirtualChunks` sequence that stores only the chunks an algorithm
replaced with a buffer of another size, so a rank's p chunks cost O(1) memory.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn, Union, cast, overload

import numpy as np
from numpy.typing import NDArray

from simcoll.checks import integer
from simcoll.errors import CommUsageError, InvalidInputError

__all__ = ["VirtualBuffer", "VirtualChunks", "Buffer", "Chunks", "split_sizes", "block_counts",
           "block_bytes", "block_size", "block_start", "split", "split_counts", "repeat", "join",
           "nbytes_of", "frozen", "sealed", "snapshot", "memory_owner", "owned"]


def split_sizes(count: int, parts: int) -> tuple[int, int]:
    """``(q, big)``: ``np.array_split`` gives the first ``big`` of ``parts`` blocks q + 1
    of the ``count`` elements and the others q. Every block size in simcoll comes from
    here."""
    return divmod(count, parts)


def block_counts(count: int, parts: int) -> NDArray[np.int64]:
    """Elements in each of ``parts`` blocks of ``count`` elements, as ``np.array_split``
    cuts them: the first ``count % parts`` blocks hold one element more."""
    small, big = split_sizes(count, parts)
    counts = np.full(parts, small, dtype=np.int64)
    counts[:big] += 1
    return counts


def block_bytes(nbytes: int, parts: int, itemsize: int) -> NDArray[np.int64]:
    """Bytes in each of ``parts`` blocks of an ``nbytes`` buffer of ``itemsize``-byte
    elements, cut by elements as :func:`block_counts` does."""
    return block_counts(nbytes // itemsize, parts) * itemsize


def block_size(count: int, parts: int, i: int) -> int:
    """Elements in block ``i`` of :func:`block_counts`, in O(1) (no array)."""
    small, big = split_sizes(count, parts)
    return small + (i < big)


def block_start(count: int, parts: int, i: int) -> int:
    """First element of block ``i`` (``0 <= i <= parts``) of :func:`block_counts`, in O(1);
    ``block_start(count, parts, parts) == count``."""
    small, big = split_sizes(count, parts)
    return i * small + min(i, big)


_NO_VALUES = ("it holds no values (data-free mode): reduce two buffers with comm.reduce(a, "
              "b, op), which also charges the reduction's time, join them with comm.join, "
              "cut them with x[a:b] or simcoll.buffers.split")


def _known_dtype(dtype: Any) -> np.dtype:
    """``np.dtype(dtype)``, or an InvalidInputError naming what numpy does not know."""
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError, SyntaxError) as exc:
        raise InvalidInputError(f"dtype={dtype!r:.60} is not accepted: {exc}; give a numpy "
                                f"dtype such as np.float32 or 'float16'") from None


class VirtualBuffer:
    """A buffer of ``count`` elements of ``dtype`` without storage (data-free mode).

    Instances are immutable and interned: ``VirtualBuffer.of(n, dtype)`` returns the same
    object for the same size, so holding millions of them costs only pointers.
    """

    __slots__ = ("count", "dtype", "nbytes")
    _interned: dict[tuple[int, np.dtype], VirtualBuffer] = {}

    def __init__(self, count: int, dtype: Any) -> None:
        """``count`` elements of ``dtype`` (a numpy dtype or what names one).

        Raises:
            InvalidInputError: a count that is not an integer >= 0, or a dtype numpy
                does not know.
        """
        if type(count) is not int or count < 0:
            count = integer(count, "count", minimum=0, what="elements")
        self.count = count
        self.dtype = dtype if isinstance(dtype, np.dtype) else _known_dtype(dtype)
        self.nbytes = count * self.dtype.itemsize

    @classmethod
    def of(cls, count: int, dtype: Any) -> VirtualBuffer:
        """The interned buffer of ``count`` elements of ``dtype``.

        Raises:
            InvalidInputError: a count that is not an integer >= 0 (a float 3.0 would
                otherwise be handed out for 3 to every later caller).
        """
        if type(count) is not int:
            count = integer(count, "count", minimum=0, what="elements")
        dtype = dtype if isinstance(dtype, np.dtype) else _known_dtype(dtype)
        key = (count, dtype)
        buf = cls._interned.get(key)
        if buf is None:
            if len(cls._interned) > 100_000:
                cls._interned.clear()
            buf = cls._interned[key] = cls(count, dtype)
        return buf

    @property
    def size(self) -> int:
        """Number of elements, as ``ndarray.size``."""
        return self.count

    @property
    def shape(self) -> tuple[int]:
        return (self.count,)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: slice) -> VirtualBuffer:
        if not isinstance(index, slice):
            raise TypeError(f"a VirtualBuffer can only be sliced (x[a:b]); {_NO_VALUES}")
        return VirtualBuffer.of(len(range(*index.indices(self.count))), self.dtype)

    def _arithmetic(self, *_: Any, **__: Any) -> NoReturn:
        raise TypeError(f"a VirtualBuffer takes no arithmetic; {_NO_VALUES}")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _arithmetic
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __pow__ = _arithmetic
    __matmul__ = __rmatmul__ = __neg__ = __abs__ = _arithmetic
    __array_ufunc__ = _arithmetic  # np.add(a, b), array + x: not an array of objects

    def copy(self) -> VirtualBuffer:
        """Itself, as ``ndarray.copy`` gives an equal array: it holds no data to copy."""
        return self

    def __eq__(self, other: object) -> bool:
        """Buffers of one size and element type are equal (interned ones are one)."""
        if not isinstance(other, VirtualBuffer):
            return NotImplemented
        return self is other or (self.count == other.count and self.dtype == other.dtype)

    def __hash__(self) -> int:
        return hash((self.count, self.dtype))

    def __repr__(self) -> str:
        return f"VirtualBuffer({self.count}, {self.dtype})"


Buffer = Union[np.ndarray, VirtualBuffer]  # noqa: UP007 (a runtime alias on 3.10)
"""What an algorithm holds: an ndarray in data mode, a VirtualBuffer in data-free mode."""


class VirtualChunks(Sequence[VirtualBuffer]):
    """``parts`` consecutive chunks of a VirtualBuffer, sized as ``np.array_split`` does.

    Reading a chunk builds nothing; assigning one stores it only if its size differs from
    the chunk it replaces, so a data-free ring keeps O(1) state per rank.
    """

    __slots__ = ("_dtype", "_parts", "_small", "_big", "_nbig", "_changed")

    def __init__(self, buf: VirtualBuffer, parts: int) -> None:
        small, big = split_sizes(buf.count, parts)
        self._dtype = buf.dtype
        self._parts = parts
        self._small = VirtualBuffer.of(small, buf.dtype)
        self._big = VirtualBuffer.of(small + 1, buf.dtype)
        self._nbig = big
        self._changed: dict[int, VirtualBuffer] | None = None

    def __len__(self) -> int:
        return self._parts

    @property
    def dtype(self) -> np.dtype:
        """The element type of every chunk."""
        return self._dtype

    def _position(self, index: Any) -> int:
        """``index`` as a list reads it: an integer, negative from the end (1.5 refused,
        as data mode's list refuses it)."""
        try:
            index = operator.index(index)
        except TypeError:
            raise TypeError(f"chunk indices must be integers or slices, not "
                            f"{type(index).__name__}") from None
        i = index + self._parts if index < 0 else index
        if not 0 <= i < self._parts:
            raise IndexError(f"chunk index {index} out of range for {self._parts} chunks")
        return i

    def _default(self, i: int) -> VirtualBuffer:
        return self._big if i < self._nbig else self._small

    @overload
    def __getitem__(self, index: int) -> VirtualBuffer: ...

    @overload
    def __getitem__(self, index: slice) -> list[VirtualBuffer]: ...

    def __getitem__(self, index: int | slice) -> VirtualBuffer | list[VirtualBuffer]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._parts))]
        i = self._position(index)
        if self._changed is not None and i in self._changed:
            return self._changed[i]
        return self._default(i)

    @overload
    def __setitem__(self, index: int, value: Buffer) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Sequence[Buffer]) -> None: ...

    def __setitem__(self, index: int | slice, value: Any) -> None:
        if isinstance(index, slice):   # as a list takes it, but for as many chunks
            indices = range(*index.indices(self._parts))
            values = list(value)
            if len(values) != len(indices):
                raise ValueError(f"cannot assign {len(values)} chunks to {len(indices)} of "
                                 f"a data-free split, whose {self._parts} chunks stay "
                                 f"{self._parts}")
            for i, chunk in zip(indices, values):
                self[i] = chunk
            return
        i = self._position(index)
        if not isinstance(value, VirtualBuffer):
            raise TypeError(f"data-free chunks hold VirtualBuffers, not {type(value).__name__}")
        if value is self._default(i):
            if self._changed is not None:
                self._changed.pop(i, None)
            return
        if self._changed is None:
            self._changed = {}
        self._changed[i] = value

    def __iter__(self) -> Iterator[VirtualBuffer]:
        return (self[i] for i in range(self._parts))

    def replaced(self) -> list[VirtualBuffer]:
        """The chunks put in place of the split's own."""
        return [] if self._changed is None else list(self._changed.values())

    def total(self) -> int:
        """Total element count of all chunks."""
        q = self._small.count
        count = q * self._parts + self._nbig
        if self._changed:
            count += sum(v.count - self._default(i).count for i, v in self._changed.items())
        return count


Chunks = Union[list[Buffer], VirtualChunks]  # noqa: UP007 (a runtime alias on 3.10)
"""What :func:`split` returns: a list of arrays, or O(1)-memory data-free chunks."""


def split(buf: Buffer, parts: int) -> Chunks:
    """Cut ``buf`` into ``parts`` consecutive chunks sized as ``np.array_split`` does.

    In data mode the chunks are views of ``buf``; algorithms replace chunks, they never
    write into them, so inputs stay unchanged.
    """
    if parts < 1:
        raise ValueError(f"cannot split a buffer into {parts} parts; parts must be >= 1")
    if isinstance(buf, VirtualBuffer):
        return VirtualChunks(buf, parts)
    return [*np.array_split(buf, parts)]


def split_counts(buf: Buffer, counts: Sequence[int]) -> list[Buffer]:
    """Cut ``buf`` into consecutive chunks of ``counts[i]`` elements (a v-collective's
    blocks; the counts add up to its length): views in data mode, VirtualBuffers in
    data-free mode (one list of ``len(counts)`` per call)."""
    if isinstance(buf, VirtualBuffer):
        return [VirtualBuffer.of(c, buf.dtype) for c in counts]
    chunks: list[Buffer] = []
    start = 0
    for c in counts:
        chunks.append(buf[start:start + c])
        start += c
    if start != len(buf):
        raise ValueError(f"counts {list(counts)} add up to {start}, not to the buffer's "
                         f"{len(buf)} elements")
    return chunks


def repeat(block: Buffer, parts: int) -> Chunks:
    """``parts`` chunks that all start as ``block``, for an algorithm to replace one by one
    (an output of p equal blocks): a list in data mode, O(1)-memory in data-free mode."""
    if isinstance(block, VirtualBuffer):
        return VirtualChunks(VirtualBuffer.of(block.count * parts, block.dtype), parts)
    return [block] * parts


def join(chunks: Sequence[Buffer]) -> Buffer:
    """Concatenate chunks (the inverse of :func:`split`)."""
    if isinstance(chunks, VirtualChunks):
        others = sorted({str(c.dtype) for c in chunks.replaced() if c.dtype != chunks.dtype})
        if others:   # as a data-mode join of mixed dtypes is refused
            raise CommUsageError(f"join takes chunks of one mode and dtype (numpy arrays or "
                                 f"VirtualBuffers), got VirtualBuffer {chunks.dtype}, "
                                 f"{', '.join(f'VirtualBuffer {d}' for d in others)}")
        return VirtualBuffer.of(chunks.total(), chunks.dtype)
    if not isinstance(chunks, (list, tuple)) or not chunks:
        raise CommUsageError(f"join takes a non-empty list of chunks, got "
                             f"{type(chunks).__name__} {chunks!r:.60}")
    first = chunks[0]
    kind = type(first) if type(first) in (np.ndarray, VirtualBuffer) else None
    if kind is np.ndarray and any(c.ndim == 0 for c in chunks if type(c) is np.ndarray):
        raise CommUsageError("join takes chunks of one or more dimensions, got a 0-d "
                             "array (a scalar); give arrays, e.g. np.atleast_1d(x)")
    if kind is None or any(type(c) is not kind or c.dtype != first.dtype for c in chunks):
        kinds = sorted({" ".join([type(c).__name__, str(getattr(c, "dtype", ""))]).strip()
                        for c in chunks})
        raise CommUsageError(f"join takes chunks of one mode and dtype (numpy arrays or "
                             f"VirtualBuffers), got {', '.join(kinds)}")
    if kind is VirtualBuffer:
        return VirtualBuffer.of(sum(len(c) for c in chunks), first.dtype)
    arrays = cast("Sequence[np.ndarray]", chunks)
    if len({a.shape[1:] for a in arrays}) > 1:
        raise CommUsageError(f"join takes chunks of one shape past their first axis, got "
                             f"shapes {', '.join(sorted({str(a.shape) for a in arrays}))}")
    return np.concatenate(arrays)


def nbytes_of(payload: Any) -> int:
    """Payload size in bytes: ``.nbytes`` of an array or VirtualBuffer; ``None`` is 0.

    Raises:
        CommUsageError: anything else (an array subclass or a memoryview, which a send
            could not snapshot, included).
    """
    if payload is None:
        return 0
    if type(payload) not in (np.ndarray, VirtualBuffer):
        raise CommUsageError(
            f"cannot send a {type(payload).__name__}; send a numpy array (np.asarray(x) "
            f"for a subclass), a VirtualBuffer, or None (an empty message)")
    if payload.dtype.hasobject:   # a copy would share the objects, and they have no size
        raise CommUsageError(f"cannot send an array of dtype {payload.dtype}: its elements "
                             f"are Python objects, which a snapshot cannot copy and no "
                             f"wire carries; send numbers")
    return int(payload.nbytes)


_FROZEN: dict[int, weakref.ref[np.ndarray]] = {}
"""The arrays :func:`frozen` made read-only, by ``id`` (each entry leaves with its
array)."""


def frozen(array: np.ndarray) -> np.ndarray:
    """Mark ``array``, which the run made, read-only and return it (:func:`owned` hands
    it back writeable, uncopied unless it is a view or handed out twice)."""
    array.flags.writeable = False
    key = id(array)
    _FROZEN[key] = weakref.ref(array, lambda _: _FROZEN.pop(key, None))
    return array


_SEALED: dict[int, weakref.ref[np.ndarray]] = {}
"""The arrays :func:`sealed` made, by ``id`` (each entry leaves with its array)."""


def sealed(array: np.ndarray) -> np.ndarray:
    """A read-only view of the 1-D ``array`` that nobody can make writeable again.

    numpy lets ``setflags(write=True)`` undo a read-only flag wherever the chain of bases
    ends in writeable memory (a read-only view of the caller's array); this view's base is
    a read-only memoryview, so numpy refuses that on it and on every view of it. Nothing
    is copied, but an array that is not contiguous, which is copied once.
    """
    if _is_sealed(memory_owner(array)):
        return array
    raw = np.ascontiguousarray(array).view(np.uint8)
    view = np.frombuffer(raw.data.toreadonly(), dtype=array.dtype)
    key = id(view)
    _SEALED[key] = weakref.ref(view, lambda _: _SEALED.pop(key, None))
    return view


def _is_sealed(array: np.ndarray) -> bool:
    """Whether :func:`sealed` made ``array``."""
    return _made_by(_SEALED, array)


def _made_by(made: dict[int, weakref.ref[np.ndarray]], array: np.ndarray) -> bool:
    """Whether ``array`` is in ``made`` (:data:`_SEALED` or :data:`_FROZEN`), by
    identity: an ``id`` alone may be a dead array's, taken again."""
    ref = made.get(id(array))
    return ref is not None and ref() is array


def snapshot(data: Any, trusted: frozenset[int] = frozenset()) -> Any:
    """The payload a send carries: an array nobody can change any more.

    Algorithms only ever hold read-only arrays (inputs are handed over as
    :func:`sealed` views; ``comm.reduce``, ``comm.join`` and received payloads are
    read-only), so those are sent
    as they are, without a copy: immutability is what makes them snapshots. An array is
    copied once into a read-only one if it is writeable, or if it is a read-only view of
    memory that something else may still write: an array that owns writeable memory and
    whose ``id`` is not in ``trusted`` (the run's inputs, which nothing changes), or
    memory held by something other than a numpy array (a memoryview, numpy's own holder
    behind ``as_strided`` and ``sliding_window_view``), but for what :func:`sealed` made.
    """
    if type(data) is not np.ndarray:
        return data
    if data.flags.writeable:
        return frozen(data.copy())
    base = memory_owner(data)
    if base.base is not None and not _is_sealed(base):
        return frozen(data.copy())
    if base is not data and base.flags.writeable and id(base) not in trusted:
        return frozen(data.copy())
    return data


def memory_owner(array: np.ndarray) -> np.ndarray:
    """The array at the end of ``array``'s chain of bases: the one whose memory it views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


NESTED = 64
"""How deep :func:`owned` walks an output's containers; deeper ones come back as they
are."""


def owned(outputs: Sequence[Any]) -> list[Any]:
    """The outputs a run hands back: every array writeable and sharing memory with no
    other rank's output nor an input (algorithms pass read-only arrays around without
    copying them, so one array may be several ranks' output, or a view of an input), in
    an output itself or in the lists, tuples (named ones too) and dicts it holds, to
    :data:`NESTED` levels, which come back as new containers of the same kind (other
    objects, subclasses of list and dict included, come back as they are). An array or
    container that a rank's output holds twice comes back as one, copied once. A
    read-only array the run did not make (one a program's caller holds) is copied, not
    made writeable."""
    seen: set[int] = set()   # the arrays handed out so far, every rank's
    return [_own(out, 0, {}, seen) for out in outputs]


def _own(x: Any, depth: int, made: dict[int, Any], seen: set[int]) -> Any:
    """``x`` as :func:`owned` hands it back, ``depth`` containers down; ``made``: what
    each array and container of this rank's output became, ``seen``: the arrays handed
    out so far."""
    if id(x) in made:
        return made[id(x)]
    if isinstance(x, np.ndarray):
        mine = x.base is None and id(x) not in seen \
            and (x.flags.writeable or _made_by(_FROZEN, x))
        array = x if mine else x.copy()
        _FROZEN.pop(id(array), None)   # the caller's now: one it locks stays locked
        array.flags.writeable = True
        seen.add(id(array))
        made[id(x)] = array
        return array
    named = isinstance(x, tuple) and hasattr(x, "_make")
    if depth >= NESTED or not (type(x) in (list, dict, tuple) or named):
        return x
    made[id(x)] = x   # inside itself, a container that holds itself stays itself
    if type(x) is dict:
        new: Any = {k: _own(v, depth + 1, made, seen) for k, v in x.items()}
    else:
        items = [_own(v, depth + 1, made, seen) for v in x]
        new = items if type(x) is list else x._make(items) if named else tuple(items)
    made[id(x)] = new
    return new
