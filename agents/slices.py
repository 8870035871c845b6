"""MIG instance readings onto MigInstance rows: the slice's last value and a MigSample per poll.

dcgm-exporter names an instance by its GPU instance id (GPU_I_ID), which the driver hands out and
Tessera does not keep, so a reading finds its row by the best key it carries:
1. the (GPU, start slot) where the source knows the placement (NVML);
2. the pods that hold it (dcgm-exporter's pod labels): a Tessera pod is `<team>-<job>-<attempt>-<member>`
   in namespace `<team>`, and the job's open placement on this node names the instance;
3. its profile, where exactly one instance of that profile sits on that GPU.
A reading that matches no row, or a row two readings claim, is left out: a wrong slice's number
on a job's page is worse than none.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from datetime import datetime

from agents.telemetry import SliceReading
from scheduling.engine import mig
from scheduling.models import MigInstance, MigSample, Node, Placement

log = logging.getLogger(__name__)


def slices_record(*, node: Node, slices: tuple[SliceReading, ...], at: datetime) -> int:
    """Store the readings of `node`'s MIG instances taken at `at`; the number matched."""
    if not slices:
        return 0
    instances = list(MigInstance.objects.filter(gpu__node=node).select_related("gpu"))
    held = _held_by_job(node)
    matched = [(_match(reading, instances, held), reading) for reading in slices]
    claims = Counter(instance.pk for instance, _reading in matched if instance is not None)
    samples = []
    for instance, reading in matched:
        if instance is None or claims[instance.pk] > 1:
            if instance is None:
                log.info("%s: no MIG instance row for reading %s", node.name, reading)
            continue
        MigInstance.objects.filter(pk=instance.pk).update(
            utilization=reading.utilisation, memory_used_gb=reading.memory_used_gb, measured_at=at)
        samples.append(MigSample(mig_instance=instance, at=at, utilization=reading.utilisation,
                                 memory_used_gb=reading.memory_used_gb))
    MigSample.objects.bulk_create(samples, ignore_conflicts=True)  # a repeated poll at one time adds nothing
    return len(samples)


def _held_by_job(node: Node) -> dict[int, list[MigInstance]]:
    held = defaultdict(list)
    for placement in (Placement.objects.filter(gpu__node=node, ended_at__isnull=True, mig_instance__isnull=False)
                      .select_related("mig_instance__gpu")):
        held[placement.job_id].append(placement.mig_instance)
    return held


def job_of_pod(pod: str) -> int | None:
    """The job id in a Tessera pod's "namespace/name", else None (another scheduler's pod)."""
    namespace, _sep, name = pod.partition("/")
    if not namespace or not name.startswith(f"{namespace}-"):
        return None
    parts = name[len(namespace) + 1:].split("-")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0])


def _same_profile(instance: MigInstance, profile: str | None) -> bool:
    if profile is None:
        return True
    geometry = mig.geometry_for(instance.gpu.model)
    try:
        return geometry is not None and geometry.resolve(profile).name == instance.profile
    except KeyError:
        return False


def _fits(instance: MigInstance, reading: SliceReading) -> bool:
    return (reading.gpu_index is None or instance.gpu.index == reading.gpu_index) \
        and _same_profile(instance, reading.profile)


def _match(reading: SliceReading, instances: list[MigInstance],
           held: dict[int, list[MigInstance]]) -> MigInstance | None:
    if reading.gpu_index is not None and reading.placement_start is not None:
        exact = [i for i in instances if i.gpu.index == reading.gpu_index and i.start_slot == reading.placement_start
                 and _same_profile(i, reading.profile)]
        return exact[0] if exact else None
    by_pod = {i.pk: i for pod in reading.pods for i in held.get(job_of_pod(pod) or -1, []) if _fits(i, reading)}
    if len(by_pod) == 1:
        return next(iter(by_pod.values()))
    if reading.gpu_index is None or by_pod:
        return None
    by_profile = [i for i in instances if i.gpu.index == reading.gpu_index and reading.profile is not None
                  and _same_profile(i, reading.profile)]
    return by_profile[0] if len(by_profile) == 1 else None
