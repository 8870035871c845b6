"""Read NVIDIA dcgm-exporter's Prometheus text into the node agent's report shape.

For clusters that already run dcgm-exporter (GPU Operator) instead of our agent. What DCGM does
not export is left None or empty: MIG placements, compute processes, the link matrix.
Units as dcgm-exporter sends them: FB in MiB, power in W, temperature in °C, utilisation in %.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from agents.node_agent.report import GpuReport, MigInstanceReport, NodeReport

FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "mem_util",
    "DCGM_FI_DEV_FB_USED": "fb_used",
    "DCGM_FI_DEV_FB_FREE": "fb_free",
    "DCGM_FI_DEV_GPU_TEMP": "temp",
    "DCGM_FI_DEV_POWER_USAGE": "power",
}
# Physical quantities of the whole board: dcgm-exporter may only send them on MIG entities.
_BOARD_WIDE = ("temp", "power")


@dataclass
class _Gpu:
    uuid: str = ""
    model: str = ""
    pci_bus_id: str | None = None
    values: dict[str, float] = field(default_factory=dict)
    mig: dict[int, dict] = field(default_factory=dict)  # GPU_I_ID -> {"profile", values...}


def parse_dcgm_text(text: str) -> NodeReport:
    """One node's scrape. Raises ValueError for text from several hosts or with no GPU."""
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
            _add_sample(gpus[int(labels["gpu"])], labels, key, sample.value)
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


def _add_sample(gpu: _Gpu, labels: dict[str, str], key: str, value: float) -> None:
    gpu.uuid = labels.get("UUID", gpu.uuid)
    gpu.model = labels.get("modelName", gpu.model)
    gpu.pci_bus_id = labels.get("pci_bus_id", gpu.pci_bus_id)
    instance = labels.get("GPU_I_ID", "")
    if instance == "":
        gpu.values[key] = value
        return
    entry = gpu.mig.setdefault(int(instance), {"profile": labels.get("GPU_I_PROFILE")})
    entry[key] = value
    if key in _BOARD_WIDE:
        gpu.values.setdefault(key, value)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _total(values: dict[str, float]) -> int | None:
    if "fb_used" in values and "fb_free" in values:
        return int(values["fb_used"] + values["fb_free"])
    return None


def _gpu_report(index: int, gpu: _Gpu) -> GpuReport:
    v = gpu.values
    return GpuReport(
        index=index,
        uuid=gpu.uuid,
        name=gpu.model,
        pci_bus_id=gpu.pci_bus_id,
        memory_total_mib=_total(v),
        memory_used_mib=_int(v.get("fb_used")),
        utilisation_pct=_int(v.get("util")),
        memory_utilisation_pct=_int(v.get("mem_util")),
        temperature_c=_int(v.get("temp")),
        power_w=round(v["power"], 1) if "power" in v else None,
        power_limit_w=None,
        mig_mode=bool(gpu.mig),
        mig_mode_pending=None,
        mig_instances=[_mig_report(gi, gpu.mig[gi]) for gi in sorted(gpu.mig)],
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
    )
