"""The per-rank communicator that algorithms see, and nothing else.

An algorithm is a generator function ``fn(comm, x, *, op, ...)``; it yields the events
that ``comm`` returns and returns its output. Names follow mpi4py / torch.distributed:
``rank``, ``size``, ``src``, ``dst``, ``tag``, ``group``. Besides point-to-point messages
and local work, a rank can start work that runs alongside it (``start``) and any
registered collective (``collective``, ``all_reduce``, ...), as torch's ``async_op=True``.
The reduce *collective* is ``comm.collective("reduce", x, root=...)``: ``comm.reduce`` is
the local reduction of two buffers that every algorithm is built from.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Generator, Sequence
from typing import Any, ClassVar, NoReturn

import numpy as np
from simpy.events import PENDING, Event

from simcoll import buffers
from simcoll.buffers import Buffer, Chunks, VirtualBuffer, frozen, snapshot
from simcoll.checks import as_float, flag, integer, shown
from simcoll.dtypes import is_float
from simcoll.errors import CommUsageError, InvalidInputError, TopologyError
from simcoll.ops import ReduceOp
from simcoll.runtime import Joint, Message, Runtime
from simcoll.topology.graph import Topology, Via

__all__ = ["Comm"]


def _plain_tag(tag: Any) -> bool:
    """An int (not a bool), a str, or a tuple of them."""
    return (isinstance(tag, (int, np.integer, str)) and not isinstance(tag, bool)) or (
        type(tag) is tuple and all(_plain_tag(t) for t in tag))


def _check_tag(who: str, tag: Any, name: str = "tag") -> None:
    """Refuse a tag that is not an int, a str or a tuple of them: one that cannot key a
    message's matching (not hashable), or that would match another (``True`` and ``1.0``
    equal 1) or none (NaN equals nothing).

    Raises:
        CommUsageError: naming the rank and the tag.
    """
    if not _plain_tag(tag):
        raise CommUsageError(f"{who}: {name}={tag!r} cannot be a tag; use an int, a "
                             f"str or a tuple of them")


_VIA = "a device name or a tuple of them, in the order the route passes them"
"""What ``via`` of a send accepts (a tuple, not a list: routes are cached by it)."""
_MULTICAST_VIA = (f"a list or tuple of one entry per destination, each {_VIA} or None "
                  f"(the shortest route)")
"""What ``via`` of a multicast accepts."""


def _described(x: Any) -> str:
    """An operand as an error names it: its dtype and shape, or its type."""
    if isinstance(x, np.ndarray):
        return f"a {x.dtype} array of shape {x.shape}"
    return repr(x) if isinstance(x, VirtualBuffer) else f"a {type(x).__name__}"


def _usual(delay: Any, wire_bytes: Any) -> bool:
    """Whether a send's ``delay`` and ``wire_bytes`` are plainly fine (a float of seconds
    >= 0, bytes as an int >= 0 or None), as every message of NCCL's protocols has them:
    the cheap test before :meth:`Comm._check_send` on the hot path."""
    return (type(delay) is float and 0.0 <= delay < math.inf
            and (wire_bytes is None or (type(wire_bytes) is int and wire_bytes >= 0)))


class Comm:
    """One rank's view of a communicator (the whole machine, or a group of it).

    Attributes:
        rank: this endpoint's rank in the communicator (0..size-1; hosts: see ``hosts``).
        size: number of GPU ranks in the communicator.
        hosts: ranks of the server hosts (``size``, ``size + 1``, ...; world only).
        in_network: ranks of the switches and NICs that compute in the network (after the
            hosts; in a group, right after its GPU ranks: every group reaches every
            in-network device, whose programs see the group's GPUs by their group ranks).
    """

    __slots__ = ("rank", "size", "hosts", "in_network", "_rt", "_env", "_address",
                 "_members", "_context", "_ranks", "_inline")

    fast: ClassVar[bool] = True
    """Let :meth:`sendrecv` and :meth:`reduce` do the plain runtime's work themselves;
    ``False`` sends everything through the runtime's methods (for tests that compare the
    two)."""

    def __init__(self, runtime: Runtime, rank: int, members: Sequence[int] | None = None,
                 context: int = 0):
        self._rt = runtime
        self._env = runtime.env
        self._inline = self.fast and type(runtime) is Runtime
        """Whether the hot paths (:meth:`sendrecv`, :meth:`reduce`) may do the runtime's
        work themselves: a runtime of a subclass, such as the tracing one, sees every
        message and reduction through its own methods."""
        self._context = context
        if members is None:
            self.size = runtime.nranks
            self._ranks = runtime.endpoints
            self.hosts: tuple[int, ...] = tuple(range(runtime.nranks,
                                                      runtime.nranks + runtime.hosts))
            self.in_network: tuple[int, ...] = tuple(range(runtime.nranks + runtime.hosts,
                                                           runtime.endpoints))
            self._members = None
            self._address = rank
        else:
            devices = tuple(range(runtime.nranks + runtime.hosts, runtime.endpoints))
            self.size = len(members)
            self.hosts = ()
            self.in_network = tuple(range(self.size, self.size + len(devices)))
            self._members = tuple(members) + devices
            self._ranks = len(self._members)
            self._address = self._members[rank]
        self.rank = rank

    @property
    def _who(self) -> str:
        """This rank as an error names it: ``rank 2``, or in a group ``rank 0 of group
        [2, 3] (world rank 2)``, whose numbers the message then uses; a server host or an
        in-network device by its name and the number peers give it (``host server0
        (rank 4)``)."""
        if self._members is None:
            if self._address >= self._rt.nranks:
                return f"{self._endpoint} (rank {self.rank})"
            return f"rank {self.rank}"
        return (f"rank {self.rank} of group {list(self._members[:self.size])} (world rank "
                f"{self._address})")

    @property
    def _endpoint(self) -> str:
        """This endpoint as the run names it: ``rank 2`` (its world rank), ``host NAME``
        or ``in-network device NAME``."""
        address, runtime = self._address, self._rt
        if address < runtime.nranks:
            return f"rank {address}"
        kind = "host" if address < runtime.nranks + runtime.hosts else "in-network device"
        return f"{kind} {self.topology.endpoint_name(address)}"

    # -- point to point ------------------------------------------------------------------
    def _peer(self, peer: int, role: str) -> int:
        if type(peer) is int and 0 <= peer < self._ranks and peer != self.rank:
            return peer if self._members is None else self._members[peer]
        if isinstance(peer, (bool, np.bool_)) or not isinstance(peer, (int, np.integer)):
            raise CommUsageError(f"{self._who}: {role}={peer!r} is not an integer rank")
        if not 0 <= peer < self._ranks:
            raise CommUsageError(f"{self._who}: {role}={peer} is out of range; "
                                 f"{self._numbering()}")
        if peer == self.rank:
            raise CommUsageError(f"{self._who}: {role}={peer} is this rank itself; "
                                 f"keep local data local instead of messaging it")
        peer = int(peer)   # a numpy integer, as the trace's JSON takes it
        return peer if self._members is None else self._members[peer]

    def _numbering(self) -> str:
        """How this communicator numbers its endpoints, for an error naming a bad peer."""
        parts = [f"GPU ranks are 0..{self.size - 1}"]
        for what, numbers in (("server hosts", self.hosts), ("in-network devices",
                                                              self.in_network)):
            if len(numbers) == 1:
                parts.append(f"{what[:-1]} {numbers[0]}")
            elif numbers:
                parts.append(f"{what} {numbers[0]}..{numbers[-1]}")
        return ", ".join(parts)

    def send(self, data: Any, dst: int, *, tag: Any = 0, delay: float = 0.0,
             wire_bytes: int | None = None, ordered: bool = False,
             via: Via | None = None) -> Event:
        """Send a snapshot of ``data`` to ``dst``; the event fires when it has arrived.

        The transfer starts at once; yield the event only to wait for its arrival. Arrays
        in data mode are read-only, so the receiver gets the very array sent, and no copy
        is made (a writeable array is copied once).

        A protocol (NCCL's LL, LL128) may put ``wire_bytes`` on the links instead of the
        payload's bytes, and add ``delay`` seconds of per-step overhead to the route's
        latency; the endpoints' traffic counters count the payload either way.

        ``ordered=True`` makes the message one of a connection whose messages move one
        after the other, as a channel's threads write NCCL's slices: its bytes start
        moving once the previous ordered message to ``dst`` with ``tag`` has arrived (its
        latency runs meanwhile). Unordered messages in flight together share the links
        as flows of their own.

        ``via`` names a device the message's route must pass, such as the NIC an NCCL
        channel is bound to where a GPU has several, or a tuple of them in order (the
        sender's NIC and the receiver's): the shortest path to each, then on to ``dst``
        (:meth:`Topology.route`).
        """
        target = self._peer(dst, "dst")
        if type(tag) is not int:
            _check_tag(self._who, tag)
        if via is not None:
            self._check_via(via, via)
        # The default (0.0 and None) skips the call; None, 0 or False do not.
        if (delay or wire_bytes is not None or type(delay) is not float) \
                and not _usual(delay, wire_bytes):
            delay, wire_bytes = self._check_send(delay, wire_bytes)
        done = Event(self._env)
        self._post(data, target, tag, done, delay, wire_bytes, ordered, via)
        return done

    def _check_send(self, delay: Any, wire_bytes: Any) -> tuple[float, int | None]:
        """``delay`` as a float and ``wire_bytes`` as an int (numpy's numbers as Python's,
        which the trace's JSON takes); refuse a ``delay`` that is not a finite number of
        seconds >= 0 and ``wire_bytes`` that are not a whole number >= 0 (or None)."""
        seconds = self._seconds("send(delay=...)", delay)
        if wire_bytes is not None and (isinstance(wire_bytes, (bool, np.bool_))
                                       or not isinstance(wire_bytes, (int, np.integer))
                                       or wire_bytes < 0):
            raise CommUsageError(f"{self._who}: wire_bytes={wire_bytes!r} is not "
                                 f"accepted; use a whole number of bytes >= 0, or None "
                                 f"(the payload's)")
        return seconds, None if wire_bytes is None else int(wire_bytes)

    def _flag(self, name: str, value: Any) -> bool:
        """``value`` (the argument ``name``) as a bool, if it is one (numpy's too)."""
        try:
            return flag(value, name, error=CommUsageError)
        except CommUsageError as exc:
            raise CommUsageError(f"{self._who}: {exc}") from None

    def _seconds(self, call: str, seconds: Any) -> float:
        """``seconds`` as a float, if it is a finite number >= 0."""
        if not isinstance(seconds, (bool, np.bool_)) and isinstance(
                seconds, (int, float, np.integer, np.floating)):
            # in float64 before comparing: numpy's long double holds 1e400
            value = as_float(seconds)
            if 0 <= value < math.inf:
                return value
        raise CommUsageError(f"{self._who}: {call} got {shown(seconds)}; use a "
                             f"finite number of seconds >= 0")

    def _check_via(self, via: Via, given: Any, accepted: str = _VIA) -> None:
        """Refuse ``via`` (part of the argument ``given``, which accepts ``accepted``)
        unless it is a device's name or a tuple of them."""
        if not isinstance(via, (str, tuple)):
            raise CommUsageError(f"{self._who}: via={given!r} is not accepted; give "
                                 f"{accepted}")
        try:
            for name in (via,) if isinstance(via, str) else via:
                self.topology.device(name)
        except (TopologyError, TypeError):
            raise CommUsageError(f"{self._who}: via={given!r} names no device of "
                                 f"topology {self.topology.name!r}") from None

    def _post(self, data: Any, target: int, tag: Any, done: Event, delay: float = 0.0,
              wire_bytes: int | None = None, ordered: bool = False,
              via: Via | None = None) -> None:
        if ordered is not False and ordered is not True:   # "no" would pass as True
            ordered = self._flag("ordered", ordered)
        if type(data) is VirtualBuffer:
            payload, nbytes = data, data.nbytes
        else:
            payload = snapshot(data, self._rt.inputs)
            nbytes = buffers.nbytes_of(payload)
        address = self._address
        self._rt.post_send((self._context, address, target, tag), payload, nbytes,
                           address, target, tag, done, delay, wire_bytes, ordered, via)

    def recv(self, src: int, *, tag: Any = 0) -> Event:
        """Receive the next message from ``src`` with ``tag``; the event's value is it."""
        source = self._peer(src, "src")
        if type(tag) is not int:
            _check_tag(self._who, tag)
        event = Event(self._env)
        payload = self._rt.post_recv((self._context, source, self._address, tag), event)
        if payload is not PENDING:
            return self._rt.done(payload)
        return event

    def sendrecv(self, data: Any, dst: int, src: int, *, tag: Any = 0,
                 recv_tag: Any = None, delay: float = 0.0,
                 wire_bytes: int | None = None) -> Event:
        """Send ``data`` to ``dst`` and receive from ``src`` at once.

        The event fires when both are done; its value is the received payload.
        ``recv_tag`` defaults to ``tag``; ``delay`` and ``wire_bytes`` are the send's, as
        for :meth:`send`.
        """
        # The checks of _peer, inline for in-range integer peers: every message of a ring
        # or tree comes this way.
        members, rank, ranks = self._members, self.rank, self._ranks
        if type(dst) is int and 0 <= dst < ranks and dst != rank:
            target = dst if members is None else members[dst]
        else:
            target = self._peer(dst, "dst")
        if type(src) is int and 0 <= src < ranks and src != rank:
            source = src if members is None else members[src]
        else:
            source = self._peer(src, "src")
        # The default (0.0 and None) skips the call; None, 0 or False do not.
        if (delay or wire_bytes is not None or type(delay) is not float) \
                and not _usual(delay, wire_bytes):
            delay, wire_bytes = self._check_send(delay, wire_bytes)
        joint = Joint(self._env, 2)
        rt, address, context = self._rt, self._address, self._context
        if type(tag) is not int or (recv_tag is not None and type(recv_tag) is not int):
            _check_tag(self._who, tag)
            if recv_tag is not None:
                _check_tag(self._who, recv_tag, "recv_tag")
        recv_key = (context, source, address, tag if recv_tag is None else recv_tag)
        if type(data) is VirtualBuffer:   # refused before the receive is posted
            payload, nbytes = data, data.nbytes
        else:
            payload = snapshot(data, rt.inputs)
            nbytes = buffers.nbytes_of(payload)
        if not self._inline:
            self._post_sendrecv(payload, target, tag, recv_key, joint, delay, wire_bytes)
            return joint
        # Runtime.post_recv and Runtime.post_send, inline: every message of a ring or tree
        # comes this way.
        channels = rt.channels
        channel = channels.get(recv_key) or rt._new_channel(recv_key)
        if channel.unclaimed:
            message = channel.unclaimed.popleft()
            if message.arrived:
                joint.pending = 1
                joint.payload = message.payload
            else:
                message.receiver = joint
        else:
            channel.waiting.append(joint)
        send_key = (context, address, target, tag)
        channel = channels.get(send_key) or rt._new_channel(send_key)
        message = Message(payload, joint, address, target, tag)
        if channel.waiting:
            message.receiver = channel.waiting.popleft()
        else:
            channel.unclaimed.append(message)
        rt.network.transfer(address, target, nbytes, rt._arrive, message, delay, wire_bytes)
        return joint

    def _post_sendrecv(self, data: Any, target: int, tag: Any, recv_key: tuple, joint: Joint,
                       delay: float, wire_bytes: int | None) -> None:
        """:meth:`sendrecv`'s receive and send, through the runtime's own methods."""
        rt = self._rt
        payload = rt.post_recv(recv_key, joint)
        if payload is not PENDING:
            joint.pending = 1
            joint.payload = payload
        self._post(data, target, tag, joint, delay, wire_bytes)

    def multicast(self, data: Any, dsts: Sequence[int], *, tag: Any = 0,
                  delay: float = 0.0, ordered: bool = False,
                  via: Sequence[Via | None] | None = None) -> Event:
        """Send one copy of ``data`` that the network replicates to every rank in ``dsts``
        (NVLink SHARP and InfiniBand multicast): each byte crosses each link of the union
        of the routes once. Every destination receives it with ``recv`` as any message;
        the event fires when all of them have it. The copy moves as one flow: it starts
        after the longest of its routes' latencies and drains at its slowest branch's
        share, so every destination gets it at the same instant (a near one as late as
        the farthest, where separate sends would reach it sooner). It counts as one
        message in ``RunResult.messages``; a trace holds an event per destination.
        ``delay`` and ``ordered`` are as for :meth:`send` (ordered multicasts queue behind
        the previous one to the same destinations with the same tag). ``via`` gives,
        destination by destination, the device or devices its route must pass, or None
        (as ``via`` of :meth:`send`: a SHARP switch reaching each GPU through the NIC its
        channel is bound to).
        """
        if not isinstance(dsts, (list, tuple, range)):
            raise CommUsageError(f"{self._who}: multicast dsts={dsts!r} is not "
                                 f"accepted; give a list of destination ranks")
        targets = tuple(self._peer(d, "dsts") for d in dsts)
        if type(delay) is not float or not 0.0 <= delay < math.inf:
            delay = self._seconds("multicast(delay=...)", delay)
        if not targets:
            raise CommUsageError(f"{self._who}: multicast needs at least one "
                                 f"destination")
        if len(set(targets)) != len(targets):
            raise CommUsageError(f"{self._who}: multicast dsts={list(dsts)} lists a "
                                 f"rank twice")
        vias: tuple[Via | None, ...] | None = None
        if via is not None:
            if not isinstance(via, (list, tuple)):
                raise CommUsageError(f"{self._who}: multicast via={via!r} is not "
                                     f"accepted; give {_MULTICAST_VIA}")
            vias = tuple(via)
            if len(vias) != len(targets):
                raise CommUsageError(f"{self._who}: multicast via={via!r} gives "
                                     f"{len(vias)} routes for {len(targets)} destinations; "
                                     f"give one per destination (None: the shortest)")
            for one in vias:
                if one is not None:
                    self._check_via(one, via, _MULTICAST_VIA)
            if all(one is None for one in vias):
                vias = None
        if type(data) is VirtualBuffer:
            payload, nbytes = data, data.nbytes
        else:
            payload = snapshot(data, self._rt.inputs)
            nbytes = buffers.nbytes_of(payload)
        if type(tag) is not int:
            _check_tag(self._who, tag)
        if ordered is not False and ordered is not True:
            ordered = self._flag("ordered", ordered)
        done = Joint(self._env, len(targets))
        address = self._address
        self._rt.post_multicast([(self._context, address, t, tag) for t in targets], payload,
                                nbytes, address, targets, tag, done, delay, ordered, vias)
        return done

    # -- local work ----------------------------------------------------------------------
    def reduce(self, a: Buffer, b: Buffer, op: ReduceOp, *, shared: bool = False) -> Event:
        """Combine ``a`` and ``b`` element-wise with ``op`` into a new buffer.

        Takes ``nbytes / reduce_bandwidth`` of this GPU's reduction engine, one reduction
        at a time (the gamma term). The inputs are left unchanged; the result is read-only.
        ``op`` is a :class:`ReduceOp` or its name; ``avg`` adds, as NCCL's ``ncclAvg``
        combines buffers: the scaling by 1/p is done once, by whoever started the
        collective (:meth:`ReduceOp.combining`), not by each reduction.

        ``shared=True`` runs it on threads of its own beside this GPU's other shared
        reductions, each at an even share of the reduction rate while it runs (k at
        once: rate / k each, recomputed as they start and end), as NCCL's channels do;
        such reductions do not queue behind the one-at-a-time ones. Run one at a time
        instead, equal reductions of channels that move in step would end one after
        another and set the channels apart, and a faster GPU could then make a
        collective slower.
        """
        if type(op) is not ReduceOp:
            op = self._parse_op(op) if isinstance(op, str) else self._refuse_op(op)
        if shared.__class__ is not bool:   # refused before numpy's work
            if not isinstance(shared, np.bool_):
                raise CommUsageError(f"{self._who}: reduce shared={shared!r} is not "
                                     f"accepted; use True or False")
            shared = bool(shared)
        if type(a) is VirtualBuffer or type(b) is VirtualBuffer:
            if a is not b and (getattr(a, "count", None) != getattr(b, "count", None)
                               or getattr(a, "dtype", None) != getattr(b, "dtype", None)):
                raise CommUsageError(f"{self._who}: cannot reduce {_described(a)} with "
                                     f"{_described(b)}; give two VirtualBuffers of one "
                                     f"count and dtype (or two arrays in data mode)")
            out = a
        else:
            if type(a) is not np.ndarray or type(b) is not np.ndarray or a.shape != b.shape \
                    or a.dtype != b.dtype:
                raise CommUsageError(f"{self._who}: cannot reduce "
                                     f"{_described(a)} with {_described(b)}; give two arrays "
                                     f"of one shape and dtype (as a data-free run must)")
            if a.dtype.kind not in "iu" and not is_float(a.dtype):  # strings, bools, records
                raise CommUsageError(f"{self._who}: cannot reduce {a.dtype} arrays; "
                                     f"reduce integers or floats")
            out = op(a, b)   # of two 0-d arrays a numpy scalar, which has no flags to set
            out = frozen(out if type(out) is np.ndarray else np.array(out))
        rt = self._rt
        if self._inline and rt.reduce_bandwidth[self._address] == math.inf:
            # A free reduction (the default): what reduce_delay and after come to, without
            # calling them; every message of a ring reduce-scatter comes this way.
            return rt.done(out)
        if shared:
            return rt.shared_reduce(self._address, out.nbytes, out)
        return rt.after(rt.reduce_delay(self._address, out.nbytes), out)

    def _parse_op(self, op: str) -> ReduceOp:
        try:
            return ReduceOp.parse(op)
        except InvalidInputError as err:
            raise CommUsageError(f"{self._who}: {err}") from None

    def _refuse_op(self, op: Any) -> NoReturn:
        raise CommUsageError(f"{self._who}: reduce op={op!r} is not accepted; use a "
                             f"simcoll.ReduceOp or its name")

    def sleep(self, seconds: float) -> Event:
        """Wait ``seconds`` (finite, >= 0) without using any engine: a fixed overhead such
        as a kernel launch, which neither links nor the compute stream see."""
        if type(seconds) is not float or not 0.0 <= seconds < math.inf:  # the hot path
            seconds = self._seconds("sleep", seconds)
        return self._rt.sleep(self._address, seconds)

    def compute(self, seconds: float) -> Event:
        """Keep this GPU's compute stream busy for ``seconds`` (finite, >= 0; FIFO with
        earlier work)."""
        seconds = self._seconds("compute", seconds)
        return self._rt.after(self._rt.compute_delay(self._address, seconds), None)

    # -- concurrent work and collectives --------------------------------------------------
    @property
    def now(self) -> float:
        """The simulated time in seconds (for traces and tests: an algorithm decides what
        to send from its rank, size and arguments, never from the clock)."""
        return self._env.now

    def start(self, program: Generator[Any, Any, Any], *, name: str | None = None) -> Event:
        """Run ``program`` (a generator yielding this communicator's events) alongside the
        caller, as a CUDA stream or torch's ``async_op=True`` handle does.

        Returns an event that fires with the program's return value: ``out = yield h``.
        The program shares this GPU's links, reduction engine and compute stream; an
        exception inside it ends the run, naming this rank and the program's number
        (and ``name``, if given: a started collective's is ``"all_reduce/ring"``).

        Raises:
            CommUsageError: ``program`` is not a generator, or one already started (a
                generator runs once: call the generator function again for another run).
        """
        if not inspect.isgenerator(program):
            raise CommUsageError(f"{self._who}: start() needs a generator (call the "
                                 f"generator function), got {type(program).__name__}")
        if name is not None and not isinstance(name, str):  # before the generator is marked
            raise CommUsageError(f"{self._who}: start(name={name!r}) is not accepted; "
                                 f"give a string, or leave it out")
        if (inspect.getgeneratorstate(program) != inspect.GEN_CREATED
                or self._rt.count(("started", id(program)))):
            # A started generator stays alive (its process holds it) until the run ends,
            # so its id names it alone.
            raise CommUsageError(f"{self._who}: start() got {program.__name__}, a "
                                 f"generator already started; a generator runs once, so "
                                 f"call the generator function again for another run")
        number = self._rt.count(("program", self._address))
        shown = "" if name is None else f": {name}"
        return self._rt.start(program, f"{self._endpoint} (started program "
                                       f"{number}{shown})", self._address)

    def collective(self, collective: str, x: Buffer | None = None, *, algorithm: str,
                   op: ReduceOp | str | None = None, root: int | None = None,
                   src: int | None = None, dst: int | None = None, splits: Any = None,
                   **params: Any) -> Event:
        """Start the registered ``algorithm`` of ``collective`` on this communicator now.

        Every member must start the same collectives in the same order (as with NCCL and
        torch.distributed); each gets a matching context of its own, so the messages of
        concurrent collectives never cross. Returns an event whose value is this rank's
        output (AVG already applied), so ``out = yield comm.all_reduce(x, ...)`` waits
        for it and two started collectives run side by side. torch's names are accepted
        too: ``all_gather_into_tensor``, ``reduce_scatter_tensor``, ``all_to_all_single``
        for the collective, ``src=`` (broadcast, scatter) or ``dst=`` (reduce, gather)
        for the root. The v-collectives take ``splits=``, every rank's sizes in elements
        (the same on every rank; see ``simulate``), and ``x`` must be this rank's share.
        A barrier takes no buffer (``x=None``). Parameters are checked against the
        largest input, as ``simulate`` checks them (a v-collective's largest share).

        Raises:
            CommUsageError: an unknown collective or algorithm, bad parameters, a buffer
                for a barrier or none for another collective, sizes whose traffic could
                overflow the int64 counters, an op
                for a collective that does not reduce (SUM by default where it does), a
                root given twice, or an algorithm that runs programs on server hosts started
                on a communicator that has them (they run only at the top level; on a
                group, or a machine without hosts, such an algorithm's servers are
                ranks).
        """
        from simcoll.startable import start_collective

        return start_collective(self, collective, x, algorithm, op, root, src, dst, params,
                                splits)

    def all_reduce(self, x: Buffer, *, algorithm: str = "ring",
                   op: ReduceOp | str = ReduceOp.SUM, **params: Any) -> Event:
        """Start an all_reduce of ``x`` (see :meth:`collective`)."""
        return self.collective("all_reduce", x, algorithm=algorithm, op=op, **params)

    def reduce_scatter(self, x: Buffer, *, algorithm: str = "ring",
                       op: ReduceOp | str = ReduceOp.SUM, **params: Any) -> Event:
        """Start a reduce_scatter of ``x`` (see :meth:`collective`)."""
        return self.collective("reduce_scatter", x, algorithm=algorithm, op=op, **params)

    def all_gather(self, x: Buffer, *, algorithm: str = "ring", **params: Any) -> Event:
        """Start an all_gather of ``x`` (see :meth:`collective`)."""
        return self.collective("all_gather", x, algorithm=algorithm, **params)

    def broadcast(self, x: Buffer, *, root: int | None = None, src: int | None = None,
                  algorithm: str = "binomial", **params: Any) -> Event:
        """Start a broadcast of ``x`` from ``root`` (torch: ``src``; default 0; see
        :meth:`collective`)."""
        return self.collective("broadcast", x, algorithm=algorithm, root=root, src=src,
                               **params)

    def all_to_all(self, x: Buffer, *, algorithm: str = "pairwise", **params: Any) -> Event:
        """Start an all_to_all of ``x`` (see :meth:`collective`)."""
        return self.collective("all_to_all", x, algorithm=algorithm, **params)

    def all_gatherv(self, x: Buffer, splits: Sequence[int], *, algorithm: str = "ring",
                    **params: Any) -> Event:
        """Start an all_gatherv of ``x``: ``splits`` holds every rank's element count
        (``x`` has ``splits[rank]``); see :meth:`collective`."""
        return self.collective("all_gatherv", x, algorithm=algorithm, splits=splits,
                               **params)

    def reduce_scatterv(self, x: Buffer, splits: Sequence[int], *, algorithm: str = "ring",
                        op: ReduceOp | str = ReduceOp.SUM, **params: Any) -> Event:
        """Start a reduce_scatterv of ``x`` (``sum(splits)`` elements): rank r gets block
        r, of ``splits[r]`` elements; see :meth:`collective`."""
        return self.collective("reduce_scatterv", x, algorithm=algorithm, op=op,
                               splits=splits, **params)

    def all_to_allv(self, x: Buffer, splits: Sequence[Sequence[int]], *,
                    algorithm: str = "pairwise", **params: Any) -> Event:
        """Start an all_to_allv of ``x``: ``splits[i][j]`` elements go from rank i to rank
        j (``x`` has ``sum(splits[rank])``); see :meth:`collective`."""
        return self.collective("all_to_allv", x, algorithm=algorithm, splits=splits,
                               **params)

    def barrier(self, *, algorithm: str = "dissemination") -> Event:
        """Start a barrier (see :meth:`collective`)."""
        return self.collective("barrier", None, algorithm=algorithm)

    # -- buffers and groups --------------------------------------------------------------
    @staticmethod
    def split_buffer(x: Buffer, parts: int) -> Chunks:
        """Cut ``x`` into ``parts`` chunks sized as ``np.array_split`` does (both modes):
        a list of views in data mode, :class:`~simcoll.buffers.VirtualChunks` in
        data-free mode; either takes a received chunk in place of one
        (``pieces[k] = yield comm.recv(...)``).

        Raises:
            CommUsageError: ``x`` is no buffer or a 0-d array, or ``parts`` is not an
                integer >= 1.
        """
        if not isinstance(x, (np.ndarray, VirtualBuffer)):
            raise CommUsageError(f"split_buffer of {_described(x)}: give a numpy array or a "
                                 f"VirtualBuffer")
        if isinstance(x, np.ndarray) and x.ndim == 0:
            raise CommUsageError(f"split_buffer of a 0-d array ({x!r:.40}): give an array "
                                 f"of one or more dimensions, cut along its first")
        return buffers.split(x, integer(parts, "parts", minimum=1, maximum=2**62,
                                        error=CommUsageError))

    @staticmethod
    def join(chunks: Sequence[Buffer]) -> Buffer:
        """Concatenate chunks into one new (read-only) buffer (both modes), all of one
        dtype and one mode (arrays or VirtualBuffers).

        Raises:
            CommUsageError: no chunk, a 0-d one, or chunks of several dtypes, modes or
                shapes past their first axis.
        """
        out = buffers.join(chunks)
        return frozen(out) if type(out) is np.ndarray else out

    def node_of(self, rank: int) -> int:
        """The node (server) that GPU ``rank`` of this communicator sits in.

        Hierarchical algorithms use it to form node-local groups; it says nothing about
        links or bandwidths.
        """
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) \
                or not 0 <= rank < self.size:
            raise CommUsageError(f"{self._who}: node_of({rank!r}) needs a GPU rank "
                                 f"0..{self.size - 1}")
        address = rank if self._members is None else self._members[rank]
        return self._rt.nodes[address]

    def attached(self, device: int) -> tuple[int, ...]:
        """The GPU ranks of this communicator directly linked to in-network device
        ``device``: whose data it can reduce without another hop."""
        if device not in self.in_network:
            raise CommUsageError(f"{self._who}: {device!r} is not an in-network device "
                                 f"of this communicator (those are {list(self.in_network)})")
        if self._members is None:
            return self._rt.attached[device]
        index = self._rt.index_of(self._members[:self.size])
        return tuple(index[g] for g in self._rt.attached[self._members[device]]
                     if g in index)

    def reducer_of(self, rank: int) -> int | None:
        """The in-network device directly linked to GPU ``rank``, where an in-network
        reduction of its data takes place (the first such device), or None if it has
        none.

        Raises:
            CommUsageError: ``rank`` is not a GPU rank of this communicator.
        """
        if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)) \
                or not 0 <= rank < self.size:
            raise CommUsageError(f"{self._who}: reducer_of({rank!r}) needs a GPU rank "
                                 f"0..{self.size - 1}")
        device = self._rt.reducer.get(self.address_of(int(rank)))
        if device is None or self._members is None:
            return device
        return self.in_network[device - self._rt.nranks - self._rt.hosts]

    def group(self, ranks: Sequence[int]) -> Comm:
        """A communicator over ``ranks``, this communicator's ranks (world ranks on the
        world communicator, a group's own on a group), in their new rank order.

        Every member must call it with the same list, and as often: as with
        ``torch.distributed.new_group``, each call makes a communicator of its own, the
        n-th call over a list meeting the n-th call of every other member. Messages in
        the group never match messages outside it, nor those of another group over the
        same ranks.
        """
        if not isinstance(ranks, (list, tuple, range)):
            raise CommUsageError(f"{self._who}: group ranks={ranks!r} is not accepted; "
                                 f"give a list of ranks")
        members = tuple(self._member(r) for r in ranks)
        if self._members is not None:
            members = tuple(self._members[r] for r in members)
        if self._address not in members:
            raise CommUsageError(f"{self._who} called group({list(ranks)}), which leaves it "
                                 f"out; only the group's members call it")
        if len(set(members)) != len(members):
            raise CommUsageError(f"{self._who}: group {list(ranks)} lists a rank twice")
        number = self._rt.count(("group", self._context, members, self._address))
        contexts = self._rt.contexts
        context = contexts.setdefault(("group", self._context, members, number),
                                      len(contexts) + 1)
        self._rt.made_context(context, members, self._address)
        return Comm(self._rt, members.index(self._address), members, context)

    def snapshot(self, data: Any) -> Any:
        """``data`` as a payload nobody can change any more (see ``send``)."""
        return snapshot(data, self._rt.inputs)

    @property
    def topology(self) -> Topology:
        """The machine (for choosing among algorithms before one starts, as NCCL's tuner
        does; an algorithm itself decides from its rank, size and arguments)."""
        return self._rt.network.topology

    def route_bandwidth(self, peer: int, via: Via | None = None) -> float:
        """Bytes per second of the narrowest link of the route to ``peer`` (through the
        devices ``via``) as links stand now: slowed or failed links count as they are
        (for NCCL's threads, which write a slice while its lines cross the links). Like
        :attr:`topology`, it may set when a program sends, never what: an algorithm
        decides what to send from its rank, size and arguments.

        Raises:
            CommUsageError: ``peer`` is not an endpoint of this communicator, or is this
                rank itself (a route to oneself crosses no link).
            LinkFailureError: failed links leave no route to ``peer`` now
                (:class:`~simcoll.errors.NoRouteError` where the healthy machine has
                none either).
        """
        address = self.address_of(peer)
        if address == self._address:   # inf, which an algorithm could divide by
            raise CommUsageError(f"{self._who}: route_bandwidth({peer!r}) names this rank "
                                 f"itself, whose route crosses no link; give a peer")
        return self._rt.network.route(self._address, address, via)[2]

    def address_of(self, rank: int) -> int:
        """The machine-wide endpoint address of ``rank`` of this communicator (a GPU's
        world rank, or an in-network device's address).

        Raises:
            CommUsageError: ``rank`` is not an endpoint of this communicator.
        """
        if type(rank) is int and 0 <= rank < self._ranks:
            return rank if self._members is None else self._members[rank]
        if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)) \
                or not 0 <= rank < self._ranks:
            raise CommUsageError(f"{self._who}: address_of({rank!r}) names no endpoint "
                                 f"of this communicator; {self._numbering()}")
        return int(rank) if self._members is None else self._members[rank]

    def world_ranks(self) -> tuple[int, ...]:
        """The world rank of every member of this communicator, in rank order."""
        return tuple(range(self.size)) if self._members is None else self._members[:self.size]

    def fresh_context(self) -> Comm:
        """This communicator again, with a matching context of its own: the n-th context
        a rank asks for on a communicator meets the n-th of every other member, and no
        other message."""
        number = self._rt.count(("context", self._context, self._address))
        contexts = self._rt.contexts
        context = contexts.setdefault(("started", self._context, number), len(contexts) + 1)
        members = None if self._members is None else self._members[:self.size]
        self._rt.made_context(context, tuple(range(self.size)) if members is None else members,
                              self._address)
        return Comm(self._rt, self.rank, members, context)

    def agree(self, what: str, value: Any, show: Callable[[Any], str] = str) -> None:
        """Check that every member says the same ``value`` in this matching context (the
        arguments of a started collective): the first to say it sets it. ``show`` writes
        a value for the message, only where two differ.

        Raises:
            CommUsageError: this rank says something else than the first did.
        """
        first, said = self._rt.first_said(("agree", self._context), self.rank, value)
        if not _same(said, value):
            raise CommUsageError(f"{self._who}: {what} with {show(value)} where rank "
                                 f"{first} started it with {show(said)}; every member must "
                                 f"start the same collectives with the same arguments")

    def start_devices(self, program_of: Callable[[Comm], Generator[Any, Any, Any] | None]
                      ) -> None:
        """Run ``program_of(view)`` on every in-network device it gives a program, where
        ``view`` is this communicator (its members and matching context) as that device
        sees it. Only the first member to call it in this context starts them: a
        collective started from rank programs (its in-network part, such as NCCL's
        NVSwitch for NVLS) gets its devices' programs once."""
        if self._rt.count(("devices", self._context)):
            return
        members = None if self._members is None else self._members[:self.size]
        for device in self.in_network:
            view = Comm(self._rt, device, members, self._context)
            program = program_of(view)
            if program is not None:
                address = view._address
                name = self.topology.endpoint_name(address)
                self._rt.start(program, f"in-network device {name} (started by rank "
                                        f"{self.rank})", address)

    def _member(self, rank: Any) -> int:
        if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)) \
                or not 0 <= rank < self.size:
            raise CommUsageError(f"{self._who}: group member {rank!r} is not a rank of "
                                 f"this communicator; use 0..{self.size - 1}")
        return int(rank)

    def __repr__(self) -> str:
        return f"Comm(rank={self.rank}, size={self.size})"


def _same(a: Any, b: Any) -> bool:
    """Whether two members said the same: equal, element by element inside tuples, lists
    and dicts; arrays of one dtype and shape with equal elements; NaN the same as NaN (a
    ``Value`` parameter may hold any of them, where ``!=`` is ambiguous or never false)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and a.dtype == b.dtype and a.shape == b.shape):
            return False
        if a.dtype.kind == "O":   # arrays inside: compare element by element
            return all(map(_same, a.flat, b.flat))
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) or isinstance(b, dict):
        return (type(a) is type(b) and a.keys() == b.keys()
                and all(_same(a[k], b[k]) for k in a))
    try:
        equal = a == b
    except Exception:   # a user's value whose == raises
        return False
    if isinstance(equal, (bool, np.bool_)):
        return bool(equal) or _is_nan(a) and _is_nan(b)
    return False


def _is_nan(x: Any) -> bool:
    return isinstance(x, (float, np.floating, complex, np.complexfloating)) and x != x
