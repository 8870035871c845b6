"""One bad node report must cost that node's reading only: the other nodes' heartbeats are
recorded, and a value that is no measurement (NaN, infinity, out of range) is stored as not measured,
never as a sample that turns a team's chart into NaN (issue 15, item 4)."""

import json
import math
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.node_agent.auth import StaticToken
from agents.node_agent.collector import collect
from agents.node_agent.server import make_server
from agents.services import agents_poll
from agents.telemetry import AgentHttpTelemetry, reading_from_report
from scheduling.models import Gpu, GpuSample, Node, Placement
from tests.agents.fake_nvml import FakeNvml, load_snapshot
from tests.workers.conftest import job_add
from ui.selectors import team_utilisation_series

pytestmark = pytest.mark.django_db
TOKEN = "agent-token-for-tests"


def good_report() -> dict:
    return collect(FakeNvml(load_snapshot("nvml_a100_pcie_4gpu.json")), "node").to_dict()


@pytest.fixture
def agents(cluster):
    """Serve `reports[name]` (a callable) as the agent of each node; returns the dict to fill."""
    reports, servers = {}, []
    for node in Node.objects.all():
        server = make_server(("127.0.0.1", 0), StaticToken(TOKEN), lambda name=node.name: reports[name]())
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        Node.objects.filter(pk=node.pk).update(agent_url=f"http://127.0.0.1:{server.server_address[1]}")
    yield reports
    for server in servers:
        server.shutdown()
        server.server_close()


def _broken_reports():
    no_index = good_report()
    del no_index["gpus"][0]["index"]
    wrong_types = good_report()
    wrong_types["gpus"][1]["utilisation_pct"] = "high"
    return {"a list, not an object": lambda: [1, 2, 3], "gpus not a list": lambda: {"gpus": 7},
            "a GPU without an index": lambda: no_index, "a utilisation that is text": lambda: wrong_types,
            "a GPU that is a number": lambda: {"gpus": [3]}, "an index that is no integer": lambda: {"gpus": [
                {"index": "zero", "utilisation_pct": 10, "memory_used_mib": 100}]}}


@pytest.mark.parametrize("broken", sorted(_broken_reports()))
def test_one_malformed_report_leaves_the_other_nodes_heartbeats(cluster, agents, broken):
    agents["r-01"] = _broken_reports()[broken]
    agents["s-01"] = good_report
    now = timezone.now()
    result = agents_poll(backend=cluster, telemetry=AgentHttpTelemetry(lambda: TOKEN), now=now)
    assert result["answered"] == ["s-01"]
    assert Node.objects.get(name="s-01").last_heartbeat == now
    assert GpuSample.objects.filter(gpu__node__name="s-01").count() == 4


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 250, -5])
def test_a_utilisation_that_is_no_measurement_is_stored_as_not_measured(cluster, agents, value):
    report = good_report()
    for gpu in report["gpus"]:
        gpu["utilisation_pct"] = value
    report["gpus"][0]["memory_used_mib"] = value
    agents["r-01"] = lambda: report
    agents["s-01"] = good_report
    job = job_add("busy", gpus=1)
    now = timezone.now()
    Placement.objects.create(job=job, gpu=Gpu.objects.get(node__name="r-01", index=0),
                             started_at=now - timedelta(minutes=5))
    result = agents_poll(backend=cluster, telemetry=AgentHttpTelemetry(lambda: TOKEN), now=now)
    assert sorted(result["answered"]) == ["r-01", "s-01"]  # the node answered: a heartbeat all the same
    assert not GpuSample.objects.filter(gpu__node__name="r-01").exists()
    for gpu in Gpu.objects.filter(node__name="r-01"):
        assert math.isfinite(gpu.utilization) and math.isfinite(gpu.memory_used_gb)
    series = team_utilisation_series(job.team)
    assert all(y is None or math.isfinite(y) for y in series["y"])  # None: an hour without samples
    json.dumps(series, allow_nan=False)


def test_reading_from_report_drops_values_that_are_no_measurement():
    report = good_report()
    report["gpus"][0]["utilisation_pct"] = math.nan
    report["gpus"][1]["utilisation_pct"] = 101
    report["gpus"][2]["memory_used_mib"] = -1
    reading = reading_from_report("node", report, at=0.0)
    assert [g.utilisation for g in reading.gpus][:2] == [None, None]
    assert reading.gpus[2].memory_used_gb is None
    assert reading.gpus[3].utilisation is not None


def test_a_worker_clock_a_minute_fast_neither_writes_nor_judges_heartbeats(cluster, monkeypatch):
    """Heartbeats are the database's time: a fast worker records the true time, and a poll it runs
    when no agent answers (one missed poll) marks no node lost (issue 15, item 7)."""
    class Silent:  # a poll in which neither the cluster API nor an agent answered
        def inventory(self):
            return []

        def read(self, nodes):
            return {}

    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        truth = cursor.fetchone()[0]
    Node.objects.update(last_heartbeat=truth)
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=60))
    result = agents_poll(backend=Silent(), telemetry=Silent())
    assert result["lost"] == []
    assert set(Node.objects.values_list("state", flat=True)) == {"ready"}
    agents_poll(backend=cluster, telemetry=cluster)
    for heartbeat in Node.objects.values_list("last_heartbeat", flat=True):
        assert abs((heartbeat - truth).total_seconds()) < 30
