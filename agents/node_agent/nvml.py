"""A small read-only adapter over pynvml (nvidia-ml-py).

Every method answers plain Python values (str, int, dict, list), so that a recorded snapshot of
the answers can be replayed in tests by a fake with the same methods. Only NVML *Get* calls are
made here: the agent never changes MIG mode, clocks or power, and never resets a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Link remote types, from NVML_NVLINK_DEVICE_TYPE_{GPU,IBMNPU,SWITCH}.
_REMOTE_TYPES = {0: "gpu", 1: "npu", 2: "switch"}
# NVML reports "not available" for a process's memory or instance id with all bits set.
_NOT_AVAILABLE = {0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF}


class NvmlUnavailable(RuntimeError):
    """NVML cannot be loaded or initialised on this machine."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _available(value: Any) -> Any:
    return None if value is None or value in _NOT_AVAILABLE else value


class NvmlAdapter:
    """One open NVML session. Use as a context manager, or call close()."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as exc:  # nvidia-ml-py missing from the environment
            raise NvmlUnavailable(f"pynvml is not installed: {exc}") from exc
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:  # includes LibraryNotFound, DriverNotLoaded
            raise NvmlUnavailable(f"NVML could not be initialised: {exc}") from exc
        self._handles: dict[int, Any] = {}
        # Errors that mean "this GPU cannot answer that", not "something is broken".
        self._soft_errors = (
            pynvml.NVML_ERROR_NOT_SUPPORTED,
            pynvml.NVML_ERROR_NO_PERMISSION,
            pynvml.NVML_ERROR_NOT_FOUND,
            pynvml.NVML_ERROR_INVALID_ARGUMENT,
        )

    def __enter__(self) -> NvmlAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._nvml.nvmlShutdown()

    def _optional(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            if exc.value in self._soft_errors:
                return None
            raise

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._nvml.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def system(self) -> dict:
        n = self._nvml
        return {
            "driver_version": _text(n.nvmlSystemGetDriverVersion()),
            "nvml_version": _text(n.nvmlSystemGetNVMLVersion()),
            "cuda_driver_version": self._optional(n.nvmlSystemGetCudaDriverVersion),
        }

    def device_count(self) -> int:
        return int(self._nvml.nvmlDeviceGetCount())

    def device(self, index: int) -> dict:
        n, h = self._nvml, self._handle(index)
        memory = n.nvmlDeviceGetMemoryInfo(h)
        util = self._optional(n.nvmlDeviceGetUtilizationRates, h)
        mig = self._optional(n.nvmlDeviceGetMigMode, h)
        pci = self._optional(n.nvmlDeviceGetPciInfo, h)
        return {
            "uuid": _text(n.nvmlDeviceGetUUID(h)),
            "name": _text(n.nvmlDeviceGetName(h)),
            "pci_bus_id": _text(pci.busId) if pci else None,
            "memory": {"total": memory.total, "used": memory.used},
            "utilization": {"gpu": util.gpu, "memory": util.memory} if util else None,
            "temperature_c": self._optional(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
            "power_mw": self._optional(n.nvmlDeviceGetPowerUsage, h),
            "power_limit_mw": self._optional(n.nvmlDeviceGetEnforcedPowerLimit, h),
            "mig_mode": {"current": mig[0], "pending": mig[1]} if mig else None,
        }

    def mig_devices(self, index: int) -> list[dict]:
        n, h = self._nvml, self._handle(index)
        count = self._optional(n.nvmlDeviceGetMaxMigDeviceCount, h) or 0
        found = []
        for slot in range(count):
            mig = self._optional(n.nvmlDeviceGetMigDeviceHandleByIndex, h, slot)
            if mig is not None:  # empty slots answer NOT_FOUND
                found.append(self._mig_device(h, mig))
        return found

    def _mig_device(self, parent: Any, mig: Any) -> dict:
        n = self._nvml
        gi_id = n.nvmlDeviceGetGpuInstanceId(mig)
        gi = self._optional(n.nvmlDeviceGetGpuInstanceById, parent, gi_id)
        info = self._optional(n.nvmlGpuInstanceGetInfo, gi) if gi is not None else None
        profile = None
        if info is not None:
            profile = self._optional(
                n.nvmlDeviceGetGpuInstanceProfileInfoById, parent, info.profileId
            )
        # Per-instance memory comes from the MIG device handle; NVML has no per-instance
        # utilisation (nvmlDeviceGetUtilizationRates answers NOT_SUPPORTED on MIG handles), so none
        # is asked for: the report says "not measured" for it.
        memory = self._optional(n.nvmlDeviceGetMemoryInfo, mig)
        return {
            "uuid": _text(n.nvmlDeviceGetUUID(mig)),
            "name": _text(n.nvmlDeviceGetName(mig)),
            "gpu_instance_id": gi_id,
            "compute_instance_id": self._optional(n.nvmlDeviceGetComputeInstanceId, mig),
            "profile_id": info.profileId if info else None,
            "profile_name": _text(profile.name) if profile else None,
            "placement": (
                {"start": info.placement.start, "size": info.placement.size} if info else None
            ),
            "memory": {"total": memory.total, "used": memory.used} if memory else None,
        }

    def processes(self, index: int) -> list[dict]:
        n = self._nvml
        running = self._optional(n.nvmlDeviceGetComputeRunningProcesses, self._handle(index))
        return [
            {
                "pid": p.pid,
                "name": self._process_name(p.pid),
                "used_memory": _available(p.usedGpuMemory),
                "gpu_instance_id": _available(getattr(p, "gpuInstanceId", None)),
                "compute_instance_id": _available(getattr(p, "computeInstanceId", None)),
            }
            for p in running or []
        ]

    def _process_name(self, pid: int) -> str | None:
        name = self._optional(self._nvml.nvmlSystemGetProcessName, pid)
        return _text(name) if name is not None else None

    def nvlinks(self, index: int) -> list[dict]:
        """The active NVLinks of one GPU and what sits at their far end."""
        n, h = self._nvml, self._handle(index)
        active = []
        for link in range(n.NVML_NVLINK_MAX_LINKS):
            state = self._optional(n.nvmlDeviceGetNvLinkState, h, link)
            if state is None:  # no NVLink on this GPU, or past its last link
                break
            if state != n.NVML_FEATURE_ENABLED:
                continue
            remote = self._optional(n.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
            kind = self._optional(n.nvmlDeviceGetNvLinkRemoteDeviceType, h, link)
            active.append({
                "link": link,
                "remote_bus_id": _text(remote.busId) if remote else None,
                "remote_type": _REMOTE_TYPES.get(kind, "unknown"),
            })
        return active

    def common_ancestor(self, a: int, b: int) -> int | None:
        n = self._nvml
        return self._optional(
            n.nvmlDeviceGetTopologyCommonAncestor, self._handle(a), self._handle(b)
        )


def record(adapter: Any, hostname: str) -> dict:
    """Every answer the collector asks for, as JSON data: a replayable test fixture."""
    count = adapter.device_count()
    return {
        "hostname": hostname,
        "system": adapter.system(),
        "devices": [
            {
                "device": adapter.device(i),
                "mig_devices": adapter.mig_devices(i),
                "processes": adapter.processes(i),
                "nvlinks": adapter.nvlinks(i),
            }
            for i in range(count)
        ],
        "common_ancestor": [
            [adapter.common_ancestor(a, b) if a != b else None for b in range(count)]
            for a in range(count)
        ],
    }
