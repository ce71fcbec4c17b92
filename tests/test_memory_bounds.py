"""Tables that grow with the pairs a run uses stay bounded: message channels (empty ones
are swept) and cached routes (the cache starts over past its size), with the same result
as without the bound, and with deadlocks and lost messages still reported. Data-mode
arrays that cannot fit in the machine's memory are refused before the run."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from conftest import NO_FORMULA

import simcoll as sc
from simcoll import runtime
from simcoll.execution import Execution
from simcoll.network import base
from simcoll.topology import graph


@pytest.fixture
def channels_in_use(monkeypatch):
    """Sweep from 8 channels on, and record the table's size after each new channel."""
    monkeypatch.setattr(runtime, "_SWEEP_FROM", 8)
    sizes: list[int] = []
    original = runtime.Runtime._new_channel

    def recording(self, key):
        channel = original(self, key)
        sizes.append(len(self.channels))
        return channel

    monkeypatch.setattr(runtime.Runtime, "_new_channel", recording)
    return sizes


def _pairwise(p: int, **kwargs) -> sc.Result:
    return sc.simulate(sc.topology.switch(p), "all_to_all", algorithm="pairwise", **kwargs)


@pytest.mark.parametrize("data", [False, True])
def test_an_all_to_all_keeps_o_p_channels_and_its_result(monkeypatch, channels_in_use, data):
    """A pairwise all_to_all on 12 ranks uses 132 channels one after another; with the
    sweep the table never holds more than the ones in use (two per rank in a step) and
    the last sweep's doubling, and every field of the result, outputs included, is the
    run's without it (a table too large to sweep)."""
    p = 12
    rng = np.random.default_rng(0)
    kwargs: dict = ({"data": [rng.standard_normal(5 * p).astype(np.float32) for _ in range(p)]}
                    if data else {"nbytes": 4 * 5 * p})
    swept = _pairwise(p, **kwargs)
    assert len(channels_in_use) >= p * (p - 1)      # each pair's channel made once at least
    assert max(channels_in_use) <= 2 * 2 * p + 1
    monkeypatch.setattr(runtime, "_SWEEP_FROM", 10**9)
    whole = _pairwise(p, **kwargs)
    assert swept.to_dict() == whole.to_dict()
    assert np.array_equal(swept.rank_times, whole.rank_times)
    if data:
        assert swept.correct is True
        for a, b in zip(swept.outputs, whole.outputs, strict=True):
            assert a.tobytes() == b.tobytes()


def test_a_deadlock_is_reported_through_sweeps(channels_in_use):
    """Rank 0 waits on a message nobody sends while the others exchange enough messages
    to sweep the table several times: the waiting receive survives every sweep."""
    @sc.register("all_reduce", "test_sweep_deadlock", cost=NO_FORMULA)
    def waits_while_others_talk(comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 0:
            yield comm.recv(src=1, tag="never")
        else:
            # A ring of ranks 1, 2, 3 with a new tag (a new channel) every step.
            for step in range(40):
                yield comm.sendrecv(x, dst=1 + comm.rank % 3, src=1 + (comm.rank + 1) % 3,
                                    tag=step)
        return x

    with pytest.raises(sc.DeadlockError, match="rank 0 waits for recv from 1 .tag 'never'."):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="test_sweep_deadlock",
                    nbytes=64)
    assert max(channels_in_use) >= 8


def test_a_lost_message_is_reported_through_sweeps(channels_in_use):
    @sc.register("all_reduce", "test_sweep_lost", cost=NO_FORMULA)
    def one_message_lost(comm, x, *, op=sc.ReduceOp.SUM):
        if comm.rank == 0:
            yield comm.send(x, dst=1, tag="lost")
        for tag in range(20):
            yield comm.sendrecv(x, dst=(comm.rank + 1) % comm.size,
                                src=(comm.rank - 1) % comm.size, tag=tag)
        return x

    with pytest.raises(sc.UnmatchedMessageError, match="0->1 .tag 'lost'."):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="test_sweep_lost",
                    nbytes=64)
    assert max(channels_in_use) >= 8


def test_route_caches_start_over_past_their_size(monkeypatch):
    """With room for 5 routes, a pairwise all_to_all on 6 ranks (30 pairs) gives the
    result it gives with every route kept, and neither cache holds more than 5."""
    whole = _pairwise(6, nbytes=4 * 6 * 100)
    monkeypatch.setattr(graph, "ROUTES_KEPT", 5)
    monkeypatch.setattr(base, "ROUTES_KEPT", 5)
    topo = sc.topology.switch(6)
    kept = sc.simulate(topo, "all_to_all", algorithm="pairwise", nbytes=4 * 6 * 100)
    assert kept.to_dict() == whole.to_dict()
    assert 0 < len(topo._routes) <= 5
    assert [topo.route(0, d).links for d in range(1, 6)] == [
        sc.topology.switch(6).route(0, d).links for d in range(1, 6)]


# --- data mode: arrays that cannot fit are refused before the run --------------------------

def machine_of(monkeypatch, nbytes):
    """Make this machine's physical memory ``nbytes`` (as os.sysconf reports it)."""
    real = os.sysconf

    def sysconf(name):
        return {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": nbytes // 4096}.get(name) or real(name)

    monkeypatch.setattr(os, "sysconf", sysconf)


def test_data_mode_outputs_that_cannot_fit_are_refused_before_the_run(monkeypatch):
    """An all_gather of 1 MiB on 32 ranks returns 32 outputs of 32 MiB: 1 GiB, with
    32 MiB of inputs 1.03 GiB, more than a machine of 0.5 GiB (it was simulated, and
    on 1024 ranks of 4 MiB died allocating 4 TiB of outputs)."""
    machine_of(monkeypatch, 2**29)
    x = np.ones(2**18, np.float32)
    ran = []
    monkeypatch.setattr(Execution, "run", lambda self: ran.append(self))
    with pytest.raises(sc.InvalidInputError, match=(
            r"^data= moves real arrays: all_gather on 32 ranks of 262144 float32 elements "
            r"each needs about 1\.0 GiB for its inputs and outputs alone, more than this "
            r"machine's 0\.5 GiB; pass nbytes= \(data-free mode")):
        sc.simulate(sc.topology.switch(32), "all_gather", algorithm="ring", data=[x] * 32)
    assert ran == []


@pytest.mark.parametrize("collective, algorithm", [("all_reduce", "ring"),
                                                   ("gather", "binomial")])
def test_data_mode_outputs_that_fit_run(monkeypatch, collective, algorithm):
    """The same arrays all_reduced (32 outputs of 1 MiB) or gathered (one of 32 MiB at
    the root) hold 64 MiB: they run on the machine of 0.5 GiB."""
    machine_of(monkeypatch, 2**29)
    data = [np.full(2**18, r, np.float32) for r in range(32)]
    res = sc.simulate(sc.topology.switch(32), collective, algorithm=algorithm, data=data)
    assert res.correct is True


def test_an_array_given_to_every_rank_counts_once(monkeypatch):
    """One array of 1.5 MiB given to 32 ranks, all_reduced: 1.5 MiB of inputs and 48 MiB
    of outputs fit in 64 MiB (counted once per rank, the inputs would make 96 MiB)."""
    machine_of(monkeypatch, 2**26)
    x = np.ones(3 * 2**17, np.float32)
    res = sc.simulate(sc.topology.switch(32), "all_reduce", algorithm="ring", data=[x] * 32)
    assert res.correct is True


def test_rows_of_a_memory_mapped_file_count_only_their_bytes(monkeypatch, tmp_path):
    """Four 4 KiB rows of a 64 MiB .npy file opened with mmap_mode="r", passed as
    np.asarray (as the refusal of a memmap subclass says): a run of 16 KiB in and 16 KiB
    out. The whole file was counted (needs about 0.1 GiB, on a machine of 32 MiB)."""
    np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype=np.float32,
                              shape=(2**14, 2**10)).flush()
    rows = np.load(tmp_path / "big.npy", mmap_mode="r")
    machine_of(monkeypatch, 2**25)
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring",
                      data=[np.asarray(rows[i]) for i in range(4)])
    assert res.correct is True
    # one row given to every rank through views of its own counts once: 4 KiB in and
    # 16 KiB out fit in 32 MiB, and 8 MiB rows (8 MiB in, 32 MiB out) do not
    res = sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring",
                      data=[np.asarray(rows[7]) for _ in range(4)])
    assert res.correct is True
    big = rows.reshape(-1)[:2**21]   # 8 MiB of float32
    with pytest.raises(sc.InvalidInputError, match=r"needs about 0\.04 GiB"):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring",
                    data=[np.asarray(big) for _ in range(4)])
    # the same rows of an array in memory count its whole 64 MiB: refused
    held = np.zeros((2**14, 2**10), dtype=np.float32)
    with pytest.raises(sc.InvalidInputError, match=r"needs about 0\.1 GiB"):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring",
                    data=[held[i] for i in range(4)])


def test_a_view_that_is_not_contiguous_is_counted_and_copied_after_the_check(monkeypatch):
    """np.broadcast_to views 32 MiB of 4 bytes; the algorithm holds a contiguous copy. It
    was copied once per rank (128 MiB on 4 ranks) before the memory check, which did not
    count it: on a machine of 64 MiB the copies came first, and a view of 1 TiB ended in
    numpy's MemoryError instead of the refusal."""
    machine_of(monkeypatch, 2**26)
    y = np.broadcast_to(np.float32(1), (2**23,))
    copies = []
    real = np.ascontiguousarray
    monkeypatch.setattr(np, "ascontiguousarray", lambda a: copies.append(a) or real(a))
    # refused before anything is copied
    with pytest.raises(sc.InvalidInputError, match=r"needs about 0\.2 GiB .* more than this "
                                                   r"machine's 0\.1 GiB"):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring", data=[y] * 4)
    assert copies == []
    # a gather of 2 MiB views on 4 ranks: the root's 8 MiB output and one 2 MiB copy
    # (once, however many ranks share the view) hold 10 MiB: they fit in 12 MiB and not
    # in 10 MiB less a page (without counting the copy, 8 MiB would fit there)
    machine_of(monkeypatch, 12 * 2**20)
    small = np.broadcast_to(np.float32(2), (2**19,))
    res = sc.simulate(sc.topology.switch(4), "gather", algorithm="binomial", data=[small] * 4)
    assert res.correct is True and len(copies) == 1
    machine_of(monkeypatch, 10 * 2**20 - 4096)
    with pytest.raises(sc.InvalidInputError, match=r"needs about 0\.00977 GiB"):
        sc.simulate(sc.topology.switch(4), "gather", algorithm="binomial", data=[small] * 4)
    assert len(copies) == 1


@pytest.mark.parametrize(("collective", "ranks", "nbytes", "output"), [
    ("all_reduce", 2, 2**40, ""), ("broadcast", 2, 2**40, ""),
    ("reduce_scatter", 2, 2**40, ""),
    ("all_gather", 8, 2**37, r" \(its output, 1099511627776 B\)")])
def test_nccl_slices_that_cannot_fit_are_refused_before_the_run(monkeypatch, collective,
                                                                ranks, nbytes, output):
    """NCCL's algorithms hold about 500 B of slices per MiB of a rank's larger buffer:
    1 TiB holds 2^20 x 500 B = 0.488 GiB, more than a machine of 0.25 GiB (2^59 B ended in
    an empty MemoryError at t = 0); 1/4096 of it holds 125 KiB and runs there.
    all_gather's ring moves every rank's p x nbytes output: 128 GiB in on 8 ranks is 1 TiB
    out (measured: 27.0 MB of slices for 8 GiB in, 8.3 x all_reduce's 3.3 MB); the
    estimate of its input alone, 0.061 GiB, let it run into a MemoryError."""
    machine_of(monkeypatch, 2**28)
    ran = []
    monkeypatch.setattr(Execution, "run", lambda self: ran.append(self))
    with pytest.raises(sc.InvalidInputError, match=(
            rf"^nbytes={nbytes}: NCCL's algorithms cut each rank's buffer{output} into "
            r"slices, about 0\.488 GiB of them here \(500 B per MiB\), more than this "
            r"machine's 0\.25 GiB; simulate a smaller size$")):
        sc.simulate(sc.topology.switch(ranks), collective, algorithm="nccl", nbytes=nbytes)
    assert ran == []
    monkeypatch.undo()
    machine_of(monkeypatch, 2**28)
    res = sc.simulate(sc.topology.switch(ranks), collective, algorithm="nccl",
                      nbytes=nbytes // 4096)
    assert res.time > 0


def test_nccl_slices_that_just_fit_are_not_refused(monkeypatch):
    # 1 GiB per rank holds 2^10 x 500 B = 512,000 B of slices: a machine of exactly that
    # is not exceeded ("refused where that exceeds this machine's memory")
    from simcoll.execution import Execution

    monkeypatch.setattr(sc.memory, "physical_memory", lambda: 512_000)
    class Ran(Exception):
        pass

    def run(self):
        raise Ran   # past the check: the run itself is not needed

    monkeypatch.setattr(Execution, "run", run)
    with pytest.raises(Ran):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="nccl", nbytes=2**30)
    monkeypatch.setattr(sc.memory, "physical_memory", lambda: 511_999)
    # as many digits as it takes for the two figures to differ ("about 0.000477 GiB of
    # them here ..., more than this machine's 0.000477 GiB" before)
    with pytest.raises(sc.InvalidInputError, match=r"about 0\.000476837 GiB of them here "
                                                   r"\(500 B per MiB\), more than this "
                                                   r"machine's 0\.000476836 GiB"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="nccl", nbytes=2**30)


def test_a_run_stops_with_a_memory_error_where_the_machine_runs_out(monkeypatch, capsys):
    """A data-free direct all_to_all on 3,000 ranks holds some 9 million messages, 25 GiB:
    it started on a machine of 23.5 GiB and ran until the out-of-memory killer came. The
    run now looks at the memory left every CHECK_EVERY (16,384) messages and stops with
    a MemoryError once little is (here: 100 MiB left; 2% of 23.5 GiB is 481.3 MiB). On
    129 ranks 16,512 messages: one look, in every network model (the run processes some
    2p events only, so looking by events never looked)."""
    from simcoll import memory
    from simcoll.cli import main

    looks = []

    def low():
        looks.append(1)
        return 100 * 2**20, int(23.5 * 2**30)

    monkeypatch.setattr(memory, "memory_left", low)
    for network in ("flow", "flow_rtt", "analytical"):
        looks.clear()
        with pytest.raises(MemoryError, match=r"^out of memory: this machine has 100 MiB "
                                              r"left \(below 481 MiB\), so the simulation "
                                              r"stopped$"):
            sc.simulate(sc.topology.switch(129), "all_to_all", algorithm="direct",
                        nbytes=129 * 8, network=network)
        assert looks == [1]
    assert main(["run", "--collective", "all_to_all", "--algorithm", "direct",
                 "--topology", "switch:129", "--size", "1032"]) == 2
    assert capsys.readouterr().err == (
        "simcoll run: error: out of memory: this machine has 100 MiB left (below 481 MiB), "
        "so the simulation stopped; use fewer ranks (algorithms that send to every rank at "
        "once, such as naive and direct, hold p^2 messages even data-free) or smaller sizes "
        "(or drop -c)\n")
    # with memory to spare, or where the system does not say, the run goes on; below
    # 16,384 messages nothing is read
    for reading in (lambda: (482 * 2**20, int(23.5 * 2**30)), lambda: None):
        monkeypatch.setattr(memory, "memory_left", reading)
        assert sc.simulate(sc.topology.switch(129), "all_to_all", algorithm="direct",
                           nbytes=129 * 8).time > 0
    looks.clear()
    monkeypatch.setattr(memory, "memory_left", low)
    assert sc.simulate(sc.topology.switch(128), "all_to_all", algorithm="direct",
                       nbytes=128 * 8).messages == 16_256
    assert looks == []


def test_the_memory_left_is_read_from_the_system():
    reading = sc.memory.memory_left()
    if sys.platform.startswith("linux"):
        assert reading is not None
        left, total = reading
        assert 0 < left <= total


def _meminfo(monkeypatch, text):
    """Make /proc/meminfo read ``text`` (bytes) for simcoll.memory."""
    import builtins
    import io

    from simcoll import memory

    real = builtins.open

    def fake(path, *args, **kwargs):
        if path == "/proc/meminfo":
            return io.BytesIO(text)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(memory, "open", fake, raising=False)


def test_the_memory_left_is_read_in_kib_from_one_reading(monkeypatch):
    """/proc/meminfo's kB are KiB; both figures come from the one file, and a file that
    lacks either, or a figure that is not a number, says nothing (None): the run goes on
    rather than stopping on a reading it cannot trust."""
    from simcoll import memory

    _meminfo(monkeypatch, b"MemTotal:       24683792 kB\nMemFree:        21970192 kB\n"
                          b"MemAvailable:   24091872 kB\nBuffers:           12 kB\n")
    assert memory.memory_left() == (24091872 * 1024, 24683792 * 1024)
    for text in (b"MemTotal:       24683792 kB\nMemFree:        21970192 kB\n",
                 b"MemAvailable:   24091872 kB\n",
                 b"MemTotal:       24683792 kB\nMemAvailable:   many kB\n",
                 b"MemTotal:\nMemAvailable:   24091872 kB\n"):
        _meminfo(monkeypatch, text)
        assert memory.memory_left() is None
        memory.check_memory_left()  # nothing known: no error


def test_the_memory_floor_is_256_mib_or_2_percent_and_exactly_the_floor_is_enough(
        monkeypatch):
    """The run stops below max(LOW_MEMORY, 2% of the total): on a 4 GiB machine (2% is
    82 MiB) below 256 MiB; on 23.5 GiB below 481.3 MiB. Exactly the floor left goes on."""
    from simcoll import memory

    assert memory.LOW_MEMORY == 256 * 2**20
    # a byte below the floor reads apart from it: 255.999999 MiB left (below 256.000000)
    for total, floor, shown in ((4 * 2**30, 256 * 2**20, r"255\.999999 MiB left \(below "
                                 r"256\.000000 MiB\)"),
                                (int(23.5 * 2**30), int(23.5 * 2**30) // 50,
                                 r"481\.279999 MiB left \(below 481\.280000 MiB\)")):
        monkeypatch.setattr(memory, "memory_left", lambda f=floor, t=total: (f, t))
        memory.check_memory_left()
        monkeypatch.setattr(memory, "memory_left", lambda f=floor, t=total: (f - 1, t))
        with pytest.raises(MemoryError, match=shown):
            memory.check_memory_left()


@pytest.mark.parametrize("network", ["flow", "flow_rtt", "analytical"])
def test_every_network_model_looks_at_the_memory_every_check_every_messages(monkeypatch,
                                                                           network):
    """16,256 messages (direct all_to_all on 128 ranks) read nothing; the look comes at
    the 16,384th message, in every network model, and not before."""
    from simcoll import memory

    seen = []

    def reading():
        seen.append(1)
        return 2**40, 2**40   # memory to spare

    monkeypatch.setattr(memory, "memory_left", reading)
    assert sc.simulate(sc.topology.switch(128), "all_to_all", algorithm="direct",
                       nbytes=128 * 8, network=network).messages == 16_256
    assert seen == []
    assert sc.simulate(sc.topology.switch(129), "all_to_all", algorithm="direct",
                       nbytes=129 * 8, network=network).messages == 16_512
    assert seen == [1]


@pytest.mark.parametrize("network", ["flow", "flow_rtt", "analytical"])
def test_multicasts_count_towards_the_memory_look(monkeypatch, network):
    """A multicast is a message as any other: 16,383 of them read nothing, and the
    16,384th looks at the memory left and stops the run where little is."""
    from simcoll import memory

    looks = []

    def low():
        looks.append(1)
        return 100 * 2**20, int(23.5 * 2**30)

    def caster(comm, n):
        if comm.rank == 0:
            for _ in range(n):
                yield comm.multicast(np.ones(1), [1, 2])
        else:
            for _ in range(n):
                yield comm.recv(0)
        return comm.rank

    monkeypatch.setattr(memory, "memory_left", low)
    assert sc.run_program(sc.topology.switch(3), caster, memory.CHECK_EVERY - 1,
                          network=network).messages == memory.CHECK_EVERY - 1
    assert looks == []
    with pytest.raises(MemoryError, match=r"^out of memory: this machine has 100 MiB left"):
        sc.run_program(sc.topology.switch(3), caster, memory.CHECK_EVERY, network=network)
    assert looks == [1]


def _write(folder, **files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text)


def test_a_cgroup_v2_limit_is_read_from_the_group_and_its_ancestors(tmp_path):
    """cgroup v2: the tightest of the group's and its ancestors' memory.max less what
    each uses but its inactive file pages: here the parent's 2 GiB less (1.5 GiB used
    but 0.25 GiB of them reclaimable) = 0.75 GiB; the group's own "max" sets nothing,
    and the root (no memory.max) neither."""
    gib = 2**30
    (tmp_path / "cgroup").write_text("0::/user.slice/job\n")
    mount = tmp_path / "fs"
    _write(mount / "user.slice", memory_max=f"{2 * gib}\n", memory_current=f"{3 * gib // 2}\n",
           memory_stat=f"anon 1\ninactive_file {gib // 4}\nactive_file 7\n")
    _write(mount / "user.slice" / "job", memory_max="max\n", memory_current=f"{gib}\n",
           memory_stat="inactive_file 0\n")
    _write(mount, memory_stat="inactive_file 0\n")
    assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup"), str(mount)) == (
        2 * gib - (3 * gib // 2 - gib // 4), 2 * gib)
    # a group with its own lower limit, tighter than its parent's left: 600 MiB - 500
    job = mount / "user.slice" / "job2"
    _write(job, memory_max=f"{600 * 2**20}\n", memory_current=f"{500 * 2**20}\n",
           memory_stat="inactive_file 0\n")
    (tmp_path / "cgroup2").write_text("0::/user.slice/job2\n")
    assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup2"), str(mount)) == (
        100 * 2**20, 600 * 2**20)


def test_a_cgroup_v1_limit_and_a_container_that_sees_its_group_as_the_root(tmp_path):
    """cgroup v1's memory controller: hierarchical_memory_limit less usage_in_bytes but
    total_inactive_file (1 GiB - (900 - 100) MiB = 224 MiB). In a container the group's
    path names a folder not mounted there: the mount's own files are the group's. No
    limit (v1 writes 2^63 less a page) or a limit above the machine's memory: None."""
    mib = 2**20
    (tmp_path / "cgroup").write_text(
        "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/docker/abc\n")
    mount = tmp_path / "fs"
    stat = (f"cache 5\nhierarchical_memory_limit {1024 * mib}\n"
            f"total_inactive_file {100 * mib}\n")
    _write(mount / "memory" / "docker" / "abc", memory_stat=stat,
           memory_usage_in_bytes=f"{900 * mib}\n", memory_limit_in_bytes=f"{2048 * mib}\n")
    assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup"), str(mount)) == (
        224 * mib, 1024 * mib)
    inside = tmp_path / "inside"
    _write(inside / "memory", memory_stat=stat, memory_usage_in_bytes=f"{900 * mib}\n")
    assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup"), str(inside)) == (
        224 * mib, 1024 * mib)
    for limit in (9223372036854771712, 2 * sc.memory.physical_memory()):
        free = tmp_path / f"free{limit}"
        _write(free / "memory", memory_stat=f"hierarchical_memory_limit {limit}\n",
               memory_usage_in_bytes=f"{900 * mib}\n")
        assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup"), str(free)) is None
    assert sc.memory.cgroup_memory_left(str(tmp_path / "none"), str(mount)) is None


def test_the_memory_stop_names_a_control_groups_limit_where_it_is_tighter(monkeypatch):
    """A control group with less left than the machine stops the run under its own
    floor (2% of its limit, at least 256 MiB but never over a quarter of the limit: a
    512 MiB limit stops below 128 MiB) and says so; the machine's figures where the
    group has more left."""
    from simcoll import memory

    monkeypatch.setattr(memory, "memory_left", lambda: (20 * 2**30, 24 * 2**30))
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: (128 * 2**20, 512 * 2**20))
    memory.check_memory_left()
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: (128 * 2**20 - 1, 512 * 2**20))
    with pytest.raises(MemoryError, match=r"^out of memory: this process's control group "
                                          r"\(a memory limit of 0\.5 GiB\) has 127\.999999 MiB "
                                          r"left \(below 128\.000000 MiB\), so the simulation "
                                          r"stopped$"):
        memory.check_memory_left()
    monkeypatch.setattr(memory, "memory_left", lambda: (100 * 2**20, 24 * 2**30))
    with pytest.raises(MemoryError, match=r"^out of memory: this machine has 100 MiB"):
        memory.check_memory_left()
    monkeypatch.setattr(memory, "memory_left", lambda: None)
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: (-5, 512 * 2**20))
    with pytest.raises(MemoryError, match=r"has 0 MiB left"):
        memory.check_memory_left()


def test_the_control_group_of_this_process_reads_as_no_limit_or_a_sane_one():
    reading = sc.memory.cgroup_memory_left()
    if reading is not None:
        left, limit = reading
        assert left <= limit < sc.memory.physical_memory()


def test_a_cgroup_v2_group_whose_reclaimable_pages_exceed_its_usage_has_its_whole_limit_left(
        tmp_path):
    """memory.current 100 MiB of which inactive_file says 300 MiB (the two are read at
    different instants): usage is 0, not -200 MiB, so a 1 GiB limit leaves 1 GiB, never
    more than the limit."""
    mib = 2**20
    (tmp_path / "cgroup").write_text("0::/job\n")
    mount = tmp_path / "fs"
    _write(mount / "job", memory_max=f"{1024 * mib}\n", memory_current=f"{100 * mib}\n",
           memory_stat=f"inactive_file {300 * mib}\n")
    assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup"), str(mount)) == (
        1024 * mib, 1024 * mib)


def test_a_cgroup_v2_group_without_a_usage_file_sets_no_limit(tmp_path):
    """memory.max without memory.current: the group cannot be read, so it is no limit
    (None), not a limit with nothing used."""
    mib = 2**20
    (tmp_path / "cgroup").write_text("0::/job\n")
    mount = tmp_path / "fs"
    _write(mount / "job", memory_max=f"{1024 * mib}\n", memory_stat="inactive_file 0\n")
    assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup"), str(mount)) is None


def test_a_named_v1_hierarchy_whose_name_contains_memory_is_not_the_memory_controller(
        tmp_path):
    """'1:name=memoryhog:/job' is a named hierarchy, not v1's memory controller
    (controllers are a comma-separated list): the memory folder it would point at is
    not read, so there is no limit."""
    mib = 2**20
    (tmp_path / "cgroup").write_text("1:name=memoryhog:/job\n")
    mount = tmp_path / "fs"
    _write(mount / "memory" / "job",
           memory_stat=f"hierarchical_memory_limit {1024 * mib}\ntotal_inactive_file 0\n",
           memory_usage_in_bytes=f"{100 * mib}\n")
    assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup"), str(mount)) is None


def test_malformed_cgroup_and_memory_stat_lines_are_passed_over(tmp_path):
    """A /proc/self/cgroup line without three fields and a memory.stat line without a
    value are skipped, not a crash: the well-formed lines still give 1 GiB - (600 - 100)
    MiB = 524 MiB."""
    mib = 2**20
    (tmp_path / "cgroup").write_text("garbage:line\n0::/job\n")
    mount = tmp_path / "fs"
    _write(mount / "job", memory_max=f"{1024 * mib}\n", memory_current=f"{600 * mib}\n",
           memory_stat=f"inactive_file\ninactive_file {100 * mib}\n")
    assert sc.memory.cgroup_memory_left(str(tmp_path / "cgroup"), str(mount)) == (
        524 * mib, 1024 * mib)


def test_arrays_past_a_control_groups_limit_are_refused_before_the_run(monkeypatch):
    """Inputs and outputs that fit the machine but not the process's control-group
    limit are refused by it, named as such: 2 GiB needed under a 1 GiB limit on a
    24 GiB machine; under no limit, or a looser one, the machine's memory decides."""
    from simcoll import memory

    monkeypatch.setattr(memory, "physical_memory", lambda: 24 * 2**30)
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: (2**29, 2**30))
    assert memory.shortfall(2 * 2**30) == (
        "needs about 2.0 GiB for its inputs and outputs alone, more than this process's "
        "control-group limit of 1.0 GiB")
    assert memory.shortfall(2**30) is None
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: None)
    assert memory.shortfall(2 * 2**30) is None
    assert memory.shortfall(25 * 2**30) == (
        "needs about 25.0 GiB for its inputs and outputs alone, more than this machine's "
        "24.0 GiB")


def test_the_refusals_before_a_run_read_a_control_groups_limit(monkeypatch):
    """A cost query's per-rank arrays (512 B a rank: 2 GiB for 2^22 ranks) and NCCL's
    slices (500 B per MiB: 2 MiB for 4 GiB per rank) are refused against the control
    group's limit (1 GiB, then 1 MiB) on a 24 GiB machine, naming it; the machine's
    memory where no group limits it, and nothing where neither is known."""
    from simcoll import memory

    monkeypatch.setattr(memory, "physical_memory", lambda: 24 * 2**30)
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: (2**29, 2**30))
    assert memory.memory_limit() == (2**30, "this process's control-group limit of")
    with pytest.raises(sc.InvalidInputError, match=r"would need about 2\.0 GiB, more than "
                                                   r"this process's control-group limit of "
                                                   r"1\.0 GiB"):
        sc.cost.traffic("all_reduce", "double_binary_tree", p=2**22, nbytes=8)
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: (2**19, 2**20))
    with pytest.raises(sc.InvalidInputError, match=r"more than this process's "
                                                   r"control-group limit of"):
        sc.simulate(sc.topology.switch(2), "all_reduce", algorithm="nccl", nbytes=4 * 2**30)
    monkeypatch.setattr(memory, "cgroup_memory_left", lambda: None)
    assert memory.memory_limit() == (24 * 2**30, "this machine's")
    monkeypatch.setattr(memory, "physical_memory", lambda: None)
    assert memory.memory_limit() is None


def test_kept_breadth_first_searches_start_over_past_their_size(monkeypatch):
    """The searches kept per source hold one list per device each: past ROUTES_KEPT * 8
    entries in all they start over (as the route cache does), and the routes stay those
    of a fresh search. With ROUTES_KEPT = 1 on a 3 x 3 torus with a chord (searched:
    no tree), 9 devices: one search (9 entries) is already 9 >= 8, so at most one is
    kept."""
    def machine():
        topo = sc.topology.torus((3, 3))
        topo.add_link(topo.gpus[0], topo.gpus[4], bandwidth=1e9)   # a chord: not a tree
        return topo
    fresh = {(s, t): machine().route(s, t).links for s in range(9) for t in range(9)
             if s != t}
    monkeypatch.setattr(graph, "ROUTES_KEPT", 1)
    topo = machine()
    assert not topo._is_tree()
    for (s, t), links in fresh.items():
        assert topo.route(s, t).links == links
        assert len(topo._searches) <= 1


def test_each_row_of_one_memory_mapped_file_counts_its_bytes(monkeypatch, tmp_path):
    """Four 2 MiB rows of one 32 MiB .npy file, all_reduced on 4 ranks: 8 MiB in and
    4 x 2 MiB out, 16 MiB (0.02 GiB), more than a machine of 12 MiB. Counted once for
    the mapping they share, the rows would make 10 MiB, which fits."""
    np.lib.format.open_memmap(tmp_path / "rows.npy", mode="w+", dtype=np.float32,
                              shape=(16, 2**19)).flush()
    rows = np.load(tmp_path / "rows.npy", mmap_mode="r")
    machine_of(monkeypatch, 12 * 2**20)
    with pytest.raises(sc.InvalidInputError,
                       match=r"needs about 0\.02 GiB .* machine's 0\.01 GiB"):
        sc.simulate(sc.topology.switch(4), "all_reduce", algorithm="ring",
                    data=[np.asarray(rows[i]) for i in range(4)])
