"""What node agents tell the workers each poll: a heartbeat and one reading per GPU.

The Backend protocol (agents/backends/base.py) covers pods and inventory but not GPU telemetry,
so this small protocol sits beside it. Two sources: the node agents over HTTP (production) and
the simulated backend (demo, tests). Plain Python, no Django.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)
MIB_PER_GB = 1024


@dataclass(frozen=True)
class GpuReading:
    index: int
    utilisation: float | None  # 0-1; None when the source cannot tell (NVML in MIG mode)
    memory_used_gb: float | None
    mig_enabled: bool | None = None
    mig_instances: tuple[tuple[str, int], ...] | None = None  # (profile, start slot); None: unknown


@dataclass(frozen=True)
class NodeReading:
    node: str
    at: float  # UNIX time the agent answered: the heartbeat
    gpus: tuple[GpuReading, ...] = ()


class Telemetry(Protocol):
    def read(self, nodes: Iterable[tuple[str, str]]) -> dict[str, NodeReading]:
        """Readings of the nodes (name, agent URL) that answered; a silent node is simply absent."""


class AgentHttpTelemetry:
    """Reads `GET <agent_url>/v1/report` from each node agent, with the shared bearer token."""

    def __init__(self, token: str, timeout_s: float = 5.0) -> None:
        self.token = token
        self.timeout_s = timeout_s

    def read(self, nodes: Iterable[tuple[str, str]]) -> dict[str, NodeReading]:
        readings = {}
        for name, url in nodes:
            if not url:
                continue
            try:
                report = self._fetch(url)
            except (OSError, ValueError) as error:  # a silent agent is a missed heartbeat, not a crash
                log.info("agent of %s did not answer: %s", name, error)
                continue
            readings[name] = reading_from_report(name, report, time.time())
        return readings

    def _fetch(self, url: str) -> dict:
        request = urllib.request.Request(url.rstrip("/") + "/v1/report",
                                         headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 (our agents)
            return json.loads(response.read())


def reading_from_report(node: str, report: dict, at: float) -> NodeReading:
    """A node agent's JSON report (agents/node_agent/report.py) -> a reading."""
    gpus = []
    for gpu in report.get("gpus", []):
        used = gpu.get("memory_used_mib")
        utilisation = gpu.get("utilisation_pct")
        instances = tuple((mi["profile"], mi["placement_start"]) for mi in gpu.get("mig_instances", [])
                          if mi.get("profile") and mi.get("placement_start") is not None)
        gpus.append(GpuReading(
            index=gpu["index"], utilisation=None if utilisation is None else utilisation / 100,
            memory_used_gb=None if used is None else used / MIB_PER_GB, mig_enabled=gpu.get("mig_mode"),
            mig_instances=instances if gpu.get("mig_mode") else ()))
    return NodeReading(node=node, at=at, gpus=tuple(gpus))
