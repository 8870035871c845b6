"""Read NVIDIA dcgm-exporter's Prometheus text into the node agent's report shape.

For clusters that already run dcgm-exporter (GPU Operator) instead of our agent. What DCGM does
not export is left None or empty: MIG placements, compute processes, the link matrix.
Units as dcgm-exporter sends them: FB in MiB, power in W, temperature in °C, utilisation in %,
profiling fields (DCGM_FI_PROF_*) as a 0..1 ratio.

The format, as dcgm-exporter's Prometheus template writes it (github.com/NVIDIA/dcgm-exporter):
labels gpu, UUID, pci_bus_id, device, modelName, then GPU_I_PROFILE and GPU_I_ID on a MIG
instance's samples, Hostname, extra labels (DCGM_FI_DRIVER_VERSION), and, where the exporter maps
devices to pods through the kubelet's pod-resources API, pod, namespace and container
(pod_name, pod_namespace, container_name with its --use-old-namespace flag;
internal/pkg/transformation/const.go). A MIG-enabled GPU has no DCGM_FI_DEV_GPU_UTIL: its
instances' activity is DCGM_FI_PROF_GR_ENGINE_ACTIVE, which needs the profiling (DCP) counters
(etc/dcp-metrics-included.csv; the GPU Operator's default counters include it). Without it an
instance's utilisation is None: not measured.
"""

from __future__ import annotations

import logging
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from agents.node_agent.report import GpuReport, MigInstanceReport, NodeReport, PodReport
from agents.telemetry import NodeReading, read_each, reading_from_report

log = logging.getLogger(__name__)

FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "mem_util",
    "DCGM_FI_DEV_FB_USED": "fb_used",
    "DCGM_FI_DEV_FB_FREE": "fb_free",
    "DCGM_FI_DEV_GPU_TEMP": "temp",
    "DCGM_FI_DEV_POWER_USAGE": "power",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_active",  # ratio 0..1 of time the graphics engine is busy
}
# Physical quantities of the whole board: dcgm-exporter may only send them on MIG entities.
_BOARD_WIDE = ("temp", "power")
# (pod, namespace, container) label names: current ones first, then --use-old-namespace's.
POD_LABELS = (("pod", "namespace", "container"), ("pod_name", "pod_namespace", "container_name"))
SCRAPE_LIMIT_BYTES = 8 * 1024 * 1024  # a node's full scrape is a few hundred kB; more is not dcgm-exporter


@dataclass
class _Gpu:
    uuid: str = ""
    model: str = ""
    pci_bus_id: str | None = None
    values: dict[str, float] = field(default_factory=dict)
    pods: set[PodReport] = field(default_factory=set)
    mig: dict[int, dict] = field(default_factory=dict)  # GPU_I_ID -> {"profile", "pods", values...}


def parse_dcgm_text(text: str) -> NodeReport:
    """One node's scrape. Raises ValueError for text that is not Prometheus text, text from
    several hosts, with no GPU, or with a GPU or instance id that is not a number."""
    gpus: dict[int, _Gpu] = defaultdict(_Gpu)
    hosts: set[str] = set()
    driver = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = FIELDS.get(sample.name)
            if key is None or "gpu" not in sample.labels:
                continue
            labels = sample.labels
            hosts.add(labels.get("Hostname", ""))
            driver = driver or labels.get("DCGM_FI_DRIVER_VERSION")
            _add_sample(gpus[_id(labels, "gpu")], labels, key, sample.value)
    if not gpus:
        raise ValueError("no DCGM GPU metrics in the text")
    if len(hosts) != 1:
        raise ValueError(f"dcgm-exporter text covers {len(hosts)} hosts, expected one")
    return NodeReport(
        hostname=hosts.pop(),
        source="dcgm-exporter",
        driver_version=driver,
        nvml_version=None,
        cuda_driver_version=None,
        gpus=[_gpu_report(index, gpus[index]) for index in sorted(gpus)],
    )


def _id(labels: dict[str, str], name: str) -> int:
    value = labels[name]
    if not value.isdigit():
        raise ValueError(f"label {name}={value[:20]!r} is not a device id")
    return int(value)


def _pod(labels: dict[str, str]) -> PodReport | None:
    for pod, namespace, container in POD_LABELS:
        if labels.get(pod) and labels.get(namespace):
            return PodReport(namespace=labels[namespace], pod=labels[pod], container=labels.get(container) or None)
    return None


def _add_sample(gpu: _Gpu, labels: dict[str, str], key: str, value: float) -> None:
    gpu.uuid = labels.get("UUID", gpu.uuid)
    gpu.model = labels.get("modelName", gpu.model)
    gpu.pci_bus_id = labels.get("pci_bus_id", gpu.pci_bus_id)
    pod = _pod(labels)
    if labels.get("GPU_I_ID", "") == "":
        gpu.values[key] = value
        if pod:
            gpu.pods.add(pod)
        return
    entry = gpu.mig.setdefault(_id(labels, "GPU_I_ID"), {"profile": labels.get("GPU_I_PROFILE"), "pods": set()})
    entry[key] = value
    if pod:
        entry["pods"].add(pod)
    if key in _BOARD_WIDE:
        gpu.values.setdefault(key, value)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _total(values: dict[str, float]) -> int | None:
    if "fb_used" in values and "fb_free" in values:
        return int(values["fb_used"] + values["fb_free"])
    return None


def _percent(values: dict[str, float]) -> float | None:
    """DCGM_FI_DEV_GPU_UTIL where sent, else the profiling ratio as a percentage, else None."""
    if "util" in values:
        return values["util"]
    if "gr_active" in values:
        return round(100 * values["gr_active"], 1)
    return None


def _pods(pods: set[PodReport]) -> list[PodReport]:
    return sorted(pods, key=lambda p: (p.namespace, p.pod, p.container or ""))


def _gpu_report(index: int, gpu: _Gpu) -> GpuReport:
    v = gpu.values
    utilisation = _percent(v)
    return GpuReport(
        index=index,
        uuid=gpu.uuid,
        name=gpu.model,
        pci_bus_id=gpu.pci_bus_id,
        memory_total_mib=_total(v),
        memory_used_mib=_int(v.get("fb_used")),
        utilisation_pct=None if utilisation is None else int(utilisation),
        memory_utilisation_pct=_int(v.get("mem_util")),
        temperature_c=_int(v.get("temp")),
        power_w=round(v["power"], 1) if "power" in v else None,
        power_limit_w=None,
        mig_mode=bool(gpu.mig),
        mig_mode_pending=None,
        mig_instances=[_mig_report(gi, gpu.mig[gi]) for gi in sorted(gpu.mig)],
        pods=_pods(gpu.pods),
    )


def _mig_report(gpu_instance_id: int, entry: dict) -> MigInstanceReport:
    return MigInstanceReport(
        uuid=None,
        gpu_instance_id=gpu_instance_id,
        compute_instance_id=None,
        profile=entry.get("profile"),
        profile_id=None,
        placement_start=None,
        placement_size=None,
        memory_total_mib=_total(entry),
        memory_used_mib=_int(entry.get("fb_used")),
        utilisation_pct=round(100 * entry["gr_active"], 1) if "gr_active" in entry else None,
        pods=_pods(entry["pods"]),
    )


class DcgmHttpTelemetry:
    """Scrapes dcgm-exporter on each node: at the node's agent_url where one is typed (the exporter's
    /metrics address, e.g. http://10.0.3.7:9400/metrics), else where `discover()` (node name -> URL,
    agents/backends/k8s_exporters.py) finds that node's exporter pod. Every node is scraped on its
    own: a node whose exporter is down, slow or sends garbage misses its own reading only."""

    def __init__(self, timeout_s: float = 5.0, discover: Callable[[], dict[str, str]] | None = None) -> None:
        self.timeout_s = timeout_s
        self.discover = discover

    def read(self, nodes: Iterable[tuple[str, str]]) -> dict[str, NodeReading]:
        nodes = list(nodes)
        found = self.discover() if self.discover and not all(url for _name, url in nodes) else {}
        return read_each([(name, url or found.get(name, "")) for name, url in nodes], self.read_one)

    def read_one(self, name: str, url: str) -> NodeReading:
        report = parse_dcgm_text(self._fetch(url))
        return reading_from_report(name, report.to_dict(), time.time())

    def _fetch(self, url: str) -> str:
        if not url.rstrip("/").endswith("/metrics"):
            url = url.rstrip("/") + "/metrics"
        with urllib.request.urlopen(url, timeout=self.timeout_s) as response:  # noqa: S310 (the cluster's exporters)
            body = response.read(SCRAPE_LIMIT_BYTES + 1)
        if len(body) > SCRAPE_LIMIT_BYTES:
            raise ValueError(f"scrape larger than {SCRAPE_LIMIT_BYTES} bytes")
        return body.decode("utf-8")
