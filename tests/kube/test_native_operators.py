"""A team's own JobSet and PyTorchJob on the real control plane (issue 14): the vendored CRDs are
installed in the API server, the examples of examples/k8s/ are created as they are (the server
checks them against the structural schema), and the test plays each operator's controller as the
kubelet harness plays the kubelet. Tessera takes each owner's pods in as one gang job named after
it, binds all members together, bills them, and a cancel from the portal deletes the owner (a
JobSet: not its child Job, which the JobSet would make again), and the garbage collector removes
the owner's Jobs and pods (the cancel is confirmed once they are gone)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from django.contrib.auth import get_user_model
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents import tasks
from billing.models import UsageInterval
from portal.models import Membership
from scheduling.models import ActionRequest, Job
from scheduling.services import job_cancel
from tests.kube import test_native_pods
from tests.kube.operator_crds import OPERATORS, SCHEMAS, crd
from tests.kube.test_native_pods import read_pod
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
native = test_native_pods.native  # namespace ml-research mapped to team vision, cleaned after
MAPPED = test_native_pods.MAPPED
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def operators(control_plane, native, kube_admin):
    """Creates an example as a team applies it (the CRDs: installed with the control plane,
    tests/kube/operator_crds.py); whatever a test made is deleted after it."""
    custom = client.CustomObjectsApi(kube_admin)

    def apply(kind: str) -> dict:
        file, plural, example = OPERATORS[kind]
        group, version = json.loads((SCHEMAS / file).read_text())["group"], crd(kind)["spec"]["versions"][0]["name"]
        body = yaml.safe_load((ROOT / "examples" / "k8s" / example).read_text())
        return custom.create_namespaced_custom_object(group, version, MAPPED, plural, body)

    yield apply
    for kind, (file, plural, _example) in OPERATORS.items():
        group, version = json.loads((SCHEMAS / file).read_text())["group"], crd(kind)["spec"]["versions"][0]["name"]
        for item in custom.list_namespaced_custom_object(group, version, MAPPED, plural)["items"]:
            custom.delete_namespaced_custom_object(
                group, version, MAPPED, plural, item["metadata"]["name"], propagation_policy="Background"
            )


def controlled_by(owner: dict) -> list[dict]:
    return [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def runs_in_harness(pod_spec: dict, *, gpus: int | None = None) -> dict:
    """The example's pod spec, run by the kubelet harness until stopped; `gpus` scales an example
    written for 8-GPU nodes to the harness's 4-GPU ones (its CPU and memory requests dropped)."""
    spec = copy.deepcopy(pod_spec)
    for container in spec["containers"]:
        container.setdefault("env", []).append({"name": "TESSERA_RUNTIME_S", "value": "600"})
        if gpus is not None:
            container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        for amounts in container.get("resources", {}).values():  # quantities: YAML's 1 is "1" to the client
            amounts.update({k: str(v) for k, v in amounts.items()})
    return spec


def jobset_child_job(jobset: dict, replicated: dict, index: int) -> dict:
    """What the JobSet controller makes per replica of a replicated job: a batch/v1 Job named
    <jobset>-<replicated job>-<index>, controlled by the JobSet, it and its pod template labelled
    with the JobSet's names (kubernetes-sigs/jobset, v0.12); the pods' subdomain is the JobSet's
    headless Service (network.enableDNSHostnames). v1.20 drops completionMode (Indexed is 1.21+):
    the Job controller still makes `completions` pods, without JOB_COMPLETION_INDEX."""
    name = jobset["metadata"]["name"]
    labels = {
        "jobset.sigs.k8s.io/jobset-name": name,
        "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
        "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicated["replicas"]),
        "jobset.sigs.k8s.io/job-index": str(index),
        "jobset.sigs.k8s.io/jobset-uid": jobset["metadata"]["uid"],
    }
    spec = copy.deepcopy(replicated["template"]["spec"])
    template = spec["template"]
    template["metadata"]["labels"] = {**template["metadata"].get("labels", {}), **labels}
    template["spec"] = runs_in_harness({**template["spec"], "subdomain": name}, gpus=4)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-{replicated['name']}-{index}",
            "labels": labels,
            "ownerReferences": controlled_by(jobset),
        },
        "spec": spec,
    }


def play_jobset_controller(batch, jobset: dict) -> None:
    """The JobSet controller's part: a child Job per replica of each replicated job."""
    for replicated in jobset["spec"]["replicatedJobs"]:
        for index in range(replicated["replicas"]):
            batch.create_namespaced_job(MAPPED, jobset_child_job(jobset, replicated, index))


def pytorchjob_pods(ptj: dict) -> list[dict]:
    """What the training operator (kubeflow/training-operator v1.9) makes: a pod per replica,
    <job>-<type>-<index>, controlled by the PyTorchJob, labelled with its name and replica type and
    index, with the rendezvous env it sets (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK)."""
    name = ptj["metadata"]["name"]
    specs = ptj["spec"]["pytorchReplicaSpecs"]
    world = sum(s["replicas"] for s in specs.values())
    pods, rank = [], 0
    for kind in ("Master", "Worker"):
        for index in range(specs[kind]["replicas"]):
            template = specs[kind]["template"]
            labels = {
                **template["metadata"].get("labels", {}),
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/replica-type": kind.lower(),
                "training.kubeflow.org/replica-index": str(index),
            }
            if kind == "Master":
                labels["training.kubeflow.org/job-role"] = "master"
            # ExitCode is the operator's own policy: the pod gets Never, the operator restarts it.
            policy = specs[kind]["restartPolicy"]
            spec = runs_in_harness({**template["spec"], "restartPolicy": "Never" if policy == "ExitCode" else policy})
            env = {
                "MASTER_ADDR": f"{name}-master-0",
                "MASTER_PORT": "23456",
                "WORLD_SIZE": str(world),
                "RANK": str(rank),
            }
            for container in spec["containers"]:
                container["env"] += [{"name": k, "value": v} for k, v in env.items()]
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{kind.lower()}-{index}",
                        "labels": labels,
                        "annotations": template["metadata"].get("annotations", {}),
                        "ownerReferences": controlled_by(ptj),
                    },
                    "spec": spec,
                }
            )
            rank += 1
    return pods


def placed_together_billed_then_cancelled(kube_workers, core, selector: str, *, name: str, members: int, gpus: int):
    """Take the pods in, place them, check binds and billing, cancel from the portal; the job."""
    kube_workers.start()
    taken = kube_workers.run(tasks.poll_agents)["native"]["taken"]
    (job,) = Job.objects.filter(namespace=MAPPED)
    assert set(taken) == {job.pk}
    assert (job.name, job.members, job.gpus, job.native_pods.count()) == (name, members, gpus, members)
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(
        lambda: ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").count() == members,
        what="every member bound",
        timeout=60,
    )
    pods = core.list_namespaced_pod(MAPPED, label_selector=selector).items
    assert len(pods) == members and all(p.spec.node_name for p in pods)
    open_intervals = UsageInterval.objects.filter(job=job, ended_at__isnull=True)
    assert open_intervals.count() == gpus  # billed from the bind, one interval a GPU

    lead = get_user_model().objects.create_user("lead")
    Membership.objects.create(user=lead, team=job.team, role="lead")
    job_cancel(user=lead, job=job)
    (cancel,) = ActionRequest.objects.filter(job=job, kind="preempt")
    wait_for(lambda: kube_workers.run(tasks.execute_action, cancel.pk) == "confirmed", what="cancel", timeout=120)
    job.refresh_from_db()
    assert job.status == "cancelled"
    intervals = UsageInterval.objects.filter(job=job)
    assert intervals.count() == gpus and all(i.ended_at is not None for i in intervals)
    return job


def gone(read) -> bool:
    try:
        read()
    except ApiException as error:
        return error.status == 404
    return False


def test_a_jobset_is_one_gang_named_after_it_and_a_portal_cancel_deletes_the_jobset(
    operators, native, kube_admin, kube_workers
):
    jobset = operators("JobSet")
    batch = client.BatchV1Api(kube_admin)
    play_jobset_controller(batch, jobset)
    selector = "jobset.sigs.k8s.io/jobset-name=ddp-js"
    wait_for(
        lambda: len(native.list_namespaced_pod(MAPPED, label_selector=selector).items) == 2,
        what="the Job controller's 2 pods",
        timeout=60,
    )
    job = placed_together_billed_then_cancelled(kube_workers, native, selector, name="JobSet ddp-js", members=2, gpus=8)
    assert set(job.native_pods.values_list("owner_kind", "owner_name")) == {("Job", "ddp-js-workers-0")}

    custom = client.CustomObjectsApi(kube_admin)
    assert gone(lambda: custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", MAPPED, "jobsets", "ddp-js"))
    assert gone(lambda: batch.read_namespaced_job("ddp-js-workers-0", MAPPED))  # the GC's part, done
    assert ActionRequest.objects.filter(job=job, kind="preempt").count() == 1  # no new pods, no new job
    assert kube_workers.run(tasks.poll_agents)["native"]["taken"] == []


def test_a_pytorchjob_is_one_gang_named_after_it_and_a_portal_cancel_deletes_the_pytorchjob(
    operators, native, kube_admin, kube_workers
):
    ptj = operators("PyTorchJob")
    for pod in pytorchjob_pods(ptj):  # the training operator's part
        native.create_namespaced_pod(MAPPED, pod)
    selector = "training.kubeflow.org/job-name=ddp-ptj"
    job = placed_together_billed_then_cancelled(
        kube_workers, native, selector, name="PyTorchJob ddp-ptj", members=2, gpus=2
    )
    assert set(job.native_pods.values_list("owner_kind", "owner_name")) == {("PyTorchJob", "ddp-ptj")}

    custom = client.CustomObjectsApi(kube_admin)
    assert gone(lambda: custom.get_namespaced_custom_object("kubeflow.org", "v1", MAPPED, "pytorchjobs", "ddp-ptj"))
    # Its pods, not deleted one by one (the operator would make them again), go with it.
    for pod in native.list_namespaced_pod(MAPPED, label_selector=selector).items:
        assert pod.metadata.owner_references[0].uid == ptj["metadata"]["uid"]


LWS = "leaderworkerset.sigs.k8s.io"


def lws_statefulset(lws: dict, template: dict, *, name: str, owner: dict, replicas: int, labels: dict) -> dict:
    """A StatefulSet as the LeaderWorkerSet controller (kubernetes-sigs/lws v0.10) makes one: the
    leader StatefulSet (named after the LWS, controlled by it) or a group's worker StatefulSet
    (named after its leader pod, controlled by that pod), the template labelled with the LWS's
    name and the group's, annotated with the group size. The test also plays the LWS webhook's
    group-index label on the leader pods (one group here). v1.20 drops `ordinals` (1.26+): the
    worker pod is <leader>-0, where LWS makes <leader>-1."""
    size = str(lws["spec"]["leaderWorkerTemplate"]["size"])
    body = copy.deepcopy(template)
    own = {f"{LWS}/name": lws["metadata"]["name"], **labels}
    body["metadata"]["labels"] = {**body["metadata"].get("labels", {}), **own}
    body["metadata"]["annotations"] = {**body["metadata"].get("annotations", {}), f"{LWS}/size": size}
    body["spec"] = runs_in_harness(body["spec"], gpus=4)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {f"{LWS}/name": lws["metadata"]["name"]},
                     "ownerReferences": controlled_by(owner)},
        "spec": {"replicas": replicas, "serviceName": lws["metadata"]["name"], "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": own}, "template": body},
    }


def test_a_leaderworkerset_is_one_gang_named_after_it_and_a_portal_cancel_deletes_the_leaderworkerset(
    operators, native, kube_admin, kube_workers
):
    lws = operators("LeaderWorkerSet")
    apps = client.AppsV1Api(kube_admin)
    templates = lws["spec"]["leaderWorkerTemplate"]
    group = {f"{LWS}/group-index": "0"}
    # The LWS controller's part: the leader StatefulSet; once its pod exists, the group's workers.
    leader_set = apps.create_namespaced_stateful_set(MAPPED, lws_statefulset(
        lws, templates["leaderTemplate"], name="llm-serve", owner=lws, replicas=lws["spec"]["replicas"],
        labels={f"{LWS}/worker-index": "0", **group}))
    leader = wait_for(lambda: read_pod(native, MAPPED, "llm-serve-0"), what="the leader pod", timeout=60)
    leader_ref = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llm-serve-0", "uid": leader.metadata.uid}}
    apps.create_namespaced_stateful_set(MAPPED, lws_statefulset(
        lws, templates["workerTemplate"], name="llm-serve-0", owner=leader_ref,
        replicas=templates["size"] - 1, labels=group))
    selector = f"{LWS}/name=llm-serve"
    wait_for(lambda: len(native.list_namespaced_pod(MAPPED, label_selector=selector).items) == 2,
             what="the leader and its worker", timeout=60)
    job = placed_together_billed_then_cancelled(
        kube_workers, native, selector, name="LeaderWorkerSet llm-serve", members=2, gpus=8
    )
    assert set(job.native_pods.values_list("owner_kind", "owner_name")) == {
        ("StatefulSet", "llm-serve"), ("StatefulSet", "llm-serve-0")}

    custom = client.CustomObjectsApi(kube_admin)
    assert gone(lambda: custom.get_namespaced_custom_object(
        "leaderworkerset.x-k8s.io", "v1", MAPPED, "leaderworkersets", "llm-serve"))
    # The garbage collector's part, done: the StatefulSets (not deleted one by one) went with it.
    assert gone(lambda: apps.read_namespaced_stateful_set("llm-serve", MAPPED))
    assert gone(lambda: apps.read_namespaced_stateful_set("llm-serve-0", MAPPED))
    assert leader_set.metadata.owner_references[0].uid == lws["metadata"]["uid"]
    assert ActionRequest.objects.filter(job=job, kind="preempt").count() == 1  # no new pods, no new job
    assert kube_workers.run(tasks.poll_agents)["native"]["taken"] == []
