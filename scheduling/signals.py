"""What a placement's start and end tell the layers above: billing opens and closes its ledger
interval (billing/apps.py connects the receivers).

Sent with `send`, not `send_robust`: a receiver's error (a ledger invariant refused) aborts the
caller's transaction, so a placement never exists without its interval or the other way round.
"""

from django.dispatch import Signal

placement_started = Signal()  # kwargs: placement
placement_ended = Signal()  # kwargs: placement, at, reason
placement_bound = Signal()  # kwargs: placement_ids, at: its pod was bound then, later than it was placed
