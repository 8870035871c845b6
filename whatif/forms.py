"""What a platform engineer may ask: a window of history and one or more changes to the cluster."""

from django import forms
from django.conf import settings

from portal.models import Team, units
from scheduling.engine.types import TIERS
from scheduling.models import Node
from scheduling.simulator.run.policies import known_policies

MAX_HOURS = 7 * 24
MAX_AHEAD_HOURS = 48
MAX_ADDED_NODES = 64


class WhatIfForm(forms.Form):
    hours = forms.FloatField(min_value=0.5, max_value=MAX_HOURS, initial=24, label="History to replay (hours)",
                             help_text="The live cluster's jobs of this many hours back, replayed from then.")
    ahead_hours = forms.FloatField(min_value=0, max_value=MAX_AHEAD_HOURS, initial=0, label="Then go on (hours)",
                                   help_text="Simulate past now, with no new submissions: how today's queue drains.")
    team = forms.ChoiceField(required=False, label="Team whose guarantee changes")
    guarantee_delta = forms.FloatField(initial=0, min_value=-100000, max_value=100000,
                                       label="Guarantee change (GPUs)", help_text="e.g. 8 or -4.")
    add_model = forms.ChoiceField(required=False, label="Add nodes of GPU model",
                                  help_text="Copies of an existing node of that model.")
    add_count = forms.IntegerField(initial=0, min_value=0, max_value=MAX_ADDED_NODES, label="How many nodes")
    add_tier = forms.ChoiceField(choices=[(t, t) for t in TIERS], initial="reserved", label="Their tier")
    policy = forms.ChoiceField(label="Scheduling policy",
                               help_text="The live one is the baseline; another runs on the changed side.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.teams = {t.name: t for t in Team.objects.order_by("name")}
        self.fields["team"].choices = [("", "—")] + [(name, name) for name in self.teams]
        models = (Node.objects.exclude(state=Node.State.LOST).order_by("gpu_model")
                  .values_list("gpu_model", flat=True).distinct())
        self.fields["add_model"].choices = [("", "—")] + [(m, m) for m in models]
        self.fields["policy"].choices = [(p, p) for p in sorted(known_policies())]
        self.fields["policy"].initial = settings.TESSERA_POLICY

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        team, delta = data.get("team"), data.get("guarantee_delta") or 0
        if delta and not team:
            self.add_error("team", "Choose the team whose guarantee changes.")
        if team and delta and float(self.teams[team].guaranteed_gpus) + delta < 0:
            self.add_error("guarantee_delta", f"{team} guarantees {units(self.teams[team].guaranteed_gpus)} GPUs; "
                                              f"{delta:+g} would make it negative.")
        model, count = data.get("add_model"), data.get("add_count") or 0
        if count and not model:
            self.add_error("add_model", "Choose the GPU model of the nodes to add.")
        if model and not count:
            self.add_error("add_count", "Say how many nodes to add.")
        changes = (team and delta) or (model and count) or data.get("policy") != settings.TESSERA_POLICY
        if not self.errors and not changes:
            raise forms.ValidationError("Change something: a team's guarantee, added nodes or the policy "
                                        f"(the live one is {settings.TESSERA_POLICY}).")
        return data
