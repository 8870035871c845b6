"""Notices in, deliveries out.

`notice_add` runs inside the caller's transaction (a job's release, a budget alert) and only
writes the notice; after the commit a task fans it out to the people and webhooks that want it
and another sends each delivery, retried with backoff. Enqueueing is best effort: if the broker
is down the notice is still there, and the periodic sweep (`notices_resume`) takes it up again.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from notifications.channels import DeliveryFailed, DeliveryRefused, email_send, webhook_post
from notifications.models import Delivery, Event, Notice, Preference, TeamWebhook
from scheduling.models import Job

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 6  # the first try and five retries, over about a minute of backoff
RESUME_AFTER = timedelta(minutes=2)  # a notice or delivery untouched this long lost its task
RETRY_LOST_AFTER = timedelta(minutes=10)  # twice the longest backoff (notifications/tasks.py)
KEEP = timedelta(days=90)  # notices and their deliveries are history after this


def enqueue(task, *args) -> None:
    """Send a task; a broker that is down (or an eager task that fails) must not fail the caller,
    whose transaction has committed already."""
    try:
        task.delay(*args)
    except Exception:
        log.warning("notification task %s%r not sent now; the sweep retries it", task.name, args, exc_info=True)


def notice_add(*, key: str, event: str, subject: str, text: str, team_id: int | None = None,
               job: Job | None = None, user_ids=()) -> Notice:
    """Record an event worth telling; its deliveries go out after the commit. Two inserts, no
    lookup, as it runs inside the transaction that changed the job. `key` is unique: a caller
    that may tell one event twice gets an IntegrityError (its own savepoint decides what then)."""
    notice = Notice.objects.create(key=key, event=event, subject=subject[:200], text=text, team_id=team_id, job=job)
    people = [pk for pk in user_ids if pk is not None]
    if people:
        notice.users.add(*people)
    from notifications.tasks import fan_out  # the tasks module imports this one

    transaction.on_commit(lambda: enqueue(fan_out, notice.pk))
    return notice


def preference_of(user) -> Preference:
    """The user's choices; the defaults (unsaved) for someone who never chose."""
    try:
        return user.notification_preference
    except Preference.DoesNotExist:
        return Preference(user=user)


def _deliveries_for(notice: Notice) -> list[Delivery]:
    made = []
    for user in notice.users.filter(is_active=True):
        preference = preference_of(user)
        if notice.event not in preference.events:
            continue
        if preference.email and user.email:
            made.append(Delivery(notice=notice, channel=Delivery.Channel.EMAIL, target=user.email, user=user))
        if preference.webhook_url:
            made.append(Delivery(notice=notice, channel=Delivery.Channel.WEBHOOK, target=preference.webhook_url,
                                 user=user))
    if notice.team_id is not None:
        for hook in TeamWebhook.objects.filter(team_id=notice.team_id):
            if notice.event in hook.events:
                made.append(Delivery(notice=notice, channel=Delivery.Channel.WEBHOOK, target=hook.url, webhook=hook))
    return made


@transaction.atomic
def notice_fan_out(notice_id: int) -> list[int]:
    """Make the notice's deliveries (once) and return those still to send."""
    notice = Notice.objects.select_for_update().filter(pk=notice_id).first()
    if notice is None:
        return []
    if notice.fanned_out_at is None:
        # ignore_conflicts: one target reached twice (a lead's own hook also the team's) gets one.
        Delivery.objects.bulk_create(_deliveries_for(notice), ignore_conflicts=True)
        notice.fanned_out_at = timezone.now()
        notice.save(update_fields=["fanned_out_at"])
    return list(notice.deliveries.filter(status=Delivery.Status.PENDING).values_list("pk", flat=True))


def delivery_send(delivery_id: int) -> str:
    """One attempt at one delivery. The row stays locked while it is sent, so two copies of the
    task never both send it; a delivery already sent (or given up) is left alone. Raises
    DeliveryFailed after recording the failure, for the task to retry; the last attempt marks it
    failed instead."""
    failure = None
    with transaction.atomic():
        delivery = (Delivery.objects.select_for_update(of=("self",)).select_related("notice")
                    .filter(pk=delivery_id).first())
        if delivery is None or delivery.status != Delivery.Status.PENDING:
            return "nothing to do"
        notice = delivery.notice
        try:
            if delivery.channel == Delivery.Channel.EMAIL:
                email_send(delivery.target, f"[Tessera] {notice.subject}", notice.text)
            else:
                webhook_post(delivery.target, notice.subject, notice.text)
        except DeliveryFailed as error:
            failure = error
        delivery.attempts, delivery.attempted_at = delivery.attempts + 1, timezone.now()
        if failure is None:
            delivery.status, delivery.sent_at, delivery.last_error = Delivery.Status.SENT, timezone.now(), ""
        else:
            delivery.last_error = str(failure)[:500]
            if delivery.attempts >= MAX_ATTEMPTS or isinstance(failure, DeliveryRefused):
                delivery.status = Delivery.Status.FAILED
        delivery.save(update_fields=["attempts", "attempted_at", "status", "sent_at", "last_error"])
    if failure is not None and delivery.status == Delivery.Status.PENDING:
        raise failure
    return delivery.status


def waiting_notices_add(*, now: datetime) -> int:
    """A notice for each job waiting, never started, for longer than TESSERA_NOTIFY_WAITING_S; once per job."""
    cutoff = now - timedelta(seconds=settings.TESSERA_NOTIFY_WAITING_S)
    jobs = (Job.objects.filter(status=Job.Status.PENDING, started_at__isnull=True, submitted_at__lt=cutoff)
            .exclude(notices__event=Event.WAITING).select_related("team").order_by("submitted_at"))
    made = 0
    for job in jobs[:500]:  # the next sweep takes the rest
        try:
            with transaction.atomic():
                notice_add(key=f"waiting:{job.pk}", event=Event.WAITING, team_id=job.team_id, job=job,
                           user_ids=[job.submitted_by_id], **waiting_message(job, now))
        except IntegrityError:  # a concurrent sweep told it first
            continue
        made += 1
    return made


def waiting_message(job: Job, now: datetime) -> dict[str, str]:
    hours = (now - job.submitted_at).total_seconds() / 3600
    eta = f" Estimated start: {job.estimated_start:%Y-%m-%d %H:%M} UTC." if job.estimated_start else ""
    why = f" Why it waits: {job.pending_reason}" if job.pending_reason else ""
    return {"subject": f"Job #{job.pk} {job.name} ({job.team.name}) has waited {hours:.1f} h",
            "text": f"Job #{job.pk} {job.name} of team {job.team.name} was submitted {hours:.1f} hours ago and "
                    f"has not started.{why}{eta}"}


def notices_prune(*, now: datetime) -> int:
    """Forget notices older than KEEP (their deliveries with them): one row per job event adds up."""
    return Notice.objects.filter(created_at__lt=now - KEEP).delete()[1].get(Notice._meta.label, 0)


def notices_resume(*, now: datetime) -> tuple[list[int], list[int]]:
    """(notices to fan out, deliveries to send) whose task was lost: the broker was down, a worker died."""
    before = now - RESUME_AFTER
    notices = list(Notice.objects.filter(fanned_out_at__isnull=True, created_at__lt=before)
                   .values_list("pk", flat=True)[:500])
    lost = Q(attempted_at__isnull=True, created_at__lt=before) | Q(attempted_at__lt=now - RETRY_LOST_AFTER)
    deliveries = list(Delivery.objects.filter(lost, status=Delivery.Status.PENDING).values_list("pk", flat=True)[:500])
    return notices, deliveries
