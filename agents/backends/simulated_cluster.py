"""How the simulated cluster (agents/backends/simulated.py) moves on with time, and what its nodes
and pods report: pure functions over its state (the JSON the backend keeps), no file or lock."""

from __future__ import annotations

import zlib

from agents.backends.base import (
    RECLAIM_TAINT,
    BindRequest,
    Conflict,
    JobObservation,
    JobStatus,
    MigStrategy,
    NodeInventory,
    RepartitionPhase,
)
from agents.telemetry import GpuReading, NodeReading, SliceReading


def work_done(pod: dict, now: float, speed: float) -> float:
    """Seconds of work the pod has done by `now`, counting what it resumed from."""
    until = pod["ended_at"] if pod["ended_at"] is not None else now
    return min(pod["runtime_s"], pod["resume_s"] + max(0.0, until - pod["started_at"]) * speed)


def check_free(state: dict, req: BindRequest, node: dict, indexes: list[int]) -> None:
    """The simulated device plugin: refuse a GPU that a live pod already holds."""
    held = {i for pod in state["pods"].values() if pod["node"] == req.node_name and pod["phase"] == "Running"
            for i in pod["gpus"]}
    if set(indexes) & held or len(held) + len(indexes) > node["gpu_count"]:
        raise Conflict(f"GPUs {sorted(set(indexes) & held) or indexes} of {req.node_name} are taken")


def advance_state(state: dict) -> bool:
    """Bring pods and nodes up to state['now']; True when anything changed."""
    now, config, changed = state["now"], state["config"], False
    for node in state["nodes"].values():
        if node["reclaim_at"] is not None and now >= node["reclaim_at"] and not node["gone"]:
            node["gone"] = changed = True  # the provider took it: its pods die with it
        mig = node["mig"]
        if mig.get("phase") == RepartitionPhase.PENDING.value and now >= mig["ready_at"]:
            mig.setdefault("layouts", {})[str(mig["gpu"])] = mig["layout"]
            mig["phase"], changed = RepartitionPhase.SUCCESS.value, True
    for key, pod in list(state["pods"].items()):
        node = state["nodes"][pod["node"]]
        if node["gone"] or (pod["stop_at"] is not None and now >= pod["stop_at"]):
            gone_at = node["reclaim_at"] if node["gone"] and node["reclaim_at"] is not None else now
            ran_until = pod["ended_at"] if pod["ended_at"] is not None else min(gone_at, pod["stop_at"] or gone_at)
            kept = {field: pod[field] for field in ("job_id", "name", "node", "gpus", "started_at")}
            state.setdefault("removed", []).append({**kept, "ran_until": ran_until})
            del state["pods"][key]
            changed = True
        elif node["answering"] and pod["phase"] == "Running":
            changed = _run(pod, now, config) or changed
    return changed


def _run(pod: dict, now: float, config: dict) -> bool:
    changed = False
    asked = pod["checkpoint"]
    if asked and asked.get("saved_at") is None and now >= asked["asked_at"] + config["checkpoint_save_s"]:
        asked["saved_at"] = asked["asked_at"] + config["checkpoint_save_s"]
        changed = True
    finish_at = pod["started_at"] + (pod["runtime_s"] - pod["resume_s"]) / config["speed"]
    if now >= finish_at and (pod["stop_at"] is None or finish_at < pod["stop_at"]):
        pod.update(phase="Succeeded", ended_at=finish_at, exit_code=0, reason="Completed")
        changed = True
    return changed


def inventory_of(node: dict) -> NodeInventory:
    taints = (f"{RECLAIM_TAINT}={node['reclaim_at']:.3f}:NoSchedule",) if node["reclaim_at"] is not None else ()
    return NodeInventory(
        name=node["name"], gpu_model=node["gpu_model"], gpu_count=node["gpu_count"],
        gpu_memory_mib=node["gpu_memory_mib"], mig_strategy=MigStrategy.MIXED, leaf_switch=node["leaf_switch"],
        tier=node["tier"], ready=node["answering"], schedulable=not taints, taints=taints)


def observation_of(pod: dict, node: dict) -> JobObservation:
    status = JobStatus(pod["phase"]) if node["answering"] else JobStatus.UNKNOWN
    return JobObservation(
        job_id=pod["job_id"], pod_name=pod["name"], namespace=pod["namespace"], status=status,
        node_name=pod["node"], reason=pod["reason"], exit_code=pod["exit_code"],
        terminating=pod["stop_at"] is not None, annotations=dict(pod["annotations"]), finished_at=pod["ended_at"],
        started_at=pod.get("reported_start", pod["started_at"]))


def faulty_report(kind: str, node: dict) -> object:
    if kind == "nan":
        return {"gpus": [{"index": i, "utilisation_pct": float("nan"), "memory_used_mib": float("inf")}
                         for i in range(node["gpu_count"])]}
    return {"gpus": [{"utilisation_pct": "busy"}]}  # malformed: no index, text for a number


def reading_of(state: dict, name: str, node: dict) -> NodeReading:
    """Busy GPUs read 70-95% (steady per pod, so charts look alive), idle ones 0%. A MIG pod's slice
    reads 40-85% and most of its memory, named by its pod as dcgm-exporter names it (the simulated
    device plugin does not say which GPU's slice a pod got, so gpu_index is None)."""
    busy, slices = {}, []
    for pod in state["pods"].values():
        if pod["node"] != name or pod["phase"] != "Running":
            continue
        steady = zlib.crc32(pod["name"].encode()) % 26 / 100
        for index in pod["gpus"]:
            busy[index] = 0.70 + steady
        if pod.get("mig_profile"):
            slices.append(SliceReading(
                gpu_index=None, gpu_instance_id=None, profile=pod["mig_profile"], placement_start=None,
                utilisation=0.40 + 1.75 * steady, memory_used_gb=round(_profile_gb(pod["mig_profile"]) * 0.7, 2),
                pods=(f"{pod['namespace']}/{pod['name']}",)))
    layouts = node["mig"].get("layouts", {})
    gpus = tuple(GpuReading(
        index=i, utilisation=busy.get(i, 0.0),
        memory_used_gb=round(node["gpu_memory_mib"] / 1024 * (0.8 if i in busy else 0.0), 2),
        mig_instances=tuple(tuple(slot) for slot in layouts[str(i)]) if str(i) in layouts else None)
        for i in range(node["gpu_count"]))
    return NodeReading(node=name, at=state["now"], gpus=gpus, slices=tuple(slices))


def _profile_gb(profile: str) -> float:
    """40 for '3g.40gb'; 0 for a name of another shape."""
    memory = profile.split(".", 1)[-1].removesuffix("gb").split("+", 1)[0]
    return float(memory) if memory.replace(".", "", 1).isdigit() else 0.0
