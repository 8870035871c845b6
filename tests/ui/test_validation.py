"""Bad input gets a 400 with the field named, in the API and on the form; CSRF guards every form."""

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

GOOD = {"team": "alpha", "name": "ok-job", "kind": "training", "priority_class": "training", "gpus": 1}

BAD = [
    ("negative_gpus", {"gpus": -1}, "gpus"),
    ("memory_above_any_gpu", {"gpus": 0, "gpu_memory_gb": 200}, "gpu_memory_gb"),
    ("memory_above_the_model", {"gpus": 0, "gpu_memory_gb": 60, "gpu_models": ["A100-40GB"]}, "gpu_memory_gb"),
    ("unknown_profile", {"gpus": 0, "mig_profile": "9g.999gb"}, "mig_profile"),
    ("unknown_model", {"gpu_models": ["TPU-v5"]}, "gpu_models"),
    ("gang_larger_than_cluster", {"gpus": 64, "gang": True}, "gpus"),
    ("nothing_asked", {"gpus": 0, "gpu_memory_gb": 0}, "gpus"),
    ("unknown_kind", {"kind": "mining"}, "kind"),
    ("unknown_priority", {"priority_class": "ultra"}, "priority_class"),
    ("short_checkpoints", {"checkpoint_interval_s": 5}, "checkpoint_interval_s"),
    ("zero_save_time", {"checkpoint_interval_s": 600, "checkpoint_save_s": 0}, "checkpoint_save_s"),
    ("save_time_above_an_hour", {"checkpoint_interval_s": 600, "checkpoint_save_s": 3601}, "checkpoint_save_s"),
    ("bad_name", {"name": "no spaces please"}, "name"),
    ("unknown_project", {"project": "nope"}, "project"),
    ("claim_in_another_namespace", {"volume_claim": "bravo/ckpt"}, "volume_claim"),
    ("claim_not_a_name", {"volume_claim": "Checkpoints_1"}, "volume_claim"),
    ("claim_name_too_long", {"volume_claim": "c" * 254}, "volume_claim"),
    ("claim_over_tesseras_mounts", {"volume_claim": "ckpt", "volume_mount_path": "/etc/tessera"},
     "volume_mount_path"),
    ("relative_mount_path", {"volume_claim": "ckpt", "volume_mount_path": "ckpt"}, "volume_mount_path"),
    ("env_secret_not_a_name", {"env_secret": "wandb key"}, "env_secret"),
    ("file_secret_in_another_namespace", {"file_secret": "kube-system/admin"}, "file_secret"),
]


@pytest.mark.parametrize("change,field", [(c, f) for _, c, f in BAD], ids=[b[0] for b in BAD])
def test_the_api_names_the_bad_field(clients, jobs, change, field):
    response = clients["lead"].post(reverse("api:job-list"), {**GOOD, **change}, content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json()


@pytest.mark.parametrize("change,field", [(c, f) for _, c, f in BAD], ids=[b[0] for b in BAD])
def test_the_form_shows_the_error_next_to_the_field(clients, jobs, change, field):
    data = {"cpu_cores": 4, "memory_gb": 8, "gpu_memory_gb": 0, "gang": "on", **GOOD, **change}
    if data.get("gang") is True:
        data["gang"] = "on"
    response = clients["lead"].post(reverse("ui:job_new"), data)
    assert response.status_code == 400
    assert f'id="{field}-errors"' in response.content.decode()


def test_a_member_may_not_use_a_lead_only_class(clients, jobs):
    response = clients["member"].post(reverse("api:job-list"), {**GOOD, "priority_class": "production"},
                                      content_type="application/json")
    assert response.status_code == 400 and "priority_class" in response.json()


def test_a_lead_may_not_use_a_class_the_team_lacks(clients, jobs):
    response = clients["other_lead"].post(reverse("api:job-list"), {**GOOD, "team": "bravo",
                                                                    "priority_class": "production"},
                                          content_type="application/json")
    assert response.status_code == 400 and "priority_class" in response.json()


def test_the_form_offers_only_the_classes_a_role_allows(clients, jobs):
    lead = clients["lead"].get(reverse("ui:job_new")).content.decode()
    member = clients["member"].get(reverse("ui:job_new")).content.decode()
    assert 'value="production"' in lead and 'value="production"' not in member


def test_a_mig_profile_sets_the_memory_need(clients, jobs):
    response = clients["lead"].post(reverse("api:job-list"), {**GOOD, "gpus": 0, "mig_profile": "1g.10gb"},
                                    content_type="application/json")
    assert response.status_code == 201
    # Both models have a 1g.10gb; the need is the smaller of the two so it fits either.
    assert response.json()["gpu_memory_gb"] == 9.62 and response.json()["gpu_models"] == ["A100-40GB", "H100-80GB"]


def test_reprioritise_to_an_unknown_class_is_a_400(clients, jobs):
    response = clients["lead"].post(reverse("api:job-reprioritise", args=[jobs["bob_wait"].pk]),
                                    {"priority_class": "ultra"}, content_type="application/json")
    assert response.status_code == 400 and "priority_class" in response.json()


def test_a_reorder_that_misses_a_job_is_a_400(clients, jobs):
    response = clients["lead"].post(reverse("api:team-reorder", args=["alpha"]), {"job_ids": [jobs["bob_wait"].pk]},
                                    content_type="application/json")
    assert response.status_code == 400 and "job_ids" in response.json()


def test_cancelling_twice_is_a_400(clients, jobs):
    url = reverse("api:job-cancel", args=[jobs["bob_wait"].pk])
    assert clients["lead"].post(url).status_code == 200
    assert clients["lead"].post(url).status_code == 400


@pytest.mark.parametrize("query", ["params_billion=-1", "params_billion=7&precision=fp3", "params_billion=x"])
def test_the_sizing_helper_refuses_bad_input(clients, jobs, query):
    assert clients["lead"].get(reverse("api:sizing") + "?" + query).status_code == 400


def test_the_sizing_helper_picks_the_smallest_slice(clients, jobs):
    body = clients["lead"].get(reverse("api:sizing") + "?params_billion=1&precision=bf16").json()
    assert 2 < body["need_gb"] < 4
    assert {"gpu_model": "H100-80GB", "gpus": 0, "mig_profile": "1g.10gb",
            "text": "MIG 1g.10gb on H100-80GB"} in body["fits"]


@pytest.mark.parametrize("name,data", [
    ("ui:job_new", GOOD), ("ui:queue_move", {"job": 1, "direction": "up"}),
])
def test_forms_without_a_csrf_token_are_refused(users, jobs, name, data):
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["lead"])
    url = reverse(name, args=["alpha"]) if name == "ui:queue_move" else reverse(name)
    assert client.post(url, data).status_code == 403


@pytest.mark.parametrize("route", ["ui:job_cancel", "ui:job_priority", "api:job-cancel"])
def test_job_writes_without_a_csrf_token_are_refused(users, jobs, route):
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["lead"])
    assert client.post(reverse(route, args=[jobs["bob_wait"].pk])).status_code == 403


def test_a_job_keeps_the_claim_and_secrets_it_names(clients, jobs):
    attached = {"volume_claim": "ckpt", "volume_mount_path": "/data/ckpt", "env_secret": "wandb",
                "file_secret": "hf-token"}
    response = clients["lead"].post(reverse("api:job-list"), {**GOOD, **attached}, content_type="application/json")
    assert response.status_code == 201, response.content
    assert {k: response.json()[k] for k in attached} == attached
