"""Job timeline events that people hear about: a notice for each, in the event's own transaction.

Every change of a job's life is written as a JobEvent (scheduling.services.job_event_add), so
this one receiver sees the start (placed), the end (completed, failed, cancelled) and every
preemption, whichever worker or page caused it.
"""

from django.db.models.signals import post_save
from django.dispatch import receiver

from notifications.models import Event
from notifications.services import notice_add
from scheduling.models import Job, JobEvent
from scheduling.services import RELEASE_STATUSES

# The job's status after a release, as the event people hear about (cancelled: they did it).
EVENT_OF_STATUS = {Job.Status.COMPLETED: Event.FINISHED, Job.Status.FAILED: Event.FAILED,
                   Job.Status.PREEMPTED: Event.PREEMPTED}
SUBJECTS = {Event.STARTED: "started", Event.FINISHED: "finished", Event.FAILED: "failed",
            Event.PREEMPTED: "was preempted"}


def event_of(job_event: JobEvent) -> str | None:
    if job_event.kind == "placed":
        return Event.STARTED
    if job_event.kind in RELEASE_STATUSES:
        return EVENT_OF_STATUS.get(job_event.job.status)
    return None


@receiver(post_save, sender=JobEvent, dispatch_uid="notifications-job-event")
def job_event_notice(sender, instance: JobEvent, created: bool, raw: bool = False, **kwargs) -> None:
    if not created or raw:
        return
    event = event_of(instance)
    if event is None:
        return
    job = instance.job
    detail = f" {instance.message}" if instance.message else ""
    notice_add(key=f"job-event:{instance.pk}", event=event, team_id=job.team_id, job=job,
               user_ids=[job.submitted_by_id],
               subject=f"Job #{job.pk} {job.name} ({job.team.name}) {SUBJECTS[event]}",
               text=f"Job #{job.pk} {job.name} of team {job.team.name} {SUBJECTS[event]} at "
                    f"{instance.at:%Y-%m-%d %H:%M:%S} UTC ({instance.kind}).{detail}")
