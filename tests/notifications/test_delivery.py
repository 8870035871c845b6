"""Job events reach people: mail through a real SMTP server, Slack-compatible JSON to a real HTTP
receiver, through the Celery tasks (in-process here; test_worker.py uses a real worker)."""

import pytest
from django.utils import timezone

from notifications.models import Delivery, Event, Notice, Preference, TeamWebhook
from notifications.services import MAX_ATTEMPTS, notice_fan_out
from notifications.tasks import deliver, fan_out
from scheduling.services import job_event_add, job_release
from tests.notifications.conftest import job_add


def finish(job, reason="completed", capture=None):
    with capture(execute=True):
        job_release(job_id=job.pk, at=timezone.now(), reason=reason, message="Exit code 0.")


def test_a_finished_job_is_mailed_to_its_owner_and_posted_to_the_team(cast, smtp, receiver, eager,
                                                                     django_capture_on_commit_callbacks):
    TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=receiver.url)
    job = job_add(cast)
    finish(job, capture=django_capture_on_commit_callbacks)

    assert [m["to"] for m in smtp.messages] == [["max@example.org"]]
    assert f"Job #{job.pk} resnet (vision) finished" in smtp.messages[0]["data"]
    assert len(receiver.posts) == 1
    post = receiver.posts[0]
    assert post["path"] == "/hooks/T000/secret-token" and post["type"] == "application/json"
    assert list(post["json"]) == ["text"] and f"Job #{job.pk} resnet (vision) finished" in post["json"]["text"]
    assert set(Delivery.objects.values_list("channel", "status", "attempts")) == {("email", "sent", 1),
                                                                                  ("webhook", "sent", 1)}


def test_nothing_is_sent_twice(cast, smtp, receiver, eager, django_capture_on_commit_callbacks):
    TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=receiver.url)
    job = job_add(cast)
    finish(job, capture=django_capture_on_commit_callbacks)
    notice = Notice.objects.get()
    fan_out.delay(notice.pk)  # a duplicated task
    for delivery in Delivery.objects.all():
        deliver.delay(delivery.pk)
    finish(job, capture=django_capture_on_commit_callbacks)  # a repeated release changes nothing
    assert (len(smtp.messages), len(receiver.posts), Notice.objects.count()) == (1, 1, 1)


@pytest.mark.parametrize("reason,event", [("failed", "failed"), ("bind-refused", "failed"), ("preempted", "preempted"),
                                          ("node-lost", "preempted"), ("spot-reclaimed", "preempted")])
def test_each_way_a_run_ends_is_its_event(cast, reason, event, django_capture_on_commit_callbacks):
    job = job_add(cast)
    with django_capture_on_commit_callbacks():
        job_release(job_id=job.pk, at=timezone.now(), reason=reason)
    assert list(Notice.objects.values_list("event", flat=True)) == [event]


def test_a_start_is_told_only_to_those_who_asked(cast, smtp, eager, django_capture_on_commit_callbacks):
    job = job_add(cast)
    with django_capture_on_commit_callbacks(execute=True):
        job_event_add(job=job, at=timezone.now(), kind="placed", message="Placed on n1")
    assert Notice.objects.get().event == Event.STARTED and smtp.messages == []  # off by default
    Preference.objects.create(user=cast["users"]["max"], events=[Event.STARTED])
    with django_capture_on_commit_callbacks(execute=True):
        job_event_add(job=job, at=timezone.now(), kind="placed", message="Placed again")
    assert len(smtp.messages) == 1 and "started" in smtp.messages[0]["data"]


def test_a_cancel_and_timeline_chatter_tell_nobody(cast, django_capture_on_commit_callbacks):
    job = job_add(cast)
    with django_capture_on_commit_callbacks():
        for kind in ("submitted", "checkpointed", "preemption-requested", "reprioritised"):
            job_event_add(job=job, at=timezone.now(), kind=kind)
        job_release(job_id=job.pk, at=timezone.now(), reason="cancelled")
    assert not Notice.objects.exists()


def test_mail_off_and_events_unchosen_send_nothing(cast, smtp, eager, django_capture_on_commit_callbacks):
    Preference.objects.create(user=cast["users"]["max"], email=False)
    finish(job_add(cast), capture=django_capture_on_commit_callbacks)
    Preference.objects.filter(user=cast["users"]["max"]).update(email=True, events=[Event.FAILED])
    finish(job_add(cast, name="second"), capture=django_capture_on_commit_callbacks)
    assert smtp.messages == [] and not Delivery.objects.exists()


def test_a_user_webhook_gets_the_users_events(cast, receiver, eager, django_capture_on_commit_callbacks):
    Preference.objects.create(user=cast["users"]["max"], email=False, webhook_url=receiver.url)
    finish(job_add(cast), reason="failed", capture=django_capture_on_commit_callbacks)
    assert len(receiver.posts) == 1 and "failed" in receiver.posts[0]["json"]["text"]


def test_another_teams_webhook_hears_nothing(cast, receiver, eager, django_capture_on_commit_callbacks):
    TeamWebhook.objects.create(team=cast["teams"]["speech"], name="speech-chat", url=receiver.url)
    finish(job_add(cast), capture=django_capture_on_commit_callbacks)
    assert receiver.posts == []


def test_a_receiver_that_keeps_failing_is_given_up_with_its_error(cast, receiver, eager,
                                                                 django_capture_on_commit_callbacks):
    TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=receiver.url)
    receiver.statuses = [500] * 10
    finish(job_add(cast), capture=django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get(channel="webhook")
    assert (delivery.status, delivery.attempts) == ("failed", MAX_ATTEMPTS)
    assert delivery.last_error == "receiver answered HTTP 500" and len(receiver.posts) == MAX_ATTEMPTS


def test_a_mail_server_that_is_down_is_retried_and_the_error_recorded(cast, settings, eager,
                                                                    django_capture_on_commit_callbacks):
    from tests.notifications.conftest import free_port

    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nothing listens
    finish(job_add(cast), capture=django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", MAX_ATTEMPTS)
    assert delivery.last_error.startswith("mail server: ConnectionRefusedError")


def test_a_redirect_is_not_followed(cast, receiver, eager, django_capture_on_commit_callbacks):
    TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=receiver.url)
    receiver.statuses = [302] * 10
    finish(job_add(cast), capture=django_capture_on_commit_callbacks)
    assert Delivery.objects.get(channel="webhook").last_error == "receiver answered HTTP 302"


def test_a_notice_is_fanned_out_once(cast, django_capture_on_commit_callbacks):
    TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url="https://chat.example.org/h/1")
    finish(job_add(cast), capture=django_capture_on_commit_callbacks)
    notice = Notice.objects.get()
    first, again = notice_fan_out(notice.pk), notice_fan_out(notice.pk)
    assert len(first) == 2 and sorted(again) == sorted(first) and Delivery.objects.count() == 2


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "10.1.2.3", "169.254.169.254", "[::1]"])
def test_webhooks_to_internal_addresses_are_refused_unless_allowed(cast, settings, eager, host,
                                                                   django_capture_on_commit_callbacks):
    settings.TESSERA_WEBHOOKS_TO_PRIVATE = False
    TeamWebhook.objects.create(team=cast["teams"]["vision"], name="metadata", url=f"http://{host}/latest/")
    finish(job_add(cast), capture=django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get(channel="webhook")
    assert (delivery.status, delivery.attempts) == ("failed", 1)  # refused at once, never retried
    assert delivery.last_error.startswith("receiver refused: its address is not public")
