import pytest

from scheduling.engine.topology import (
    GroupShape,
    choose_gpus,
    group_bandwidth,
    group_cost,
    intra_node_bandwidth,
    ring_allreduce_seconds,
)


def test_ring_allreduce_formula():
    # 2(n-1)/n * S/B + alpha: 8 GPUs, 1 GB at 230 GB/s.
    assert ring_allreduce_seconds(1e9, 8, 230, 15e-6) == pytest.approx(1.75 / 230 + 15e-6)
    assert ring_allreduce_seconds(1e9, 1, 230, 15e-6) == 0


@pytest.mark.parametrize("interconnect, model, gpus, bandwidth", [
    ("nvswitch", "A100-80GB", (0, 1, 2, 3), 230), ("nvswitch", "H100-80GB", (0, 5), 370),
    ("nvlink-pairs", "H100-NVL-94GB", (2, 3), 116), ("nvlink-pairs", "H100-NVL-94GB", (1, 2), 16),
    ("pcie", "T4", (0, 1), 16)])
def test_link_bandwidths_follow_the_reference(interconnect, model, gpus, bandwidth):
    assert intra_node_bandwidth(interconnect, model, gpus) == bandwidth


def test_crossing_the_spine_divides_by_oversubscription():
    nodes = tuple(("nvswitch", "H100-80GB", tuple(range(8)), 384.0) for _ in range(2))
    assert group_bandwidth(GroupShape(nodes, leaves=1)) == 370
    assert group_bandwidth(GroupShape(nodes, leaves=2), 2.0) == 185


def test_one_node_beats_two_nodes_beats_two_leaves():
    one = GroupShape((("nvswitch", "H100-80GB", tuple(range(8)), 384.0),))
    two = GroupShape(tuple(("nvswitch", "H100-80GB", tuple(range(4)), 384.0) for _ in range(2)))
    spread = GroupShape(two.nodes, leaves=2)
    assert group_cost(one) < group_cost(two) < group_cost(spread, 2.0)


def test_nvlink_pairs_are_kept_whole():
    assert choose_gpus("nvlink-pairs", [0, 2, 3, 5], 2) == (2, 3)
    assert choose_gpus("nvlink-pairs", [0, 1, 2], 1) == (2,)
    assert choose_gpus("nvswitch", [3, 1, 2], 2) == (1, 2)
