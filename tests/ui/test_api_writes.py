"""Every write endpoint refuses a field it does not know (issue 15, item 8), and the GPU-model pin
has one name and one shape, in what a client sends and in what it reads back."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

GOOD = {"team": "alpha", "name": "pinned", "kind": "training", "priority_class": "training", "gpus": 1}


def test_a_pin_under_the_old_name_is_a_400_pointing_at_the_new_one(clients, jobs):
    response = clients["lead"].post(reverse("api:job-list"), {**GOOD, "gpu_model": "A100-40GB"},
                                    content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {"gpu_model": ["Unknown field; did you mean 'gpu_models'?"]}


@pytest.mark.parametrize("route,body", [
    ("api:job-reprioritise", {"priority_class": "training", "urgent": True}),
    ("api:job-cancel", {"force": True}),
])
def test_job_writes_refuse_unknown_fields(clients, jobs, route, body):
    job = jobs["bob_wait"]
    response = clients["lead"].post(reverse(route, args=[job.pk]), body, content_type="application/json")
    assert response.status_code == 400 and list(response.json()) == [sorted(set(body) - {"priority_class"})[0]]
    job.refresh_from_db()
    assert job.status == "pending" and job.priority_class.name == "training"


def test_a_reorder_refuses_unknown_fields(clients, jobs):
    body = {"job_ids": [jobs["bob_wait"].pk], "dry_run": True}
    response = clients["lead"].post(reverse("api:team-reorder", args=["alpha"]), body, content_type="application/json")
    assert response.status_code == 400 and "dry_run" in response.json()


def test_the_pin_reads_back_as_it_was_sent(clients, jobs):
    created = clients["lead"].post(reverse("api:job-list"), {**GOOD, "gpu_models": ["A100-40GB"]},
                                   content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["gpu_models"] == ["A100-40GB"]
    listed = clients["lead"].get(reverse("api:job-list"), {"team": "alpha"}).json()["results"]
    assert [row["gpu_models"] for row in listed if row["id"] == created.json()["id"]] == [["A100-40GB"]]
    again = {**GOOD, "name": "pinned-again", "gpu_models": created.json()["gpu_models"]}
    assert clients["lead"].post(reverse("api:job-list"), again, content_type="application/json").status_code == 201


def test_no_pin_reads_back_as_any(clients, jobs):
    created = clients["lead"].post(reverse("api:job-list"), GOOD, content_type="application/json").json()
    assert created["gpu_models"] == []


def test_the_form_pins_one_model_or_several(clients, jobs):
    data = {"cpu_cores": 4, "memory_gb": 8, "gpu_memory_gb": 0, "gang": "on", **GOOD,
            "gpu_models": ["A100-40GB", "H100-80GB"]}
    response = clients["lead"].post(reverse("ui:job_new"), data)
    assert response.status_code == 302
    job = jobs["bob_wait"].__class__.objects.get(name="pinned")
    assert job.gpu_models == "A100-40GB|H100-80GB"


def test_the_token_endpoint_refuses_unknown_fields(db):
    from django.test import Client
    body = {"username": "nobody", "password": "x", "name": "ci", "scope": "admin"}
    response = Client().post(reverse("api:token"), body, content_type="application/json")
    assert response.status_code == 400 and list(response.json()) == ["scope"]
