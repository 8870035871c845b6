"""Binning by arrived percent, as the artifact's merge scripts do."""

import pytest

from scheduling.simulator.fill.loop import FillResult
from scheduling.simulator.fill.metrics import allocation_rate, bin_events, frag_ratio, mean_over_runs


def test_bins_use_whole_percent_and_the_neighbour_rule():
    arrived = [0.3, 0.6, 1.4, 3.2]
    values = [1.0, 2.0, 3.0, 4.0]
    bins = bin_events(arrived, values, max_bin=6)
    assert bins == {0: 1.0, 1: 2.5,
                    2: 3.0,  # empty: mean of the events in bins 1 and 3
                    3: 4.0, 4: 4.0}  # 5 and 6 have no neighbour events and are left out


def test_half_percent_rounds_to_even_like_pandas():
    assert bin_events([2.5, 3.5], [1.0, 2.0], max_bin=4) == {1: 1.0, 2: 1.0, 3: 1.5, 4: 2.0}


def test_allocation_and_frag_ratio_in_percent():
    result = FillResult(capacity_milli=10_000, arrived=[1000, 2000], used=[1000, 1000],
                        frag=[900.0, 450.0], idle=[9000, 9000])
    assert allocation_rate(result) == {9: 10.0, 10: 10.0, 11: 10.0, 19: 10.0, 20: 10.0, 21: 10.0}
    assert frag_ratio(result)[10] == pytest.approx(10.0)
    assert frag_ratio(result)[20] == pytest.approx(5.0)


def test_mean_over_runs_uses_the_runs_that_have_the_bin():
    assert mean_over_runs([{0: 1.0, 1: 2.0}, {0: 3.0}]) == {0: 2.0, 1: 2.0}
