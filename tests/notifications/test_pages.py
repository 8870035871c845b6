"""The preference page and a team's webhooks page: CSRF, a 400 naming the field on bad input,
and tenant isolation (only a team's leads see or change its webhooks)."""

import pytest
from django.urls import reverse

from notifications.models import Delivery, Notice, Preference, TeamWebhook

PREFERENCES = reverse("notifications:preferences")
SECRET_URL = "https://hooks.example.org/services/T000/B000/very-secret-token"


def hooks_url(team):
    return reverse("notifications:team_webhooks", kwargs={"team": team})


def post(client, url, data):
    return client.post(url, {**data, "csrfmiddlewaretoken": client.csrf})


def test_signed_out_is_sent_to_sign_in(client, cast):
    assert client.get(PREFERENCES).status_code == 302
    assert client.get(hooks_url("vision")).status_code == 302


def test_preferences_are_saved(cast, signed_in):
    client = signed_in("max")
    response = post(client, PREFERENCES, {"events": ["failed", "started"], "webhook_url": "https://chat.example.org/x"})
    assert response.status_code == 302
    preference = Preference.objects.get(user=cast["users"]["max"])
    assert (sorted(preference.events), preference.email, preference.webhook_url) == \
        (["failed", "started"], False, "https://chat.example.org/x")


def test_a_post_without_the_csrf_token_is_refused(cast, signed_in):
    response = signed_in("max").post(PREFERENCES, {"events": ["failed"], "email": "on"})
    assert response.status_code == 403 and not Preference.objects.exists()


@pytest.mark.parametrize("field,value,message", [
    ("webhook_url", "ftp://chat.example.org/x", "https://"),
    ("webhook_url", "https://user:password@chat.example.org/x", "Leave user names and passwords out"),
    ("webhook_url", "https:///no-host", "host name"),
    ("webhook_url", "https://chat.example.org:99999/x", "Not a valid URL"),
    ("events", "everything", "not one of the available choices"),
])
def test_bad_preferences_are_a_400_naming_the_field(cast, signed_in, field, value, message):
    response = post(signed_in("max"), PREFERENCES, {"events": ["failed"], field: value})
    assert response.status_code == 400
    page = response.content.decode()
    assert f'id="{field}-errors"' in page and message in page
    assert not Preference.objects.exists()


def test_a_lead_adds_a_webhook_whose_secret_path_never_shows(cast, signed_in):
    client = signed_in("lena")
    response = post(client, hooks_url("vision"), {"name": "ml-chat", "url": SECRET_URL, "events": ["failed"]})
    assert response.status_code == 302
    hook = TeamWebhook.objects.get()
    assert (hook.team.name, hook.url, hook.events, hook.created_by.username) == \
        ("vision", SECRET_URL, ["failed"], "lena")
    page = client.get(hooks_url("vision")).content.decode()
    assert "ml-chat" in page and "https://hooks.example.org/…" in page and "very-secret-token" not in page


def test_bad_webhooks_are_a_400(cast, signed_in):
    client = signed_in("lena")
    TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=SECRET_URL)
    duplicate = post(client, hooks_url("vision"), {"name": "ml-chat", "url": SECRET_URL, "events": ["failed"]})
    assert duplicate.status_code == 400 and "already has a webhook named" in duplicate.content.decode()
    credentials = post(client, hooks_url("vision"), {"name": "other", "url": "http://u:p@x.example.org/"})
    assert credentials.status_code == 400 and 'id="url-errors"' in credentials.content.decode()
    assert TeamWebhook.objects.count() == 1


@pytest.mark.parametrize("who", ["max", "sara"])  # a member of the team, the lead of another team
def test_only_the_teams_leads_see_or_change_its_webhooks(cast, signed_in, who):
    hook = TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=SECRET_URL)
    client = signed_in(who)
    assert client.get(hooks_url("vision")).status_code == 403
    assert post(client, hooks_url("vision"), {"name": "mine", "url": "https://evil.example.org/"}).status_code == 403
    delete = reverse("notifications:team_webhook_delete", kwargs={"team": "vision", "pk": hook.pk})
    assert post(client, delete, {}).status_code == 403
    assert list(TeamWebhook.objects.values_list("name", flat=True)) == ["ml-chat"]


def test_a_lead_cannot_reach_another_teams_webhook_through_their_own_team(cast, signed_in):
    hook = TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=SECRET_URL)
    client = signed_in("sara")  # lead of speech
    delete = reverse("notifications:team_webhook_delete", kwargs={"team": "speech", "pk": hook.pk})
    assert post(client, delete, {}).status_code == 404
    assert "ml-chat" not in client.get(hooks_url("speech")).content.decode()
    assert TeamWebhook.objects.filter(pk=hook.pk).exists()


def test_a_lead_removes_a_webhook(cast, signed_in):
    hook = TeamWebhook.objects.create(team=cast["teams"]["vision"], name="ml-chat", url=SECRET_URL)
    delete = reverse("notifications:team_webhook_delete", kwargs={"team": "vision", "pk": hook.pk})
    assert post(signed_in("lena"), delete, {}).status_code == 302 and not TeamWebhook.objects.exists()


def test_an_unknown_team_is_a_404(cast, signed_in):
    assert signed_in("lena").get(hooks_url("nosuchteam")).status_code == 404


def test_failed_deliveries_show_with_their_error(cast, signed_in):
    notice = Notice.objects.create(key="k", event="failed", subject="Job #1 resnet (vision) failed", text="…")
    Delivery.objects.create(notice=notice, channel="email", target="max@example.org", user=cast["users"]["max"],
                            status="failed", attempts=6, last_error="mail server: ConnectionRefusedError")
    page = signed_in("max").get(PREFERENCES).content.decode()
    assert "Job #1 resnet (vision) failed" in page and "ConnectionRefusedError" in page
    assert "ConnectionRefusedError" not in signed_in("lena").get(PREFERENCES).content.decode()
