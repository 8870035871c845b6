"""Memory profiles: how much GPU memory a job needs, and the smallest slice that holds it.

The rule is "never smaller": a job goes to the smallest MIG profile or GPU share whose memory is
at least its need, never to one that is smaller.
"""

from __future__ import annotations

import math

from .mig import MigGeometry, MigProfile

GIB = 2**30

BYTES_PER_PARAM = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0,
                   "int8": 1.0, "int4": 0.5}

# Mixed-precision Adam: bf16 weights (2) + bf16 grads (2) + fp32 master (4) + fp32 m, v (8).
ADAM_MIXED_BYTES_PER_PARAM = 16.0

# CUDA context, allocator slack and runtime buffers, added to every estimate.
RUNTIME_OVERHEAD_GB = 1.0
RUNTIME_OVERHEAD_FRACTION = 0.10

SHARE_STEP_MILLI = 10


def memory_need_gb(params_billion: float, precision: str = "bf16", workload: str = "inference",
                   kv_cache_gb: float = 0.0, activations_gb: float = 0.0,
                   overhead_gb: float | None = None) -> float:
    """GPU memory need in GiB for the submit form.

    inference ≈ parameters × bytes per parameter + KV cache + runtime overhead;
    training_adam ≈ 16 bytes per parameter (mixed precision Adam) + activations + overhead.
    """
    if workload == "inference":
        if precision not in BYTES_PER_PARAM:
            raise ValueError(f"unknown precision {precision!r}; use one of {sorted(BYTES_PER_PARAM)}")
        state = params_billion * 1e9 * BYTES_PER_PARAM[precision] / GIB
        extra = kv_cache_gb
    elif workload == "training_adam":
        state = params_billion * 1e9 * ADAM_MIXED_BYTES_PER_PARAM / GIB
        extra = activations_gb
    else:
        raise ValueError(f"unknown workload {workload!r}; use inference or training_adam")
    if overhead_gb is None:
        overhead_gb = RUNTIME_OVERHEAD_GB + RUNTIME_OVERHEAD_FRACTION * state
    return round(state + extra + overhead_gb, 2)


def smallest_profile(geometry: MigGeometry, need_gb: float, pinned: str = "") -> MigProfile | None:
    """The smallest plain MIG profile whose memory holds `need_gb`; None if none does. `pinned`
    (a job's mig_profile): that profile only, None where the geometry has none of that name."""
    if pinned:
        return next((p for p in geometry.plain_profiles if p.name == pinned), None)
    for profile in geometry.plain_profiles:  # sorted smallest memory first
        if profile.memory_gb >= need_gb:
            return profile
    return None


def share_milli(need_gb: float, gpu_memory_gb: float, compute_milli: int = 0) -> int | None:
    """Share of a non-MIG GPU for a memory need: the memory fraction (rounded up to a step),
    or the compute share asked for if larger. None when the GPU is too small."""
    if need_gb > gpu_memory_gb or gpu_memory_gb <= 0:
        return None
    by_memory = math.ceil(1000 * need_gb / gpu_memory_gb / SHARE_STEP_MILLI) * SHARE_STEP_MILLI
    return max(SHARE_STEP_MILLI, min(1000, max(by_memory, compute_milli)))
