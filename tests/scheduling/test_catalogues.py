"""Strings that cross boundaries have one catalogue: waiting-reason codes (an enum with a meaning
each, a choice in the OpenAPI schema) and typed ActionRequest payloads (integer job ids)."""

from importlib import import_module
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from scheduling.engine.reasons import PreemptReason, WaitingReason
from scheduling.models import ActionRequest
from scheduling.payloads import (
    AllocationRequest,
    BindPayload,
    CheckpointPayload,
    PayloadError,
    PreemptPayload,
    RepartitionPayload,
)
from ui.demo import demo_load

PAYLOADS = [
    BindPayload(job_id=7, member=1, node="n1", pod_name="t-7-1-1", placements=(3, 4),
                allocations=(AllocationRequest(gpu_index=0, milli=1000, mig_profile=None, mig_start=None),
                             AllocationRequest(gpu_index=1, milli=143, mig_profile="1g.10gb", mig_start=6))),
    PreemptPayload(job_id=7, for_job_id=9, reason=PreemptReason.RECLAIM, notice_deadline=None),
    PreemptPayload(job_id=7, for_job_id=None, reason=PreemptReason.SPOT_RECLAIM, notice_deadline=1.8e9),
    CheckpointPayload(job_id=7),
    RepartitionPayload(node="n1", gpu_index=2, mig_enabled=True, layout=(("3g.40gb", 0), ("1g.10gb", 6))),
]


@pytest.mark.parametrize("catalogue", [WaitingReason, PreemptReason])
def test_every_code_has_a_one_line_meaning(catalogue):
    for member in catalogue:
        assert member.meaning.endswith(".") and "\n" not in member.meaning and len(member.meaning) < 100


def test_the_engine_writes_only_catalogued_codes():
    modules = ("explain", "actions.common", "actions.evict", "actions.allocate")
    source = "".join(Path(import_module(f"scheduling.engine.{name}").__file__).read_text() for name in modules)
    assert 'return ("' not in source and 'reasons[job.id] = ("' not in source


@pytest.mark.django_db
def test_the_openapi_schema_lists_the_waiting_reasons_as_a_choice(tmp_path):
    call_command("spectacular", "--file", str(tmp_path / "schema.yaml"))
    schemas = yaml.safe_load((tmp_path / "schema.yaml").read_text())["components"]["schemas"]
    assert schemas["WaitingReasonEnum"]["enum"] == [r.value for r in WaitingReason]
    assert all(r.meaning in schemas["WaitingReasonEnum"]["description"] for r in WaitingReason)
    for name, field in (("Job", "pending_reason_code"), ("QueueEntry", "reason_code")):
        refs = [ref["$ref"] for ref in schemas[name]["properties"][field]["oneOf"]]
        assert "#/components/schemas/WaitingReasonEnum" in refs


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_payloads_round_trip_through_json_and_ignore_worker_progress(payload):
    stored = payload.as_payload()
    assert type(payload).from_payload({**stored, "phase": "stopping", "deadline": 5.0}) == payload


@pytest.mark.parametrize("bad", [{"job_id": "7"}, {"job_id": 7.5}, {"job_id": True}, {}])
def test_a_payload_of_the_wrong_shape_is_refused(bad):
    with pytest.raises(PayloadError, match="job_id"):
        CheckpointPayload.from_payload(bad)


@pytest.mark.django_db
def test_a_live_cycle_writes_integer_job_ids_in_every_request():
    from scheduling.cycle import decide_and_apply
    demo_load()
    decide_and_apply(policy="tessera")
    kinds = {BindPayload: "bind", PreemptPayload: "preempt", RepartitionPayload: "repartition"}
    seen = 0
    for cls, kind in kinds.items():
        for action in ActionRequest.objects.filter(kind=kind):
            request = cls.from_payload(action.payload)
            assert not hasattr(request, "job_id") or request.job_id == action.job_id
            seen += 1
    assert seen


@pytest.mark.django_db
def test_priority_classes_are_seeded_from_the_engines_one_table():
    from scheduling.engine.types import PRIORITY_CLASSES
    from scheduling.models import PriorityClass
    assert dict(PriorityClass.objects.values_list("name", "value")) == PRIORITY_CLASSES
