"""The number of SQL queries per page and list endpoint does not grow with the number of jobs."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.ui.conftest import make_job, run_on

pytestmark = pytest.mark.django_db

URLS = [
    "/teams/alpha/",
    "/teams/alpha/priorities/",
    "/cluster/",
    "/api/v1/jobs/",
    "/api/v1/jobs/?status=pending&team=alpha",
    "/api/v1/teams/",
    "/api/v1/teams/alpha/queue/",
    "/api/v1/cluster/",
]


def _add_jobs(users, teams, cluster, count, offset):
    """Every fifth job runs on a small share of one GPU, so placements grow with the jobs too."""
    shared = cluster["h100"].gpus.get(index=2)
    for i in range(count):
        job = make_job(teams["alpha"], users["member"], f"load-{offset + i}", queue_order=offset + i,
                       pending_reason="Waiting for 1 GPU.")
        if i % 5 == 0:
            run_on(job, shared, share_milli=40)


def _queries(client, url) -> int:
    cache.clear()  # the dashboard caches its charts for a minute; count the uncached page
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


@pytest.mark.parametrize("url", URLS)
def test_queries_stay_constant_from_10_to_100_jobs(clients, users, teams, cluster, jobs, url):
    _add_jobs(users, teams, cluster, 10, 0)
    few = _queries(clients["lead"], url)
    _add_jobs(users, teams, cluster, 90, 10)
    assert _queries(clients["lead"], url) == few, url


def test_the_staff_cluster_page_is_constant_too(clients, users, teams, cluster, jobs):
    few = _queries(clients["staff"], "/cluster/")
    _add_jobs(users, teams, cluster, 50, 0)
    assert _queries(clients["staff"], "/cluster/") == few
