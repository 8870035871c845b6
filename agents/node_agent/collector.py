"""Turn the NVML adapter's answers into a NodeReport.

The adapter is anything with the methods of `nvml.NvmlAdapter`; tests pass a fake that replays a
recorded snapshot, so everything here runs without a GPU.
"""

from __future__ import annotations

from typing import Any, Protocol

from agents.node_agent.report import (
    GpuReport,
    LinkReport,
    MigInstanceReport,
    NodeReport,
    ProcessReport,
)

MIB = 1024 * 1024

# nvmlGpuTopologyLevel_t values, and how `nvidia-smi topo -m` spells them.
TOPOLOGY_LEVELS = {
    0: ("INTERNAL", "X"),
    10: ("SINGLE", "PIX"),
    20: ("MULTIPLE", "PXB"),
    30: ("HOSTBRIDGE", "PHB"),
    40: ("NODE", "NODE"),
    50: ("SYSTEM", "SYS"),
}


class NvmlSource(Protocol):
    def system(self) -> dict: ...
    def device_count(self) -> int: ...
    def device(self, index: int) -> dict: ...
    def mig_devices(self, index: int) -> list[dict]: ...
    def processes(self, index: int) -> list[dict]: ...
    def nvlinks(self, index: int) -> list[dict]: ...
    def common_ancestor(self, a: int, b: int) -> int | None: ...


def _mib(value: int | None) -> int | None:
    return None if value is None else value // MIB


def collect(nvml: NvmlSource, hostname: str) -> NodeReport:
    system = nvml.system()
    count = nvml.device_count()
    devices = [nvml.device(i) for i in range(count)]
    return NodeReport(
        hostname=hostname,
        source="nvml",
        driver_version=system.get("driver_version"),
        nvml_version=system.get("nvml_version"),
        cuda_driver_version=system.get("cuda_driver_version"),
        gpus=[_gpu(nvml, i, d) for i, d in enumerate(devices)],
        links=_links(nvml, devices),
    )


def _gpu(nvml: NvmlSource, index: int, device: dict) -> GpuReport:
    memory = device.get("memory") or {}
    util = device.get("utilization") or {}
    mig_mode = device.get("mig_mode") or {}
    in_mig = bool(mig_mode.get("current"))
    # NVML documents nvmlDeviceGetUtilizationRates as not supported in MIG mode; a driver that
    # answers anyway answers 0, which would read as an idle GPU. Not measured is None.
    if in_mig:
        util = {}
    return GpuReport(
        index=index,
        uuid=device["uuid"],
        name=device["name"],
        pci_bus_id=device.get("pci_bus_id"),
        memory_total_mib=_mib(memory.get("total")),
        memory_used_mib=_mib(memory.get("used")),
        utilisation_pct=util.get("gpu"),
        memory_utilisation_pct=util.get("memory"),
        temperature_c=device.get("temperature_c"),
        power_w=_watts(device.get("power_mw")),
        power_limit_w=_watts(device.get("power_limit_mw")),
        mig_mode=in_mig,
        mig_mode_pending=bool(mig_mode["pending"]) if mig_mode else None,
        mig_instances=[_mig(m) for m in nvml.mig_devices(index)] if in_mig else [],
        processes=[_process(p) for p in nvml.processes(index)],
    )


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000, 1)


def _mig(m: dict) -> MigInstanceReport:
    placement = m.get("placement") or {}
    memory = m.get("memory") or {}
    return MigInstanceReport(
        uuid=m.get("uuid"),
        gpu_instance_id=m["gpu_instance_id"],
        compute_instance_id=m.get("compute_instance_id"),
        profile=_profile_name(m),
        profile_id=m.get("profile_id"),
        placement_start=placement.get("start"),
        placement_size=placement.get("size"),
        memory_total_mib=_mib(memory.get("total")),
        memory_used_mib=_mib(memory.get("used")),
    )


def _profile_name(m: dict) -> str | None:
    """'1g.10gb' from the profile info ("MIG 1g.10gb") or else the MIG device name."""
    for text in (m.get("profile_name"), m.get("name")):
        if text and "MIG " in text:
            return text.rsplit("MIG ", 1)[1].strip()
    return None


def _process(p: dict) -> ProcessReport:
    return ProcessReport(
        pid=p["pid"],
        name=p.get("name"),
        used_memory_mib=_mib(p.get("used_memory")),
        gpu_instance_id=p.get("gpu_instance_id"),
        compute_instance_id=p.get("compute_instance_id"),
    )


def _links(nvml: NvmlSource, devices: list[dict]) -> list[LinkReport]:
    bus_ids = [(d.get("pci_bus_id") or "").upper() for d in devices]
    nvlinks = [nvml.nvlinks(i) for i in range(len(devices))]
    links = []
    for a in range(len(devices)):
        for b in range(a + 1, len(devices)):
            count = _nvlink_count(nvlinks[a], nvlinks[b], bus_ids[a], bus_ids[b])
            level = nvml.common_ancestor(a, b)
            name, code = TOPOLOGY_LEVELS.get(level, (None, None))
            links.append(LinkReport(a, b, name, count, f"NV{count}" if count else code))
    return links


def _nvlink_count(links_a: list[dict], links_b: list[dict], bus_a: str, bus_b: str) -> int:
    """NVLinks joining two GPUs: direct ones, or through NVSwitch as nvidia-smi counts them.

    On an NVSwitch board every link ends at a switch, not at the peer; two GPUs that both reach
    the switch fabric talk over as many links as the less connected of the two has.
    """
    # Either end's view will do; reading both ends would count each link twice.
    direct = sum(1 for link in links_a if _remote(link) == bus_b) or sum(
        1 for link in links_b if _remote(link) == bus_a
    )
    if direct:
        return direct
    switched_a = sum(1 for link in links_a if link.get("remote_type") == "switch")
    switched_b = sum(1 for link in links_b if link.get("remote_type") == "switch")
    return min(switched_a, switched_b)


def _remote(link: dict[str, Any]) -> str:
    return (link.get("remote_bus_id") or "").upper()

