"""A what-if run: what a platform engineer asked, how far the simulation is, and what it found."""

from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from scheduling.simulator.run.whatif import Change

# A run that has not moved for this long lost its worker (a deploy, a kill): it may be claimed again.
STALE_AFTER = timedelta(minutes=10)


class WhatIfRun(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="whatif_runs")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now, help_text="Last sign of life (progress).")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    progress = models.FloatField(default=0.0, validators=[MinValueValidator(0), MaxValueValidator(1)])
    # What was asked.
    hours = models.FloatField(help_text="History replayed: the last this many hours.")
    ahead_hours = models.FloatField(default=0, help_text="Simulated on past now, with no new submissions.")
    baseline_policy = models.CharField(max_length=40)
    policy = models.CharField(max_length=40, blank=True, help_text="The changed side's; blank: the baseline's.")
    team = models.CharField(max_length=63, blank=True)
    guarantee_delta = models.FloatField(default=0)
    add_model = models.CharField(max_length=40, blank=True)
    add_count = models.PositiveSmallIntegerField(default=0)
    add_tier = models.CharField(max_length=20, default="reserved")
    # What it ran on (the simulator's own files, replayable with `simulate run`) and what it found.
    cluster_json = models.JSONField(null=True, blank=True)
    jobs_csv = models.TextField(blank=True)
    notes = models.JSONField(default=list, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=models.Q(progress__gte=0, progress__lte=1),
                                              name="whatif_progress_0_to_1")]

    def __str__(self) -> str:
        return f"what-if #{self.pk}"

    @property
    def change(self) -> Change:
        return Change(team=self.team, guarantee_delta=self.guarantee_delta, add_model=self.add_model,
                      add_count=self.add_count, add_tier=self.add_tier, policy=self.policy)

    @property
    def changes(self) -> list[str]:
        return self.change.describe(self.baseline_policy)

    @property
    def in_progress(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)

    @property
    def stale(self) -> bool:
        return self.in_progress and timezone.now() - self.updated_at > STALE_AFTER

    @property
    def percent(self) -> int:
        return 100 if self.state == self.State.DONE else int(self.progress * 100)

    @property
    def seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None
