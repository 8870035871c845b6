"""A run's checkpoint tokens are revoked when its placements end (scheduling/signals.py)."""

from django.dispatch import receiver

from checkpoints.services import tokens_revoke
from scheduling.models import Placement
from scheduling.signals import placement_ended


@receiver(placement_ended, sender=Placement, dispatch_uid="checkpoints-revoke-tokens")
def revoke_tokens(sender, *, placement, at, **kwargs) -> None:
    tokens_revoke(job_id=placement.job_id, at=at)
