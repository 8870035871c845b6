"""Memory sizing for the submit form: a thin layer over the scheduling engine's own rules.

The engine decides where a job goes, so the helper must use the very same formula and the same
"smallest MIG profile that holds the need" choice; otherwise the form would promise a slice the
scheduler does not give.
"""

import math
from dataclasses import dataclass

from scheduling.engine import memory, mig

WORKLOADS = {"inference": "Inference", "training_adam": "Training (Adam, mixed precision)"}
PRECISIONS = tuple(memory.BYTES_PER_PARAM)


@dataclass(frozen=True)
class Fit:
    gpu_model: str
    gpus: int  # whole GPUs needed; 0 when a MIG slice or a share holds the need
    mig_profile: str = ""
    text: str = ""


def memory_need_gb(*, params_billion: float, precision: str = "bf16", workload: str = "inference",
                   kv_cache_gb: float = 0.0, activations_gb: float = 0.0) -> float:
    """GPU memory need in GiB; ValueError on an unknown precision or workload."""
    if params_billion <= 0:
        raise ValueError("parameters must be positive")
    return memory.memory_need_gb(params_billion, precision, workload, kv_cache_gb=kv_cache_gb,
                                 activations_gb=activations_gb)


def fit_on(gpu_model: str, gpu_memory_gb: float, need_gb: float) -> Fit:
    """What a job with `need_gb` gets on one GPU model: the smallest MIG profile, else whole GPUs."""
    geometry = mig.geometry_for(gpu_model)
    if geometry is not None:
        profile = memory.smallest_profile(geometry, need_gb)
        if profile is not None and profile.compute_slices < geometry.compute_slices:
            return Fit(gpu_model, 0, profile.name, f"MIG {profile.name} on {gpu_model}")
    if need_gb <= gpu_memory_gb:
        return Fit(gpu_model, 1, "", f"1 × {gpu_model}")
    count = math.ceil(need_gb / gpu_memory_gb)
    return Fit(gpu_model, count, "", f"{count} × {gpu_model} (sharded across GPUs)")


def fits(need_gb: float, gpu_models: dict[str, float]) -> list[Fit]:
    """The fit on every GPU model of the cluster ({model: memory GiB}), smallest first."""
    return [fit_on(model, gb, need_gb) for model, gb in sorted(gpu_models.items(), key=lambda i: i[1])]


def profile_memory_gb(profile_name: str, gpu_models) -> dict[str, float]:
    """{model: memory GiB} of a MIG profile on each cluster model that has it (empty: unknown)."""
    found = {}
    for model in gpu_models:
        geometry = mig.geometry_for(model)
        if geometry is None:
            continue
        for profile in geometry.plain_profiles:
            if profile.name == profile_name:
                found[model] = profile.memory_gb
    return found
