"""What node agents tell the workers each poll: a heartbeat and one reading per GPU.

The Backend protocol (agents/backends/base.py) covers pods and inventory but not GPU telemetry,
so this small protocol sits beside it. Two sources: the node agents over HTTP (production) and
the simulated backend (demo, tests). Plain Python, no Django.
"""

from __future__ import annotations

import json
import logging
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)
MIB_PER_GB = 1024


class MalformedReport(ValueError):
    """An agent's answer that is not a node report: that node missed its heartbeat, no other did."""


def _measurement(value: float | None, high: float) -> float | None:
    """`value` if it can be a measurement (finite, 0..high), else None: not measured. A NaN or an
    infinity stored as a sample would turn every mean over it, a team's chart, into NaN."""
    if value is None or not math.isfinite(value) or not 0 <= value <= high:
        return None
    return float(value)


@dataclass(frozen=True)
class GpuReading:
    index: int
    utilisation: float | None  # 0-1; None when the source cannot tell (NVML in MIG mode)
    memory_used_gb: float | None
    mig_enabled: bool | None = None
    mig_instances: tuple[tuple[str, int], ...] | None = None  # (profile, start slot); None: unknown

    def __post_init__(self) -> None:  # whatever the source, only measurements get through
        object.__setattr__(self, "utilisation", _measurement(self.utilisation, 1.0))
        object.__setattr__(self, "memory_used_gb", _measurement(self.memory_used_gb, math.inf))


@dataclass(frozen=True)
class SliceReading:
    """One MIG instance's reading. Which instance row it is: the (GPU, start slot) where the
    source knows the placement (NVML), else the pods that hold it, else its profile where that
    is unique on the GPU (dcgm-exporter names instances by GPU_I_ID, which Tessera does not keep)."""

    gpu_index: int | None  # None: the source knows the pod but not the device (the simulator)
    gpu_instance_id: int | None
    profile: str | None
    placement_start: int | None
    utilisation: float | None  # 0-1; None: not measured (NVML has no per-instance utilisation)
    memory_used_gb: float | None
    pods: tuple[str, ...] = ()  # "namespace/pod"

    def __post_init__(self) -> None:
        object.__setattr__(self, "utilisation", _measurement(self.utilisation, 1.0))
        object.__setattr__(self, "memory_used_gb", _measurement(self.memory_used_gb, math.inf))


@dataclass(frozen=True)
class NodeReading:
    node: str
    at: float  # UNIX time the agent answered: the heartbeat
    gpus: tuple[GpuReading, ...] = ()
    slices: tuple[SliceReading, ...] = ()


class Telemetry(Protocol):
    def read(self, nodes: Iterable[tuple[str, str]]) -> dict[str, NodeReading]:
        """Readings of the nodes (name, agent URL) that answered; a silent node is simply absent."""


READ_THREADS = 16


def read_each(nodes: Iterable[tuple[str, str]], read_one: Callable[[str, str], NodeReading]) -> dict[str, NodeReading]:
    """`read_one(name, url)` for every node with a URL, side by side: a node that hangs until its
    timeout delays no other, and one that fails costs its own reading only."""
    wanted = [(name, url) for name, url in nodes if url]
    if not wanted:
        return {}

    def one(name: str, url: str) -> NodeReading | None:
        try:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"not an http(s) URL: {url[:60]!r}")
            return read_one(name, url)
        except MalformedReport as error:  # one bad agent costs its own node's heartbeat only
            log.warning("agent of %s sent no valid report: %s", name, error)
        except urllib.error.HTTPError as error:  # 401/403: our token or the agent's allowed identity is wrong
            log.warning("agent of %s answered %s %s", name, error.code, error.reason)
        except (OSError, ValueError, UnicodeError) as error:  # silent or garbled: a missed heartbeat, not a crash
            log.info("agent of %s did not answer usably: %s", name, error)
        return None

    with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(wanted))) as pool:
        results = list(pool.map(lambda pair: one(*pair), wanted))
    return {name: reading for (name, _url), reading in zip(wanted, results, strict=True) if reading is not None}


def token_file(path: str) -> Callable[[], str]:
    """The token in `path`, read again at each poll: the kubelet rewrites a projected
    ServiceAccount token before it expires (deploy/worker.yaml)."""
    return lambda: Path(path).read_text(encoding="utf-8").strip()


class AgentHttpTelemetry:
    """Reads `GET <agent_url>/v1/report` from each node agent, sending `token()` as the bearer
    token: the workers' ServiceAccount token, which each agent checks (agents/node_agent/auth.py)."""

    def __init__(self, token: Callable[[], str], timeout_s: float = 5.0) -> None:
        self.token = token
        self.timeout_s = timeout_s

    def read(self, nodes: Iterable[tuple[str, str]]) -> dict[str, NodeReading]:
        nodes = list(nodes)
        if not any(url for _name, url in nodes):
            return {}
        try:
            token = self.token()
        except OSError as error:  # no token, no readings: every node misses this heartbeat, loudly
            log.error("cannot read the token the node agents expect: %s", error)
            return {}
        return read_each(nodes, lambda name, url: reading_from_report(name, self._fetch(url, token), time.time()))

    def _fetch(self, url: str, token: str) -> dict:
        request = urllib.request.Request(url.rstrip("/") + "/v1/report",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 (our agents)
            return json.loads(response.read())


def reading_from_report(node: str, report: object, at: float) -> NodeReading:
    """A node agent's JSON report (agents/node_agent/report.py) -> a reading. Raises
    MalformedReport for an answer of the wrong shape; a value that is no measurement (NaN, 250 %)
    is read as not measured."""
    gpus = report.get("gpus", []) if isinstance(report, dict) else None
    if not isinstance(gpus, list):
        raise MalformedReport(f"expected an object with a list of GPUs, got {type(report).__name__}")
    readings = tuple(_gpu_reading(gpu) for gpu in gpus)
    if len({gpu.index for gpu in readings}) != len(readings):
        raise MalformedReport("a GPU index is reported twice")
    slices = tuple(s for gpu in gpus if gpu.get("mig_mode") for s in _slice_readings(gpu))
    return NodeReading(node=node, at=at, gpus=readings, slices=slices)


def _slice_readings(gpu: dict) -> list[SliceReading]:
    """A GPU's MIG instances; an entry of the wrong shape is left out, not the node's report."""
    found = []
    for mi in gpu.get("mig_instances", []):
        if not isinstance(mi, dict) or not _is_int(mi.get("gpu_instance_id")):
            continue
        used, utilisation = mi.get("memory_used_mib"), mi.get("utilisation_pct")
        if not all(value is None or _is_number(value) for value in (used, utilisation)):
            continue
        pods = tuple(f"{p['namespace']}/{p['pod']}" for p in mi.get("pods") or []
                     if isinstance(p, dict) and isinstance(p.get("namespace"), str) and isinstance(p.get("pod"), str))
        found.append(SliceReading(
            gpu_index=gpu["index"], gpu_instance_id=mi["gpu_instance_id"],
            profile=mi["profile"] if isinstance(mi.get("profile"), str) else None,
            placement_start=mi["placement_start"] if _is_int(mi.get("placement_start")) else None,
            utilisation=None if utilisation is None else utilisation / 100,
            memory_used_gb=None if used is None else used / MIB_PER_GB, pods=pods))
    return found


def _gpu_reading(gpu: object) -> GpuReading:
    if not isinstance(gpu, dict) or not _is_int(gpu.get("index")) or gpu["index"] < 0:
        raise MalformedReport(f"a GPU entry without a valid index: {str(gpu)[:80]}")
    used, utilisation, mig = gpu.get("memory_used_mib"), gpu.get("utilisation_pct"), gpu.get("mig_mode")
    if not all(value is None or _is_number(value) for value in (used, utilisation)) \
            or mig not in (None, True, False) or not isinstance(gpu.get("mig_instances", []), list):
        raise MalformedReport(f"GPU {gpu['index']}: a field of the wrong type")
    instances = tuple((mi["profile"], mi["placement_start"]) for mi in gpu.get("mig_instances", [])
                      if isinstance(mi, dict) and isinstance(mi.get("profile"), str) and mi["profile"]
                      and _is_int(mi.get("placement_start")))
    return GpuReading(
        index=gpu["index"], utilisation=None if utilisation is None else utilisation / 100,
        memory_used_gb=None if used is None else used / MIB_PER_GB, mig_enabled=mig,
        mig_instances=instances if mig else ())


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
