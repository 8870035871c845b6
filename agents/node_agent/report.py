"""The node report: plain dataclasses shared by the NVML collector and the dcgm-exporter reader.

Fields a source cannot know are None (dcgm-exporter has no MIG placement and no topology;
NVML has no utilisation for a GPU in MIG mode nor for its instances), never a made-up value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

REPORT_VERSION = 1


@dataclass(frozen=True)
class ProcessReport:
    pid: int
    name: str | None
    used_memory_mib: int | None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class PodReport:
    """A pod that holds the GPU or MIG instance, as dcgm-exporter learns it from the kubelet's
    pod-resources API (labels pod, namespace, container). NVML knows processes, not pods."""

    namespace: str
    pod: str
    container: str | None = None


@dataclass(frozen=True)
class MigInstanceReport:
    uuid: str | None
    gpu_instance_id: int
    compute_instance_id: int | None
    profile: str | None
    profile_id: int | None
    placement_start: int | None
    placement_size: int | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    # Percent of time the instance's graphics engine was busy (dcgm-exporter's profiling field);
    # None where the source cannot measure an instance: NVML has no per-instance utilisation.
    utilisation_pct: float | None = None
    pods: list[PodReport] = field(default_factory=list)


@dataclass(frozen=True)
class GpuReport:
    index: int
    uuid: str
    name: str
    pci_bus_id: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    utilisation_pct: int | None
    memory_utilisation_pct: int | None
    temperature_c: int | None
    power_w: float | None
    power_limit_w: float | None
    mig_mode: bool
    mig_mode_pending: bool | None
    mig_instances: list[MigInstanceReport] = field(default_factory=list)
    processes: list[ProcessReport] = field(default_factory=list)
    pods: list[PodReport] = field(default_factory=list)  # on the whole GPU (not in MIG mode)


@dataclass(frozen=True)
class LinkReport:
    """How two GPUs of one node reach each other."""

    gpu_a: int
    gpu_b: int
    topology: str | None  # NVML common-ancestor level name: SINGLE, MULTIPLE, HOSTBRIDGE, ...
    nvlinks: int  # active NVLinks between the pair, directly or through NVSwitch
    code: str | None  # the `nvidia-smi topo -m` spelling: NV18, PIX, PXB, PHB, NODE, SYS


@dataclass(frozen=True)
class NodeReport:
    hostname: str
    source: str  # "nvml" or "dcgm-exporter"
    driver_version: str | None
    nvml_version: str | None
    cuda_driver_version: int | None
    gpus: list[GpuReport] = field(default_factory=list)
    links: list[LinkReport] = field(default_factory=list)
    version: int = REPORT_VERSION

    def to_dict(self) -> dict:
        return asdict(self)
