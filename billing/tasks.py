from celery import shared_task
from django.utils import timezone

from billing.budgets import budget_alerts_send
from billing.services import usage_intervals_sync


@shared_task(name="billing.sync_ledger", autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def sync_ledger() -> dict:
    """The safety net for the ledger: intervals a dead worker left open or never opened are mended."""
    opened, closed = usage_intervals_sync(at=timezone.now())
    return {"opened": opened, "closed": closed}


@shared_task(name="billing.check_budgets", autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def check_budgets() -> dict:
    """Mail each budget threshold crossed this month, once (a mail server down retries: OSError)."""
    return {"alerts": len(budget_alerts_send(now=timezone.now()))}
