"""The whole path with a real Celery worker: a job's release commits, its notice travels through
Redis, the worker mails it to a real SMTP server and posts it to a real receiver, which answers
500 first: the task retries with backoff and the second attempt is delivered."""

import time

import pytest
from django.utils import timezone

from notifications.models import Delivery, TeamWebhook
from scheduling.services import job_release
from tests.celery_worker import celery_worker
from tests.notifications.conftest import job_add

pytestmark = pytest.mark.django_db(transaction=True)
PATIENCE_S = 180  # a bound on hanging on a loaded machine, not a performance claim


def wait_for(condition, what):
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def worker(smtp):
    """A worker on the default queue, which only this test process uses (its Redis key prefix is its own)."""
    with celery_worker(PATIENCE_S, EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(smtp.port),
                       TESSERA_WEBHOOKS_TO_PRIVATE="1") as process:
        yield process


def test_a_real_worker_retries_a_receiver_that_answered_500(cast, smtp, receiver, worker):
    TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=receiver.url)
    receiver.statuses = [500]
    job = job_add(cast)
    job_release(job_id=job.pk, at=timezone.now(), reason="failed", message="Exit code 1.")  # commits: enqueued

    wait_for(lambda: Delivery.objects.filter(channel="webhook", status="sent").exists(), "the webhook delivery")
    webhook = Delivery.objects.get(channel="webhook")
    assert (webhook.attempts, webhook.last_error) == (2, "")
    assert len(receiver.posts) == 2 and receiver.posts[0]["json"] == receiver.posts[1]["json"]
    assert f"Job #{job.pk} resnet (vision) failed" in receiver.posts[1]["json"]["text"]
    wait_for(lambda: smtp.messages, "the mail")
    assert [m["to"] for m in smtp.messages] == [["max@example.org"]]
    assert Delivery.objects.get(channel="email").status == "sent"
