"""Link classes and the ring all-reduce cost of a GPU group.

t(S, n) ≈ 2(n−1)/n · S / B + α, with B the bus bandwidth of the slowest link in the group
(figures from docs/reference/performance-figures.md, nccl-tests busbw):
NVSwitch A100 230 GB/s, H100/H200 370 (ring), NVLink-bridged pair 116, PCIe / CPU path 16,
between nodes NICs × 48 GB/s (NDR), divided by the spine oversubscription when crossing leaves.
"""

from __future__ import annotations

from dataclasses import dataclass

NVSWITCH_GB_S = {"A100": 230.0, "H100": 370.0, "H200": 370.0}
NVSWITCH_DEFAULT_GB_S = 230.0
NVLINK_PAIR_GB_S = 116.0
PCIE_GB_S = 16.0
ALPHA_INTRA_S = 15e-6
ALPHA_INTER_S = 47e-6
ALPHA_PER_LEVEL_S = 5e-6

# Gradient size used to rank placements; the ranking does not depend on it much.
REFERENCE_BYTES = 1e9

# Link classes inside a node, fastest first.
LINK_NVSWITCH, LINK_NVLINK, LINK_PCIE = ("nvswitch", "nvlink", "pcie")


@dataclass(frozen=True)
class GroupShape:
    """Where a gang's GPUs are: per node (interconnect, gpu model, GPU indices, nic bandwidth),
    and how many leaves and spines it spans."""

    nodes: tuple[tuple[str, str, tuple[int, ...], float], ...]
    leaves: int = 1
    spines: int = 1


def nvswitch_bandwidth(model: str) -> float:
    for family, bandwidth in NVSWITCH_GB_S.items():
        if family in model.upper():
            return bandwidth
    return NVSWITCH_DEFAULT_GB_S


def intra_node_link(interconnect: str, gpu_indices: tuple[int, ...]) -> str:
    if len(gpu_indices) <= 1:
        return LINK_NVSWITCH
    if interconnect == "nvswitch":
        return LINK_NVSWITCH
    pairs = {i // 2 for i in gpu_indices}
    if interconnect == "nvlink-pairs" and len(gpu_indices) == 2 and len(pairs) == 1:
        return LINK_NVLINK
    return LINK_PCIE


def intra_node_bandwidth(interconnect: str, model: str, gpu_indices: tuple[int, ...]) -> float:
    link = intra_node_link(interconnect, gpu_indices)
    if link == LINK_NVSWITCH:
        return nvswitch_bandwidth(model)
    return NVLINK_PAIR_GB_S if link == LINK_NVLINK else PCIE_GB_S


def ring_allreduce_seconds(size_bytes: float, n: int, bandwidth_gb_s: float,
                           alpha_s: float) -> float:
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * size_bytes / (bandwidth_gb_s * 1e9) + alpha_s


def group_bandwidth(shape: GroupShape, spine_oversubscription: float = 1.0) -> float:
    """Bus bandwidth of the slowest link the ring uses."""
    bandwidth = min(intra_node_bandwidth(ic, model, idx) for ic, model, idx, _ in shape.nodes)
    if len(shape.nodes) > 1:
        bandwidth = min(bandwidth, min(nic for *_, nic in shape.nodes))
        if shape.leaves > 1:
            bandwidth /= max(1.0, spine_oversubscription)
    return bandwidth


def group_cost(shape: GroupShape, spine_oversubscription: float = 1.0,
               size_bytes: float = REFERENCE_BYTES) -> float:
    """Seconds for one all-reduce of `size_bytes` over the group (lower is better)."""
    n = sum(len(idx) for _, _, idx, _ in shape.nodes)
    alpha = ALPHA_INTRA_S
    if len(shape.nodes) > 1:
        alpha = ALPHA_INTER_S + ALPHA_PER_LEVEL_S * ((shape.leaves > 1) + (shape.spines > 1))
    return ring_allreduce_seconds(size_bytes, n, group_bandwidth(shape, spine_oversubscription),
                                  alpha)


def choose_gpus(interconnect: str, free: list[int], count: int) -> tuple[int, ...]:
    """Which free GPUs of a node to give a member. On NVLink-pair nodes an even count takes
    whole pairs (so the pair link is used) and an odd count starts with a GPU whose mate is
    busy (so no free pair is split needlessly)."""
    free = sorted(free)
    if interconnect != "nvlink-pairs":
        return tuple(free[:count])
    present = set(free)
    lonely = [g for g in free if g ^ 1 not in present]
    paired = [g for g in free if g ^ 1 in present]
    order = paired + lonely if count % 2 == 0 else lonely + paired
    return tuple(order[:count])
