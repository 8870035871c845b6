"""Job page logs and GPU charts (issue 16, item 6): the pod's last lines from the cluster, errors as
words, per-job utilisation and memory from the node agents' samples, nothing of another team's."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agents import embedded, runtime
from agents.backends.base import Refused, TransientBackendError
from agents.backends.simulated import SimNode
from scheduling.models import GpuSample, Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def sim(settings, tmp_path):
    """The demo's simulated cluster, holding the pods of the fixture's running jobs."""
    settings.TESSERA_BACKEND = "simulated"
    settings.TESSERA_SIMULATED_STATE = str(tmp_path / "cluster.json")
    backend = runtime.simulated_backend(settings.TESSERA_SIMULATED_STATE)
    backend.ensure_node(SimNode(name="h100-t1", gpu_model="H100-80GB", gpu_count=8, gpu_memory_mib=81920))
    return backend


def _series(response) -> list[dict]:
    body = response.content.decode()
    start = body.index('<script id="gpu-series" type="application/json">') + len(
        '<script id="gpu-series" type="application/json">')
    return json.loads(body[start:body.index("</script>", start)])


def test_a_running_jobs_logs_are_the_pods_last_lines(clients, jobs, sim):
    Job.objects.filter(pk=jobs["alpha_run"].pk).update(expected_runtime_s=10 * 3600)
    jobs["alpha_run"].refresh_from_db()
    embedded.adopt(sim, jobs["alpha_run"])
    sim.advance(4 * 3600)  # 240 lines' worth of work since
    page = clients["member"].get(f"/jobs/{jobs['alpha_run'].pk}/")
    assert b'id="logs" data-url="/jobs/' in page.content
    logs = clients["member"].get(f"/jobs/{jobs['alpha_run'].pk}/logs/")
    assert logs.status_code == 200
    text = logs.content.decode()
    assert f"alpha-{jobs['alpha_run'].pk}-" in text and "loss" in text and '<pre class="log">' in text
    assert 190 <= text.count("\n20") <= 200  # the tail, not the whole run


@pytest.mark.parametrize(("error", "words"), [
    (TransientBackendError("Kubernetes API answered 503: Service Unavailable"), "did not answer"),
    (Refused('container "job" in pod "p" is waiting to start: ContainerCreating'), "waiting to start"),
    (RuntimeError("boom"), "logs failed; the operators have the details"),
])
def test_cluster_errors_are_shown_as_words(clients, jobs, sim, monkeypatch, error, words):
    embedded.adopt(sim, jobs["alpha_run"])

    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(type(sim), "pod_log", refuse)
    response = clients["member"].get(f"/jobs/{jobs['alpha_run'].pk}/logs/")
    assert response.status_code == 200 and words in response.content.decode()


def test_a_job_that_never_ran_or_whose_pod_is_gone_says_so(clients, jobs, sim):
    waiting = clients["member"].get(f"/jobs/{jobs['bob_wait'].pk}/logs/").content.decode()
    assert "has not started" in waiting
    embedded.adopt(sim, jobs["alpha_run"])
    sim.path.unlink()  # the cluster forgot the pod
    gone = clients["member"].get(f"/jobs/{jobs['alpha_run'].pk}/logs/").content.decode()
    assert "The pod is gone" in gone


def test_the_charts_show_the_gpus_the_job_held_while_it_held_them(clients, jobs, cluster):
    gpus = list(cluster["h100"].gpus.order_by("index"))
    now = timezone.now()
    GpuSample.objects.bulk_create(
        [GpuSample(gpu=gpus[0], at=now - timedelta(minutes=m), utilization=0.9, memory_used_gb=60)
         for m in range(1, 30)]
        + [GpuSample(gpu=gpus[0], at=now - timedelta(hours=5), utilization=0.1, memory_used_gb=5),  # before it ran
           GpuSample(gpu=gpus[1], at=now - timedelta(minutes=5), utilization=0.2, memory_used_gb=7)])  # bravo's GPU
    series = _series(clients["member"].get(f"/jobs/{jobs['alpha_run'].pk}/"))
    assert [line["name"] for line in series] == ["h100-t1/gpu0"]
    (line,) = series
    assert line["memory_gb"] == 80 and len(line["x"]) == 30  # per minute: 29 + the fixture's own sample
    assert 0.1 * 100 not in line["util"] and max(line["util"]) == 90.0 and 5 not in line["memory"]
    assert _series(clients["member"].get(f"/jobs/{jobs['bob_wait'].pk}/")) == []


def test_another_teams_logs_and_charts_are_not_found(clients, jobs, sim):
    embedded.adopt(sim, jobs["bravo_run"])
    for path in (f"/jobs/{jobs['bravo_run'].pk}/logs/", f"/jobs/{jobs['bravo_run'].pk}/"):
        assert clients["member"].get(path).status_code == 404
        assert clients["finance"].get(path).status_code == 404
    assert clients["anonymous"].get(f"/jobs/{jobs['bravo_run'].pk}/logs/").status_code == 302
    assert "starting bravo-" in clients["other_lead"].get(f"/jobs/{jobs['bravo_run'].pk}/logs/").content.decode()
