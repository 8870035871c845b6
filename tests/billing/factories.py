"""A tiny cluster for ledger tests: one node, a whole GPU, a MIG GPU and a shared GPU."""

from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

from billing.models import Rate
from portal.models import BusinessUnit, Project, Team
from scheduling.models import CapacityTier, Gpu, Job, MigInstance, NetworkSwitch, Node, Placement, PriorityClass

T0 = datetime(2026, 1, 31, 20, 0, tzinfo=UTC)
MIG_LAYOUT = [("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]


@dataclass
class World:
    node: Node
    whole: Gpu
    mig: Gpu
    shared: Gpu
    instances: list[MigInstance]
    team: Team
    project: Project
    jobs: list[Job]


def make_world(*, jobs: int = 4, model: str = "H100-80GB", tier: str = "reserved", price: str = "3.6400",
               name: str = "t") -> World:
    leaf = NetworkSwitch.objects.create(name=f"{name}-leaf", kind="leaf")
    node = Node.objects.create(name=f"{name}-node", tier=CapacityTier.objects.get(name=tier), leaf_switch=leaf,
                               gpu_model=model, interconnect="nvswitch", cpu_cores=64, memory_gb=512)
    gpus = [Gpu.objects.create(node=node, index=i, uuid=f"{name}-gpu-{i}", model=model, memory_gb=80,
                               mig_capable=True, mig_enabled=(i == 1)) for i in range(3)]
    instances = [MigInstance.for_profile(gpus[1], p, s) for p, s in MIG_LAYOUT]
    MigInstance.objects.bulk_create(instances)
    unit = BusinessUnit.objects.create(name=f"{name}-unit", cost_center="CC-9")
    team = Team.objects.create(name=f"{name}-team", business_unit=unit, guaranteed_gpus=2, burst_limit_gpus=4)
    project = Project.objects.create(team=team, name="p", cost_code="PX-1")
    training = PriorityClass.objects.get(name="training")
    made = [Job.objects.create(team=team, project=project, name=f"job-{i}", kind="training", priority_class=training,
                               gpus=1, status="pending") for i in range(jobs)]
    if not Rate.objects.filter(gpu_model=model, tier__name=tier).exists():
        Rate.objects.create(gpu_model=model, tier=node.tier, price_per_gpu_hour=Decimal(price),
                            valid_from=date(2025, 1, 1))
    return World(node, gpus[0], gpus[1], gpus[2], instances, team, project, made)


def place(job: Job, gpu: Gpu, at: datetime, *, mig: MigInstance | None = None, share: int = 1000) -> Placement:
    if mig is not None:
        share = mig.share_milli
    return Placement.objects.create(job=job, gpu=gpu, mig_instance=mig, share_milli=share, started_at=at)
