"""The fault campaign reads its invariants only once the database has caught up with the cluster:
a job whose pod has ended but which reconcile has not yet recorded reads as billed up to now, while
the ledger closes it back at the pod's end (a worker pause showed it: 4 violations, none real)."""

import json
import time

import pytest
from django.conf import settings

from agents.actions import action_advance
from agents.services import reconcile
from bench.faults.invariants import billed_without_pod, unreconciled_pods
from scheduling.cycle import decide_and_apply
from scheduling.models import ActionRequest
from tests.workers.conftest import job_add

pytestmark = pytest.mark.django_db


def test_a_finished_pod_not_yet_reconciled_is_unsettled_and_then_billed_to_its_end(cluster):
    job = job_add("short", gpus=4, runtime_s=1, model="A100-80GB")
    decide_and_apply(policy=settings.TESSERA_POLICY)
    [bind] = ActionRequest.objects.filter(kind="bind", job=job)
    assert action_advance(action_id=bind.pk, backend=cluster) == "confirmed"
    time.sleep(1.5 + 2.5)  # the pod has ended; nobody has reconciled for a while
    cluster.poll_observations()  # the cluster brings itself up to now
    state = json.loads(cluster.path.read_text())
    assert unreconciled_pods(state) == [f"vision/{bind.payload['pod_name']}"]
    assert billed_without_pod(cluster)[0] > 2  # read now, the open ledger runs past the pod
    reconcile(backend=cluster)
    job.refresh_from_db()
    assert job.status == "completed"
    assert unreconciled_pods(json.loads(cluster.path.read_text())) == []
    assert billed_without_pod(cluster) == (0.0, [])  # closed back at the pod's end

