"""The demo's estimated starts are in the time people wait (issue 16): its simulated cluster does a
minute of work a second, so an estimate of 7 hours of work is 7 minutes away on the wall clock."""

from datetime import timedelta

import pytest
from django.conf import settings as live_settings
from django.utils import timezone

from agents import embedded
from scheduling import engine
from scheduling.apply import _write_pending_info
from scheduling.engine.reasons import WaitingReason
from scheduling.engine.snapshot_io import snapshot_from_dict, snapshot_to_dict
from scheduling.models import Job
from scheduling.snapshot import build_snapshot
from ui.demo import demo_load
from ui.management.commands import demo

pytestmark = pytest.mark.django_db


def _estimate(seconds_of_work: float) -> timedelta:
    job = Job.objects.filter(status__in=Job.WAITING_STATUSES).first()
    now = timezone.now()
    info = engine.PendingInfo(str(job.pk), WaitingReason.NO_FREE_GPUS, "waits", now.timestamp() + seconds_of_work,
                              1, 1)
    _write_pending_info(engine.Plan(policy="tessera", pending={str(job.pk): info}), now)
    return Job.objects.get(pk=job.pk).estimated_start - now


def test_a_real_cluster_shows_the_engines_wait(settings):
    demo_load()
    assert settings.TESSERA_CLOCK_SPEED == 1.0
    assert _estimate(7 * 3600) == timedelta(hours=7)


def test_the_demo_shows_the_wait_on_the_wall_clock(settings, monkeypatch):
    demo_load()
    started = []
    monkeypatch.setattr(demo, "EMBEDDED_LOOPS", [lambda: started.append(True)])
    settings.TESSERA_CLOCK_SPEED = 1.0  # restored after the test, whatever start_loops sets
    demo.start_loops()
    assert started and live_settings.TESSERA_CLOCK_SPEED == embedded.DEMO_CONFIG.speed == 60.0
    assert _estimate(7 * 3600) == timedelta(minutes=7)


def test_the_snapshot_carries_the_clock_its_sentences_speak(settings):
    # The waiting reasons agree with the estimated start beside them: both in the time people wait.
    demo_load()
    settings.TESSERA_CLOCK_SPEED = 60.0
    snapshot = build_snapshot()
    assert snapshot.clock_speed == 60.0
    assert snapshot_from_dict(snapshot_to_dict(snapshot)).clock_speed == 60.0
    settings.TESSERA_CLOCK_SPEED = 1.0
    assert build_snapshot().clock_speed == 1.0


def test_a_dump_made_before_the_clock_reads_as_a_real_cluster(settings):
    demo_load()
    document = snapshot_to_dict(build_snapshot())
    del document["snapshot"]["clock_speed"]
    assert snapshot_from_dict(document).clock_speed == 1.0
