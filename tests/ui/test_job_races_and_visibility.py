"""Two writes to one job or one queue at once: exactly one wins, the other is told so (issue 15, item 7)."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse

from scheduling import services
from scheduling.models import Job


@pytest.mark.django_db
def test_a_priority_change_after_a_cancel_is_a_409_and_changes_nothing(clients, users, jobs):
    seen = Job.objects.get(pk=jobs["alice_wait"].pk)  # what the priority change read before the cancel
    services.job_cancel(user=users["lead"], job=jobs["alice_wait"])
    with pytest.raises(ValidationError):  # a StateConflict: the API answers 409
        services.job_reprioritise(user=users["lead"], job=seen, priority_class="production")
    seen.refresh_from_db()
    assert seen.status == "cancelled" and seen.priority_class.name == "training"
    response = clients["lead"].post(reverse("api:job-reprioritise", args=[seen.pk]),
                                    {"priority_class": "production"}, content_type="application/json")
    assert response.status_code == 409 and "cancelled" in response.content.decode()


@pytest.fixture
def seeded(transactional_db):
    """The rows the data migrations seed, which a transactional test's flush removes. (Not
    serialized_rollback: after another transactional test's flush re-created the content types,
    restoring them failed on their unique key.)"""
    from django.contrib.auth.models import Group

    from portal.models import FINANCE_GROUP
    from scheduling.defaults import defaults_ensure
    from scheduling.models import CapacityTier, PriorityClass

    defaults_ensure(CapacityTier, PriorityClass)
    Group.objects.get_or_create(name=FINANCE_GROUP)


@pytest.mark.django_db(transaction=True)
def test_simultaneous_submits_get_distinct_queue_positions(seeded, users, teams, monkeypatch):
    """The window between reading the last position and writing the new one is widened, so the two
    submits surely overlap in it."""
    real_project, barrier = services._project, threading.Barrier(2)

    def slow_project(team, name):
        threading.Event().wait(0.3)
        return real_project(team, name)

    monkeypatch.setattr(services, "_project", slow_project)
    errors = []

    def submit(n):
        try:
            barrier.wait()
            services.job_submit(user=users["lead"], team=teams["alpha"], name=f"race-{n}", kind="training",
                                priority_class="training", gpus=1)
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    orders = list(Job.objects.filter(name__startswith="race-").values_list("queue_order", flat=True))
    assert len(orders) == 2 and len(set(orders)) == 2, orders


@pytest.mark.django_db
def test_an_account_in_no_team_does_not_see_the_cluster(users, jobs, client):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_user("nobody", password="nobody-test-pass"))
    assert client.get(reverse("ui:cluster")).status_code == 403
    assert client.get(reverse("api:cluster")).status_code == 403
