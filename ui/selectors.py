"""Scoped reads for pages and the API: every query goes through the user's memberships."""

from collections import defaultdict
from datetime import timedelta

from django.db.models import Avg, Count, F, Prefetch, Q, Sum
from django.db.models.functions import TruncHour, TruncMinute
from django.http import Http404
from django.utils import timezone

from portal import access
from portal.models import Team
from scheduling.models import PLACEMENT_UNITS, Gpu, GpuSample, Job, JobEvent, MigSample, Node, Placement

QUEUED_STATUSES = Job.WAITING_STATUSES
RUNNING_STATUSES = Job.HOLDING_STATUSES



def teams_visible_to(user):
    """Teams whose quota and usage the user may read: staff and finance all, others their own."""
    teams = Team.objects.select_related("business_unit")
    if access.sees_all_usage(user):
        return teams
    return teams.filter(pk__in=list(access.team_roles(user)))


def team_get(user, name: str) -> Team:
    team = teams_visible_to(user).filter(name=name).first()
    if team is None:
        raise Http404("No such team.")
    return team


def jobs_visible_to(user):
    """Jobs with their internals: staff all; team members their teams'; finance and others none."""
    jobs = Job.objects.select_related("team", "project", "priority_class", "submitted_by")
    if not user.is_authenticated:
        return jobs.none()
    if user.is_staff:
        return jobs
    return jobs.filter(team_id__in=[t for t in access.team_roles(user) if access.can_see_jobs(user, t)])


def job_get(user, pk: int) -> Job:
    job = jobs_visible_to(user).filter(pk=pk).first()
    if job is None:
        raise Http404("No such job.")
    return job


def open_placements():
    return Placement.objects.filter(ended_at__isnull=True).select_related("gpu__node__leaf_switch", "mig_instance")




def team_running(team, limit: int | None = 50):
    jobs = (Job.objects.filter(team=team, status__in=RUNNING_STATUSES)
            .select_related("priority_class", "submitted_by", "project", "team")
            .prefetch_related(Prefetch("placements", queryset=open_placements()))
            .order_by("-started_at", "pk"))
    return jobs[:limit] if limit else jobs


def team_usage(team) -> dict:
    """Quota, GPU units in use and borrowed now, and the cluster's idle units."""
    held = Placement.objects.filter(ended_at__isnull=True, job__team=team).aggregate(
        in_use=Sum(PLACEMENT_UNITS), borrowed=Sum(PLACEMENT_UNITS, filter=Q(job__borrowed=True)))
    counts = Job.objects.filter(team=team).aggregate(
        queued=Count("pk", filter=Q(status__in=QUEUED_STATUSES)),
        running=Count("pk", filter=Q(status__in=RUNNING_STATUSES)))
    cluster = cluster_units()
    return {"guaranteed": float(team.guaranteed_gpus), "burst_limit": float(team.burst_limit_gpus),
            "in_use": round(held["in_use"] or 0.0, 3), "borrowed": round(held["borrowed"] or 0.0, 3),
            "idle_in_cluster": round(cluster["total"] - cluster["in_use"], 3), "cluster_total": cluster["total"],
            **counts}


def cluster_units() -> dict:
    total = Gpu.objects.filter(node__state="ready").count()
    in_use = Placement.objects.filter(ended_at__isnull=True).aggregate(units=Sum(PLACEMENT_UNITS))["units"]
    return {"total": float(total), "in_use": float(in_use or 0.0)}


def team_allocation_series(team, hours: int = 24) -> dict:
    """GPU units the team held, time-averaged per hour over the last `hours` hours."""
    now = timezone.now()
    start = (now - timedelta(hours=hours)).replace(minute=0, second=0, microsecond=0)
    rows = (Placement.objects.filter(job__team=team, started_at__lt=now)
            .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
            .annotate(units=PLACEMENT_UNITS).values_list("started_at", "ended_at", "units"))
    buckets = [start + timedelta(hours=i) for i in range(hours + 1)]
    totals = [0.0] * len(buckets)
    for began, ended, units in rows:
        ended = ended or now
        for i, bucket in enumerate(buckets):
            overlap = (min(ended, bucket + timedelta(hours=1)) - max(began, bucket)).total_seconds()
            if overlap > 0:
                totals[i] += units * overlap / 3600
    return {"x": [b.isoformat() for b in buckets], "y": [round(t, 3) for t in totals]}


def team_utilisation_series(team, hours: int = 24) -> dict:
    """Mean measured utilisation of the GPUs and MIG slices the team held at each sample, per hour.

    A whole GPU's samples and a MIG slice's own (its GPU has none in MIG mode) count alike; a slice
    not measured (NVML) is left out of the mean, not counted as idle. The team's placements in the
    window are picked first (a short id list), so the database joins samples to those few rows
    rather than to every placement ever made.
    """
    now = timezone.now()
    since = now - timedelta(hours=hours)
    window = (Placement.objects.filter(job__team=team, started_at__lt=now)
              .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since)).values("pk"))
    sums: dict = defaultdict(lambda: [0.0, 0])
    for through, samples in (("gpu", GpuSample.objects), ("mig_instance", MigSample.objects)):
        held_then = (Q(**{f"{through}__placements__in": window, f"{through}__placements__started_at__lte": F("at")})
                     & (Q(**{f"{through}__placements__ended_at__isnull": True})
                        | Q(**{f"{through}__placements__ended_at__gt": F("at")})))
        rows = (samples.filter(held_then, at__gte=since, utilization__isnull=False).annotate(hour=TruncHour("at"))
                .values("hour").annotate(total=Sum("utilization"), n=Count("id")).order_by("hour"))
        for row in rows:
            sums[row["hour"]][0] += row["total"]
            sums[row["hour"]][1] += row["n"]
    means = {hour: round(100 * total / n, 1) for hour, (total, n) in sums.items()}
    if not means:
        return {"x": [], "y": []}  # the chart says "no samples yet"
    # The allocation chart's hours, an hour without samples a gap: the two charts share one time axis,
    # and a single sampled hour is not stretched over the whole width.
    buckets = [since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=i) for i in range(hours + 1)]
    return {"x": [b.isoformat() for b in buckets], "y": [means.get(b) for b in buckets]}


def job_events(job):
    return JobEvent.objects.filter(job=job).order_by("at", "pk")


def job_placements(job):
    return (Placement.objects.filter(job=job).select_related("gpu__node__leaf_switch", "gpu__node__tier",
                                                              "mig_instance").order_by("started_at", "pk"))


# Samples the job page charts: its most recent placements (a job preempted many times has many).
SERIES_PLACEMENTS = 64


def job_gpu_series(placements) -> list[dict]:
    """Measured utilisation (%) and memory (GiB) of each GPU or MIG slice the job held, while it held it.

    A whole GPU reads the node agent's (or dcgm-exporter's) GPU samples, so a shared GPU shows its
    neighbours' work too; a MIG slice reads its own instance's samples. A slice whose utilisation
    is not measured (NVML cannot measure MIG instances) has null points and `unmeasured` set, never
    zeros. A run of up to 6 hours is shown per minute, a longer one per hour.
    """
    now = timezone.now()
    held = placements[-SERIES_PLACEMENTS:]
    if not held:
        return []
    span = max((p.ended_at or now) for p in held) - min(p.started_at for p in held)
    bucket = TruncMinute("at") if span <= timedelta(hours=6) else TruncHour("at")
    slices = [p for p in held if p.mig_instance_id]
    whole = [p for p in held if not p.mig_instance_id]
    return (_sample_lines(whole, bucket, now, GpuSample.objects, "gpu_id", _gpu_line)
            + _sample_lines(slices, bucket, now, MigSample.objects, "mig_instance_id", _slice_line))


def _gpu_line(p) -> tuple[str, float]:
    return f"{p.gpu.node.name}/gpu{p.gpu.index}", p.gpu.memory_gb


def _slice_line(p) -> tuple[str, float]:
    return (f"{p.gpu.node.name}/gpu{p.gpu.index} {p.mig_instance.profile}@{p.mig_instance.start_slot}",
            p.mig_instance.memory_gb)


def _sample_lines(held, bucket, now, samples, key: str, describe) -> list[dict]:
    """One line per GPU or MIG slice (`key`: the placement's and the sample's gpu_id or
    mig_instance_id) from its samples while it was held; a point not measured is None."""
    if not held:
        return []
    window = Q()
    for p in held:
        window |= Q(**{key: getattr(p, key)}, at__gte=p.started_at, at__lte=p.ended_at or now)
    rows = (samples.filter(window).annotate(bucket=bucket).values(key, "bucket")
            .annotate(util=Avg("utilization"), memory=Avg("memory_used_gb")).order_by(key, "bucket"))
    placements = {getattr(p, key): p for p in held}
    series: dict[int, dict] = {}
    for row in rows:
        line = series.get(row[key])
        if line is None:
            name, memory_gb = describe(placements[row[key]])
            line = series[row[key]] = {"name": name, "memory_gb": memory_gb, "x": [], "util": [], "memory": []}
        line["x"].append(row["bucket"].isoformat())
        line["util"].append(None if row["util"] is None else round(100 * row["util"], 1))
        line["memory"].append(None if row["memory"] is None else round(row["memory"], 2))
    for line in series.values():
        line["unmeasured"] = all(point is None for point in line["util"])
    return list(series.values())


def job_gpu_hours(job, placements) -> float:
    now = timezone.now()
    total = 0.0
    for p in placements:
        total += p.gpu_fraction * ((p.ended_at or now) - p.started_at).total_seconds() / 3600
    return round(total, 3)






def cluster_nodes():
    """Nodes with tier, leaf, GPUs, MIG instances and open placements, in a fixed number of queries."""
    return (Node.objects.select_related("tier", "leaf_switch")
            .prefetch_related("gpus__mig_instances",
                              Prefetch("gpus__placements", to_attr="open_placements",
                                       queryset=Placement.objects.filter(ended_at__isnull=True)
                                       .select_related("job__team"))))


def free_by_model(nodes) -> list[dict]:
    """Free capacity per GPU model from the prefetched nodes: whole GPUs, MIG slices and units."""
    free = defaultdict(lambda: {"gpus": 0, "free_gpus": 0, "free_slices": 0, "free_units": 0.0})
    for node in nodes:
        for gpu in node.gpus.all():
            row = free[gpu.model]
            row["gpus"] += 1
            if node.state != "ready":
                continue
            held = {p.mig_instance_id for p in gpu.open_placements}
            if gpu.mig_enabled:
                idle = [m for m in gpu.mig_instances.all() if m.pk not in held]
                row["free_slices"] += len(idle)
                row["free_units"] += float(sum(m.gpu_fraction for m in idle))
            elif not gpu.open_placements:
                row["free_gpus"] += 1
                row["free_units"] += 1
            else:
                row["free_units"] += max(0.0, 1 - sum(p.share_milli for p in gpu.open_placements) / 1000)
    return [{"model": m, **{k: round(v, 2) for k, v in r.items()}} for m, r in sorted(free.items())]
