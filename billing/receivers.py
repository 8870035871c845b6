"""Ledger intervals follow placements: scheduling's signals (scheduling/signals.py) open and close them."""

from django.dispatch import receiver

from billing.services import usage_interval_close, usage_interval_open, usage_intervals_move_start
from scheduling.models import Placement
from scheduling.signals import placement_bound, placement_ended, placement_started


@receiver(placement_started, sender=Placement, dispatch_uid="billing-open-interval")
def open_interval(sender, *, placement, **kwargs) -> None:
    usage_interval_open(placement=placement, at=placement.started_at)


@receiver(placement_ended, sender=Placement, dispatch_uid="billing-close-interval")
def close_interval(sender, *, placement, at, reason, **kwargs) -> None:
    usage_interval_close(placement=placement, at=at, reason=reason)


@receiver(placement_bound, sender=Placement, dispatch_uid="billing-move-interval-start")
def move_interval_start(sender, *, placement_ids, at, **kwargs) -> None:
    usage_intervals_move_start(placement_ids=placement_ids, at=at)
