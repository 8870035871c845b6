"""What a cluster would refuse only at bind time is refused at submit (issue 13 point 4, issue 15
item 2): a job with no image on a real cluster, a command that does not parse."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db
JOB = {"team": "alpha", "name": "api-job", "kind": "training", "priority_class": "training", "gpus": 1}


def submit(clients, **fields):
    return clients["member"].post(reverse("api:job-list"), {**JOB, **fields}, content_type="application/json")


def test_a_kubernetes_cluster_refuses_a_job_without_an_image(clients, jobs, settings):
    settings.TESSERA_BACKEND = "kubernetes"
    response = submit(clients, image="  ")
    assert response.status_code == 400 and "image" in response.json(), response.content
    assert submit(clients, image="nvcr.io/nvidia/pytorch:24.05-py3").status_code == 201


def test_the_simulated_cluster_needs_no_image(clients, jobs, settings):
    settings.TESSERA_BACKEND = "simulated"
    assert submit(clients).status_code == 201


def test_a_command_that_does_not_parse_is_refused(clients, jobs):
    response = submit(clients, command='python train.py --name "unterminated')
    assert response.status_code == 400, response.content
    assert "does not parse" in str(response.json()["command"])
    assert submit(clients, command='python train.py --name "quoted words"').status_code == 201
