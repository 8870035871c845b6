"""One structured log line per scheduling cycle and per action outcome, JSON in production."""

import json
import logging

import pytest
from django.conf import settings
from django.utils.module_loading import import_string

from agents import actions, services
from scheduling.models import ActionRequest
from tests.observability.conftest import job_add

pytestmark = pytest.mark.django_db


def json_formatter() -> logging.Formatter:
    config = dict(settings.LOGGING["formatters"]["json"])
    return import_string(config.pop("()"))(**config)


def test_a_cycle_logs_one_line_with_its_summary(cluster, caplog):
    job_add("first", gpus=2)
    job_add("too-big", gpus=64)
    with caplog.at_level(logging.INFO, logger="tessera.cycle"):
        assert services.cycle_run()["ran"]
    [record] = [r for r in caplog.records if r.name == "tessera.cycle"]
    assert record.event == "cycle" and record.policy == "tessera"
    assert (record.binds, record.preemptions, record.repartitions, record.pending) == (1, 0, 0, 1)
    assert sum(record.pending_by_reason.values()) == 1 and record.duration_s > 0
    assert "1 bound" in record.getMessage() and "1 waiting" in record.getMessage()


def test_in_production_each_line_is_one_json_object_with_the_fields(cluster, caplog):
    job_add("first", gpus=2)
    with caplog.at_level(logging.INFO, logger="tessera.cycle"):
        services.cycle_run()
    [record] = [r for r in caplog.records if r.name == "tessera.cycle"]
    line = json_formatter().format(record)
    assert "\n" not in line
    fields = json.loads(line)
    assert fields["level"] == "INFO" and fields["logger"] == "tessera.cycle" and fields["time"]
    assert fields["event"] == "cycle" and fields["binds"] == 1 and "pending_by_reason" in fields
    assert fields["message"].startswith("cycle tessera: 1 bound")


def test_the_demo_reads_text_and_production_json():
    assert settings.LOG_FORMAT == "json"  # DEBUG off in the suite
    assert settings.LOGGING["handlers"]["console"]["formatter"] == settings.LOG_FORMAT
    assert not settings.CELERY_WORKER_HIJACK_ROOT_LOGGER


def test_an_action_outcome_is_logged_once(cluster, caplog):
    job_add("first", gpus=2)
    services.cycle_run()
    bind = ActionRequest.objects.get(kind="bind")
    with caplog.at_level(logging.INFO, logger="tessera.action"):
        assert actions.action_advance(action_id=bind.pk, backend=cluster) == "confirmed"
        assert actions.action_advance(action_id=bind.pk, backend=cluster) == "confirmed"
    records = [r for r in caplog.records if r.name == "tessera.action"]
    assert len(records) == 1
    assert (records[0].event, records[0].kind, records[0].outcome, records[0].job_id) == \
        ("action", "bind", "confirmed", bind.job_id)
