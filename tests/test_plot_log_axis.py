"""The log y axis of the scaling and comparison plots (plot.style.log_y_axis): its
limits, labelled ticks and unlabelled minor ones, worked out by hand."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import simcoll as sc  # noqa: E402
from simcoll.plot.style import log_y_axis, tick_numbers  # noqa: E402


def _axis(lo, hi):
    """An axes with data from lo to hi on log_y_axis, drawn: its limits, the major ticks
    in view with their labels, the minor ticks in view with theirs."""
    fig, ax = plt.subplots()
    ax.plot([0, 1], [lo, hi])
    log_y_axis(ax, lo, hi, lambda v: f"{v:g}")
    fig.canvas.draw()
    bottom, top = ax.get_ylim()
    inside = lambda v: bottom * (1 - 1e-9) <= v <= top * (1 + 1e-9)  # noqa: E731
    major = [(t.get_loc(), t.label1.get_text()) for t in ax.yaxis.get_major_ticks()
             if inside(t.get_loc())]
    minor = [(t.get_loc(), t.label1.get_text()) for t in ax.yaxis.get_minor_ticks()
             if inside(t.get_loc())]
    plt.close(fig)
    return (bottom, top), major, minor


def test_a_log_axis_over_100_to_200_runs_from_90_to_250():
    # by hand: the data with 2.5% of margin, 97.6 to 205, on the series 1, 1.5, 2, 2.5,
    # 3, 4, ... 9: 90 to 250 (ratio 2.8; 1-9 needs 90 to 300, 1-2-3-5-7 70 to 300, 1-2-5
    # 50 to 500), its closest ticks 100/90 (0.046 decades) above 1/12 of its 0.44
    limits, major, minor = _axis(100, 200)
    assert limits == pytest.approx((90, 250))
    assert [v for v, _ in major] == pytest.approx([90, 100, 150, 200, 250])
    assert [text for _, text in major] == ["90", "100", "150", "200", "250"]
    assert minor == []    # 90, 100 and 200 are labelled


def test_a_log_axis_over_2_to_30_labels_1_2_5_and_leaves_the_rest_unlabelled():
    # 1-2-5 from 1 to 50 (1-2-3-5-7 spans as much; 1-9 and 1.5-2.5 crowd 9 and 10);
    # the other multiples of each power of ten unlabelled minor ticks
    limits, major, minor = _axis(2, 30)
    assert limits == pytest.approx((1, 50))
    assert [v for v, _ in major] == pytest.approx([1, 2, 5, 10, 20, 50])
    assert [v for v, _ in minor] == pytest.approx([3, 4, 6, 7, 8, 9, 30, 40])
    assert all(text == "" for _, text in minor)


def test_data_under_twice_its_lowest_value_is_centred_on_an_axis_twice_as_wide():
    # 4.5 to 6.75: geometric centre 5.51, widened to 3.90 to 7.79 (a factor 2), with
    # margin 3.80 to 7.99: 1-9 from 3 to 8
    limits, major, _ = _axis(4.5, 6.75)
    assert limits == pytest.approx((3, 8))
    assert [v for v, _ in major] == pytest.approx([3, 4, 5, 6, 7, 8])


@pytest.mark.parametrize("lo, hi, decades, ends", [
    (1, 500, [1, 10, 100, 1000], (10 ** -0.09, 1000)),               # 3 decades
    (1, 1e6, [1, 10, 100, 1e3, 1e4, 1e5, 1e6], (10 ** -0.18, 10 ** 6.18)),
    (0.2, 99.99, [0.1, 1, 10, 100], (0.1, 99.99 * 10 ** 0.09)),   # a saturated busbw
    (0.03, 70, [0.01, 0.1, 1, 10, 100], (0.01, 100)),   # 70 x 10^0.12 = 92: the decades
])
def test_data_over_more_than_10_to_the_2_5_is_labelled_at_every_power_of_ten(lo, hi, decades,
                                                                              ends):
    """From the power of ten at or below the data to the one at or above: 500 was read
    against a last label of 100. Data within 3% of the axis's height of an end leaves that
    much to the frame, a factor 10^(0.03 d) on d decades: it ran along it, its markers
    cut in half."""
    limits, major, minor = _axis(lo, hi)
    assert limits == pytest.approx(ends)
    assert [v for v, _ in major] == pytest.approx(decades)
    assert all(text == "" for _, text in minor)


@pytest.mark.parametrize("lo, hi", [(1, 3), (1, 5), (1.2, 4.8)])
def test_minor_ticks_under_a_decade_are_not_labelled(lo, hi):
    # matplotlib's own minor labels here read "4x10^0" beside a plain "5"
    _, major, minor = _axis(lo, hi)
    assert minor and all(text == "" for _, text in minor)
    assert all(text and "times" not in text for _, text in major)


def test_an_axis_needs_three_labelled_ticks():
    # 3 to 3.03, widened about 3.015 to a factor 2 with margin: 2.08 to 4.37. 1-2-5
    # would span 2 to 5 with two labels only; 1-2-3-5-7 spans it with 2, 3, 5
    limits, major, _ = _axis(3, 3.03)
    assert limits == pytest.approx((2, 5))
    assert [v for v, _ in major] == pytest.approx([2, 3, 5])


def test_tick_labels_over_many_decades_share_one_notation():
    """busbw of 8 B - 32 KiB on a 50 us machine spans 1e-5 to 0.04 GB/s: Python's g form
    labelled it 1e-05 beside 0.0001; every tick is now a power of ten."""
    topo = sc.topology.switch(8, bandwidth=10 * sc.GB, latency=50 * sc.us)
    runs = [sc.simulate(topo, "all_reduce", algorithm="ring", nbytes=n)
            for n in (8, 64, 512, 4096, 32768)]
    fig = sc.plot.scaling(runs, x="nbytes", y="busbw")
    ax = fig.axes[0]
    labels = {float(v): t.get_text() for v, t in zip(ax.get_yticks(), ax.get_yticklabels())
              if ax.get_ylim()[0] <= v <= ax.get_ylim()[1]}
    superscripts = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
    assert len(labels) >= 4
    for value, text in labels.items():
        assert text.startswith("10") and "e" not in text
        assert 10.0 ** int(text[2:].translate(superscripts)) == pytest.approx(value)
    plt.close(fig)


def test_tick_numbers_plain_exactly_from_1e_4_to_1e5():
    plain = tick_numbers(1e-4, 1e5)
    assert plain(1e-4) == "0.0001" and plain(1e5) == "100000" and plain(250.0) == "250"


def test_tick_numbers_powers_of_ten_just_past_either_end():
    assert tick_numbers(1e-5, 1.0)(1e-5) == "10\u207b\u2075"        # 10⁻⁵ (g: 1e-05)
    assert tick_numbers(1.0, 1e6)(1e6) == "10\u2076"                # 10⁶ (g: 1e+06)
    assert tick_numbers(1.0, 1e6)(2e6) == "2\u00d710\u2076"         # 2×10⁶


def test_tick_numbers_a_mantissa_rounding_to_ten_moves_to_the_next_power():
    # 999,960 = 9.9996 x 10^5, 3 significant digits: 10.0 x 10^5 = 10^6
    assert tick_numbers(1.0, 1e6)(999_960.0) == "10\u2076"


def test_tick_numbers_zero_reads_as_zero():
    assert tick_numbers(1e-6, 1e6)(0.0) == "0"


def test_data_over_10_to_the_2_5_from_off_a_decade_starts_at_the_power_below():
    """3 to 5000: from 10^0, the power of ten below 3, to 10^4, the one above 5000."""
    fig, ax = plt.subplots()
    ax.plot([0, 1], [3, 5000])
    log_y_axis(ax, 3, 5000, lambda v: f"{v:g}")
    fig.canvas.draw()
    limits = ax.get_ylim()
    plt.close(fig)
    assert limits == pytest.approx((1, 1e4))
