"""The cluster heat map's rows: one per node, one cell per GPU, MIG instances in their slots.

What a cell says depends on who looks: everyone sees capacity and utilisation, staff and finance
see which team holds a GPU, and only those who may see a team's jobs see the job's name.
"""

from portal import access
from ui.templatetags.tessera import slice_reading

MEMORY_SLOTS = 8


def _colour(utilisation: float) -> str:
    """Idle is pale, busy is deep orange; a plain hue ramp readable without a legend."""
    light = 92 - round(52 * max(0.0, min(1.0, utilisation)))
    return f"hsl(24, 85%, {light}%)"


def _holder(user, placement) -> str:
    team = placement.job.team
    if access.can_see_jobs(user, team.pk):
        return f"{team.name}: #{placement.job_id} {placement.job.name}"
    if access.sees_all_usage(user):
        return team.name
    return "in use"


def _mig_segments(user, gpu) -> list[dict]:
    held = {p.mig_instance_id: p for p in gpu.open_placements if p.mig_instance_id}
    segments = []
    for instance in gpu.mig_instances.all():
        placement = held.get(instance.pk)
        measured = instance.measured_at is not None and instance.utilization is not None
        reading = slice_reading(instance.utilization, instance.memory_used_gb, instance.memory_gb,
                                instance.measured_at is not None)
        segments.append({
            "profile": instance.profile, "short": instance.profile.split(".")[0],
            "start": instance.start_slot + 1, "size": instance.size_slots,
            "busy": placement is not None, "measured": measured,
            # A slice not measured keeps the page's background: no colour that reads as idle.
            "colour": _colour(instance.utilization) if measured else "",
            "reading": reading,
            # Numbers for the API: percent and GiB, null where not measured (or not read yet).
            "utilisation": round(100 * instance.utilization, 1) if measured else None,
            "memory_used_gb": instance.memory_used_gb,
            "label": f"{instance.profile} @ slot {instance.start_slot}: "
                     + (_holder(user, placement) if placement else "free") + f" · {reading}"})
    return segments


def _cell(user, gpu) -> dict:
    placements = gpu.open_placements
    whole = [p for p in placements if not p.mig_instance_id]
    holders = ", ".join(_holder(user, p) for p in whole)
    # A MIG GPU has no whole-GPU utilisation (NVML and DCGM measure none in MIG mode): its slices say.
    used = ("per MIG slice" if gpu.mig_enabled
            else f"{gpu.utilization:.0%} used · {gpu.memory_used_gb:g}/{gpu.memory_gb:g} GiB")
    label = f"gpu{gpu.index} · {gpu.model} · {used}"
    return {
        "index": gpu.index, "model": gpu.model, "utilisation": round(100 * gpu.utilization),
        "colour": _colour(0.0 if gpu.mig_enabled else gpu.utilization), "busy": bool(placements),
        "mig": gpu.mig_enabled,
        "segments": _mig_segments(user, gpu) if gpu.mig_enabled else [],
        "label": label + (f" · {holders}" if holders else " · free" if not gpu.mig_enabled else ""),
    }


def heat_rows(user, nodes) -> list[dict]:
    return [{
        "name": node.name, "tier": node.tier.name, "leaf": node.leaf_switch.name, "state": node.state,
        "interconnect": node.get_interconnect_display(), "gpu_model": node.gpu_model,
        "sharing": sharing_text(node), "sharing_mode": node.gpu_sharing,
        "cells": [_cell(user, gpu) for gpu in node.gpus.all()],
    } for node in nodes]


def sharing_text(node) -> str:
    """How the node's device plugin shares its GPUs, as the cluster page says it."""
    if node.gpu_sharing == node.GpuSharing.NONE:
        return "none (whole GPUs)"
    if node.gpu_sharing == node.GpuSharing.MPS:
        return f"MPS × {node.gpu_replicas} (memory-limited)"
    return f"time-slicing × {node.gpu_replicas} (no memory isolation)"
