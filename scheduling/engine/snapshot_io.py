"""A snapshot as plain JSON and back, so a live situation can be replayed offline as a test.

`python manage.py dump_snapshot --out case.json` writes one; `snapshot_load(path)` reads it back
into the same frozen types, and `schedule()` decides exactly as it did on the live cluster.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .fair_history import empty_history
from .plan import Bind, Preempt, Repartition
from .reasons import PreemptReason
from .types import (
    SHARING_NONE,
    Allocation,
    Gpu,
    InFlight,
    Job,
    MigInstance,
    Node,
    Nomination,
    Queue,
    Running,
    Snapshot,
    UsageHistory,
)

FORMAT = 1
_IN_FLIGHT = {"bind": Bind, "preempt": Preempt, "repartition": Repartition}


def snapshot_to_dict(snapshot: Snapshot) -> dict[str, Any]:
    data = dataclasses.asdict(snapshot)
    data["in_flight"] = [dict(dataclasses.asdict(action), type=_kind(action)) for action in snapshot.in_flight]
    return {"format": FORMAT, "snapshot": data}


def snapshot_from_dict(document: dict[str, Any]) -> Snapshot:
    if document.get("format") != FORMAT:
        raise ValueError(f"unknown snapshot format {document.get('format')!r}; expected {FORMAT}")
    data = document["snapshot"]
    return Snapshot(
        now=data["now"], nodes=tuple(_node(n) for n in data["nodes"]),
        pending=tuple(_job(j) for j in data["pending"]), running=tuple(_running(r) for r in data["running"]),
        queues=tuple(Queue(**q) for q in data["queues"]),
        in_flight=tuple(_in_flight(a) for a in data["in_flight"]),
        spine_oversubscription=data["spine_oversubscription"],
        nominations=tuple(Nomination(job_id=n["job_id"], gpus=tuple((g[0], g[1]) for g in n["gpus"]),
                                     priority=n["priority"])
                          for n in data.get("nominations", ())),  # absent from dumps made before
        usage_history=_usage_history(data.get("usage_history"), data["now"]),  # also absent before
        clock_speed=data.get("clock_speed", 1.0))  # and this


def snapshot_dump(snapshot: Snapshot, path: Path) -> None:
    path.write_text(json.dumps(snapshot_to_dict(snapshot), indent=1, sort_keys=True))


def snapshot_load(path: Path) -> Snapshot:
    return snapshot_from_dict(json.loads(Path(path).read_text()))


def _usage_history(data: dict[str, Any] | None, now: float) -> UsageHistory:
    if data is None:
        return empty_history(now)
    return UsageHistory(half_life_s=data["half_life_s"], since=data["since"],
                        team_gpu_s=tuple((team, gpu_s) for team, gpu_s in data["team_gpu_s"]))


def _kind(action: InFlight) -> str:
    return next(name for name, cls in _IN_FLIGHT.items() if isinstance(action, cls))


def _node(data: dict[str, Any]) -> Node:
    gpus = tuple(Gpu(**dict(g, mig_instances=tuple(MigInstance(**m) for m in g["mig_instances"])))
                 for g in data["gpus"])
    # Dumps made before nodes said how they share: a plain device plugin, as those clusters had.
    return Node(**{"sharing": SHARING_NONE, "share_replicas": 1, **data, "gpus": gpus})


def _job(data: dict[str, Any]) -> Job:
    return Job(**{"accepts_no_isolation": False, "mig_profile": "", **data, "gpu_models": tuple(data["gpu_models"])})


def _allocations(items: list[dict[str, Any]]) -> tuple[Allocation, ...]:
    return tuple(Allocation(**a) for a in items)


def _running(data: dict[str, Any]) -> Running:
    return Running(**dict(data, job=_job(data["job"]), allocations=_allocations(data["allocations"])))


def _in_flight(data: dict[str, Any]) -> InFlight:
    fields = {k: v for k, v in data.items() if k != "type"}
    if data["type"] == "bind":
        fields["allocations"] = _allocations(fields["allocations"])
    if data["type"] == "repartition":
        fields["layout"] = tuple(tuple(slot) for slot in fields["layout"])
    if data["type"] == "preempt":
        fields["reason"] = PreemptReason(fields["reason"])
    return _IN_FLIGHT[data["type"]](**fields)
