from django import forms

from notifications.models import Event, Preference, TeamWebhook

MAX_WEBHOOKS_PER_TEAM = 10


class EventsField(forms.MultipleChoiceField):
    widget = forms.CheckboxSelectMultiple

    def __init__(self, **kwargs):
        super().__init__(choices=Event.choices, required=False, **kwargs)


class PreferenceForm(forms.ModelForm):
    events = EventsField(label="Tell me when", help_text="About your own jobs, and budgets of teams you lead.")

    class Meta:
        model = Preference
        fields = ["events", "email", "webhook_url"]
        labels = {"email": "By mail", "webhook_url": "To my own webhook"}
        help_texts = {"webhook_url": "A Slack-compatible incoming webhook URL (https://…); empty for none."}


class TeamWebhookForm(forms.ModelForm):
    events = EventsField(label="Post when", initial=[e for e in Event.values if e != Event.STARTED])

    class Meta:
        model = TeamWebhook
        fields = ["name", "url", "events"]
        labels = {"url": "Webhook URL"}
        help_texts = {"url": "The channel's Slack-compatible incoming webhook (https://…). Shown afterwards only "
                             "as its host: its path is a secret."}

    def __init__(self, *args, team, **kwargs):
        self.team = team
        super().__init__(*args, **kwargs)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Give the webhook a name.")
        if TeamWebhook.objects.filter(team=self.team, name=name).exists():
            raise forms.ValidationError(f"Team {self.team} already has a webhook named {name!r}.")
        return name

    def clean(self):
        if TeamWebhook.objects.filter(team=self.team).count() >= MAX_WEBHOOKS_PER_TEAM:
            raise forms.ValidationError(f"A team may have at most {MAX_WEBHOOKS_PER_TEAM} webhooks; remove one first.")
        return super().clean()
