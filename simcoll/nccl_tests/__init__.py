"""Read the tables that nccl-tests' ``*_perf`` programs print (and ``simcoll run`` prints).

``parse(text)`` turns one run's output into an :class:`NcclTestsTable`: the header (the
program, the ``# nThread ...`` settings, the devices of every rank, the NCCL version when
printed), one :class:`NcclTestsRow` per size with its out-of-place and in-place
:class:`Measurement`, and the footer (``# Out of bounds values``, ``# Avg bus
bandwidth``). ``parse_all(text)`` reads a log holding several runs, ``parse(text, run=K)``
the K-th of them, and ``count_runs(text)`` counts them.

The layout follows ``src/util.cu`` of NVIDIA/nccl-tests 2.19.6: ``size count type redop
root``, then per block ``time algbw busbw #wrong`` (out-of-place, then in-place), and with
``-S 1`` a timestamp at the end of the row, which is left out. Older versions print no
``root`` column (and no ``redop`` for collectives without one) and an ``error`` column
(the largest error, e.g. ``2e-07``) instead of ``#wrong``; 2.10 to 2.13.3 leave the redop
of the collectives without one blank (as hypercube still does), read as None. nccl-tests
1.x titles its columns ``bytes N type op ... res``, prints its settings and footer without
their ``#`` and its times in milliseconds, which are read in microseconds like the
others'. The column titles say which layout a table has, and without titles the number
of fields does. ``simcoll run`` prints one block, titled ``simulated``, read as the
out-of-place one.

Header lines that lost their ``#`` (a log pasted into a GitHub issue or a markdown page,
which reads ``# ...`` as a heading and shows the text after it) are read as their ``#``
forms: ``Using devices``, the ``Rank N [Group N] [Pid N] on HOST device N [..] NAME``
lines, ``nccl-tests version ...``, ``Collective test starting: ...``, the column titles,
the footers and ``simcoll run``'s own header. A line is read so only where it matches
such a header whole (column titles only where they give a layout), and only until a
line that kept its ``#`` (after which the text is no such paste, and a launcher's line
shaped like a device line stays a log line); any other line, a row or a log line, is
read as before.

Every row is cross-checked: its size must be its count of elements of its type (times
the ranks for the collectives whose count is one rank's share, where the header lists
them all; where it lists none, or a list cut short, the rows give the ranks), and its
algbw its size over its time, to the rounding of the printed numbers (a JSON report's to
the 6 decimals nccl-tests writes; not where the time is ``-C 1``'s CPU time, which algbw
does not come from). A collective prints ``none`` for redop where it reduces nothing and
a reduction (``sum`` ...) where it does: a row that says otherwise is an error naming its
line (a JSON report's row: ``results[i]``). Where no
header comes between two runs (``grep -v '^#'``), a row whose redop changes between
``none`` and a reduction, or (without column titles) whose fields give other columns
(a root where the redop was, a blank redop) or whose size falls below the previous
one's of the same type, redop and root, starts another run. Without titles, a ``#wrong``
column printed as ``0e+00`` is old versions' ``error`` column (``error_column``).

Lines that MPI launchers prefix (``[0] ``, ``[1,0]<stdout>:``, ``srun -l``'s `` 0: ``)
are read without their prefix, and a byte-order mark is dropped; log lines between the
rows (``NCCL INFO ...``) are skipped. A line that starts like a result row but is not
one (a row cut short included) is an error naming its line number. A run that failed
(nccl-tests' ``Test NCCL failure``, ``Test CUDA failure``, ``Test timeout`` or
``.. host pid N: Test failure`` lines) is an error that quotes the line and says
after which size the table stops; the other runs of the log can still be read with
``parse(text, run=K)``.

The modules:

* :mod:`~simcoll.nccl_tests.tables`: the result types, ``PROGRAMS``, ``ITEMSIZE`` and
  ``nccl_shape``.
* :mod:`~simcoll.nccl_tests.scanning`: a log split into runs, line by line.
* :mod:`~simcoll.nccl_tests.rows`: the column layouts, and a result row read and checked.
* :mod:`~simcoll.nccl_tests.json_report`: nccl-tests' JSON report (``-J file``), read as
  one run (one without results is refused as a log without rows is).
* :mod:`~simcoll.nccl_tests.parsing`: ``parse``, ``parse_all``, ``count_runs``: each run
  made a table, its rows checked against its collective.
"""

from __future__ import annotations

from simcoll.nccl_tests.parsing import count_runs, parse, parse_all
from simcoll.nccl_tests.tables import (
    ITEMSIZE,
    PROGRAMS,
    Measurement,
    NcclTestsRow,
    NcclTestsTable,
    nccl_shape,
)

__all__ = ["Measurement", "NcclTestsRow", "NcclTestsTable", "parse", "parse_all", "count_runs",
           "nccl_shape", "ITEMSIZE", "PROGRAMS"]
