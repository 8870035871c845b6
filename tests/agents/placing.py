"""A job as a scheduling cycle leaves it on the fake cluster (running, placed, a bind to carry out),
for the tests of the workers' steps through the Kubernetes backend (these need the database)."""

from datetime import timedelta

from django.utils import timezone

from billing.models import UsageInterval
from scheduling.models import ActionRequest, Job, Placement, run_id
from scheduling.services import placement_start
from tests.billing.factories import World, make_world


def vision_world(kube) -> World:
    world = make_world(jobs=1, name="vision")
    kube.add_namespace(world.team.name)
    kube.add_node(world.node.name, {"nvidia.com/gpu.present": "true"})
    return world


def placed(world: World, *, command: str = "python train.py", ago_s: int = 60,
           image: str = "nvcr.io/nvidia/pytorch:24.05-py3") -> tuple[Job, ActionRequest, Placement]:
    """The job as a cycle leaves it: running, one open placement and interval, a bind to carry out."""
    started = timezone.now().replace(microsecond=0) - timedelta(seconds=ago_s)
    Job.objects.filter(pk=world.jobs[0].pk).update(status="running", started_at=started, command=command, image=image)
    job = Job.objects.get(pk=world.jobs[0].pk)
    placement = Placement.objects.create(job=job, gpu=world.whole, started_at=started)
    placement_start(placement=placement)
    attempt = run_id(started)
    bind = ActionRequest.objects.create(
        key=f"bind:{job.pk}:0:{attempt}", kind="bind", job=job, node=world.node,
        payload={"job_id": job.pk, "member": 0, "node": world.node.name, "placements": [placement.pk],
                 "pod_name": f"{world.team.name}-{job.pk}-{attempt}-0",
                 "allocations": [{"gpu_index": 0, "milli": 1000, "mig_profile": None, "mig_start": None}]})
    return job, bind, placement


def assert_nothing_billed(job: Job) -> None:
    for interval in UsageInterval.objects.filter(job=job):
        assert interval.ended_at == interval.started_at, "billed for time that never ran"
