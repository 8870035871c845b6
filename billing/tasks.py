from celery import shared_task
from django.utils import timezone

from billing.services import usage_intervals_sync


@shared_task(name="billing.sync_ledger", autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def sync_ledger() -> dict:
    """The safety net for the ledger: intervals a dead worker left open or never opened are mended."""
    opened, closed = usage_intervals_sync(at=timezone.now())
    return {"opened": opened, "closed": closed}
