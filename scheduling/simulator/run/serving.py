"""How much a serving replica counts: what it needs against what its placement can serve.

A replica's need is throughput, in reference GPUs (one A100-80GB = 1.0): the output tokens/s it
must sustain at peak over what one reference GPU sustains for its model. jobs.csv may declare it
(`gpu_need`); the generator derives it from a request rate and the model's size
(`need_from_rate`). A placement serves in proportion to the memory bandwidth it gets (decode is
bandwidth-bound): a whole GPU its model's bandwidth over the reference's, a MIG slice the lesser of
its compute (k/7) and memory (m/8) slices, a share its share. The replica counts min(need,
capacity), expressed in GPUs of the node it runs on: an over-sized placement is not credited for
capacity nobody asks for, and an under-sized one serves (and counts) less than asked.
Figures and sources: docs/reference/inference-credit.md.
"""

from __future__ import annotations

import math

from scheduling.engine.mig import geometry_for
from scheduling.engine.types import Allocation

# HBM bandwidth, GB/s (NVIDIA datasheet figures as quoted in docs/reference/inference-credit.md §1).
HBM_GB_S = {"H100": 3350.0, "A100-80GB": 2039.0, "A100-40GB": 1555.0}
REFERENCE_GB_S = HBM_GB_S["A100-80GB"]
# TensorRT-LLM v0.6 peak throughput on A100 FP16, 128 in / 2048 out, output tokens/s per GPU:
# LLaMA 7B 1,928 (TP1), LLaMA 70B 525 over TP4 = 131 per GPU (§2).
ANCHORS = ((7.0, 1928.0), (70.0, 525.0 / 4))
TOKENS_PER_REQUEST = 256  # output tokens per request, the scenarios' assumption (§3)


def speed(model: str) -> float:
    """A whole GPU's serving throughput over the reference GPU's (bandwidth ratio)."""
    upper = model.upper()
    for name, gb_s in HBM_GB_S.items():
        if name in upper:
            return gb_s / REFERENCE_GB_S
    if "A100" in upper:
        return HBM_GB_S["A100-40GB" if "40" in upper else "A100-80GB"] / REFERENCE_GB_S
    return 1.0


def tokens_per_s(params_b: float) -> float:
    """Output tokens/s one reference GPU sustains for a model of this size: a power law through
    the two TensorRT-LLM anchors (extrapolated beyond them)."""
    (p0, t0), (p1, t1) = ANCHORS
    slope = math.log(t1 / t0) / math.log(p1 / p0)
    return t0 * (params_b / p0) ** slope


def need_from_rate(params_b: float, requests_per_s: float) -> float:
    """Reference GPUs a replica needs to serve this request rate."""
    return requests_per_s * TOKENS_PER_REQUEST / tokens_per_s(params_b)


def slice_fraction(model: str, alloc: Allocation) -> float:
    """Share of one GPU's serving throughput an allocation gets."""
    if alloc.mig_profile is not None:
        geometry = geometry_for(model)
        profile = geometry.resolve(alloc.mig_profile)
        return min(profile.compute_slices / geometry.compute_slices,
                   profile.memory_slices / geometry.memory_slices)
    return min(alloc.milli, 1000) / 1000


def credit(need_ref: float, model: str, allocations) -> float:
    """GPUs of this model that a replica needing `need_ref` reference GPUs counts for."""
    capacity = speed(model) * sum(slice_fraction(model, a) for a in allocations)
    return min(need_ref, capacity) / speed(model)
