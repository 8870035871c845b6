"""/metrics: who may read it, and what it says about the cluster's state."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from agents import metrics, services
from scheduling.models import Gpu, Job, MigInstance, Node, Placement
from tessera import env
from tests.observability.conftest import TOKEN, job_add, scrape, value

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-of-the-right-length-0123456789", f"Basic {TOKEN}"])
def test_without_the_token_it_is_refused(client, header):
    response = client.get("/metrics", headers={"Authorization": header} if header else {})
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert b"tessera_" not in response.content


def test_staff_may_read_it_signed_in_and_other_users_may_not(client):
    user = User.objects.create_user("member", password="x")
    client.force_login(user)
    assert client.get("/metrics").status_code == 401
    user.is_staff = True
    user.save()
    assert client.get("/metrics").status_code == 200


def test_a_short_token_is_refused_at_start_up(monkeypatch):
    monkeypatch.setenv("TESSERA_METRICS_TOKEN", "short")
    with pytest.raises(ImproperlyConfigured, match="TESSERA_METRICS_TOKEN"):
        env.env_token("TESSERA_METRICS_TOKEN")


def test_pending_jobs_by_team_and_reason(cluster, client):
    job_add("waits-for-quota").__class__.objects.update(pending_reason_code="quota")
    job_add("new-one")
    samples = scrape(client)
    assert value(samples, "tessera_pending_jobs", team="vision", reason="quota") == 1
    assert value(samples, "tessera_pending_jobs", team="vision", reason="none") == 1


def test_allocated_and_used_gpus_by_team_tier_and_model(cluster, client):
    job_add("two-gpus", gpus=2, model="H100-80GB")
    services.cycle_run()
    assert Job.objects.get(name="two-gpus").status == "running"
    Gpu.objects.filter(placements__ended_at__isnull=True).update(utilization=0.25)
    samples = scrape(client)
    labels = {"team": "vision", "tier": "spot", "model": "H100-80GB"}
    assert value(samples, "tessera_allocated_gpus", **labels) == 2
    assert value(samples, "tessera_used_gpus", **labels) == 0.5
    assert value(samples, "tessera_capacity_gpus", tier="spot", model="H100-80GB") == 4
    assert value(samples, "tessera_team_guaranteed_gpus", team="vision") == 8
    assert value(samples, "tessera_actions_in_flight", kind="bind") == 1


def test_a_mig_slice_counts_as_used_by_its_own_reading_not_its_gpus(cluster, client):
    gpu = Gpu.objects.get(node__name="s-01", index=3)
    Gpu.objects.filter(pk=gpu.pk).update(mig_capable=True, mig_enabled=True, utilization=0.9)
    gpu.refresh_from_db()
    slice_, unread = MigInstance.for_profile(gpu, "3g.40gb", 4), MigInstance.for_profile(gpu, "1g.10gb", 0)
    slice_.utilization = 0.5
    slice_.save()
    unread.save()
    for name, instance in (("served", slice_), ("unread", unread)):
        job = job_add(name, gpus=0)
        Job.objects.filter(pk=job.pk).update(status="running", started_at=timezone.now())
        Placement.objects.create(job=job, gpu=gpu, mig_instance=instance, mig_profile=instance.profile,
                                 memory_gb=instance.memory_gb, started_at=timezone.now())
    samples = scrape(client)
    labels = {"team": "vision", "tier": "spot", "model": "H100-80GB"}
    assert value(samples, "tessera_allocated_gpus", **labels) == pytest.approx(4 / 7, abs=1e-5)
    assert value(samples, "tessera_used_gpus", **labels) == pytest.approx(3 / 7 * 0.5, abs=1e-5)  # not 0.9


def test_agent_poll_age_and_node_states(cluster, client):
    Node.objects.filter(name="r-01").update(last_heartbeat=timezone.now() - timedelta(seconds=30))
    Node.objects.filter(name="s-01").update(state=Node.State.LOST)
    samples = scrape(client)
    assert 30 <= value(samples, "tessera_agent_poll_age_seconds", node="r-01") < 60
    assert value(samples, "tessera_nodes", state="lost") == 1 and value(samples, "tessera_nodes", state="ready") == 1


def test_scrape_age_per_node_moves_with_readings_only(cluster, client):
    """A heartbeat from the cluster alone leaves the readings' age alone; a node never read has none."""
    Node.objects.filter(name="r-01").update(last_heartbeat=timezone.now(),
                                            telemetry_at=timezone.now() - timedelta(seconds=90))
    samples = scrape(client)
    assert 90 <= value(samples, "tessera_telemetry_scrape_age_seconds", node="r-01") < 120
    assert ("tessera_telemetry_scrape_age_seconds", (("node", "s-01"),)) not in samples


def test_cycle_events_add_up_into_a_histogram_and_counters(client):
    before = scrape(client)
    for duration in (0.004, 0.2, 42.0):
        metrics.cycle_recorded({"duration_s": duration, "binds": 2, "preemptions": 1, "reclaims": 0,
                                "repartitions": 0})
    after = scrape(client)
    delta = lambda name, **labels: value(after, name, **labels) - value(before, name, **labels)  # noqa: E731
    assert delta("tessera_cycle_duration_seconds_count") == 3
    assert delta("tessera_cycle_duration_seconds_sum") == pytest.approx(42.204)
    assert delta("tessera_cycle_duration_seconds_bucket", le="0.01") == 1
    assert delta("tessera_cycle_duration_seconds_bucket", le="0.25") == 2
    assert delta("tessera_cycle_duration_seconds_bucket", le="+Inf") == 3
    assert delta("tessera_cycle_binds_total") == 6 and delta("tessera_cycle_preemptions_total") == 3
    assert value(after, "tessera_cycle_last_run_timestamp_seconds") > 0
