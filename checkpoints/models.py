"""The checkpoint channel's rows: the pods' credentials and what the workloads confirmed.

See CONTRACTS.md ("Checkpoint channel"): Tessera asks through a pod annotation; the workload
answers on the API with its pod's token; these rows are where that answer lands.
"""

from django.db import models
from django.db.models import Q


class CheckpointToken(models.Model):
    """The credential of one pod of a job's run. Only its SHA-256 digest is kept."""

    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, related_name="checkpoint_tokens")
    pod_name = models.CharField(max_length=253)
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex.")
    issued_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True, help_text="Set when the run ends.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "pod_name"], name="one_token_per_pod")]

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else "live"
        return f"token of {self.pod_name} ({state})"


class CheckpointConfirmation(models.Model):
    """A checkpoint the workload says it saved: the answer to a request, or one it made itself."""

    PERIODIC = "periodic"

    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, related_name="checkpoint_confirmations")
    # The request's id, or "periodic@<step>": one record per request, one per periodic step.
    key = models.CharField(max_length=120)
    checkpoint_id = models.CharField(max_length=100, help_text="The request's id, or 'periodic'.")
    pod_name = models.CharField(max_length=253)
    step = models.BigIntegerField()
    progress_s = models.FloatField(help_text="Seconds of training done at this checkpoint.")
    saved_at = models.DateTimeField(help_text="When the workload says it saved it.")
    path = models.CharField(max_length=1000, blank=True)
    recorded_at = models.DateTimeField()

    class Meta:
        ordering = ["recorded_at", "id"]
        indexes = [models.Index(fields=["job", "saved_at"])]
        constraints = [
            models.UniqueConstraint(fields=["job", "key"], name="one_confirmation_per_request"),
            models.CheckConstraint(condition=Q(step__gte=0) & Q(progress_s__gte=0),
                                   name="confirmation_non_negative"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.checkpoint_id} at step {self.step}"
