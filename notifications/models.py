"""Who wants to hear about what (per user, per team), what there was to tell, and each delivery of it.

A Notice is one event worth telling (unique `key`, so an event is told once however often it is
reported); a Delivery is that notice to one address or URL (unique per notice, channel and
target, so nobody gets it twice), with its attempts and last error so failures show.
"""

from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Event(models.TextChoices):
    STARTED = "started", "A job started"
    FINISHED = "finished", "A job finished"
    FAILED = "failed", "A job failed"
    PREEMPTED = "preempted", "A job was preempted"
    WAITING = "waiting", "A job has waited longer than expected"
    BUDGET = "budget", "A budget threshold was passed"


def default_events() -> list[str]:
    """What a user hears about until they choose: all but starts, which would be most of the mail."""
    return [event for event in Event.values if event != Event.STARTED]


def webhook_url_validate(url: str) -> None:
    """http(s) to a named host, without user:password in it: the URL shows in the admin and in
    the form, and credentials there would leak (a receiver's token belongs in its path)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a port out of range)
    except ValueError:
        raise ValidationError("Not a valid URL.") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValidationError("Give an https:// (or http://) URL with a host name.")
    if parts.username or parts.password:
        raise ValidationError("Leave user names and passwords out of the URL; put the receiver's token in its path.")
    if any(ch.isspace() for ch in url):
        raise ValidationError("A URL has no spaces.")


def events_validate(value) -> None:
    if not isinstance(value, list) or not set(value) <= set(Event.values):
        raise ValidationError(f"Events must be a list of {', '.join(Event.values)}.")


def url_shown(url: str) -> str:
    """A webhook URL as pages show it: scheme and host only, since its path is usually the secret."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}/…" if parts.hostname else "…"


class Preference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="notification_preference")
    events = models.JSONField(default=default_events, validators=[events_validate],
                              help_text="The events the user hears about, by mail and by their own webhook.")
    email = models.BooleanField(default=True, help_text="Mail to the account's address.")
    webhook_url = models.CharField(max_length=500, blank=True, validators=[webhook_url_validate],
                                   help_text="A Slack-compatible incoming webhook of the user's own.")

    def __str__(self) -> str:
        return f"{self.user} notification preferences"


class TeamWebhook(models.Model):
    """A team's chat channel (Slack-compatible incoming webhook), managed by the team's leads."""

    team = models.ForeignKey("portal.Team", on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=60)
    url = models.CharField(max_length=500, validators=[webhook_url_validate])
    events = models.JSONField(default=default_events, validators=[events_validate])
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["team__name", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="webhook_name_unique_per_team")]

    def __str__(self) -> str:
        return f"{self.team.name}/{self.name} → {self.url_shown}"

    @property
    def url_shown(self) -> str:
        return url_shown(self.url)


class Notice(models.Model):
    key = models.CharField(max_length=120, unique=True, help_text="job-event:<id>, waiting:<job id>, budget-alert:<id>")
    event = models.CharField(max_length=20, choices=Event.choices)
    subject = models.CharField(max_length=200)
    text = models.TextField()
    team = models.ForeignKey("portal.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey("scheduling.Job", null=True, blank=True, on_delete=models.CASCADE,
                            related_name="notices")
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+",
                                   help_text="The people it concerns (their preferences decide how they hear).")
    created_at = models.DateTimeField(default=timezone.now)
    fanned_out_at = models.DateTimeField(null=True, blank=True, help_text="When its deliveries were made.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["fanned_out_at", "created_at"])]
        constraints = [models.CheckConstraint(condition=Q(event__in=Event.values), name="notice_event_valid")]

    def __str__(self) -> str:
        return f"{self.event}: {self.subject}"


class Delivery(models.Model):
    class Channel(models.TextChoices):
        EMAIL = "email", "Mail"
        WEBHOOK = "webhook", "Webhook"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # not sent yet; retried while attempts are left
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"  # every attempt failed: `last_error` says why

    notice = models.ForeignKey(Notice, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    target = models.CharField(max_length=500, help_text="The address or URL it goes to.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="notification_deliveries")
    webhook = models.ForeignKey(TeamWebhook, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="deliveries")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    attempted_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"
        indexes = [models.Index(fields=["status", "created_at"])]
        constraints = [
            models.UniqueConstraint(fields=["notice", "channel", "target"], name="delivery_once_per_target"),
            models.CheckConstraint(condition=Q(channel__in=["email", "webhook"]), name="delivery_channel_valid"),
            models.CheckConstraint(condition=Q(status__in=["pending", "sent", "failed"]), name="delivery_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.notice_id} by {self.channel} ({self.status})"

    @property
    def target_shown(self) -> str:
        return self.target if self.channel == self.Channel.EMAIL else url_shown(self.target)
