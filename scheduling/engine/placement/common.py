"""Lookups every placement path shares: which GPU models a job may use, in which order."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..mig import canonical_model
from ..plan import Allocation
from ..state import NodeState
from ..tiers import tier_order
from ..types import Job

if TYPE_CHECKING:
    from ..session import Session

Models = tuple[str, ...]  # canonical GPU models a job may use, in a fixed order
Slot = tuple[NodeState, Allocation]  # where one sub-GPU member goes
SlotFinder = Callable[["Session", Job, Models], Slot | None]


def model_memory(session: Session) -> dict[str, float]:
    """Smallest GPU memory per canonical model present in the cluster."""
    if session.memory_by_model is None:
        memory: dict[str, float] = {}
        for node in session.nodes.values():
            if node.gpus:  # its smallest first (a min is exact, whatever the order)
                least = min(gpu.memory_gb for gpu in node.gpus)
                memory[node.model] = min(memory.get(node.model, least), least)
        session.memory_by_model = memory
    return session.memory_by_model


def as_whole(session: Session, job: Job) -> bool:
    """A sub-GPU job takes a whole GPU when the policy has neither MIG nor sharing."""
    return not job.fractional or not (session.features.mig or session.features.sharing)


def allowed_models(session: Session, job: Job) -> Models:
    # Every pass over the waiting jobs asks for each: kept per job object too (one string key
    # rather than a tuple to hash).
    mine = session.job_models.get(job.id)
    if mine is not None and mine[0] is job:
        return mine[1]
    models = _allowed_models(session, job)
    session.job_models[job.id] = (job, models)
    return models


def _allowed_models(session: Session, job: Job) -> Models:
    key = ("models", job.gpu_models, job.gpu_memory_gb, job.fractional)
    if key not in session.allowed:
        memory = model_memory(session)
        wanted = {canonical_model(m) for m in job.gpu_models}
        models = [m for m in sorted(memory) if not wanted or m in wanted]
        if session.features.memory_aware:
            models = [m for m in models if job.gpu_memory_gb <= memory[m]]
        session.allowed[key] = tuple(models)
    return session.allowed[key]


def search_order(session: Session, job: Job, models: Models) -> list[tuple[str, str]]:
    """(tier, model) pairs, best tier first when the tiers plugin is on."""
    return [(tier, model) for tier in tier_order(job, session.features.tiers) for model in models]
