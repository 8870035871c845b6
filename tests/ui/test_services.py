"""The write services: what they change and what they leave on the job's timeline."""

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command

from scheduling import services
from scheduling.models import Job

pytestmark = pytest.mark.django_db


def test_submit_queues_the_job_last_and_records_it(users, teams, jobs):
    job = services.job_submit(user=users["member"], team=teams["alpha"], name="new-one", kind="batch",
                              priority_class="best-effort", gpu_memory_gb=12)
    assert job.status == "pending" and job.queue_order == 3 and job.project.name == "main"
    assert list(job.events.values_list("kind", flat=True)) == ["submitted"]


def test_a_viewer_may_not_submit(users, teams, jobs):
    with pytest.raises(PermissionDenied):
        services.job_submit(user=users["viewer"], team=teams["alpha"], name="x", kind="batch",
                            priority_class="training", gpus=1)


def test_cancel_of_a_waiting_job_is_at_once_and_recorded(users, jobs):
    job = services.job_cancel(user=users["lead"], job=jobs["bob_wait"])
    assert job.status == "cancelled" and job.finished_at
    assert job.events.last().kind == "cancelled"


def test_cancel_of_a_running_job_asks_its_pods_to_stop_first(users, jobs):
    """Its GPUs stay held until a worker has stopped the pods (tests/workers/test_cancel_stops_first.py)."""
    job = services.job_cancel(user=users["lead"], job=jobs["alpha_run"])
    assert job.status == "running" and job.placements.filter(ended_at__isnull=True).exists()
    assert job.events.last().kind == "cancel-requested"
    assert job.actions.get(kind="preempt").payload["reason"] == "cancel"
    again = services.job_cancel(user=users["lead"], job=job)  # a second click changes nothing
    assert again.actions.count() == 1


def test_reprioritise_changes_the_class_and_records_it(users, jobs):
    job = services.job_reprioritise(user=users["lead"], job=jobs["bob_wait"], priority_class="production")
    assert job.priority_class.name == "production" and job.preemptible is False
    assert "training → production" in job.events.last().message


def test_reorder_sets_the_order_and_the_team_position_at_once(users, teams, jobs):
    bob, alice = jobs["bob_wait"], jobs["alice_wait"]
    services.team_queue_reorder(user=users["lead"], team=teams["alpha"], job_ids=[alice.pk, bob.pk])
    assert list(Job.objects.filter(pk__in=[alice.pk, bob.pk]).order_by("queue_order")
                .values_list("pk", "queue_position_team")) == [(alice.pk, 1), (bob.pk, 2)]


def test_moving_the_last_job_up_swaps_it(users, teams, jobs):
    services.team_queue_move(user=users["lead"], team=teams["alpha"], job_id=jobs["alice_wait"].pk, offset=-1)
    jobs["alice_wait"].refresh_from_db()
    assert jobs["alice_wait"].queue_order == 1


def test_the_api_token_command_prints_a_working_token(users, jobs, client, capsys):
    call_command("api_token", "bob")
    key = capsys.readouterr().out.strip()
    assert users["member"].api_tokens.get().name == "cli"
    response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200 and response.json()["count"] == 3


def test_the_docs_page_loads_nothing_from_a_cdn(clients, jobs):
    body = clients["lead"].get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/" in body and "cdn" not in body.lower()


def test_the_dashboard_loads_plotly_from_static(clients, jobs):
    body = clients["lead"].get("/teams/alpha/").content.decode()
    assert "/static/vendor/plotly.min.js" in body and "cdn" not in body.lower()
