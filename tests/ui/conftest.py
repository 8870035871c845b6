"""One cast for every portal test: team alpha (alice lead, bob member, carol viewer), team bravo
(dave lead), fiona in finance, root on staff, and nobody signed in; a small cluster; a few jobs."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from portal.models import FINANCE_GROUP, BusinessUnit, Membership, Project, Team
from scheduling.models import (
    CapacityTier,
    Gpu,
    GpuSample,
    Job,
    JobEvent,
    MigInstance,
    NetworkSwitch,
    Node,
    Placement,
    PriorityClass,
)

ROLES = ["lead", "member", "viewer", "finance", "staff", "other_lead", "anonymous"]
USERNAMES = {"lead": "alice", "member": "bob", "viewer": "carol", "other_lead": "dave",
             "finance": "fiona", "staff": "root"}
# Names that must never show up for someone outside team bravo.
BRAVO_SECRETS = ("bravo-secret-train", "bravo-secret-wait")


def _node(name, tier, leaf, model, count, memory_gb):
    node = Node.objects.create(name=name, tier=tier, leaf_switch=leaf, gpu_model=model, interconnect="nvswitch",
                               cpu_cores=64, memory_gb=512, last_heartbeat=timezone.now())
    for index in range(count):
        Gpu.objects.create(node=node, index=index, model=model, memory_gb=memory_gb, mig_capable=True,
                           uuid=f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{name}/{index}')}", utilization=0.5)
    return node


@pytest.fixture
def cluster(db):
    spine = NetworkSwitch.objects.create(name="spine-t", kind="spine")
    leaf = NetworkSwitch.objects.create(name="leaf-t", kind="leaf", parent=spine)
    reserved = CapacityTier.objects.get(name="reserved")
    h100 = _node("h100-t1", reserved, leaf, "H100-80GB", 8, 80)
    _node("a100-t1", CapacityTier.objects.get(name="spot"), leaf, "A100-40GB", 4, 40)
    mig_gpu = h100.gpus.get(index=7)
    mig_gpu.mig_enabled = True
    mig_gpu.save()
    MigInstance.for_profile(mig_gpu, "1g.10gb", 0).save()
    MigInstance.for_profile(mig_gpu, "3g.40gb", 4).save()
    return {"h100": h100}


@pytest.fixture
def teams(cluster):
    unit = BusinessUnit.objects.create(name="Unit", cost_center="CC-1")
    alpha = Team.objects.create(name="alpha", business_unit=unit, guaranteed_gpus=Decimal(4),
                                burst_limit_gpus=Decimal(8))
    bravo = Team.objects.create(name="bravo", business_unit=unit, guaranteed_gpus=Decimal(2),
                                burst_limit_gpus=Decimal(4))
    alpha.allowed_priority_classes.set(PriorityClass.objects.all())
    bravo.allowed_priority_classes.set(PriorityClass.objects.filter(name__in=["training", "best-effort"]))
    for team in (alpha, bravo):
        Project.objects.create(team=team, name="main")
    return {"alpha": alpha, "bravo": bravo}


@pytest.fixture
def users(teams):
    finance = Group.objects.get_or_create(name=FINANCE_GROUP)[0]
    made = {}
    for role, name in USERNAMES.items():
        user = User.objects.create_user(name, password=f"{name}-test-pass", is_staff=role == "staff",
                                        is_superuser=role == "staff")
        if role in ("lead", "member", "viewer"):
            Membership.objects.create(user=user, team=teams["alpha"], role=role)
        if role == "other_lead":
            Membership.objects.create(user=user, team=teams["bravo"], role="lead")
        if role == "finance":
            user.groups.add(finance)
        made[role] = user
    return made


def make_job(team, user, name, *, status="pending", priority="training", **fields):
    defaults = {"kind": "training", "gpus": 1, "gpu_memory_gb": 40, "queue_order": 1}
    job = Job.objects.create(team=team, project=team.projects.first(), submitted_by=user, name=name, status=status,
                             priority_class=PriorityClass.objects.get(name=priority), **{**defaults, **fields})
    JobEvent.objects.create(job=job, at=timezone.now(), kind="submitted")
    return job


def run_on(job, gpu, hours=2, share_milli=1000):
    started = timezone.now() - timedelta(hours=hours)
    Job.objects.filter(pk=job.pk).update(status="running", started_at=started)
    Placement.objects.create(job=job, gpu=gpu, memory_gb=gpu.memory_gb, started_at=started, share_milli=share_milli)
    GpuSample.objects.create(gpu=gpu, at=timezone.now() - timedelta(minutes=30), utilization=0.7, memory_used_gb=30)


@pytest.fixture
def jobs(users, teams, cluster):
    alpha, bravo, gpus = teams["alpha"], teams["bravo"], list(cluster["h100"].gpus.order_by("index"))
    made = {
        "bob_wait": make_job(alpha, users["member"], "alpha-bob-wait", queue_order=1,
                             pending_reason_code="burst-limit", pending_reason="Team alpha is at its burst limit."),
        "alice_wait": make_job(alpha, users["lead"], "alpha-alice-wait", queue_order=2),
        "alpha_run": make_job(alpha, users["lead"], "alpha-run"),
        "bravo_run": make_job(bravo, users["other_lead"], BRAVO_SECRETS[0]),
        "bravo_wait": make_job(bravo, users["other_lead"], BRAVO_SECRETS[1]),
    }
    run_on(made["alpha_run"], gpus[0])
    run_on(made["bravo_run"], gpus[1])
    for job in made.values():
        job.refresh_from_db()
    return made


@pytest.fixture
def clients(users):
    """{role: Client signed in as that role}; 'anonymous' is signed in as nobody."""
    made = {"anonymous": Client()}
    for role, user in users.items():
        client = Client()
        client.force_login(user)
        made[role] = client
    return made


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """The cast is created for every test; the production hasher would make that take seconds."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
