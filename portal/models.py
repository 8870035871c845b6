"""Tenancy: business units own teams, teams own projects, users belong to teams by role."""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q, Sum

from portal.capacity import cluster_gpus

FINANCE_GROUP = "Finance"

# A team is a Kubernetes namespace, so its name must be a valid DNS-1123 label.
namespace_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    "Use lowercase letters, digits and '-', starting and ending with a letter or digit (max 63).",
)


def units(amount: Decimal | int) -> str:
    """GPU units as people write them: 16, 0.5, 2.25 (never 16.000 or 5E+2)."""
    return f"{Decimal(amount).normalize():f}"


class BusinessUnit(models.Model):
    name = models.CharField(max_length=100, unique=True)
    cost_center = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Team(models.Model):
    name = models.CharField(max_length=63, unique=True, validators=[namespace_validator],
                            help_text="Also the Kubernetes namespace of the team's jobs.")
    business_unit = models.ForeignKey(BusinessUnit, on_delete=models.PROTECT, related_name="teams")
    guaranteed_gpus = models.DecimalField(
        max_digits=8, decimal_places=3, default=Decimal("0"), validators=[MinValueValidator(0)],
        help_text="GPU units always available to the team (a MIG slice counts its compute slices over its GPU's).")
    burst_limit_gpus = models.DecimalField(
        max_digits=8, decimal_places=3, default=Decimal("0"), validators=[MinValueValidator(0)],
        help_text="Most GPU units the team may hold, borrowed capacity included.")
    weight = models.FloatField(default=1.0, validators=[MinValueValidator(0.01)],
                               help_text="Share of idle capacity lent to the team, relative to others.")
    allowed_priority_classes = models.ManyToManyField(
        "scheduling.PriorityClass", blank=True, related_name="teams",
        help_text="Priority classes the team's leads may use; members get the non-production ones.")
    # One member must not stall scheduling for everyone (issue 15): a cycle's cost grows with the queue.
    max_waiting_jobs = models.PositiveIntegerField(
        default=1000, validators=[MinValueValidator(1)],
        help_text="Most jobs the team may have waiting; a submit beyond it is refused until some start or end.")
    max_submits_per_minute = models.PositiveIntegerField(
        default=120, validators=[MinValueValidator(1)],
        help_text="Most jobs the team's members may submit in any 60 seconds, all together.")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(guaranteed_gpus__gte=0), name="team_guaranteed_non_negative"),
            models.CheckConstraint(condition=Q(burst_limit_gpus__gte=F("guaranteed_gpus")),
                                   name="team_burst_at_least_guaranteed"),
            models.CheckConstraint(condition=Q(weight__gt=0), name="team_weight_positive"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Quotas a person can act on: plain words instead of a constraint name, and no guarantee
        the cluster cannot honour (a 500-GPU guarantee on 72 GPUs used to be accepted silently)."""
        super().clean()
        guaranteed, burst = self.guaranteed_gpus, self.burst_limit_gpus
        if guaranteed is None or burst is None:
            return
        if burst < guaranteed:
            raise ValidationError({"burst_limit_gpus": (
                f"The burst limit ({units(burst)}) must be at least the guarantee ({units(guaranteed)}): a team can "
                "always hold what it is guaranteed.")})
        capacity = cluster_gpus()
        others = Team.objects.exclude(pk=self.pk).aggregate(total=Sum("guaranteed_gpus"))["total"] or 0
        if capacity is not None and guaranteed and others + guaranteed > capacity:
            raise ValidationError({"guaranteed_gpus": (
                f"Guarantees would total {units(others + guaranteed)} GPUs but the cluster has {units(capacity)}; "
                f"other teams hold {units(others)}, so this team can be guaranteed at most "
                f"{units(max(capacity - others, 0))}.")})

    @property
    def namespace(self) -> str:
        return self.name


class TeamNamespace(models.Model):
    """A Kubernetes namespace whose native pods (spec.schedulerName: tessera) are this team's jobs.
    A namespace named as a team is that team's without a row here."""

    namespace = models.CharField(max_length=63, unique=True, validators=[namespace_validator])
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="namespaces")

    class Meta:
        ordering = ["namespace"]

    def __str__(self) -> str:
        return f"{self.namespace} → {self.team.name}"

    def clean(self) -> None:
        super().clean()
        owner = Team.objects.filter(name=self.namespace).exclude(pk=self.team_id).first()
        if owner is not None:  # that team's portal jobs run there: its native pods are its own too
            raise ValidationError({"namespace": f"{self.namespace} is team {owner.name}'s own namespace."})


def default_cost_code(team_name: str, project_name: str) -> str:
    """The code a project gets when nobody gave one: TEAM-PROJECT, upper case, at most 40 characters."""
    return f"{team_name}-{project_name}".upper().replace(" ", "-")[:40]


class Project(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=100)
    cost_code = models.CharField(max_length=40, help_text="The code finance books this project's GPU cost to; "
                                                          "TEAM-PROJECT when left empty.")

    class Meta:
        ordering = ["team__name", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="project_unique_per_team"),
                       models.CheckConstraint(condition=~Q(cost_code=""), name="project_has_cost_code")]

    def __str__(self) -> str:
        return f"{self.team.name}/{self.name}"

    def save(self, *args, **kwargs):
        # Every chargeback line carries a cost code, so a project is never without one.
        if not self.cost_code:
            self.cost_code = default_cost_code(self.team.name, self.name)
        super().save(*args, **kwargs)


class Membership(models.Model):
    class Role(models.TextChoices):
        LEAD = "lead", "Team lead"
        MEMBER = "member", "Member"
        VIEWER = "viewer", "Viewer"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        ordering = ["team__name", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team"),
            models.CheckConstraint(condition=Q(role__in=["lead", "member", "viewer"]),
                                   name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} — {self.team} ({self.role})"


class ApiToken(models.Model):
    """A named API credential a user made in the portal. Only its SHA-256 digest is kept; it is
    refused after `expires_at` or once revoked (portal/tokens.py, ui/api/auth.py)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="The token's first characters, to tell tokens apart.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex.")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], condition=Q(revoked_at__isnull=True),
                                    name="api_token_live_name_unique_per_user"),
            models.CheckConstraint(condition=Q(expires_at__gt=F("created_at")), name="api_token_expires_after_created"),
        ]

    def __str__(self) -> str:
        return f"{self.user} — {self.name} ({self.prefix}…)"
