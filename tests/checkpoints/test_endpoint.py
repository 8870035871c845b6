"""POST /api/v1/checkpoints/: a pod confirms its own job's checkpoints with its token, nothing more."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from checkpoints.models import CheckpointConfirmation
from scheduling.models import JobEvent
from scheduling.services import job_release

URL = "/api/v1/checkpoints/"


def post(token, body, content_type="application/json"):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
    data = json.dumps(body) if content_type == "application/json" and not isinstance(body, str) else body
    return Client().post(URL, data, content_type=content_type, **headers)


def saved(run, **overrides):
    body = {"checkpoint_id": f"interval-{run.interval.pk}", "step": 1200, "progress_s": 3600.5,
            "saved_at": (timezone.now() - timedelta(seconds=5)).isoformat(), "path": "/ckpt/step-1200.pt"}
    return {**body, **overrides}


def test_a_confirmation_is_recorded_once_and_repeats_are_idempotent(mine):
    body = saved(mine)
    first = post(mine.token, body)
    assert first.status_code == 201, first.content
    assert first.json() | {"recorded_at": None} == {
        "job_id": mine.job.pk, "checkpoint_id": body["checkpoint_id"], "pod_name": mine.pod, "step": 1200,
        "progress_s": 3600.5, "saved_at": first.json()["saved_at"], "path": "/ckpt/step-1200.pt", "recorded_at": None}
    again = post(mine.token, body)
    assert again.status_code == 200 and again.json() == first.json()
    mine.job.refresh_from_db()
    assert mine.job.progress_s == 3600.5
    assert mine.job.last_checkpoint_at == datetime.fromisoformat(body["saved_at"])
    assert JobEvent.objects.filter(job=mine.job, kind="checkpointed").count() == 1


def test_the_same_request_confirmed_otherwise_is_a_conflict(mine):
    assert post(mine.token, saved(mine)).status_code == 201
    answer = post(mine.token, saved(mine, step=1300))
    assert answer.status_code == 409
    assert "already confirmed at step 1200" in answer.json()["detail"]


def test_periodic_checkpoints_are_one_record_per_step_and_progress_never_goes_back(mine):
    now = timezone.now()
    late = saved(mine, checkpoint_id="periodic", step=200, progress_s=200.0, saved_at=now.isoformat())
    early = saved(mine, checkpoint_id="periodic", step=100, progress_s=100.0,
                  saved_at=(now - timedelta(minutes=1)).isoformat())
    assert post(mine.token, late).status_code == 201
    assert post(mine.token, early).status_code == 201  # recorded, but older than what is kept
    assert CheckpointConfirmation.objects.filter(job=mine.job).count() == 2
    mine.job.refresh_from_db()
    assert mine.job.progress_s == 200.0


def test_a_token_confirms_its_own_job_and_no_other(mine, theirs):
    # Their request id, sent with my token, is a request my job never had.
    answer = post(mine.token, saved(theirs))
    assert answer.status_code == 400 and "never asked" in answer.json()["checkpoint_id"][0]
    assert post(theirs.token, saved(theirs)).status_code == 201
    assert not CheckpointConfirmation.objects.filter(job=mine.job).exists()
    mine.job.refresh_from_db()
    assert mine.job.progress_s == 0


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer a b", "Token abc", "Bearer not-a-token"])
def test_no_valid_token_is_a_401_that_says_how(mine, header):
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    answer = Client().post(URL, json.dumps(saved(mine)), content_type="application/json", **extra)
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"].startswith("Bearer")
    assert answer.json()["detail"]


def test_a_token_dies_with_its_run(mine):
    job_release(job_id=mine.job.pk, at=timezone.now(), reason="preempted")
    answer = post(mine.token, saved(mine))
    assert answer.status_code == 401 and "revoked" in answer.json()["detail"]
    assert mine.job.checkpoint_tokens.get().revoked_at is not None


@pytest.mark.parametrize("change, field", [
    ({"step": -1}, "step"),
    ({"step": "12"}, "step"),
    ({"step": 1.5}, "step"),
    ({"step": True}, "step"),
    ({"step": 2**63}, "step"),
    ({"progress_s": -0.1}, "progress_s"),
    ({"progress_s": "10"}, "progress_s"),
    ({"progress_s": 1e300}, "progress_s"),
    ({"saved_at": "2026-01-31T12:00:00"}, "saved_at"),  # no zone
    ({"saved_at": "yesterday"}, "saved_at"),
    ({"saved_at": 1700000000}, "saved_at"),
    ({"checkpoint_id": ""}, "checkpoint_id"),
    ({"checkpoint_id": "x" * 101}, "checkpoint_id"),
    ({"checkpoint_id": "interval-1 OR 1=1"}, "checkpoint_id"),
    ({"checkpoint_id": "preempt-999999"}, "checkpoint_id"),
    ({"path": "p" * 1001}, "path"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_input_is_a_400_naming_the_field(mine, change, field):
    answer = post(mine.token, saved(mine, **change))
    assert answer.status_code == 400, answer.content
    assert field in answer.json() and answer.json()[field][0]


def test_a_save_in_the_future_is_refused(mine):
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    answer = post(mine.token, saved(mine, saved_at=future))
    assert answer.status_code == 400 and "in the future" in answer.json()["saved_at"][0]


@pytest.mark.parametrize("body", [["a list"], "not json", 12])
def test_a_body_that_is_no_json_object_is_a_400(mine, body):
    data = body if isinstance(body, str) else json.dumps(body)
    answer = Client().post(URL, data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {mine.token}")
    assert answer.status_code == 400


def test_other_content_types_and_methods_are_refused(mine):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {mine.token}"}
    assert Client().post(URL, "step=1", content_type="application/x-www-form-urlencoded", **auth).status_code == 415
    assert Client().get(URL, **auth).status_code == 405


def test_a_signed_in_user_is_no_pod(mine, django_user_model):
    user = django_user_model.objects.create_user("eve", password="pw-12345678")
    client = Client()
    client.force_login(user)
    assert client.post(URL, json.dumps(saved(mine)), content_type="application/json").status_code == 401


def test_the_endpoint_is_in_the_openapi_schema(mine, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("reader", password="pw-12345678"))
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"][URL]["post"]
    assert operation["security"] == [{"checkpointToken": []}]
    assert schema["components"]["securitySchemes"]["checkpointToken"]["scheme"] == "bearer"
    assert {"201", "200", "400", "401", "409"} <= set(operation["responses"])
    body = schema["components"]["schemas"]["Confirm"]
    assert set(body["required"]) == {"checkpoint_id", "step", "progress_s", "saved_at"}


def test_simulated_workloads_confirm_through_the_same_service(mine, tmp_path):
    from agents.actions.checkpoint import confirm_simulated
    from agents.backends import BindRequest, CheckpointRequest
    from agents.backends.simulated import ENV_GPU_INDEXES, SimNode, SimulatedBackend

    clock = [timezone.now().timestamp()]
    sim = SimulatedBackend(tmp_path / "cluster.json", clock=lambda: clock[0], confirm=confirm_simulated)
    sim.ensure_node(SimNode("n-1", "H100-80GB", 4, 81920))
    namespace = mine.job.team.name
    sim.bind(BindRequest(job_id=str(mine.job.pk), pod_name=mine.pod, namespace=namespace, project="p",
                         job_kind="training", image="i", command=(), node_name="n-1", gpu_count=1,
                         env=((ENV_GPU_INDEXES, "0"),)))
    request_id = f"interval-{mine.interval.pk}"
    sim.request_checkpoint(CheckpointRequest(str(mine.job.pk), mine.pod, namespace, checkpoint_id=request_id))
    sim.poll_observations()
    assert not CheckpointConfirmation.objects.exists()  # still saving
    clock[0] += 5
    for _ in range(2):  # inside this test's transaction nothing is durable: sent again, recorded once
        sim.poll_observations()
    record = CheckpointConfirmation.objects.get(job=mine.job)
    assert (record.checkpoint_id, record.pod_name) == (request_id, mine.pod)
    mine.job.refresh_from_db()
    assert mine.job.progress_s == record.progress_s


def test_a_saved_at_offset_postgresql_lacks_is_stored_in_utc(mine):
    """Python parses offsets up to ±23:59, PostgreSQL stores ±15:59 (issue 15, item 6)."""
    moment = (timezone.now() - timedelta(seconds=5)).astimezone(timezone.get_fixed_timezone(16 * 60))
    answer = post(mine.token, saved(mine, saved_at=moment.isoformat()))
    assert answer.status_code == 201, answer.content
    assert datetime.fromisoformat(answer.json()["saved_at"]) == moment
    assert post(mine.token, saved(mine, checkpoint_id="periodic", saved_at="0001-01-01T00:00:00+01:00")
                ).status_code == 400
