"""The GPU-hour ledger (usage intervals), the prices it is charged at (rates), and closed months."""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q


class UsageInterval(models.Model):
    """A stretch of time one placement held (a share of) a GPU.

    Team, project, business unit, node, model and tier are copied in when the interval opens, so
    later moves (a team changing business unit, a node changing tier) never rewrite past bills.
    """

    job = models.ForeignKey("scheduling.Job", on_delete=models.PROTECT, related_name="usage_intervals")
    team = models.ForeignKey("portal.Team", on_delete=models.PROTECT, related_name="usage_intervals")
    project = models.ForeignKey("portal.Project", on_delete=models.PROTECT, related_name="usage_intervals")
    business_unit = models.ForeignKey("portal.BusinessUnit", on_delete=models.PROTECT,
                                      related_name="usage_intervals")
    node = models.ForeignKey("scheduling.Node", on_delete=models.PROTECT, related_name="usage_intervals")
    gpu = models.ForeignKey("scheduling.Gpu", on_delete=models.PROTECT, related_name="usage_intervals")
    gpu_model = models.CharField(max_length=40)
    tier = models.ForeignKey("scheduling.CapacityTier", on_delete=models.PROTECT, related_name="usage_intervals")
    # Copied from the placement (Placement.billed_fraction; MIG: MigInstance.gpu_fraction).
    gpu_fraction = models.DecimalField(
        max_digits=7, decimal_places=6, validators=[MinValueValidator(Decimal("0.000001")),
                                                    MaxValueValidator(Decimal("1"))],
        help_text="GPU units billed: 1 for a whole GPU, a MIG instance's compute slices over its GPU's, "
                  "else the share.")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True, help_text="Empty while the interval is open.")
    end_reason = models.CharField(max_length=30, blank=True)
    # Unique, so one placement can never be billed twice; empty only for imported history.
    placement = models.OneToOneField("scheduling.Placement", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="usage_interval")

    class Meta:
        ordering = ["-started_at", "id"]
        indexes = [
            models.Index(fields=["started_at"], name="usage_started_idx"),
            models.Index(fields=["ended_at"], name="usage_ended_idx"),
            models.Index(fields=["job", "gpu"], name="usage_job_gpu_idx"),
            models.Index(fields=["gpu"], condition=Q(ended_at__isnull=True), name="usage_open_per_gpu_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(gpu_fraction__gt=0) & Q(gpu_fraction__lte=1),
                                   name="usage_fraction_range"),
            models.CheckConstraint(condition=Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at")),
                                   name="usage_ends_after_start"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} on {self.gpu_id} from {self.started_at:%Y-%m-%d %H:%M}"

    @property
    def is_open(self) -> bool:
        return self.ended_at is None


class Rate(models.Model):
    """Price of one GPU-hour of a model in a tier, from valid_from until the day before valid_to."""

    gpu_model = models.CharField(max_length=40)
    tier = models.ForeignKey("scheduling.CapacityTier", on_delete=models.PROTECT, related_name="rates")
    price_per_gpu_hour = models.DecimalField(max_digits=10, decimal_places=4,
                                             validators=[MinValueValidator(Decimal("0"))],
                                             help_text="US dollars per GPU-hour.")
    valid_from = models.DateField()
    valid_to = models.DateField(null=True, blank=True,
                                help_text="First day the rate no longer applies; empty means open-ended.")
    note = models.CharField(max_length=200, blank=True, help_text="Where the price comes from.")

    class Meta:
        ordering = ["gpu_model", "tier__name", "valid_from"]
        constraints = [
            models.CheckConstraint(condition=Q(price_per_gpu_hour__gte=0), name="rate_price_non_negative"),
            models.CheckConstraint(condition=Q(valid_to__isnull=True) | Q(valid_to__gt=F("valid_from")),
                                   name="rate_valid_to_after_from"),
            # Overlapping validity is excluded on PostgreSQL by migration 0002 (an exclusion
            # constraint SQLite cannot express); clean() and the rate_save service check everywhere.
        ]

    def __str__(self) -> str:
        until = self.valid_to.isoformat() if self.valid_to else "open"
        return f"{self.gpu_model} {self.tier} ${self.price_per_gpu_hour}/GPU-h {self.valid_from}…{until}"

    def overlapping(self):
        """Other rates of the same model × tier whose validity meets this one's."""
        others = Rate.objects.filter(gpu_model=self.gpu_model, tier_id=self.tier_id).exclude(pk=self.pk)
        if self.valid_to is not None:
            others = others.filter(valid_from__lt=self.valid_to)
        return others.filter(Q(valid_to__isnull=True) | Q(valid_to__gt=self.valid_from))

    def clean(self):
        super().clean()
        if self.price_per_gpu_hour is not None and self.price_per_gpu_hour < 0:
            raise ValidationError({"price_per_gpu_hour": "A price cannot be negative."})
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValidationError({"valid_to": "The end must come after the start."})
        if self.valid_from and self.tier_id and self.gpu_model:
            clash = self.overlapping().first()
            if clash is not None:
                raise ValidationError(f"Overlaps the rate {clash}; end that one first or pick other dates.")


class LineKind(models.TextChoices):
    USAGE = "usage", "GPU usage"
    IDLE = "idle", "Idle reserved capacity"
    ADJUSTMENT = "adjustment", "Adjustment"


class ClosedMonth(models.Model):
    """A month whose statement is final: its lines are frozen and no rate edit can change them."""

    month = models.DateField(unique=True, help_text="First day of the month (UTC).")
    closed_at = models.DateTimeField()
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")
    total_cost = models.DecimalField(max_digits=14, decimal_places=2)
    idle_policy = models.CharField(max_length=30, default="showback",
                                   help_text="The idle-cost policy in force when the month was closed.")

    class Meta:
        ordering = ["-month"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} (closed)"


class FrozenLine(models.Model):
    """One statement line of a closed month, exactly as it was billed (names as they were then)."""

    closed_month = models.ForeignKey(ClosedMonth, on_delete=models.PROTECT, related_name="lines")
    kind = models.CharField(max_length=12, choices=LineKind.choices)
    business_unit = models.ForeignKey("portal.BusinessUnit", null=True, on_delete=models.PROTECT, related_name="+")
    team = models.ForeignKey("portal.Team", null=True, on_delete=models.PROTECT, related_name="+")
    project = models.ForeignKey("portal.Project", null=True, on_delete=models.PROTECT, related_name="+")
    business_unit_name = models.CharField(max_length=100)
    cost_center = models.CharField(max_length=40, blank=True)
    team_name = models.CharField(max_length=63)
    project_name = models.CharField(max_length=100)
    cost_code = models.CharField(max_length=40, blank=True)
    tier = models.CharField(max_length=40)
    gpu_model = models.CharField(max_length=40)
    gpu_seconds = models.DecimalField(max_digits=20, decimal_places=6)
    cost = models.DecimalField(max_digits=14, decimal_places=2)
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["closed_month", "id"]

    def __str__(self) -> str:
        return f"{self.team_name}/{self.project_name} {self.tier} {self.gpu_model} ${self.cost}"


class Adjustment(models.Model):
    """A correction to a closed month, booked as its own line in an open month: who, why, how much."""

    month = models.DateField(help_text="First day of the open month the line is booked in.")
    corrects = models.DateField(help_text="First day of the closed month it corrects.")
    project = models.ForeignKey("portal.Project", on_delete=models.PROTECT, related_name="adjustments")
    amount = models.DecimalField(max_digits=14, decimal_places=2, help_text="US dollars; negative is a credit.")
    reason = models.CharField(max_length=200)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["month", "id"]
        constraints = [
            models.CheckConstraint(condition=~Q(amount=0), name="adjustment_not_zero"),
            models.CheckConstraint(condition=Q(month__gt=F("corrects")), name="adjustment_after_corrected_month"),
            models.CheckConstraint(condition=~Q(reason=""), name="adjustment_has_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.amount:+} to {self.project} in {self.month:%Y-%m} for {self.corrects:%Y-%m}"



def parse_thresholds(text: str) -> list[int]:
    """'50,80,100' → [50, 80, 100]; ValidationError naming what is wrong."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValidationError("Thresholds are whole percentages separated by commas, e.g. 50,80,100.") from None
    if not values or values[0] < 1 or values[-1] > 1000:
        raise ValidationError("Give at least one threshold, each between 1 and 1000 percent.")
    return values


class Budget(models.Model):
    """A monthly spending budget for one team or one business unit, with alerts at thresholds."""

    team = models.OneToOneField("portal.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="budget")
    business_unit = models.OneToOneField("portal.BusinessUnit", null=True, blank=True, on_delete=models.CASCADE,
                                         related_name="budget")
    monthly_amount = models.DecimalField(max_digits=14, decimal_places=2,
                                         validators=[MinValueValidator(Decimal("0.01"))],
                                         help_text="US dollars per calendar month (UTC).")
    thresholds = models.CharField(max_length=60, default="50,80,100", validators=[parse_thresholds],
                                  help_text="Percentages of the monthly amount that raise an alert, e.g. 50,80,100.")

    class Meta:
        ordering = ["business_unit__name", "team__name"]
        constraints = [
            models.CheckConstraint(condition=Q(team__isnull=True) ^ Q(business_unit__isnull=True),
                                   name="budget_for_team_or_unit"),
            models.CheckConstraint(condition=Q(monthly_amount__gt=0), name="budget_amount_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.owner_name}: ${self.monthly_amount:,.2f}/month"

    @property
    def owner_name(self) -> str:
        return str(self.team or self.business_unit)

    def clean(self):
        super().clean()
        if (self.team_id is None) == (self.business_unit_id is None):
            raise ValidationError("A budget belongs to exactly one team or one business unit.")


class BudgetAlert(models.Model):
    """One threshold crossed in one month: recorded once, so nobody is told twice."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    month = models.DateField()
    threshold = models.PositiveIntegerField()
    spent = models.DecimalField(max_digits=14, decimal_places=2)
    recipients = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["budget", "month", "threshold"], name="budget_alert_once")]

    def __str__(self) -> str:
        return f"{self.budget.owner_name} passed {self.threshold}% in {self.month:%Y-%m}"
