"""The demo cluster, tenants, users and jobs that `make demo` loads (demo only)."""

import uuid
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from billing.demo import billing_demo_load
from portal.models import FINANCE_GROUP, BusinessUnit, Membership, Project, Team
from scheduling.defaults import defaults_ensure
from scheduling.models import (
    CapacityTier,
    Gpu,
    Job,
    JobEvent,
    MigInstance,
    NetworkSwitch,
    Node,
    Placement,
    PriorityClass,
)

# name prefix, count, GPU model, GPUs, memory GB, interconnect, leaf, tier per node, MIG-capable
NODE_GROUPS = [
    ("h100-", 4, "H100-80GB", 8, 80, "nvswitch", "leaf-1", ["reserved"] * 4, True),
    ("a100-", 4, "A100-80GB", 8, 80, "nvswitch", "leaf-2",
     ["reserved", "on-demand", "spot", "spot"], True),
    ("pcie-", 2, "A100-40GB", 4, 40, "pcie", "leaf-2", ["on-demand", "on-demand"], True),
]
# The balanced MIG layout (2×1g + 2g + 3g) given to four H100s so inference has slices to use.
BALANCED_H100 = [("1g.10gb", 0), ("1g.10gb", 1), ("2g.20gb", 2), ("3g.40gb", 4)]

BUSINESS_UNITS = {"Consumer": "CC-100", "Enterprise": "CC-200", "Research": "CC-300"}
# team, business unit, guaranteed, burst, weight, projects
TEAMS = [
    ("search", "Consumer", 16, 40, 1.0, ["ranking", "query-understanding"]),
    ("recsys", "Consumer", 12, 32, 1.0, ["feeds"]),
    ("llm-platform", "Research", 24, 64, 2.0, ["foundation", "evals"]),
    ("vision", "Research", 8, 24, 1.0, ["detection"]),
    ("fraud", "Enterprise", 4, 12, 0.5, ["scoring"]),
]
# username, password, team, role (None: not a team member), staff, finance
USERS = [
    ("admin", "admin-demo-pass", None, None, True, False),
    ("alice", "alice-demo-pass", "search", "lead", False, False),
    ("bob", "bob-demo-pass", "search", "member", False, False),
    ("carol", "carol-demo-pass", "search", "viewer", False, False),
    ("dave", "dave-demo-pass", "llm-platform", "lead", False, False),
    ("erin", "erin-demo-pass", "vision", "lead", False, False),
    ("fiona", "fiona-demo-pass", None, None, False, True),
]


def demo_is_loaded() -> bool:
    return BusinessUnit.objects.exists()


@transaction.atomic
def demo_load(*, workload: bool = False) -> list[tuple[str, str, str]]:
    """Create the demo data; returns (username, password, what they are) for printing. `workload`:
    also `make demo`'s busy cluster (ui/demo_workload.py), placed before the billing history, which
    fills each GPU's past only up to its running job and opens the ledger for every running job
    (loaded after, those jobs showed GPU-hours but no cost, and overlapped the history)."""
    defaults_ensure(CapacityTier, PriorityClass)
    Group.objects.get_or_create(name=FINANCE_GROUP)
    switches = _create_switches()
    _create_nodes(switches)
    teams = _create_tenancy()
    users = _create_users(teams)
    _create_jobs(teams, users)
    if workload:
        from ui.demo_workload import demo_workload_load  # it places jobs through this module's helpers
        demo_workload_load()
    billing_demo_load()
    return [(u, p, _describe(team, role, staff, finance)) for u, p, team, role, staff, finance in USERS]


def _describe(team, role, staff, finance) -> str:
    if staff:
        return "platform admin (staff, superuser)"
    if finance:
        return "finance"
    return f"{role} of {team}"


def _create_switches() -> dict[str, NetworkSwitch]:
    spine = NetworkSwitch.objects.create(name="spine-1", kind="spine")
    return {name: NetworkSwitch.objects.create(name=name, kind="leaf", parent=spine)
            for name in ("leaf-1", "leaf-2")}


def _create_nodes(switches) -> None:
    tiers = {t.name: t for t in CapacityTier.objects.all()}
    for prefix, count, model, gpus, memory, interconnect, leaf, node_tiers, mig in NODE_GROUPS:
        for number in range(1, count + 1):
            node = Node.objects.create(
                name=f"{prefix}{number:02d}", tier=tiers[node_tiers[number - 1]],
                leaf_switch=switches[leaf], gpu_model=model, interconnect=interconnect,
                cpu_cores=192 if gpus == 8 else 64, memory_gb=2048 if gpus == 8 else 512,
                nics=8 if gpus == 8 else 1, nic_gbps=400 if gpus == 8 else 100,
                last_heartbeat=timezone.now())
            for index in range(gpus):
                Gpu.objects.create(
                    node=node, index=index, model=model, memory_gb=memory, mig_capable=mig,
                    uuid=f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node.name}/{index}')}")
    for gpu in Gpu.objects.filter(node__name="h100-04", index__lt=4):
        gpu.mig_enabled = True
        gpu.layout_changed_at = timezone.now() - timedelta(days=3)  # partitioned when the cluster was set up
        gpu.save(update_fields=["mig_enabled", "layout_changed_at"])
        for profile, start in BALANCED_H100:
            MigInstance.for_profile(gpu, profile, start).save()


def _create_tenancy() -> dict[str, Team]:
    units = {name: BusinessUnit.objects.create(name=name, cost_center=cc)
             for name, cc in BUSINESS_UNITS.items()}
    classes = list(PriorityClass.objects.all())
    teams = {}
    for name, unit, guaranteed, burst, weight, projects in TEAMS:
        team = Team.objects.create(name=name, business_unit=units[unit],
                                   guaranteed_gpus=Decimal(guaranteed), burst_limit_gpus=Decimal(burst),
                                   weight=weight)
        team.allowed_priority_classes.set(classes)
        for project in projects:
            Project.objects.create(team=team, name=project)
        teams[name] = team
    return teams


def _create_users(teams) -> dict[str, User]:
    finance = Group.objects.get(name=FINANCE_GROUP)
    users = {}
    for username, password, team, role, staff, is_finance in USERS:
        user = User(username=username, email=f"{username}@example.com", is_staff=staff,
                    is_superuser=staff, first_name=username.capitalize())
        user.set_password(password)
        user.save()
        if team:
            Membership.objects.create(user=user, team=teams[team], role=role)
        if is_finance:
            user.groups.add(finance)
        users[username] = user
    return users


def _create_jobs(teams, users) -> None:
    now = timezone.now()
    classes = {c.name: c for c in PriorityClass.objects.all()}

    def job(team, project, user, name, kind, priority, **fields):
        return Job.objects.create(
            team=teams[team], project=teams[team].projects.get(name=project), submitted_by=users[user],
            name=name, kind=kind, priority_class=classes[priority], **fields)

    pretrain = job("llm-platform", "foundation", "dave", "llama-13b-pretrain", "training", "training",
                   gpus=8, gpu_memory_gb=80, cpu_cores=96, memory_gb=1024, checkpoint_interval_s=1800,
                   expected_runtime_s=36 * 3600, status="running", started_at=now - timedelta(hours=5))
    _place_whole(pretrain, "h100-01", range(8), now - timedelta(hours=5))
    ranker = job("search", "ranking", "alice", "ranker-serving", "inference", "production",
                 gpu_memory_gb=8, cpu_cores=4, memory_gb=32, preemptible=False, status="running",
                 started_at=now - timedelta(days=2))
    _place_mig(ranker, "h100-04", 0, start_slot=0, started=now - timedelta(days=2))
    recsys = job("recsys", "feeds", "alice", "feeds-two-tower", "training", "training", gpus=4,
                 gpu_memory_gb=60, cpu_cores=32, memory_gb=256, checkpoint_interval_s=3600,
                 expected_runtime_s=10 * 3600, status="running", started_at=now - timedelta(hours=2))
    _place_whole(recsys, "a100-03", range(4), now - timedelta(hours=2))
    job("vision", "detection", "erin", "detr-finetune", "training", "training", gpus=16,
        gpu_memory_gb=70, cpu_cores=128, memory_gb=1024, checkpoint_interval_s=1800,
        expected_runtime_s=8 * 3600, queue_order=1)
    job("search", "query-understanding", "bob", "qu-bert-eval", "batch", "best-effort",
        gpu_memory_gb=12, cpu_cores=8, memory_gb=64, expected_runtime_s=3600, queue_order=1)
    job("search", "ranking", "alice", "ranker-distill", "training", "training", gpus=2,
        gpu_memory_gb=40, cpu_cores=16, memory_gb=128, checkpoint_interval_s=900,
        expected_runtime_s=4 * 3600, queue_order=2)
    job("fraud", "scoring", "admin", "fraud-xgb-serving", "inference", "production",
        gpu_memory_gb=5, cpu_cores=2, memory_gb=16, preemptible=False)


def _place_whole(job, node_name, indexes, started) -> None:
    for gpu in Gpu.objects.filter(node__name=node_name, index__in=list(indexes)):
        Placement.objects.create(job=job, gpu=gpu, share_milli=1000, memory_gb=gpu.memory_gb,
                                 started_at=started)
    _events(job, started)


def _place_mig(job, node_name, gpu_index, *, start_slot, started) -> None:
    instance = MigInstance.objects.get(gpu__node__name=node_name, gpu__index=gpu_index,
                                       start_slot=start_slot)
    Placement.objects.create(job=job, gpu=instance.gpu, mig_instance=instance, mig_profile=instance.profile,
                             share_milli=instance.share_milli,
                             memory_gb=instance.memory_gb, started_at=started)
    _events(job, started)


def _events(job, started) -> None:
    JobEvent.objects.create(job=job, at=started - timedelta(minutes=3), kind="submitted")
    JobEvent.objects.create(job=job, at=started, kind="placed", message="Placed by the scheduler.")
    Job.objects.filter(pk=job.pk).update(submitted_at=started - timedelta(minutes=3))
