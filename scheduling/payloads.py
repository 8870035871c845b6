"""What an ActionRequest asks for, as typed records: one definition for whoever writes a request
(scheduling/apply.py from a plan; the workers for spot reclaims, due checkpoints and the demo's
rebinds) and whoever reads it (the snapshot counts it in flight, the workers carry it out).

Job ids are the database's integers here; the engine's string ids are made from them in one
place (the snapshot). A row's payload also holds the workers' progress (`phase`, `asked_at`,
... in agents/actions/): `from_payload` reads only the request's own fields (pydantic checks
them) and refuses a payload that lacks one or has one of the wrong type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, Self

from pydantic import TypeAdapter, ValidationError

from scheduling.engine.reasons import PreemptReason


class PayloadError(ValueError):
    """A payload that does not say what its kind of request needs."""


class _Payload:
    def as_payload(self) -> dict[str, Any]:
        """JSON-ready: tuples as lists, reasons as their codes."""
        return _adapter(type(self)).dump_python(self, mode="json")

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Self:
        try:
            return _adapter(cls).validate_json(json.dumps(payload), strict=True)
        except ValidationError as error:
            raise PayloadError(f"{cls.__name__}: {error}") from None


@cache
def _adapter(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


@dataclass(frozen=True, kw_only=True)
class AllocationRequest(_Payload):
    """What one pod holds on one GPU: a whole GPU, a share (milli < 1000) or a MIG instance."""

    gpu_index: int
    milli: int
    mig_profile: str | None
    mig_start: int | None


@dataclass(frozen=True, kw_only=True)
class BindPayload(_Payload):
    """Start member `member` of a job as pod `pod_name` on `node`, over these placement rows."""

    job_id: int
    member: int
    node: str
    pod_name: str
    placements: tuple[int, ...]
    allocations: tuple[AllocationRequest, ...]


@dataclass(frozen=True, kw_only=True)
class PreemptPayload(_Payload):
    """Stop every pod of a job, checkpointing first where it can; `for_job_id` is the job it makes
    room for (None for a spot reclaim), `notice_deadline` the UNIX time the provider takes the
    node back (spot reclaim only; otherwise the workers allow TESSERA_PREEMPT_GRACE_S)."""

    job_id: int
    for_job_id: int | None
    reason: PreemptReason
    notice_deadline: float | None


@dataclass(frozen=True, kw_only=True)
class CheckpointPayload(_Payload):
    job_id: int


@dataclass(frozen=True, kw_only=True)
class RepartitionPayload(_Payload):
    """Set a GPU's MIG mode and its layout of (profile, start slot) instances."""

    node: str
    gpu_index: int
    mig_enabled: bool
    layout: tuple[tuple[str, int], ...]
