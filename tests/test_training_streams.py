"""Where a step's time went: the breakdown of spans, worked by hand."""

from __future__ import annotations

import pytest

from simcoll import training as tr
from simcoll.training.streams import breakdown


def span(rank, stream, start, end):
    return tr.Span(rank, stream, "x", start, end)


def test_breakdown_by_hand():
    spans = [span(0, "compute", 0, 1), span(0, "tp", 1, 3), span(0, "dp", 2, 4),
             span(0, "compute", 4.5, 5), span(1, "compute", 0, 2), span(1, "compute", 1, 3),
             span(1, "pp", 2, 6)]
    # Rank 0: compute 1.5; tp alone on [1, 2], shared with dp on [2, 3] (half each), dp
    # alone on [3, 4]; idle on [4, 4.5] and [5, 6]. Rank 1: compute [0, 3] (overlapping
    # spans count once), pp exposed on [3, 6].
    one = breakdown(spans, [0], 6.0)
    assert one.compute == pytest.approx(1.5)
    assert one.exposed == pytest.approx({"dp": 1.5, "tp": 1.5})
    assert one.idle == pytest.approx(1.5)
    two = breakdown(spans, [1], 6.0)
    assert two.compute == pytest.approx(3.0) and two.idle == pytest.approx(0.0)
    assert two.exposed == pytest.approx({"pp": 3.0})
    both = breakdown(spans, [0, 1], 6.0)
    assert both.compute == pytest.approx(2.25) and both.idle == pytest.approx(0.75)
    assert both.exposed == pytest.approx({"dp": 0.75, "pp": 1.5, "tp": 0.75})
    assert both.exposed_total == pytest.approx(3.0)


def test_spans_past_the_step_are_cut_and_absent_ranks_are_idle():
    res = breakdown([span(0, "compute", -1, 2), span(0, "dp", 1, 9)], [0, 1], 4.0)
    assert res.compute == pytest.approx(1.0)  # rank 0: 2 of 4, rank 1: nothing
    assert res.exposed == pytest.approx({"dp": 1.0})
    assert res.idle == pytest.approx(2.0)
