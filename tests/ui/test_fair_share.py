"""The dashboard explains fair share over time: how much of its share the team used lately and
what that means for idle GPUs (ui/fair_share.py; the engine orders lending by the same ratio)."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from billing.services import usage_interval_open
from scheduling.models import Placement
from tests.ui.conftest import make_job
from ui.fair_share import fair_share_sentence


@pytest.mark.parametrize("ratio, used, hours, sentence", [
    (1.8, True, 168, "Your team used 1.8× its share over the last 7 days, so idle GPUs go to others first."),
    (0.4, True, 168, "Your team used 0.4× its share over the last 7 days, so idle GPUs come to it first."),
    (0.03, True, 24, "Your team used 0.03× its share over the last 1 day, so idle GPUs come to it first."),
    (1.02, True, 36, "Your team used about its share (1.0×) over the last 36 hours."),
    (0.0, False, 168, "Your team used no GPUs over the last 7 days, so idle GPUs come to it first."),
    (float("inf"), True, 168, "Your team has no guaranteed share, so idle GPUs go to teams with one first."),
])
def test_the_sentence_says_the_ratio_and_what_follows(ratio, used, hours, sentence):
    assert fair_share_sentence(ratio, used, hours) == sentence


def _bravo_ran_eight_gpus(teams, users, cluster):
    """bravo (guarantee 2 of 6: a third) held 8 of the 12 GPUs for the last day: 2x its share."""
    started = timezone.now() - timedelta(hours=24)
    for gpu in cluster["h100"].gpus.order_by("index")[:8]:
        job = make_job(teams["bravo"], users["other_lead"], f"bravo-{gpu.index}", status="running")
        placement = Placement.objects.create(job=job, gpu=gpu, memory_gb=80, started_at=started)
        usage_interval_open(placement=placement, at=started)


def test_the_dashboard_tells_a_heavy_team_idle_gpus_go_to_others_first(clients, users, teams, cluster):
    _bravo_ran_eight_gpus(teams, users, cluster)
    cache.clear()
    page = clients["other_lead"].get(reverse("ui:dashboard", kwargs={"team": "bravo"})).content.decode()
    assert 'id="fair-share"' in page
    assert "Your team used 2.0× its share over the last 7 days, so idle GPUs go to others first." in page


def test_the_dashboard_tells_an_idle_team_idle_gpus_come_to_it_first(clients, users, teams, cluster):
    _bravo_ran_eight_gpus(teams, users, cluster)
    cache.clear()
    page = clients["lead"].get(reverse("ui:dashboard", kwargs={"team": "alpha"})).content.decode()
    assert "Your team used no GPUs over the last 7 days, so idle GPUs come to it first." in page


def test_a_policy_without_fair_history_shows_no_sentence(clients, users, teams, cluster, settings):
    settings.TESSERA_POLICY = "k8s-default"
    cache.clear()
    page = clients["lead"].get(reverse("ui:dashboard", kwargs={"team": "alpha"})).content.decode()
    assert 'id="fair-share"' not in page
