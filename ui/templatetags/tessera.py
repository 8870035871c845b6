"""The navigation bar's data: the user's teams, the current one, and which links they get."""

from datetime import timedelta

from django import template
from django.utils import dateformat, timezone
from django.utils.timesince import timesince, timeuntil

from portal import access
from portal.models import units

register = template.Library()


@register.simple_tag(takes_context=True)
def tessera_nav(context) -> dict:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    roles = access.team_roles(user)
    teams = sorted(access.team_names(user).items(), key=lambda team: team[1])  # read with the roles
    match = getattr(request, "resolver_match", None)
    wanted = match.kwargs.get("team") if match else None
    current = next(((pk, name) for pk, name in teams if name == wanted), teams[0] if teams else None)
    return {
        "teams": [name for _, name in teams],
        "current": current[1] if current else None,
        "lead": bool(current) and access.can_manage(user, current[0]),
        "sees_jobs": user.is_staff or any(role in access.SEES_JOBS for role in roles.values()),
        "submits": user.is_staff or any(role in access.SUBMITS for role in roles.values()),
        "finance": user.is_staff or access.is_finance(user),
    }


@register.filter(name="units")
def units_filter(amount) -> str:
    """GPU units as people write them (16, not 16.000)."""
    return units(amount)


# The portal's one way to write a moment: sortable, unambiguous, with its zone (settings.TIME_ZONE).
WHEN_FORMAT = "Y-m-d H:i T"


@register.filter
def when(moment) -> str:
    """'2026-12-04 10:17 UTC' for a datetime; '' for none (pair it with |default:"never")."""
    if not moment:
        return ""
    return dateformat.format(timezone.localtime(moment), WHEN_FORMAT)


@register.filter
def ago(moment) -> str:
    """'3 hours, 1 minute ago'; 'just now' under a minute, where timesince says '0 minutes'."""
    if not moment:
        return ""
    now = timezone.now()
    return "just now" if (now - moment).total_seconds() < 60 else f"{timesince(moment, now)} ago"


NOT_MEASURED = "not measured"


def slice_reading(utilisation, memory_used_gb, memory_gb, measured: bool) -> str:
    """'81% · 29.7/40 GiB'; a utilisation the source could not measure says so, never 0%."""
    if not measured:
        return "no reading yet"
    busy = NOT_MEASURED if utilisation is None else f"{utilisation:.0%}"
    memory = "memory not measured" if memory_used_gb is None else f"{memory_used_gb:.1f}/{memory_gb:g} GiB"
    return f"{busy} · {memory}"


@register.filter
def held_now(placement) -> str:
    """What the job's slice or GPU measures now: its MIG instance's own reading, or the GPU's."""
    if placement.ended_at:
        return "—"
    if placement.mig_instance_id:
        mi = placement.mig_instance
        return slice_reading(mi.utilization, mi.memory_used_gb, mi.memory_gb, mi.measured_at is not None)
    gpu = placement.gpu
    return slice_reading(gpu.utilization, gpu.memory_used_gb, gpu.memory_gb, gpu.node.telemetry_at is not None)


@register.filter
def placement_summary(job) -> str:
    """'h100-01 gpu0–7 · NVSwitch · leaf-1' from the job's prefetched open placements."""
    by_node: dict = {}
    for placement in job.placements.all():
        by_node.setdefault(placement.gpu.node, []).append(placement)
    parts = []
    for node, held in by_node.items():
        slots = ", ".join(f"gpu{p.gpu.index} {p.mig_instance.profile}" if p.mig_instance_id else f"gpu{p.gpu.index}"
                          for p in sorted(held, key=lambda p: p.gpu.index))
        parts.append(f"{node.name} {slots} · {node.get_interconnect_display()} · {node.leaf_switch.name}")
    return "; ".join(parts) or "—"


@register.filter
def ask(job) -> str:
    """What a job asks for, the way a lead says it: '8 × GPU' or '12 GiB slice'."""
    if job.gpus:
        return f"{job.gpus} × GPU" + (" (gang)" if job.gang and job.gpus > 1 else "")
    return f"{job.gpu_memory_gb:g} GiB slice"


# How far real starts fell from the estimate, as a share of the estimated wait: the middle half
# (25th to 75th percentile) of the jobs the simulator showed an estimate in each band of wait,
# tessera policy, tuning seeds 101-102 of mixed, serving-heavy, big-gangs and light (2026-12-04;
# the figures that report on it use other seeds). Under 15 minutes the estimate is close enough to
# stand alone. Real runtimes are less known than the simulator's, so real ranges are wider still.
ETA_SPREAD = ((15 * 60, 0.10, 1.64), (3600, 0.15, 1.54), (4 * 3600, 0.06, 0.75))


@register.filter
def eta(moment) -> dict:
    """How a start estimated at `moment` reads, for the one ETA partial (first paint and refresh):
    `point` ('7 hours, 54 minutes'), `low`/`high` (the likely range, '' when the estimate is near)
    and `rough`: the range leaves out the point itself (long waits), so the range is the headline."""
    if moment is None:
        return {}
    now = timezone.now()
    wait = (moment - now).total_seconds()
    point = timeuntil(moment, now)
    bands = [band for band in ETA_SPREAD if wait >= band[0]]
    if not bands:
        return {"point": point, "low": "", "high": "", "rough": False}
    _, low, high = bands[-1]
    return {"point": point, "low": _until(now, wait * low), "high": _until(now, wait * high),
            "rough": not low <= 1 <= high}


def _until(now, seconds: float) -> str:
    return "now" if seconds < 60 else timeuntil(now + timedelta(seconds=seconds), now)
