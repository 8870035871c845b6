"""The cluster a campaign runs on, written to the (empty) database and the simulated cluster alike."""

from __future__ import annotations

from decimal import Decimal

NODES = (("r-01", "reserved", "A100-80GB"), ("r-02", "reserved", "A100-80GB"),
         ("s-01", "spot", "H100-80GB"), ("s-02", "spot", "H100-80GB"))
GPUS_PER_NODE = 4
TEAM = "campaign"


def cluster_create(sim) -> None:
    """Four 4-GPU nodes (two reserved, two spot) under one leaf, and one team that may use them all."""
    from django.utils import timezone

    from agents.backends.simulated import SimNode
    from portal.models import BusinessUnit, Project, Team
    from scheduling.models import CapacityTier, Gpu, NetworkSwitch, Node, PriorityClass

    tiers = {name: CapacityTier.objects.get_or_create(name=name, defaults={"reclaimable": name == "spot"})[0]
             for name in ("reserved", "on-demand", "spot")}
    PriorityClass.objects.get_or_create(name="training", defaults={"value": 200})
    PriorityClass.objects.get_or_create(name="production", defaults={"value": 1000, "preemptible": False})
    spine = NetworkSwitch.objects.create(name="spine-c", kind="spine")
    leaf = NetworkSwitch.objects.create(name="leaf-c", kind="leaf", parent=spine)
    for name, tier, model in NODES:
        node = Node.objects.create(name=name, tier=tiers[tier], leaf_switch=leaf, gpu_model=model,
                                   interconnect="nvswitch", cpu_cores=64, memory_gb=512,
                                   last_heartbeat=timezone.now())
        for index in range(GPUS_PER_NODE):
            Gpu.objects.create(node=node, index=index, uuid=f"GPU-c-{name}-{index}", model=model, memory_gb=80)
        sim.ensure_node(SimNode(name=name, gpu_model=model, gpu_count=GPUS_PER_NODE,
                                gpu_memory_mib=81920, tier=tier))
    unit = BusinessUnit.objects.create(name="Campaign", cost_center="CC-C")
    total = Decimal(len(NODES) * GPUS_PER_NODE)
    team = Team.objects.create(name=TEAM, business_unit=unit, guaranteed_gpus=total, burst_limit_gpus=total)
    Project.objects.create(team=team, name="faults")


def job_submit(rng, job_count: int) -> int | None:
    """Maybe one new job (a random shape, at most 10 waiting); its id, or None."""
    from portal.models import Team
    from scheduling.models import Job, PriorityClass

    team = Team.objects.get(name=TEAM)
    waiting = Job.objects.filter(team=team, status__in=Job.WAITING_STATUSES).count()
    if waiting >= 10 or rng.random() < 0.35:
        return None
    production = rng.random() < 0.2
    job = Job.objects.create(
        team=team, project=team.projects.get(), name=f"c{job_count}", kind="training",
        priority_class=PriorityClass.objects.get(name="production" if production else "training"),
        preemptible=not production, gpus=rng.choice((1, 1, 2, 4)), gpu_memory_gb=40, cpu_cores=4,
        memory_gb=32, expected_runtime_s=rng.randint(8, 60), checkpoint_interval_s=rng.choice((None, 5, 20)))
    return job.pk
