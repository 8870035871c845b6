"""Gangs of native pods on the real control plane (issue 14): a batch/v1 Job of 4 pods with the
scheduler-plugins pod-group label and a PodGroup (the vendored CRD) of minMember 4 is one job,
placed all at once on nodes under one leaf; a gang whose pods arrive over several polls binds none
before all exist, and says how many do; a member deleted while the gang runs stops the others and
ends the job in a clear state, billed once; production inference stops a running gang whole and
requeues it."""

from __future__ import annotations

import pytest
from kubernetes import client

from agents import tasks
from agents.backends.k8s_gangs import MIN_MEMBER_ANNOTATION, POD_GROUP_LABEL, PODGROUP_GROUP, PODGROUP_VERSION
from billing.models import UsageInterval
from scheduling.models import ActionRequest, Job, PriorityClass
from tests.kube import test_native_pods
from tests.kube.conftest import kube_job
from tests.kube.test_native_pods import MAPPED, _pod_spec, pod_body, read_pod
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
# The native pods' fixture (namespace ml-research mapped to team vision, cleaned after), by another name.
core = test_native_pods.native


def member(name: str, group: str, *, min_member: int | None = None, gpus: int = 1, runtime_s: int = 600) -> dict:
    body = pod_body(name, gpus=gpus, runtime_s=runtime_s)
    body["metadata"]["labels"] = {POD_GROUP_LABEL: group}
    if min_member is not None:
        body["metadata"]["annotations"] = {MIN_MEMBER_ANNOTATION: str(min_member)}
    return body


def podgroup(custom: client.CustomObjectsApi, name: str, min_member: int) -> None:
    custom.create_namespaced_custom_object(
        PODGROUP_GROUP,
        PODGROUP_VERSION,
        MAPPED,
        "podgroups",
        {
            "apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": min_member},
        },
    )


@pytest.fixture
def gangs(core, kube_admin, podgroup_crd):
    """The native fixture (namespace ml-research mapped to vision) with the PodGroup CRD installed;
    the PodGroups a test made are deleted after it."""
    custom = client.CustomObjectsApi(kube_admin)
    yield custom
    for item in custom.list_namespaced_custom_object(PODGROUP_GROUP, PODGROUP_VERSION, MAPPED, "podgroups")["items"]:
        custom.delete_namespaced_custom_object(
            PODGROUP_GROUP, PODGROUP_VERSION, MAPPED, "podgroups", item["metadata"]["name"]
        )


def binds(job: Job, state: str | None = None):
    found = ActionRequest.objects.filter(job=job, kind="bind")
    return found.filter(state=state) if state else found


def test_a_batch_job_of_four_pods_with_a_podgroup_is_placed_as_one_gang(gangs, core, kube_admin, kube_workers):
    podgroup(gangs, "ddp", 4)
    template = _pod_spec(gpus=2, runtime_s=4, priority_class="training")
    batch = client.BatchV1Api(kube_admin)
    batch.create_namespaced_job(
        MAPPED,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "ddp"},
            "spec": {
                "parallelism": 4,
                "completions": 4,
                "backoffLimit": 0,
                "template": {"metadata": {"labels": {POD_GROUP_LABEL: "ddp"}}, "spec": template},
            },
        },
    )
    wait_for(
        lambda: len(core.list_namespaced_pod(MAPPED, label_selector="job-name=ddp").items) == 4,
        what="the Job controller's 4 pods",
        timeout=60,
    )
    kube_workers.start()
    taken = kube_workers.run(tasks.poll_agents)["native"]["taken"]
    (job,) = Job.objects.filter(namespace=MAPPED)
    assert set(taken) == {job.pk} and job.native_pods.count() == 4
    assert (job.name, job.members, job.gpus, job.pending_reason_code) == ("Job ddp", 4, 8, "new")

    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: binds(job, "confirmed").count() == 4, what="4 binds confirmed", timeout=60)
    pods = core.list_namespaced_pod(MAPPED, label_selector="job-name=ddp").items
    nodes = sorted(p.spec.node_name for p in pods)
    assert nodes == ["gpu-01", "gpu-01", "gpu-02", "gpu-02"]  # 2 GPUs each, both nodes under leaf-1
    wait_for(
        lambda: all(read_pod(core, MAPPED, p.metadata.name).status.phase == "Succeeded" for p in pods),
        what="the gang ran",
        timeout=60,
    )
    wait_for(
        lambda: kube_workers.run(tasks.reconcile)["finished"] == {"completed": [job.pk]},
        what="completed",
        timeout=60,
        every=1,
    )
    job.refresh_from_db()
    assert job.status == "completed"
    intervals = UsageInterval.objects.filter(job=job)
    assert intervals.count() == 8 and all(i.ended_at is not None for i in intervals)  # one per GPU, once


def test_a_gang_whose_members_arrive_over_several_polls_binds_none_before_all_exist(gangs, core, kube_workers):
    """No PodGroup object: the pods' tessera.io/min-member annotation sizes the gang."""
    kube_workers.start()
    core.create_namespaced_pod(MAPPED, member("late-0", "late", min_member=3))
    core.create_namespaced_pod(MAPPED, member("late-1", "late", min_member=3))
    kube_workers.run(tasks.poll_agents)
    (job,) = Job.objects.filter(namespace=MAPPED)
    for _cycle in range(2):
        assert kube_workers.run(tasks.run_cycle)["placed"] == []
        job.refresh_from_db()
        assert (job.status, job.pending_reason_code) == ("pending", "gang-incomplete")
        assert job.pending_reason == "Pod group late: 2 of 3 members exist; none is placed before all 3 do."
        assert not binds(job).exists()
        assert all(read_pod(core, MAPPED, name).spec.node_name is None for name in ("late-0", "late-1"))

    core.create_namespaced_pod(MAPPED, member("late-2", "late", min_member=3))
    kube_workers.run(tasks.poll_agents)
    assert job.native_pods.count() == 3
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: binds(job, "confirmed").count() == 3, what="3 binds confirmed", timeout=60)
    assert all(read_pod(core, MAPPED, f"late-{i}").spec.node_name for i in range(3))


def test_where_no_workload_api_is_served_the_pod_group_label_forms_the_gang(core, kube_workers):
    """v1.20 has no spec.schedulingGroup: it drops the field from a pod that names a Kubernetes
    PodGroup, and the scheduler-plugins label on the same pods forms the gang."""
    kube_workers.start()
    for index in range(2):
        body = member(f"both-{index}", "both", min_member=2)
        body["spec"]["schedulingGroup"] = {"podGroupName": "both-workers-0"}
        core.create_namespaced_pod(MAPPED, body)
    assert read_pod(core, MAPPED, "both-0").spec.scheduling_group is None
    kube_workers.run(tasks.poll_agents)
    (job,) = Job.objects.filter(namespace=MAPPED)
    assert set(job.native_pods.values_list("group", flat=True)) == {"both"}
    assert (job.members, job.pending_reason_code) == (2, "new")


def test_a_pod_beyond_the_gang_is_told_once_in_one_event(core, kube_workers):
    """Two polls that find the same extra pod make one Warning Event, count 1 (agents/native.py:
    a refusal is said once per pod and reason, not raised on the Event every poll)."""
    kube_workers.start()
    for index in range(3):
        core.create_namespaced_pod(MAPPED, member(f"trio-{index}", "trio", min_member=2))
    for _poll in range(2):
        assert kube_workers.run(tasks.poll_agents)["native"]["refused"] == {"InvalidPodGroup": 1}
    (job,) = Job.objects.filter(namespace=MAPPED)
    taken = set(job.native_pods.values_list("name", flat=True))
    (extra,) = {f"trio-{index}" for index in range(3)} - taken
    uid = read_pod(core, MAPPED, extra).metadata.uid
    events = core.list_namespaced_event(MAPPED, field_selector=f"involvedObject.uid={uid}").items
    (event,) = events
    assert (event.reason, event.type, event.count) == ("InvalidPodGroup", "Warning", 1)
    assert f"Pod group trio already has its 2 members (job #{job.pk})" in event.message


def test_a_podgroup_created_after_its_pods_sizes_the_gang(gangs, core, kube_workers):
    kube_workers.start()
    for index in range(2):
        core.create_namespaced_pod(MAPPED, member(f"pg-{index}", "pg"))
    kube_workers.run(tasks.poll_agents)
    (job,) = Job.objects.filter(namespace=MAPPED)
    assert job.pending_reason_code == "gang-incomplete" and "nothing says how many" in job.pending_reason
    assert kube_workers.run(tasks.run_cycle)["placed"] == []

    podgroup(gangs, "pg", 2)
    kube_workers.run(tasks.poll_agents)
    job.refresh_from_db()
    assert (job.members, job.pending_reason_code) == (2, "new")
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]


def test_a_member_deleted_mid_run_stops_the_gang_billed_once(gangs, core, kube_workers):
    podgroup(gangs, "pair", 2)
    kube_workers.start()
    for index in range(2):
        core.create_namespaced_pod(MAPPED, member(f"pair-{index}", "pair", gpus=2))
    kube_workers.run(tasks.poll_agents)
    (job,) = Job.objects.filter(namespace=MAPPED)
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(
        lambda: all((read_pod(core, MAPPED, f"pair-{i}").status.phase == "Running") for i in range(2)),
        what="both members running",
        timeout=60,
    )

    core.delete_namespaced_pod("pair-1", MAPPED, grace_period_seconds=0)
    wait_for(lambda: kube_workers.run(tasks.reconcile)["finished"], what="the gang stopped", timeout=60, every=1)
    job.refresh_from_db()
    assert job.status == "cancelled"
    assert "pair-1 was deleted outside Tessera" in job.events.get(kind="pod-deleted").message
    wait_for(lambda: read_pod(core, MAPPED, "pair-0") is None, what="the other member stopped", timeout=60)
    intervals = UsageInterval.objects.filter(job=job)
    assert intervals.count() == 4 and all(i.ended_at is not None for i in intervals)
    ends = {i.ended_at for i in intervals}
    assert len(ends) == 1  # the whole gang billed until the same moment, once
    assert kube_workers.run(tasks.reconcile)["finished"] == {}
    assert UsageInterval.objects.filter(job=job).count() == 4


def test_production_inference_preempts_a_native_gang_whole_billed_once(gangs, core, kube_workers):
    """A gang whose pods mount no checkpoint channel is stopped whole, without a checkpoint, and
    requeued (not failed), saying so: it waits for its pods to be made again; its GPUs go to
    production inference. (The channel: tests/kube/test_native_checkpoint.py.)"""
    podgroup(gangs, "wide", 2)
    kube_workers.start()
    for index in range(2):
        core.create_namespaced_pod(MAPPED, member(f"wide-{index}", "wide", gpus=4))
    kube_workers.run(tasks.poll_agents)
    (gang,) = Job.objects.filter(namespace=MAPPED)
    assert kube_workers.run(tasks.run_cycle)["placed"] == [gang.pk]
    wait_for(lambda: binds(gang, "confirmed").count() == 2, what="both members bound", timeout=60)

    serving = kube_job("serving", gpus=1, runtime_s=600)
    Job.objects.filter(pk=serving.pk).update(
        kind="inference", priority_class=PriorityClass.objects.get(name="production"), preemptible=False
    )
    assert kube_workers.run(tasks.run_cycle)["placed"] == []
    (stop,) = ActionRequest.objects.filter(job=gang, kind="preempt")
    wait_for(
        lambda: ActionRequest.objects.get(pk=stop.pk).state == "confirmed", what="the gang stopped", timeout=90, every=1
    )
    gang.refresh_from_db()
    assert (gang.status, gang.pending_reason_code) == ("preempted", "pods-gone")
    assert "mount no checkpoint channel" in gang.events.get(kind="checkpoint-skipped").message
    assert not gang.events.filter(kind="failed").exists()
    assert list(gang.native_pods.values_list("vacant", flat=True)) == [True, True]
    assert all(read_pod(core, MAPPED, f"wide-{i}") is None for i in range(2))  # both members, not one
    intervals = UsageInterval.objects.filter(job=gang)
    assert intervals.count() == 8 and len({i.ended_at for i in intervals}) == 1  # its 8 GPUs, once
    assert kube_workers.run(tasks.run_cycle)["placed"] == [serving.pk]

    # Its pods made again (bare pods: by their owner, under their names) rejoin the same gang job.
    for index in range(2):
        core.create_namespaced_pod(MAPPED, member(f"wide-{index}", "wide", gpus=4))
    assert kube_workers.run(tasks.poll_agents)["native"]["taken"] == [gang.pk, gang.pk]
    gang.refresh_from_db()
    assert (gang.status, gang.pending_reason_code, gang.members) == ("preempted", "new", 2)
    assert Job.objects.filter(namespace=MAPPED).count() == 1  # no second job for the same group
