"""The rows of a native job (scheduling/native.py): which team a namespace is, which of Tessera's
priority classes a pod gets, the project, and the refusals the intake turns into Events, in the
portal's words. The real control plane tests (tests/kube/test_native_pods.py) run the whole path."""

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from portal.models import BusinessUnit, Membership, Project, Team, TeamNamespace
from scheduling.cycle import decide_and_apply
from scheduling.defaults import PRIORITIES
from scheduling.models import ActionRequest, CapacityTier, Gpu, Job, NativePod, NetworkSwitch, Node, PriorityClass
from scheduling.native import (
    NativeNeed,
    member_pod_name,
    namespace_team,
    native_job_create,
    native_priority_class,
    refusal_reason,
)
from scheduling.payloads import BindPayload
from scheduling.services import job_reprioritise
from scheduling.snapshot import to_engine_job

pytestmark = pytest.mark.django_db
AT = datetime(2026, 12, 4, 17, 0, tzinfo=UTC)
NEED = NativeNeed(
    uid="u-1",
    namespace="ml",
    pod_name="train-0",
    name="Job train-llm",
    image="pytorch:24",
    gpus=2,
    gpu_memory_gb=0.0,
    mig_profile=None,
    cpu_cores=4,
    memory_gb=32,
    priority_class="training",
    priority=200,
    project=None,
    owner=("batch/v1", "Job", "train-llm", "uid-o"),
)


@pytest.fixture
def team():
    for name, value, preemptible, lead_only, description in PRIORITIES:
        PriorityClass.objects.get_or_create(
            name=name,
            defaults={"value": value, "preemptible": preemptible, "lead_only": lead_only, "description": description},
        )
    unit = BusinessUnit.objects.create(name="Research")
    team = Team.objects.create(
        name="vision", business_unit=unit, guaranteed_gpus=Decimal(8), burst_limit_gpus=Decimal(8)
    )
    team.allowed_priority_classes.set(PriorityClass.objects.exclude(name="production"))
    Project.objects.create(team=team, name="detection")
    tier = CapacityTier.objects.get_or_create(name="on-demand")[0]
    leaf = NetworkSwitch.objects.create(name="leaf-1", kind="leaf")
    node = Node.objects.create(
        name="gpu-01",
        tier=tier,
        leaf_switch=leaf,
        gpu_model="H100-80GB",
        interconnect="nvswitch",
        cpu_cores=64,
        memory_gb=512,
    )
    for index in range(4):
        Gpu.objects.create(node=node, index=index, uuid=f"GPU-{index}", model="H100-80GB", memory_gb=80)
    return team


def test_a_namespace_is_its_mapped_team_else_the_team_of_its_name(team):
    assert namespace_team("vision") == team
    assert namespace_team("ml") is None
    TeamNamespace.objects.create(namespace="ml", team=team)
    assert namespace_team("ml") == team


def test_a_mapping_cannot_take_another_teams_own_namespace(team):
    other = Team.objects.create(name="nlp", business_unit=team.business_unit)
    with pytest.raises(ValidationError, match="vision is team vision's own namespace"):
        TeamNamespace(namespace="vision", team=other).full_clean()


def test_a_native_job_is_written_with_its_pod_once(team):
    job = native_job_create(team=team, need=NEED, at=AT)
    assert (job.name, job.namespace, job.native, job.pod_namespace, job.gpus, job.status) == (
        "Job train-llm",
        "ml",
        True,
        "ml",
        2,
        "pending",
    )
    assert (job.priority_class.name, job.project.name, job.kind, job.submitted_by) == (
        "training",
        "detection",
        "batch",
        None,
    )
    (row,) = job.native_pods.all()
    assert (row.uid, str(row), row.owner) == ("u-1", "ml/train-0", "Job train-llm")
    assert member_pod_name(job, 0) == "train-0"
    with pytest.raises(IntegrityError):  # the pod's uid is its identity: never a second job for it
        native_job_create(team=team, need=NEED, at=AT)


@pytest.mark.parametrize(
    ("name", "value", "chosen"),
    [
        ("training", 200, "training"),
        (None, 0, "best-effort"),  # names none: priority 0, the team's lowest
        (None, None, "best-effort"),
        ("cluster-high", 600, "interactive"),  # a class of the cluster's own, by its value
        ("cluster-low", 10, "best-effort"),
    ],
)
def test_the_pods_priority_class_maps_to_one_the_team_may_use(team, name, value, chosen):
    assert native_priority_class(team, name, value).name == chosen


def test_a_class_the_team_may_not_use_is_refused_by_name(team):
    with pytest.raises(ValidationError) as refused:
        native_job_create(team=team, need=replace(NEED, priority_class="production"), at=AT)
    reason, message = refusal_reason(refused.value)
    assert reason == "PriorityClassNotAllowed" and "may not use priority class production" in message
    assert not Job.objects.exists()


def test_a_project_named_by_the_annotation_must_exist(team):
    with pytest.raises(ValidationError) as refused:
        native_job_create(team=team, need=replace(NEED, project="nope"), at=AT)
    assert refusal_reason(refused.value) == (
        "ProjectNotFound",
        "No project nope in team vision; the annotation tessera.io/project names one of detection.",
    )


def test_a_pod_larger_than_any_node_is_refused(team):
    with pytest.raises(ValidationError) as refused:
        native_job_create(team=team, need=replace(NEED, gpus=5), at=AT)
    reason, message = refusal_reason(refused.value)
    assert reason == "InvalidGpuRequest" and "no node has more than 4" in message
    assert not NativePod.objects.exists()


def test_a_mig_pod_asks_for_its_profiles_memory_on_the_models_that_offer_it(team):
    job = native_job_create(team=team, need=replace(NEED, gpus=0, mig_profile="1g.10gb"), at=AT)
    assert job.gpus == 0 and 0 < job.gpu_memory_gb <= 10 and job.allowed_gpu_models == ("H100-80GB",)
    assert job.mig_profile == "1g.10gb"


def test_a_mig_pod_is_placed_in_the_profile_it_asked_for(team):
    # 4g.40gb holds what 3g.40gb holds: by memory alone the engine would choose 3g.40gb, which the
    # kubelet would refuse to a pod that asked for nvidia.com/mig-4g.40gb.
    Gpu.objects.update(mig_capable=True, mig_enabled=True)
    job = native_job_create(team=team, need=replace(NEED, gpus=0, mig_profile="4g.40gb"), at=AT)
    assert to_engine_job(job, 4).mig_profile == "4g.40gb"
    assert decide_and_apply(policy="tessera").applied.bound_jobs == [job.pk]
    (bind,) = [BindPayload.from_payload(a.payload) for a in ActionRequest.objects.filter(job=job, kind="bind")]
    assert [a.mig_profile for a in bind.allocations] == ["4g.40gb"]


def test_a_share_where_no_node_shares_is_refused_in_the_submit_words(team):
    with pytest.raises(ValidationError) as refused:
        native_job_create(team=team, need=replace(NEED, gpus=0, gpu_memory_gb=12.0), at=AT)
    reason, message = refusal_reason(refused.value)
    assert reason == "InvalidGpuRequest" and message
    assert not Job.objects.exists()


def test_a_native_job_is_reprioritised_by_a_lead_like_any_other(team, django_user_model):
    job = native_job_create(team=team, need=NEED, at=AT)
    lead = django_user_model.objects.create_user("lead")
    Membership.objects.create(user=lead, team=team, role="lead")
    assert job_reprioritise(user=lead, job=job, priority_class="interactive").priority_class.name == "interactive"
