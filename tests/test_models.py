"""Constraints that live in the database hold there, on PostgreSQL."""

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.models import BusinessUnit, Team
from scheduling.models import Gpu, Job, MigInstance, Placement
from ui.demo import demo_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo():
    demo_load()


def rejected(make) -> bool:
    try:
        with transaction.atomic():
            make()
    except IntegrityError:
        return True
    return False


def test_a_team_cannot_have_a_negative_guarantee_or_burst_below_it():
    unit = BusinessUnit.objects.create(name="Unit")
    assert rejected(lambda: Team.objects.create(name="neg", business_unit=unit,
                                                guaranteed_gpus=Decimal(-1)))
    assert rejected(lambda: Team.objects.create(name="low", business_unit=unit, guaranteed_gpus=8,
                                                burst_limit_gpus=4))


def test_a_job_needs_gpus_or_a_memory_need_and_a_valid_status(demo):
    template = Job.objects.filter(status="pending").first()

    def clone(**changes):
        fields = {f.attname: getattr(template, f.attname) for f in Job._meta.concrete_fields
                  if f.name not in ("id", "submitted_at", "updated_at")}
        fields.update(changes)
        return Job.objects.create(**fields)

    assert rejected(lambda: clone(gpus=0, gpu_memory_gb=0))
    assert rejected(lambda: clone(status="sleeping"))
    assert rejected(lambda: clone(gpus=-1))
    assert not rejected(lambda: clone(gpus=0, gpu_memory_gb=5))


def test_one_open_placement_per_mig_instance(demo):
    instance = MigInstance.objects.filter(placements__ended_at__isnull=True).first()
    job = Job.objects.filter(status="pending").first()
    assert rejected(lambda: Placement.objects.create(job=job, gpu=instance.gpu, mig_instance=instance,
                                                     share_milli=143, started_at=timezone.now()))


def test_a_closed_placement_frees_the_mig_instance_for_a_new_one(demo):
    instance = MigInstance.objects.filter(placements__ended_at__isnull=True).first()
    instance.placements.update(ended_at=timezone.now())
    job = Job.objects.filter(status="pending").first()
    assert not rejected(lambda: Placement.objects.create(
        job=job, gpu=instance.gpu, mig_instance=instance, share_milli=143, started_at=timezone.now()))


def test_one_open_whole_gpu_placement_per_gpu(demo):
    busy = Gpu.objects.filter(placements__ended_at__isnull=True, placements__share_milli=1000).first()
    job = Job.objects.filter(status="pending").first()
    assert rejected(lambda: Placement.objects.create(job=job, gpu=busy, share_milli=1000,
                                                     started_at=timezone.now()))


def test_shares_stay_between_one_and_a_thousand(demo):
    gpu = Gpu.objects.filter(placements__isnull=True, mig_enabled=False).first()
    job = Job.objects.filter(status="pending").first()
    assert rejected(lambda: Placement.objects.create(job=job, gpu=gpu, share_milli=1500,
                                                     started_at=timezone.now()))


def test_mig_needs_a_mig_capable_gpu(demo):
    gpu = Gpu.objects.first()
    assert rejected(lambda: Gpu.objects.filter(pk=gpu.pk).update(mig_capable=False, mig_enabled=True))
