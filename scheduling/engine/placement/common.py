"""Lookups every placement path shares: which GPU models a job may use, in which order."""

from __future__ import annotations

from ..mig import canonical_model
from ..tiers import tier_order
from ..types import Job


def model_memory(session) -> dict[str, float]:
    """Smallest GPU memory per canonical model present in the cluster."""
    if "model_memory" not in session.cache:
        memory: dict[str, float] = {}
        for node in session.nodes.values():
            for gpu in node.gpus:
                memory[node.model] = min(memory.get(node.model, gpu.memory_gb), gpu.memory_gb)
        session.cache["model_memory"] = memory
    return session.cache["model_memory"]


def as_whole(session, job: Job) -> bool:
    """A sub-GPU job takes a whole GPU when the policy has neither MIG nor sharing."""
    return not job.fractional or not (session.features.mig or session.features.sharing)


def allowed_models(session, job: Job) -> tuple[str, ...]:
    key = ("models", job.gpu_models, job.gpu_memory_gb, job.fractional)
    if key not in session.cache:
        memory = model_memory(session)
        wanted = {canonical_model(m) for m in job.gpu_models}
        models = [m for m in sorted(memory) if not wanted or m in wanted]
        if session.features.memory_aware:
            models = [m for m in models if job.gpu_memory_gb <= memory[m]]
        session.cache[key] = tuple(models)
    return session.cache[key]


def search_order(session, job: Job, models):
    """(tier, model) pairs, best tier first when the tiers plugin is on."""
    return [(tier, model) for tier in tier_order(job, session.features.tiers) for model in models]
