"""The Prometheus metrics Tessera exports at /metrics (tessera/metrics.py serves them).

Everything is read when Prometheus scrapes, so every portal replica answers the same, whichever
process did the work:

- The cluster's state (pending jobs, allocated GPUs, action outcomes, agent poll age, quotas) comes
  from the database, one query per family: a restart loses nothing and no process must be alive
  to keep a gauge current.
- Events only a worker sees (how long a cycle took, what it decided) are counted in the shared
  cache, which is Redis in production: the worker that runs a cycle and the portal that is
  scraped are separate processes, usually separate pods. prometheus_client's multiprocess mode
  would need them to share one directory on one host; Redis counters (INCRBY, atomic) do not.
  The embedded demo runs both in one process, where the in-process cache serves the same.

Names follow Prometheus conventions and stay close to Kueue's and KAI's (`*_seconds` histograms,
`*_total` counters, GPU gauges labelled by team the way they label by queue).

Adding a metric: a state metric is a function that yields metric families, listed in STATE; an
event metric is a name in EVENT_COUNTERS (or a histogram beside CYCLE_DURATION) counted with
`count()` where it happens. tests/observability checks every family against the Grafana dashboard.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator

from django.core.cache import cache
from django.db.models import Count
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from portal.models import Team
from scheduling.models import ActionRequest, Gpu, Job, Node, Placement

# -- events counted by workers ----------------------------------------------------------------------

KEY = "metrics:{}"
CYCLE_DURATION = "tessera_cycle_duration_seconds"
CYCLE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
CYCLE_LAST_RUN = "tessera_cycle_last_run_timestamp_seconds"
# name -> (help, the field of the cycle's log line it adds up)
EVENT_COUNTERS = {
    "tessera_cycle_binds_total": ("Jobs bound by scheduling cycles.", "binds"),
    "tessera_cycle_preemptions_total": ("Jobs scheduling cycles preempted for a higher priority class.",
                                        "preemptions"),
    "tessera_cycle_reclaims_total": ("Borrowed jobs scheduling cycles reclaimed for a team's guarantee.", "reclaims"),
    "tessera_cycle_repartitions_total": ("MIG repartitions scheduling cycles asked for.", "repartitions"),
}


def count(name: str, amount: int = 1) -> None:
    """Add to a counter every process shares (atomic in Redis)."""
    if amount <= 0:
        return
    key = KEY.format(name)
    for _attempt in range(2):
        cache.add(key, 0, timeout=None)
        try:
            cache.incr(key, amount)
            return
        except ValueError:  # the cache was cleared between add and incr: add it again
            continue


def cycle_recorded(fields: dict) -> None:
    """Count one scheduling cycle from its log line's fields (agents/observe.py)."""
    duration = fields["duration_s"]
    bucket = next((i for i, bound in enumerate(CYCLE_BUCKETS) if duration <= bound), len(CYCLE_BUCKETS))
    count(f"{CYCLE_DURATION}:bucket:{bucket}")
    count(f"{CYCLE_DURATION}:count")
    count(f"{CYCLE_DURATION}:sum_us", round(duration * 1e6))
    for name, (_help, field) in EVENT_COUNTERS.items():
        count(name, fields[field])
    cache.set(KEY.format(CYCLE_LAST_RUN), time.time(), timeout=None)


LEADER = "tessera_leader"


def leader_recorded(identity: str, renewed: float) -> None:
    """The Lease as a beat replica last read it (agents/leadership.py): who holds it, when renewed."""
    cache.set(KEY.format(LEADER), {"identity": identity, "renewed": renewed}, timeout=None)


def leader() -> Iterator[Metric]:
    """Only where beat elects a leader (TESSERA_LEADER_ELECTION): nothing is recorded otherwise."""
    lease = cache.get(KEY.format(LEADER))
    if not lease:
        return
    holder = GaugeMetricFamily(LEADER, "The beat replica that holds the scheduling Lease (1 for its identity).",
                               labels=["identity"])
    holder.add_metric([lease["identity"]], 1)
    yield holder
    yield GaugeMetricFamily("tessera_leader_lease_age_seconds", "Seconds since the leader last renewed the "
                            "scheduling Lease (by its clock); past the lease duration a follower takes over.",
                            value=round(max(0.0, time.time() - lease["renewed"]), 3))


def events() -> Iterator[Metric]:
    names = [f"{CYCLE_DURATION}:bucket:{i}" for i in range(len(CYCLE_BUCKETS) + 1)] + \
        [f"{CYCLE_DURATION}:count", f"{CYCLE_DURATION}:sum_us", CYCLE_LAST_RUN, *EVENT_COUNTERS]
    stored = cache.get_many([KEY.format(name) for name in names])
    value = lambda name: stored.get(KEY.format(name), 0)  # noqa: E731
    cumulative, buckets = 0, []
    for i, bound in enumerate((*CYCLE_BUCKETS, float("inf"))):
        cumulative += value(f"{CYCLE_DURATION}:bucket:{i}")
        buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
    yield HistogramMetricFamily(CYCLE_DURATION, "Time one scheduling cycle took: snapshot, decide and apply.",
                                buckets=buckets, sum_value=value(f"{CYCLE_DURATION}:sum_us") / 1e6)
    for name, (text, _field) in EVENT_COUNTERS.items():
        yield CounterMetricFamily(name.removesuffix("_total"), text, value=value(name))
    if value(CYCLE_LAST_RUN):
        yield GaugeMetricFamily(CYCLE_LAST_RUN, "When the last scheduling cycle ran (Unix time).",
                                value=value(CYCLE_LAST_RUN))


# -- the cluster's state, from the database -------------------------------------------------------------

def pending_jobs() -> Iterator[Metric]:
    family = GaugeMetricFamily("tessera_pending_jobs", "Jobs waiting to be placed, by team and the reason the "
                               "last cycle gave (reason codes: README, scheduling engine).", labels=["team", "reason"])
    rows = Job.objects.filter(status__in=Job.WAITING_STATUSES).values("team__name", "pending_reason_code") \
        .annotate(jobs=Count("id")).order_by()
    for row in rows:
        family.add_metric([row["team__name"], row["pending_reason_code"] or "none"], row["jobs"])
    yield family


def gpus() -> Iterator[Metric]:
    allocated, used = defaultdict(float), defaultdict(float)
    placements = Placement.objects.filter(ended_at__isnull=True, job__status__in=Job.HOLDING_STATUSES) \
        .select_related("job__team", "gpu__node__tier", "mig_instance")
    for placement in placements:
        key = (placement.job.team.name, placement.gpu.node.tier.name, placement.gpu.model)
        allocated[key] += placement.gpu_fraction
        # A MIG slice's own activity, not its GPU's (which no source measures in MIG mode); a slice
        # not measured adds nothing rather than a made-up share.
        busy = placement.mig_instance.utilization if placement.mig_instance_id else placement.gpu.utilization
        used[key] += placement.gpu_fraction * (busy or 0.0)
    labels = ["team", "tier", "model"]
    families = (
        (GaugeMetricFamily("tessera_allocated_gpus", "GPUs held by running jobs (a MIG instance or a share counts "
                           "its fraction of a GPU), by team, capacity tier and GPU model.", labels=labels), allocated),
        (GaugeMetricFamily("tessera_used_gpus", "Allocated GPUs weighted by the utilisation last measured on them, "
                           "a MIG slice's its own (0 to allocated; a slice not measured adds 0).",
                           labels=labels), used),
    )
    for family, values in families:
        for key, value in sorted(values.items()):
            family.add_metric(list(key), round(value, 6))
        yield family
    capacity = GaugeMetricFamily("tessera_capacity_gpus", "GPUs on nodes that are not lost, by capacity tier and "
                                 "GPU model.", labels=["tier", "model"])
    for row in Gpu.objects.exclude(node__state=Node.State.LOST).values("node__tier__name", "model") \
            .annotate(gpus=Count("id")).order_by():
        capacity.add_metric([row["node__tier__name"], row["model"]], row["gpus"])
    yield capacity


def team_quotas() -> Iterator[Metric]:
    guaranteed = GaugeMetricFamily("tessera_team_guaranteed_gpus", "GPUs guaranteed to the team.", labels=["team"])
    burst = GaugeMetricFamily("tessera_team_burst_limit_gpus", "Most GPUs the team may hold, borrowing included.",
                              labels=["team"])
    for name, guarantee, limit in Team.objects.values_list("name", "guaranteed_gpus", "burst_limit_gpus"):
        guaranteed.add_metric([name], float(guarantee))
        burst.add_metric([name], float(limit))
    yield guaranteed
    yield burst


def actions() -> Iterator[Metric]:
    finished = CounterMetricFamily("tessera_actions", "Backend actions (bind, preempt, checkpoint, repartition) "
                                   "that finished, by kind and outcome (confirmed or failed).",
                                   labels=["kind", "outcome"])
    in_flight = GaugeMetricFamily("tessera_actions_in_flight", "Backend actions requested and not finished yet.",
                                  labels=["kind"])
    for row in ActionRequest.objects.values("kind", "state").annotate(actions=Count("id")).order_by():
        if row["state"] == ActionRequest.State.REQUESTED:
            in_flight.add_metric([row["kind"]], row["actions"])
        else:
            finished.add_metric([row["kind"], row["state"]], row["actions"])
    yield finished
    yield in_flight


def nodes() -> Iterator[Metric]:
    age = GaugeMetricFamily("tessera_agent_poll_age_seconds", "Seconds since the node's agent last answered a "
                            "poll (a node is lost after TESSERA_LOST_AFTER_MISSED missed polls).", labels=["node"])
    # A heartbeat can come from the cluster alone (a Ready node without an agent URL); this one moves
    # only when GPU readings arrive, from the node agent or a dcgm-exporter scrape.
    scrape = GaugeMetricFamily("tessera_telemetry_scrape_age_seconds", "Seconds since the node's GPU readings "
                               "last arrived (node agent or dcgm-exporter scrape).", labels=["node"])
    states = GaugeMetricFamily("tessera_nodes", "GPU nodes by state.", labels=["state"])
    now = timezone.now()
    by_state = dict.fromkeys(Node.State.values, 0)
    for name, state, heartbeat, read_at in Node.objects.values_list("name", "state", "last_heartbeat", "telemetry_at"):
        by_state[state] += 1
        if heartbeat is not None:
            age.add_metric([name], round((now - heartbeat).total_seconds(), 3))
        if read_at is not None:
            scrape.add_metric([name], round((now - read_at).total_seconds(), 3))
    for state, number in by_state.items():
        states.add_metric([state], number)
    yield age
    yield scrape
    yield states


STATE: tuple[Callable[[], Iterator[Metric]], ...] = (pending_jobs, gpus, team_quotas, actions, nodes)


class TesseraCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from events()
        yield from leader()
        for source in STATE:
            yield from source()


def registry() -> CollectorRegistry:
    """Tessera's metrics only: the per-process defaults (process_*, python_gc_*) would describe
    whichever replica happened to be scraped, not the cluster."""
    own = CollectorRegistry(auto_describe=False)
    own.register(TesseraCollector())
    return own
