"""Every page and endpoint × every role: allowed where docs/design.md §7 says, 403/404 elsewhere, no leaks."""

import pytest
from django.urls import reverse

from tests.ui.conftest import BRAVO_SECRETS, ROLES

pytestmark = pytest.mark.django_db

SIGNED_OUT = {302, 401, 403}


def _expect(expected, role):
    """expected: {role: status}; roles not named get 404; anonymous is redirected or refused."""
    if role == "anonymous":
        return SIGNED_OUT
    return {expected.get(role, 404)}


ALL_SIGNED_IN = dict.fromkeys(["lead", "member", "viewer", "finance", "staff", "other_lead"], 200)
TEAM_READERS = {"lead": 200, "member": 200, "viewer": 200, "staff": 200}

GET_CASES = [
    # Signing in lands on the first team's dashboard; people in no team get the list of teams.
    ("home", lambda j: reverse("home"), {**dict.fromkeys(["lead", "member", "viewer", "other_lead"], 302),
                                         "finance": 200, "staff": 200}),
    ("teams", lambda j: reverse("ui:teams"), ALL_SIGNED_IN),
    ("dashboard", lambda j: reverse("ui:dashboard", args=["alpha"]), {**TEAM_READERS, "finance": 200}),
    ("priorities", lambda j: reverse("ui:priorities", args=["alpha"]),
     {"lead": 200, "staff": 200, "member": 403, "viewer": 403, "finance": 403}),
    ("job_new", lambda j: reverse("ui:job_new"),
     {"lead": 200, "member": 200, "staff": 200, "other_lead": 200, "viewer": 403, "finance": 403}),
    ("job_detail", lambda j: reverse("ui:job_detail", args=[j["bob_wait"].pk]), TEAM_READERS),
    ("cluster", lambda j: reverse("ui:cluster"), ALL_SIGNED_IN),
    ("api_jobs", lambda j: reverse("api:job-list"), ALL_SIGNED_IN),
    ("api_job", lambda j: reverse("api:job-detail", args=[j["bob_wait"].pk]), TEAM_READERS),
    ("api_teams", lambda j: reverse("api:team-list"), ALL_SIGNED_IN),
    ("api_team", lambda j: reverse("api:team-detail", args=["alpha"]), {**TEAM_READERS, "finance": 200}),
    ("api_queue", lambda j: reverse("api:team-queue", args=["alpha"]), {**TEAM_READERS, "finance": 403}),
    ("api_cluster", lambda j: reverse("api:cluster"), ALL_SIGNED_IN),
    ("api_sizing", lambda j: reverse("api:sizing") + "?params_billion=7", ALL_SIGNED_IN),
    ("api_schema", lambda j: reverse("schema"), ALL_SIGNED_IN),
    ("api_docs", lambda j: reverse("api-docs"), ALL_SIGNED_IN),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name,url,expected", GET_CASES, ids=[c[0] for c in GET_CASES])
def test_it_answers_each_role_as_designed(clients, jobs, role, name, url, expected):
    response = clients[role].get(url(jobs))
    assert response.status_code in _expect(expected, role), response.content[:300]
    if response.status_code == 200 and role != "other_lead" and role != "staff":
        body = response.content.decode()
        assert not any(secret in body for secret in BRAVO_SECRETS), f"{name} leaks team bravo's jobs to {role}"


@pytest.mark.parametrize("role", ROLES)
def test_it_never_counts_another_teams_jobs(clients, jobs, role):
    response = clients[role].get(reverse("api:job-list"))
    if role == "anonymous":
        assert response.status_code in SIGNED_OUT
        return
    expected = {"lead": 3, "member": 3, "viewer": 3, "finance": 0, "staff": 5, "other_lead": 2}[role]
    assert response.json()["count"] == expected


@pytest.mark.parametrize("role,names", [("lead", ["alpha"]), ("other_lead", ["bravo"]), ("viewer", ["alpha"]),
                                        ("finance", ["alpha", "bravo"]), ("staff", ["alpha", "bravo"])])
def test_it_lists_only_the_teams_a_role_may_see(clients, jobs, role, names):
    listed = [t["name"] for t in clients[role].get(reverse("api:team-list")).json()["results"]]
    assert listed == names


def test_the_team_usage_counts_only_the_team(clients, jobs):
    alpha = clients["lead"].get(reverse("api:team-detail", args=["alpha"])).json()
    assert alpha["in_use_gpus"] == 1.0 and alpha["borrowed_gpus"] == 0.0


def test_finance_sees_usage_but_no_job_on_the_dashboard(clients, jobs):
    body = clients["finance"].get(reverse("ui:dashboard", args=["alpha"])).content.decode()
    assert "alpha-bob-wait" not in body and "alpha-run" not in body and "Quota" in body


def test_the_cluster_page_names_jobs_only_to_their_team(clients, jobs):
    lead = clients["lead"].get(reverse("ui:cluster")).content.decode()
    assert "alpha-run" in lead and "bravo-secret-train" not in lead and "in use" in lead
    finance = clients["finance"].get(reverse("ui:cluster")).content.decode()
    assert "alpha-run" not in finance and "bravo" in finance
    staff = clients["staff"].get(reverse("api:cluster")).json()
    assert "bravo-secret-train" in str(staff)


CANCEL = {"lead": 302, "member": 302, "staff": 302, "viewer": 403}


@pytest.mark.parametrize("role", ROLES)
def test_it_lets_the_right_roles_cancel_a_members_job(clients, jobs, role):
    response = clients[role].post(reverse("ui:job_cancel", args=[jobs["bob_wait"].pk]))
    assert response.status_code in _expect(CANCEL, role)
    jobs["bob_wait"].refresh_from_db()
    assert (jobs["bob_wait"].status == "cancelled") == (response.status_code == 302 and role != "anonymous")


@pytest.mark.parametrize("role", ROLES)
def test_it_lets_the_right_roles_cancel_through_the_api(clients, jobs, role):
    response = clients[role].post(reverse("api:job-cancel", args=[jobs["bob_wait"].pk]))
    assert response.status_code in _expect({**CANCEL, "lead": 200, "member": 200, "staff": 200}, role)


def test_a_member_may_not_cancel_someone_elses_job(clients, jobs):
    assert clients["member"].post(reverse("api:job-cancel", args=[jobs["alice_wait"].pk])).status_code == 403


MANAGE = {"lead": 200, "staff": 200, "member": 403, "viewer": 403}


@pytest.mark.parametrize("role", ROLES)
def test_only_leads_reprioritise(clients, jobs, role):
    response = clients[role].post(reverse("api:job-reprioritise", args=[jobs["bob_wait"].pk]),
                                  {"priority_class": "interactive"}, content_type="application/json")
    assert response.status_code in _expect(MANAGE, role)


@pytest.mark.parametrize("role", ROLES)
def test_only_leads_reorder(clients, jobs, role):
    ids = [jobs["alice_wait"].pk, jobs["bob_wait"].pk]
    response = clients[role].post(reverse("api:team-reorder", args=["alpha"]), {"job_ids": ids},
                                  content_type="application/json")
    assert response.status_code in _expect({**MANAGE, "finance": 403}, role)


@pytest.mark.parametrize("role", ROLES)
def test_only_leads_move_jobs_on_the_priorities_page(clients, jobs, role):
    response = clients[role].post(reverse("ui:queue_move", args=["alpha"]),
                                  {"job": jobs["alice_wait"].pk, "direction": "up"})
    assert response.status_code in _expect({"lead": 302, "staff": 302, "member": 403, "viewer": 403,
                                            "finance": 403}, role)


@pytest.mark.parametrize("role", ROLES)
def test_it_lets_leads_and_members_submit_through_the_api(clients, jobs, role):
    response = clients[role].post(reverse("api:job-list"), {
        "team": "alpha", "name": "api-job", "kind": "inference", "priority_class": "training",
        "gpu_memory_gb": 8}, content_type="application/json")
    # A team the caller cannot see is a field error, not a hint that it exists.
    expected = {"lead": 201, "member": 201, "staff": 201, "viewer": 403, "finance": 403, "other_lead": 400}
    assert response.status_code in _expect(expected, role), response.content
