"""Inputs that once made a 500 (issue 15, item 6) get a 400 naming what is wrong."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

GOOD = {"team": "alpha", "name": "ok-job", "kind": "training", "priority_class": "training", "gpus": 1}


@pytest.mark.parametrize("field", ["checkpoint_interval_s", "expected_runtime_s"])
@pytest.mark.parametrize("value", [2**31, 2**63])
def test_seconds_beyond_the_column_are_a_400_in_the_api(clients, jobs, field, value):
    response = clients["lead"].post(reverse("api:job-list"), {**GOOD, field: value}, content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json()


@pytest.mark.parametrize("field", ["checkpoint_interval_s", "expected_runtime_s"])
def test_seconds_beyond_the_column_are_a_400_on_the_form(clients, jobs, field):
    data = {"cpu_cores": 4, "memory_gb": 8, "gpu_memory_gb": 0, "gang": "on", **GOOD, field: 2**31}
    response = clients["lead"].post(reverse("ui:job_new"), data)
    assert response.status_code == 400
    assert f'id="{field}-errors"' in response.content.decode()


TIME_FILTERS = [("api:job-list", "submitted_after"), ("api:job-list", "submitted_before"),
                ("billing-interval-list", "started_at__gte"), ("billing-interval-list", "ended_at__lt")]


@pytest.mark.parametrize("moment", ["2026-01-01T00:00:00+16:00", "2026-01-01T00:00:00-16:00",
                                    "2026-01-01T00:00:00+23:59"])
@pytest.mark.parametrize("url,param", TIME_FILTERS)
def test_a_time_filter_with_an_offset_postgresql_lacks_is_answered(clients, jobs, url, param, moment):
    """Python parses offsets up to ±23:59, PostgreSQL stores ±15:59: the filter compares in UTC."""
    response = clients["staff"].get(reverse(url), {param: moment})
    assert response.status_code == 200, response.content


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
                                    "2026-01-01T00:00:00+99:00"])
@pytest.mark.parametrize("url,param", TIME_FILTERS)
def test_a_time_filter_without_a_utc_equivalent_is_a_400(clients, jobs, url, param, moment):
    response = clients["staff"].get(reverse(url), {param: moment})
    assert response.status_code == 400, response.content
    assert param in response.json()


def test_a_far_offset_means_the_same_instant_in_utc(clients, jobs):
    """+16:00 on 2 January is 08:00 on 1 January in UTC: jobs submitted now are after it, none before."""
    url = reverse("api:job-list")
    after = clients["lead"].get(url, {"submitted_after": "2000-01-02T00:00:00+16:00"}).json()
    before = clients["lead"].get(url, {"submitted_before": "2000-01-02T00:00:00+16:00"}).json()
    assert (after["count"], before["count"]) == (3, 0)


def test_a_nul_byte_in_the_priority_form_is_refused_with_a_message(clients, jobs):
    job = jobs["bob_wait"]
    response = clients["lead"].post(reverse("ui:job_priority", args=[job.pk]), {"priority_class": "train\x00ing"},
                                    follow=True)
    assert response.status_code == 200
    assert "Null characters are not allowed" in response.content.decode()
    job.refresh_from_db()
    assert job.priority_class.name == "training"


@pytest.mark.parametrize("url", ["api:job-list", "api:sizing"])
def test_json_nested_2000_deep_is_a_400(clients, jobs, url):
    body = "[" * 2000 + "]" * 2000
    response = clients["lead"].post(reverse(url), body, content_type="application/json")
    assert response.status_code in (400, 405), response.content
    if url == "api:job-list":
        assert response.status_code == 400 and "deep" in response.json()["detail"]
