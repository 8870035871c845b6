"""The portal says when a share can run nowhere (no MIG slice holds it and no node offers sharing it may
use), in the API and on the form, and the cluster page shows how each node shares its GPUs."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from billing.ledger import grouped
from billing.models import UsageInterval
from billing.periods import Month
from scheduling.clock import database_now
from scheduling.cycle import decide_and_apply
from scheduling.models import Gpu, Job, Node, Placement
from ui.selectors import job_gpu_hours

pytestmark = pytest.mark.django_db

SHARE = {
    "team": "alpha",
    "name": "nb",
    "kind": "interactive",
    "priority_class": "training",
    "gpus": 0,
    "gpu_memory_gb": 8,
    "gpu_models": ["A100-40GB"],
}


@pytest.fixture
def no_mig(cluster):
    """The A100-40GB node cannot be partitioned: a share pinned to it needs the node to share."""
    Gpu.objects.filter(node__name="a100-t1").update(mig_capable=False)


def sharing(mode: str, replicas: int) -> None:
    Node.objects.filter(name="a100-t1").update(gpu_sharing=mode, gpu_replicas=replicas)


def submit_api(client, **change):
    return client.post(reverse("api:job-list"), {**SHARE, **change}, content_type="application/json")


def test_a_share_no_node_can_take_is_refused_in_plain_words(clients, jobs, no_mig):
    response = submit_api(clients["lead"])
    assert response.status_code == 400
    assert "no node offers GPU sharing it can use" in response.json()["gpu_memory_gb"][0]
    assert not Job.objects.filter(name="nb").exists()


def test_the_form_says_it_next_to_the_memory_field(clients, jobs, no_mig):
    data = {**SHARE, "cpu_cores": 4, "memory_gb": 8, "gang": "on"}
    response = clients["lead"].post(reverse("ui:job_new"), data)
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="gpu_memory_gb-errors"' in page and "no node offers GPU sharing it can use" in page


@pytest.mark.parametrize(
    "mode, replicas, change, accepted",
    [
        ("mps", 4, {}, True),  # 40 GB / 4 = 10 GB per replica holds 8 GB
        ("mps", 8, {}, False),  # 5 GB per replica does not
        ("time-slicing", 4, {}, False),  # no memory isolation, not accepted
        ("time-slicing", 4, {"accepts_no_isolation": True}, True),
    ],
)
def test_a_sharing_node_takes_the_shares_its_mode_allows(clients, jobs, no_mig, mode, replicas, change, accepted):
    sharing(mode, replicas)
    response = submit_api(clients["lead"], **change)
    assert (response.status_code == 201) is accepted, response.content
    if accepted:
        assert response.json()["accepts_no_isolation"] is bool(change)


def test_production_is_not_refused_it_takes_a_whole_gpu_instead(clients, jobs, no_mig):
    assert submit_api(clients["lead"], priority_class="production", kind="inference").status_code == 201


def test_the_cluster_page_shows_each_nodes_sharing_mode(clients, jobs):
    sharing("mps", 4)
    page = clients["staff"].get(reverse("ui:cluster")).content.decode()
    assert "MPS × 4 (memory-limited)" in page and "none (whole GPUs)" in page


def test_the_admin_shows_the_clusters_word_on_sharing_read_only(clients, jobs):
    sharing("mps", 4)
    node = Node.objects.get(name="a100-t1")
    page = clients["staff"].get(reverse("admin:scheduling_node_change", args=[node.pk])).content.decode()
    assert "MPS (memory-limited replicas)" in page and 'name="gpu_sharing"' not in page


def test_an_mps_share_is_billed_its_replica_everywhere(clients, jobs, no_mig):
    """An 8 GB share on a 40 GB GPU whose MPS daemon runs 4 replicas holds a quarter of it (a
    quarter of the compute, 10 GB pinned, one of 4 clients): the ledger bills 0.25 GPU, not the
    0.2 its memory would say, and the portal's GPU-hours count the same (the simulator's meter:
    tests/simulator_run/test_metrics.py)."""
    sharing("mps", 4)
    job = Job.objects.get(pk=submit_api(clients["lead"]).json()["id"])
    start = database_now()
    assert job.pk in decide_and_apply(policy="tessera", now=start).applied.bound_jobs
    placement = Placement.objects.get(job=job)
    assert (placement.share_milli, placement.memory_gb) == (250, 8.0)
    assert UsageInterval.objects.get(job=job).gpu_fraction == Decimal("0.25")

    two_hours = start + timedelta(hours=2)
    rows = grouped(Month.of(start.date()), ["job_id"], now=two_hours, check=False).filter(job_id=job.pk)
    assert float(rows.get()["gpu_seconds"]) == pytest.approx(0.25 * 7200)
    placement.ended_at = two_hours
    assert job_gpu_hours(job, [placement]) == 0.5
