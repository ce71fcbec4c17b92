"""The public nccl-tests tables in benchmarks/nccl_public.py are consistent with
nccl-tests' definitions, row by row, within the rounding they were printed with."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "nccl_public.py"
spec = importlib.util.spec_from_file_location("nccl_public", PATH)
nccl_public = importlib.util.module_from_spec(spec)
sys.modules.setdefault("nccl_public", nccl_public)
spec.loader.exec_module(nccl_public)


def rounding(time_us: float) -> float:
    """Half a unit of the time's last printed digit: two decimals below 100 us, one below
    10 ms, none above (as the published tables print it)."""
    return 0.005 if time_us < 100 else 0.05 if time_us < 10000 else 0.5


@pytest.mark.parametrize("public", nccl_public.TABLES, ids=lambda t: t.id)
def test_rows_follow_the_definitions(public):
    p = public.nranks
    assert len(public.rows) >= 6 and public.source.startswith("https://")
    sizes = [row[0] for row in public.rows]
    assert sizes == sorted(set(sizes))
    for size, time_us, algbw, busbw in public.rows:
        exact = size / (time_us * 1e-6) / 1e9            # algbw from size and printed time
        slack = exact * rounding(time_us) / time_us       # what the time's rounding allows
        assert abs(algbw - exact) <= 0.005 + slack + 1e-9, (size, algbw, exact)
        assert abs(busbw - exact * 2 * (p - 1) / p) <= 0.005 + 2 * slack + 1e-9, size


def test_ids_are_unique_and_tables_convert():
    ids = [t.id for t in nccl_public.TABLES]
    assert len(ids) == len(set(ids)) >= 5
    for public in nccl_public.TABLES:
        table = nccl_public.table(public)
        assert (table.collective, table.nranks) == ("all_reduce", public.nranks)
        assert table.sizes == tuple(r[0] for r in public.rows)
        assert [r.out_of_place.time_us for r in table.rows] == [r[1] for r in public.rows]
