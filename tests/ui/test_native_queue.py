"""A native job (a pod someone else created, taken in by the intake) waits in its team's queue as a
portal job does: the cycle gives it a position, an estimate and a reason, and the dashboard, the
queue API and the job API show them, though nobody in the portal submitted it."""

import re
from dataclasses import replace

import pytest
from django.utils import timezone

from scheduling.cycle import decide_and_apply
from scheduling.native import native_job_create
from tests.scheduling.test_native_jobs import NEED as BATCH_JOB_POD
from tests.ui.conftest import make_job

pytestmark = pytest.mark.django_db

# As agents/native.py reads an 8-GPU pod of a batch/v1 Job: no node has 8 GPUs free (two run).
NEED = replace(BATCH_JOB_POD, uid="u-native", namespace="alpha", gpus=8)


def _dashboard_row(client, job) -> str:
    html = client.get("/teams/alpha/").content.decode()
    found = re.search(rf'<tr data-job="{job.pk}">(.*?)</tr>', html, re.S)
    assert found, "the job is not in the dashboard's queue"
    return found[1]


def test_a_waiting_native_job_has_position_eta_and_reason_like_a_portal_job(clients, users, teams, jobs):
    alpha = teams["alpha"]
    native = native_job_create(team=alpha, need=NEED, at=timezone.now())
    portal = make_job(alpha, users["lead"], "alpha-portal-eight", gpus=8, queue_order=native.queue_order + 1)
    decide_and_apply(policy="tessera")
    native.refresh_from_db()
    portal.refresh_from_db()

    for job in (native, portal):
        assert job.status == "pending" and job.submitted_by_id == (None if job is native else users["lead"].pk)
        assert job.queue_position_team and job.queue_position_overall
        assert job.estimated_start is not None
        assert job.pending_reason_code and job.pending_reason
        assert job.pending_reason_code != "new"  # the cycle's reason, not the intake's
    assert native.queue_position_team < portal.queue_position_team  # the lead's order, natives included

    lead = clients["lead"]
    rows = {r["id"]: r for r in lead.get("/api/v1/teams/alpha/queue/").json()["results"]}
    row = rows[native.pk]
    assert (row["position_team"], row["position_overall"]) == (
        native.queue_position_team,
        native.queue_position_overall,
    )
    assert row["estimated_start"] is not None
    assert (row["reason_code"], row["reason"]) == (native.pending_reason_code, native.pending_reason)
    assert set(row) == set(rows[portal.pk])  # the same fields as a portal job's row

    detail = lead.get(f"/api/v1/jobs/{native.pk}/").json()
    assert (detail["queue_position_team"], detail["pending_reason"]) == (
        native.queue_position_team,
        native.pending_reason,
    )
    assert detail["estimated_start"] is not None

    shown = _dashboard_row(lead, native)
    assert "Job train-llm" in shown and native.pending_reason_code in shown
    assert f'<td class="num">{native.queue_position_team}</td>' in shown
    assert "<time datetime=" in shown  # the estimate, as a portal job shows it
