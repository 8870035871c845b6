from celery import shared_task
from django.utils import timezone

from notifications.channels import DeliveryFailed
from notifications.services import (
    MAX_ATTEMPTS,
    delivery_send,
    enqueue,
    notice_fan_out,
    notices_prune,
    notices_resume,
    waiting_notices_add,
)


@shared_task(name="notifications.fan_out", autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def fan_out(notice_id: int) -> int:
    """Make a notice's deliveries and send each in its own task, so one failing receiver delays no other."""
    pending = notice_fan_out(notice_id)
    for delivery_id in pending:
        enqueue(deliver, delivery_id)
    return len(pending)


# Backoff 1, 2, 4, 8, 16 s (jittered): a receiver that is down a minute still gets the notice.
@shared_task(name="notifications.deliver", autoretry_for=(DeliveryFailed,), retry_backoff=True,
             retry_backoff_max=300, max_retries=MAX_ATTEMPTS - 1)
def deliver(delivery_id: int) -> str:
    return delivery_send(delivery_id)


@shared_task(name="notifications.sweep")
def sweep() -> dict:
    """The periodic part: jobs that have waited too long, notices whose task was lost, old notices."""
    now = timezone.now()
    pruned = notices_prune(now=now)
    waiting = waiting_notices_add(now=now)
    notices, deliveries = notices_resume(now=now)
    for notice_id in notices:
        enqueue(fan_out, notice_id)
    for delivery_id in deliveries:
        enqueue(deliver, delivery_id)
    return {"waiting": waiting, "resumed_notices": len(notices), "resumed_deliveries": len(deliveries),
            "pruned": pruned}
