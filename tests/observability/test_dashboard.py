"""The Grafana dashboard in deploy/grafana queries only metrics /metrics exports."""

import json
import re

import pytest

from agents import metrics
from tests.hygiene.repo import ROOT

DASHBOARD = json.loads((ROOT / "deploy" / "grafana" / "tessera-dashboard.json").read_text())
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
# What issue 11 asks the endpoint, and so the dashboard, to show.
REQUIRED = {"tessera_cycle_duration_seconds_bucket", "tessera_pending_jobs", "tessera_allocated_gpus",
            "tessera_used_gpus", "tessera_actions_total", "tessera_agent_poll_age_seconds"}


def queries() -> list[str]:
    found = [target["expr"] for panel in DASHBOARD["panels"] for target in panel.get("targets", [])]
    found += [variable["definition"] for variable in DASHBOARD["templating"]["list"] if "definition" in variable]
    return found


def exported() -> set[str]:
    """Every sample name /metrics can show, from the families the collector yields."""
    metrics.cycle_recorded({"duration_s": 0.1, "binds": 0, "preemptions": 0, "reclaims": 0, "repartitions": 0})
    families = metrics.TesseraCollector().collect()
    return {family.name + suffix for family in families for suffix in SUFFIXES[family.type]}


@pytest.mark.django_db
def test_every_metric_the_dashboard_queries_is_exported():
    named = {name for query in queries() for name in re.findall(r"\btessera_[a-z0-9_]+", query)}
    assert REQUIRED <= named
    assert sorted(named - exported()) == []


def test_every_panel_reads_the_chosen_data_source():
    panels = [panel for panel in DASHBOARD["panels"] if panel["type"] != "row"]
    assert panels and all(panel["datasource"]["uid"] == "${datasource}" and panel["targets"] for panel in panels)
    assert len({panel["title"] for panel in panels}) == len(panels)
