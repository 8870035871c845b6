"""What telling people costs the transaction that changes a job: a few small writes, no lookups
of preferences or webhooks (those wait for the task after the commit)."""

from django.db import connection
from django.db.models.signals import post_save
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from notifications.receivers import job_event_notice
from scheduling.models import JobEvent
from scheduling.services import job_release
from tests.notifications.conftest import job_add


def release_queries(job) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        job_release(job_id=job.pk, at=timezone.now(), reason="completed")
    return [q["sql"] for q in queries]


def test_a_notice_adds_a_few_inserts_to_a_release(cast):
    with_notice = release_queries(job_add(cast, name="one"))
    post_save.disconnect(job_event_notice, sender=JobEvent, dispatch_uid="notifications-job-event")
    try:
        without = release_queries(job_add(cast, name="two"))
    finally:
        post_save.connect(job_event_notice, sender=JobEvent, dispatch_uid="notifications-job-event")
    extra = [sql.split(" (")[0].split(" WHERE")[0] for sql in with_notice
             if "notifications_" in sql or 'FROM "portal_team"' in sql]
    assert len(with_notice) - len(without) == len(extra) == 3, with_notice
    assert [sql.split()[0] for sql in extra] == ["SELECT", "INSERT", "INSERT"]  # the team's name, notice, its people
