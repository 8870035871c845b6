"""A simulated GPU cluster behind the Backend protocol, for the embedded demo and the worker tests.

Its whole state lives in one JSON file (under var/ by default), read and written under an
exclusive file lock, so the web process, Celery workers and a test driving faults all see the
same cluster, and it survives restarts. Time is computed, not ticked: every call first brings
the cluster up to `now` (pods finish, checkpoints get saved, reclaimed nodes vanish).

`speed` makes jobs do `speed` seconds of work per clock second, so the demo moves faster than
real time while every timestamp stays a real one.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from agents.backends import simulated_logs
from agents.backends.base import (
    ENV_GPU_INDEXES,
    ENV_RESUME,
    ENV_RUNTIME,
    BackendError,
    BindRequest,
    CheckpointRequest,
    Conflict,
    JobObservation,
    NodeInventory,
    Outcome,
    PreemptRequest,
    RendezvousService,
    RepartitionPhase,
    RepartitionRequest,
    RepartitionState,
    TransientBackendError,
)
from agents.backends.simulated_cluster import (
    advance_state,
    check_free,
    faulty_report,
    inventory_of,
    observation_of,
    reading_of,
    work_done,
)
from agents.telemetry import MalformedReport, NodeReading, reading_from_report

_THREAD_LOCK = threading.Lock()  # flock is per process; threads of one process need their own


@dataclass(frozen=True)
class SimConfig:
    speed: float = 1.0  # seconds of job work per clock second
    checkpoint_save_s: float = 2.0  # clock seconds a checkpoint takes to write
    stop_s: float = 0.0  # clock seconds between a stop and the pod being gone
    repartition_s: float = 1.0  # clock seconds a MIG reconfiguration takes


@dataclass(frozen=True)
class SavedCheckpoint:
    """What a simulated workload confirms through the checkpoint channel once it has saved."""

    job_id: str
    pod_name: str
    checkpoint_id: str
    step: int
    progress_s: float
    saved_at: float  # UNIX time


# Called with each saved checkpoint until it answers True (recorded for good), as a real workload
# retries until the endpoint says 2xx. The workers pass agents.actions.checkpoint.confirm_simulated.
Confirm = Callable[[SavedCheckpoint], bool]


@dataclass(frozen=True)
class SimNode:
    name: str
    gpu_model: str
    gpu_count: int
    gpu_memory_mib: int
    leaf_switch: str = ""
    tier: str = ""


class SimulatedBackend:
    def __init__(self, path: str | Path, clock: Callable[[], float] = time.time,
                 confirm: Confirm | None = None) -> None:
        self.path = Path(path)
        self.clock = clock
        self.confirm = confirm

    # -- set-up and commands (demo and tests) ---------------------------------------------

    def configure(self, config: SimConfig) -> None:
        with self._state() as state:
            state["config"] = asdict(config)

    def config(self) -> SimConfig:
        with self._state() as state:
            return SimConfig(**state["config"])

    def ensure_node(self, node: SimNode) -> None:
        """Add the node if it is new; a node already known keeps its state (lost stays lost)."""
        with self._state() as state:
            state["nodes"].setdefault(node.name, {**asdict(node), "answering": True, "reclaim_at": None,
                                                  "gone": False, "mig": {}})

    def advance(self, seconds: float) -> None:
        """Move the simulated clock forward for every process that shares the state file."""
        with self._state() as state:
            state["offset"] += seconds

    def now(self) -> float:
        with self._state(write=False) as state:
            return self.clock() + state["offset"]

    def fail_job(self, job_id: str, reason: str = "Error", exit_code: int = 1) -> None:
        with self._state() as state:
            for pod in state["pods"].values():
                if pod["job_id"] == job_id and pod["phase"] == "Running":
                    pod.update(phase="Failed", reason=reason, exit_code=exit_code, ended_at=state["now"])

    def reclaim_node(self, name: str, notice_s: float) -> None:
        """The provider takes the node back in notice_s seconds; the first notice stands."""
        with self._state() as state:
            node = state["nodes"][name]
            if node["reclaim_at"] is None:
                node["reclaim_at"] = state["now"] + notice_s

    def lose_node(self, name: str) -> None:
        """The node stops answering; its pods are frozen where they were (phase Unknown)."""
        with self._state() as state:
            state["nodes"][name]["answering"] = False

    def revive_node(self, name: str) -> None:
        with self._state() as state:
            state["nodes"][name]["answering"] = True

    # -- faults (the fault campaign, bench/fault_campaign.py) ---------------------------------

    def restore_node(self, name: str) -> None:
        """The provider hands a reclaimed node back, empty."""
        with self._state() as state:
            state["nodes"][name].update(answering=True, reclaim_at=None, gone=False, mig={})

    def report_fault(self, name: str, kind: str, seconds: float) -> None:
        """For `seconds`, the node's agent sends no report ("missing"), one of the wrong shape
        ("malformed") or readings that are no measurement ("nan")."""
        with self._state() as state:
            state["nodes"][name]["report_fault"] = [kind, state["now"] + seconds]

    def api_errors(self, seconds: float) -> None:
        """For `seconds`, every cluster API call fails as a transient error (a 503, a timeout)."""
        with self._state() as state:
            state["api_errors_until"] = state["now"] + seconds

    def backdate(self, namespace: str, pod_name: str, started_at: float) -> None:
        """Report the pod as started at `started_at` (its work still counts from its bind): the
        demo's jobs were placed before the loop ran, and their history and billing start then."""
        with self._state() as state:
            state["pods"][f"{namespace}/{pod_name}"]["reported_start"] = started_at

    def _api_call(self, state: dict) -> None:
        if state["now"] < state.get("api_errors_until", 0.0):
            raise TransientBackendError("simulated cluster API error (503)")

    # -- the Backend protocol -------------------------------------------------------------

    def inventory(self) -> list[NodeInventory]:
        with self._state(write=False) as state:
            self._api_call(state)
            return [inventory_of(node) for node in state["nodes"].values() if not node["gone"]]

    def bind(self, req: BindRequest) -> Outcome:
        with self._state() as state:
            self._api_call(state)
            key = f"{req.namespace}/{req.pod_name}"
            pod = state["pods"].get(key)
            if pod is not None:
                if pod["job_id"] != req.job_id or pod["node"] != req.node_name:
                    raise Conflict(f"pod {key} is job {pod['job_id']} on {pod['node']}")
                return Outcome.ALREADY_DONE
            node = state["nodes"].get(req.node_name)
            if node is None or node["gone"]:
                raise BackendError(f"node {req.node_name} is not available")
            if not node["answering"]:  # silent, not known lost: the agent may be back in a moment
                raise TransientBackendError(f"node {req.node_name} is not answering")
            env = dict(req.env)
            indexes = [int(i) for i in env.get(ENV_GPU_INDEXES, "").split(",") if i]
            check_free(state, req, node, indexes)
            state["pods"][key] = {
                "job_id": req.job_id, "namespace": req.namespace, "name": req.pod_name, "node": req.node_name,
                "gpus": indexes if req.mig_profile is None else [], "mig_profile": req.mig_profile,
                "kind": req.job_kind, "started_at": state["now"], "resume_s": float(env.get(ENV_RESUME, 0)),
                "runtime_s": float(env.get(ENV_RUNTIME, 3600)), "phase": "Running", "ended_at": None,
                "reason": None, "exit_code": None, "stop_at": None, "checkpoint": None, "annotations": {}}
            return Outcome.DONE

    def request_checkpoint(self, req: CheckpointRequest) -> Outcome:
        with self._state() as state:
            self._api_call(state)
            pod = state["pods"].get(f"{req.namespace}/{req.pod_name}")
            if pod is None:
                return Outcome.GONE
            asked = pod["checkpoint"] or {}
            if pod["phase"] != "Running" or req.checkpoint_id == asked.get("id"):
                return Outcome.ALREADY_DONE
            pod["checkpoint"] = {"id": req.checkpoint_id, "asked_at": state["now"],
                                 "progress_s": work_done(pod, state["now"], state["config"]["speed"])}
            pod["annotations"]["tessera.io/checkpoint-request"] = req.checkpoint_id
            return Outcome.DONE

    def preempt(self, req: PreemptRequest) -> Outcome:
        with self._state() as state:
            self._api_call(state)
            pod = state["pods"].get(f"{req.namespace}/{req.pod_name}")
            if pod is None:
                return Outcome.GONE
            if pod["stop_at"] is not None:
                return Outcome.ALREADY_DONE
            pod["stop_at"] = state["now"] + min(req.grace_seconds, state["config"]["stop_s"])
            pod["annotations"]["tessera.io/preempted"] = req.reason
            advance_state(state)
            return Outcome.DONE

    def repartition(self, req: RepartitionRequest) -> Outcome:
        with self._state() as state:
            mig = state["nodes"][req.node_name]["mig"]
            if mig.get("config") == req.config_name and not req.retry:
                return Outcome.ALREADY_DONE
            mig.update(config=req.config_name, phase=RepartitionPhase.PENDING.value, gpu=req.gpu_index,
                       layout=[[slot.profile, slot.start] for slot in req.layout],
                       ready_at=state["now"] + state["config"]["repartition_s"])
            return Outcome.DONE

    def repartition_state(self, node_name: str) -> RepartitionState:
        with self._state(write=False) as state:
            mig = state["nodes"][node_name]["mig"]
            return RepartitionState(node_name, mig.get("config"), RepartitionPhase(mig.get("phase", "unknown")))

    def record_waiting(self, job_id: str, namespace: str, reason_code: str, message: str, count: int) -> bool:
        return False  # the demo's pages say why a job waits; there is no cluster to tell

    def rendezvous_services(self) -> list[RendezvousService]:
        return []  # its pods need no DNS to meet

    def remove_rendezvous_service(self, namespace: str, name: str) -> Outcome:
        return Outcome.GONE

    def poll_observations(self) -> list[JobObservation]:
        """The pods; the workloads also confirm what they saved since (see Confirm)."""
        with self._state(write=False) as state:
            self._api_call(state)
            observed = [observation_of(pod, state["nodes"][pod["node"]]) for pod in state["pods"].values()]
            unconfirmed = {key: _saved(pod) for key, pod in state["pods"].items() if _unconfirmed(pod)}
        self._confirm(unconfirmed)
        return observed

    def _confirm(self, saved: dict[str, SavedCheckpoint]) -> None:
        """Outside the state lock: the confirmation writes to the database, which may wait."""
        if self.confirm is None or not saved:
            return
        durable = {key: item.checkpoint_id for key, item in saved.items() if self.confirm(item)}
        if durable:
            with self._state() as state:
                for key, checkpoint_id in durable.items():
                    pod = state["pods"].get(key)
                    if pod is not None and (pod["checkpoint"] or {}).get("id") == checkpoint_id:
                        pod["checkpoint"]["confirmed"] = True

    def job_observations(self, job_id: str) -> list[JobObservation]:
        return [o for o in self.poll_observations() if o.job_id == job_id]

    def pod_log(self, namespace: str, pod_name: str, tail_lines: int, limit_bytes: int) -> str | None:
        with self._state(write=False) as state:
            self._api_call(state)
            pod = state["pods"].get(f"{namespace}/{pod_name}")
            if pod is None:
                return None
            return simulated_logs.pod_log(pod, state["now"], state["config"]["speed"], tail_lines, limit_bytes)

    # -- telemetry (agents/telemetry.py) ----------------------------------------------------

    def read(self, nodes: Iterable[tuple[str, str]] = ()) -> dict[str, NodeReading]:
        wanted = {name for name, _url in nodes}
        readings = {}
        with self._state(write=False) as state:
            for name, node in state["nodes"].items():
                if not node["answering"] or node["gone"] or (wanted and name not in wanted):
                    continue
                fault, until = node.get("report_fault") or (None, 0.0)
                if fault is None or state["now"] >= until:
                    readings[name] = reading_of(state, name, node)
                elif fault != "missing":
                    try:  # through the same validation as a real agent's report
                        readings[name] = reading_from_report(name, faulty_report(fault, node), state["now"])
                    except MalformedReport:
                        pass  # a missed heartbeat, as AgentHttpTelemetry treats it
        return readings

    # -- state file -----------------------------------------------------------------------

    @contextmanager
    def _state(self, write: bool = True):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _THREAD_LOCK, open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._load()
            state["now"] = self.clock() + state["offset"]
            advanced = advance_state(state)
            yield state
            removed = state.pop("removed", [])
            if removed:  # what ran, kept for the fault campaign's billing check
                with open(self.history_path, "a") as history:
                    history.writelines(json.dumps(pod) + "\n" for pod in removed)
            if write or advanced:
                self._save(state)

    @property
    def history_path(self) -> Path:
        """One JSON line per pod that is gone: where and from when to when it ran."""
        return self.path.with_suffix(".history.jsonl")

    def _load(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"offset": 0.0, "config": asdict(SimConfig()), "nodes": {}, "pods": {}}

    def _save(self, state: dict) -> None:
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(temporary, self.path)  # a reader never sees half a file


def _unconfirmed(pod: dict) -> bool:
    asked = pod["checkpoint"]
    return bool(asked and asked.get("saved_at") is not None and not asked.get("confirmed"))


def _saved(pod: dict) -> SavedCheckpoint:
    asked = pod["checkpoint"]
    return SavedCheckpoint(job_id=pod["job_id"], pod_name=pod["name"], checkpoint_id=asked["id"],
                           step=simulated_logs.step_at(asked["progress_s"]), progress_s=asked["progress_s"],
                           saved_at=asked["saved_at"])
