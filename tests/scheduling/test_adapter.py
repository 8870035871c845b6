"""The Django adapter: rows -> snapshot in fixed queries, plan -> rows in one transaction."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.actions.pods import attempt_binds
from billing.models import UsageInterval
from scheduling import engine
from scheduling.apply import apply_plan
from scheduling.cycle import decide_and_apply
from scheduling.models import ActionRequest, Gpu, Job, Node, Placement, run_id
from scheduling.services import job_release
from scheduling.snapshot import build_snapshot, member_shape
from tests.engine.builders import whole
from ui.demo import demo_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo():
    demo_load()


def snapshot_queries() -> int:
    with CaptureQueriesContext(connection) as queries:
        build_snapshot()
    return len(queries)


def add_pending_jobs(count: int) -> None:
    template = Job.objects.filter(status="pending").first()
    fields = {f.attname: getattr(template, f.attname) for f in Job._meta.concrete_fields
              if f.name not in ("id", "submitted_at", "updated_at")}
    Job.objects.bulk_create([Job(**dict(fields, name=f"extra-{i}")) for i in range(count)])


def test_the_snapshot_takes_a_fixed_number_of_queries(demo):
    before = snapshot_queries()
    add_pending_jobs(50)
    node = Node.objects.first()
    for number in range(5):
        clone = Node.objects.create(name=f"extra-{number}", tier=node.tier, leaf_switch=node.leaf_switch,
                                    gpu_model=node.gpu_model, interconnect=node.interconnect, cpu_cores=64,
                                    memory_gb=512)
        for index in range(8):
            Gpu.objects.create(node=clone, index=index, uuid=f"GPU-extra-{number}-{index}",
                               model=node.gpu_model, memory_gb=80)
    assert snapshot_queries() == before


def test_the_snapshot_mirrors_the_demo_cluster(demo):
    snapshot = build_snapshot()
    assert len(snapshot.nodes) == 10
    assert {n.tier for n in snapshot.nodes} == {"reserved", "on-demand", "spot"}
    assert {r.job.id for r in snapshot.running} == {str(j.pk) for j in Job.objects.filter(status="running")}
    vision = next(j for j in snapshot.pending if j.team == "vision")
    assert (vision.gpus, vision.gang_size) == (8, 2)


@pytest.mark.parametrize("total, expected", [(1, (1, 1)), (8, (8, 1)), (16, (8, 2)), (12, (6, 2)), (24, (8, 3))])
def test_jobs_larger_than_a_node_become_even_gangs(total, expected):
    assert member_shape(total, 8) == expected


def test_a_cycle_places_jobs_opens_their_ledger_and_explains_the_rest(demo):
    report = decide_and_apply(policy="tessera")
    assert report.applied.bound_jobs
    for job in Job.objects.filter(pk__in=report.applied.bound_jobs):
        assert job.status == "running" and job.events.filter(kind="placed").exists()
        open_placements = job.placements.filter(ended_at__isnull=True)
        assert open_placements.exists()
        assert UsageInterval.objects.filter(placement__in=open_placements, ended_at__isnull=True).count() == \
            open_placements.count()
    for job in Job.objects.filter(status="pending"):
        assert job.pending_reason and job.queue_position_overall


def test_a_second_cycle_places_nothing_twice(demo):
    decide_and_apply(policy="tessera")
    placements = Placement.objects.filter(ended_at__isnull=True).count()
    decide_and_apply(policy="tessera", now=timezone.now() + timedelta(seconds=5))
    assert Placement.objects.filter(ended_at__isnull=True).count() >= placements
    for gpu in Gpu.objects.all():
        whole = gpu.placements.filter(ended_at__isnull=True, mig_instance__isnull=True)
        assert sum(p.share_milli for p in whole) <= 1000


def test_a_gang_whose_member_cannot_be_written_is_rolled_back_whole(demo):
    job = Job.objects.get(name="detr-finetune")
    busy = Placement.objects.filter(ended_at__isnull=True, mig_instance__isnull=True).first().gpu
    held = Placement.objects.filter(ended_at__isnull=True).values("gpu")
    free = Gpu.objects.filter(mig_enabled=False).exclude(pk__in=held).exclude(node=busy.node).first()
    plan = engine.Plan(policy="test", binds=(
        engine.Bind(job_id=str(job.pk), team="vision", member=0, node=free.node.name,
                    allocations=(whole(free.index),), borrowed=False),
        engine.Bind(job_id=str(job.pk), team="vision", member=1, node=busy.node.name,
                    allocations=(whole(busy.index),), borrowed=False),
    ))
    result = apply_plan(plan, now=timezone.now())
    assert result.skipped_jobs == [job.pk]
    assert not job.placements.exists()
    assert not ActionRequest.objects.filter(job=job).exists()
    job.refresh_from_db()
    assert job.status == "pending"


def test_releasing_a_job_twice_bills_its_intervals_once(demo):
    job = Job.objects.filter(status="running").first()
    at = timezone.now()
    assert job_release(job_id=job.pk, at=at, reason="preempted") is True
    assert job_release(job_id=job.pk, at=at + timedelta(minutes=5), reason="preempted") is False
    job.refresh_from_db()
    assert job.status == "preempted"
    intervals = UsageInterval.objects.filter(job=job)
    assert intervals.exists() and all(i.ended_at == at for i in intervals)


def test_a_job_placed_again_within_the_second_of_its_last_bind_is_bound_as_a_new_run(demo):
    """A native job evicted, rejoined and placed again in the second of its first bind had that bind
    refused as a duplicate key, and the cycle placed nothing (run ids were start seconds)."""
    job = Job.objects.get(name="detr-finetune")
    held = Placement.objects.filter(ended_at__isnull=True).values("gpu")
    free = Gpu.objects.filter(mig_enabled=False).exclude(pk__in=held).first()
    plan = engine.Plan(policy="test", binds=(engine.Bind(
        job_id=str(job.pk), team="vision", member=0, node=free.node.name, allocations=(whole(free.index),),
        borrowed=False),))
    first = timezone.now().replace(microsecond=100_000)
    assert apply_plan(plan, now=first).bound_jobs == [job.pk]
    assert job_release(job_id=job.pk, at=first + timedelta(milliseconds=300), reason="preempted")
    again = first + timedelta(milliseconds=600)
    assert apply_plan(plan, now=again).bound_jobs == [job.pk]
    job.refresh_from_db()
    binds = attempt_binds(job)
    assert [b.key for b in binds] == [f"bind:{job.pk}:0:{run_id(again)}"]
    assert ActionRequest.objects.filter(job=job, kind="bind").count() == 2


def test_schedule_once_prints_what_it_did(demo, capsys):
    call_command("schedule", "--once")
    out = capsys.readouterr().out
    assert "bind" in out and "placed" in out


def test_a_live_snapshot_dumps_to_a_replayable_fixture(demo, tmp_path, capsys):
    from scheduling.engine.snapshot_io import snapshot_load

    call_command("dump_snapshot", "--out", str(tmp_path / "live.json"))
    replayed = snapshot_load(tmp_path / "live.json")
    assert replayed == build_snapshot(now=datetime.fromtimestamp(replayed.now, tz=UTC))
    assert "tessera would bind" in capsys.readouterr().out
