"""The periodic sweep: jobs waiting longer than expected are told about once, and notices or
deliveries whose task was lost (broker down, worker killed) are taken up again."""

from datetime import timedelta

from django.utils import timezone

from notifications.models import Delivery, Event, Notice
from notifications.services import notices_resume, waiting_notices_add
from notifications.tasks import sweep
from scheduling.models import Job
from tests.notifications.conftest import job_add


def waited(job, seconds):
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(seconds=seconds))


def test_a_job_waiting_past_the_threshold_is_told_about_once(cast, settings, smtp, eager,
                                                            django_capture_on_commit_callbacks):
    settings.TESSERA_NOTIFY_WAITING_S = 3600
    old, young, was_running = (job_add(cast, status="pending", name=name) for name in ("old", "young", "requeued"))
    Job.objects.filter(pk=old.pk).update(pending_reason="Team vision is at its burst limit.")
    waited(old, 3700)
    waited(young, 600)
    waited(was_running, 7200)
    Job.objects.filter(pk=was_running.pk).update(started_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert sweep.delay().get()["waiting"] == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert waiting_notices_add(now=timezone.now()) == 0  # once per job
    notice = Notice.objects.get()
    assert (notice.event, notice.job_id, notice.key) == (Event.WAITING, old.pk, f"waiting:{old.pk}")
    assert len(smtp.messages) == 1 and "has waited 1.0 h" in smtp.messages[0]["data"]
    assert "burst limit" in smtp.messages[0]["data"]


def test_lost_notices_and_deliveries_are_resumed(cast):
    long_ago = timezone.now() - timedelta(minutes=30)
    lost = Notice.objects.create(key="lost", event="failed", subject="s", text="t", created_at=long_ago)
    Notice.objects.create(key="fresh", event="failed", subject="s", text="t")
    done = Notice.objects.create(key="done", event="failed", subject="s", text="t", created_at=long_ago,
                                 fanned_out_at=long_ago)
    never_tried = Delivery.objects.create(notice=done, channel="email", target="a@example.org", created_at=long_ago)
    retry_lost = Delivery.objects.create(notice=done, channel="email", target="b@example.org", created_at=long_ago,
                                         attempts=2, attempted_at=long_ago)
    Delivery.objects.create(notice=done, channel="email", target="c@example.org", created_at=long_ago, attempts=1,
                            attempted_at=timezone.now())  # its retry is still due
    Delivery.objects.create(notice=done, channel="email", target="d@example.org", created_at=long_ago,
                            status="sent")
    notices, deliveries = notices_resume(now=timezone.now())
    assert notices == [lost.pk] and sorted(deliveries) == sorted([never_tried.pk, retry_lost.pk])


def test_notices_older_than_90_days_are_forgotten_with_their_deliveries(cast, eager):
    old = Notice.objects.create(key="old", event="failed", subject="s", text="t",
                                created_at=timezone.now() - timedelta(days=91))
    Delivery.objects.create(notice=old, channel="email", target="a@example.org", status="sent")
    Notice.objects.create(key="recent", event="failed", subject="s", text="t",
                          created_at=timezone.now() - timedelta(days=89))
    assert sweep.delay().get()["pruned"] == 1
    assert list(Notice.objects.values_list("key", flat=True)) == ["recent"] and not Delivery.objects.exists()
