"""A team's own gang, preempted with a confirmed checkpoint on the real control plane (issue 14):
the JobSet and PyTorchJob examples of examples/k8s/, created as they are (with the checkpoint
channel their pod templates mount), the test playing each operator as test_native_operators does.

The plain batch/v1 Job of examples/k8s/pytorch-ddp-indexed-job.yaml (its PodGroup and Job) is
run the same way, the real Job controller making its pods again.

The gang's channel is one Secret, `tessera-checkpoint-<pod group>`: the name the intake looks for in
the pod template is the one the bind creates. Every member's pod is asked (the annotation on each);
each rank sees the request in its own pod's annotations and saves its part, and global rank 0
confirms once for the gang (the SDK's rule: a rank other than 0 confirms nothing), so Tessera waits
for one confirmation per job, not per member. Then it deletes every member's pod, the job is
preempted (requeued, not failed) with every GPU's interval closed once, the pods the operator (or,
for the JobSet's child Job, the real Job controller) makes again rejoin the same job as one gang at
the confirmed progress, and it is billed again only from its new bind: one job row, no GPU-second
twice."""

from __future__ import annotations

import base64
import copy
import subprocess

import pytest
import yaml
from kubernetes import client

from agents import tasks
from agents.backends.k8s_gangs import PODGROUP_GROUP, PODGROUP_VERSION
from agents.backends.k8s_manifests import ANNOTATION_CHECKPOINT, LABEL_JOB
from billing.models import UsageInterval
from checkpoints.models import CheckpointConfirmation, CheckpointToken
from scheduling.models import ActionRequest, Job
from tessera_checkpoint import Checkpointer
from tests.kube import test_native_operators, test_native_pods
from tests.kube.test_checkpoint_sdk import kubelet_writes_annotations
from tests.kube.test_native_checkpoint import production
from tests.kube.test_native_operators import MAPPED, ROOT, play_jobset_controller, pytorchjob_pods, runs_in_harness
from tests.workers.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
native = test_native_pods.native  # namespace ml-research mapped to team vision, cleaned after
operators = test_native_operators.operators  # creates an example; deletes what the test made


@pytest.fixture
def podgroups(native, kube_admin, podgroup_crd):
    """The PodGroup CRD installed; the PodGroups the test made are deleted after it."""
    custom = client.CustomObjectsApi(kube_admin)
    yield custom
    for item in custom.list_namespaced_custom_object(PODGROUP_GROUP, PODGROUP_VERSION, MAPPED, "podgroups")["items"]:
        custom.delete_namespaced_custom_object(
            PODGROUP_GROUP, PODGROUP_VERSION, MAPPED, "podgroups", item["metadata"]["name"]
        )


def live_pods(core, selector: str) -> list:
    pods = core.list_namespaced_pod(MAPPED, label_selector=selector).items
    return sorted((p for p in pods if p.metadata.deletion_timestamp is None), key=lambda p: p.metadata.name)


def job_controller_makes_again(core, selector: str):
    """Waits for the real Job controller's two pods of the selector, then returns how a test waits
    for the ones it makes again: two live pods, none of them among those."""
    wait_for(lambda: len(live_pods(core, selector)) == 2, what="the Job controller's 2 pods", timeout=60)
    before = {p.metadata.uid for p in live_pods(core, selector)}

    def made_again():
        return wait_for(
            lambda: (
                (pods := live_pods(core, selector)) and len(pods) == 2 and not before & {p.metadata.uid for p in pods}
            )
            and pods,
            what="the Job controller's new pods",
            timeout=90,
            every=0.5,
        )

    return made_again


def binds_confirmed(job: Job) -> int:
    return ActionRequest.objects.filter(job=job, kind="bind", state="confirmed").count()


class Ranks:
    """The gang's training processes, one per member pod, as the test plays them: each has the
    channel volume as the kubelet would mount it (the Secret's `token` and `url`, its own pod's
    `annotations`) and the SDK with its RANK; the checkpoint directory is shared (a PVC)."""

    def __init__(self, core, control_plane, pods, channel: str, tmp_path):
        secret = core.read_namespaced_secret(channel, MAPPED)
        self.control_plane, self.pods, self.ckpt_dir = control_plane, [p.metadata.name for p in pods], tmp_path / "ckpt"
        self.dirs = [tmp_path / f"rank{rank}" for rank in range(len(self.pods))]
        self.sdks = []
        for rank, folder in enumerate(self.dirs):
            folder.mkdir()
            for key in ("token", "url"):
                (folder / key).write_text(base64.b64decode(secret.data[key]).decode())
            self.refresh(rank)
            env = {"TESSERA_CHANNEL_DIR": str(folder), "RANK": str(rank)}  # each rank decides alone (Solo)
            self.sdks.append(Checkpointer.from_env(self.ckpt_dir, handle_sigterm=False, env=env))

    def refresh(self, rank: int) -> None:
        try:
            path = self.dirs[rank] / "annotations"
            kubelet_writes_annotations(self.control_plane, self.pods[rank], path, namespace=MAPPED)
        except subprocess.CalledProcessError:
            pass  # the pod is gone: its kubelet writes nothing more

    def train_until_asked(self, step: int) -> int:
        """Steps of the loop until a request came and every rank saved for it; the last step."""
        while self.sdks[0].last_answer is None:
            step += 1
            for rank in reversed(range(len(self.sdks))):  # rank 0 last: it confirms after the others saved
                self.refresh(rank)
                sdk = self.sdks[rank]
                if sdk.should_save(step):
                    path = sdk.path_for(step, f".rank{rank}.pt")
                    open(path, "w").close()
                    sdk.saved(step, path)
            assert step < 300, "no checkpoint request reached the loop"
        return step


def preempted_with_a_checkpoint_and_rejoined(
    kube_workers,
    core,
    control_plane,
    tmp_path,
    *,
    selector,
    channel,
    owner,
    gpus,
    serving_gpus,
    make_again,
    filler_gpus=0,
):
    """The flow of the module's docstring for the pods `selector` finds; the job."""
    members = len(live_pods(core, selector))
    kube_workers.start()
    (job_id,) = set(kube_workers.run(tasks.poll_agents)["native"]["taken"])
    job = Job.objects.get(pk=job_id)
    assert (job.members, job.gpus) == (members, gpus)
    assert job.checkpoint_interval_s == 3600, f"the intake found {channel} in the pod template"
    filler = production("filler", gpus=filler_gpus, runtime_s=600) if filler_gpus else None
    placed = kube_workers.run(tasks.run_cycle)["placed"]
    assert sorted(placed) == sorted([job.pk] + ([filler.pk] if filler else []))
    wait_for(lambda: binds_confirmed(job) == members, what="every member bound", timeout=60)
    first = live_pods(core, selector)
    assert len(first) == members and all(p.spec.node_name for p in first)

    # The bind made the Secret the intake looked for, owned by the pods' controller.
    secret = core.read_namespaced_secret(channel, MAPPED)
    assert [(r.kind, r.name) for r in secret.metadata.owner_references] == [owner]
    assert CheckpointToken.objects.get(job=job).pod_name == channel
    ranks = Ranks(core, control_plane, first, channel, tmp_path)
    step = ranks.sdks[0].resume()

    serving = production("serving", gpus=serving_gpus, runtime_s=2)
    assert kube_workers.run(tasks.run_cycle)["placed"] == []
    (stop,) = ActionRequest.objects.filter(job=job, kind="preempt")
    request = f"preempt-{stop.pk}"
    asked = lambda: all(  # noqa: E731 - every member's pod carries the request
        (test_native_pods.read_pod(core, MAPPED, p.metadata.name).metadata.annotations or {}).get(ANNOTATION_CHECKPOINT)
        == request
        for p in first
    )
    wait_for(asked, what="every member asked", timeout=60)
    step = ranks.train_until_asked(step)
    assert ranks.sdks[0].last_answer.status == 201
    assert [sdk.latest.checkpoint_id for sdk in ranks.sdks] == [request] * members  # each rank saw it
    (confirmed,) = CheckpointConfirmation.objects.filter(job=job)  # once for the gang, by rank 0
    assert (confirmed.checkpoint_id, confirmed.step, confirmed.pod_name) == (request, step, channel)

    wait_for(lambda: ActionRequest.objects.get(pk=stop.pk).state == "confirmed", what="stopped", timeout=90, every=0.5)
    uids = {p.metadata.uid for p in first}
    assert not uids & {p.metadata.uid for p in core.list_namespaced_pod(MAPPED, label_selector=selector).items}
    job.refresh_from_db()
    assert (job.status, job.pending_reason_code) == ("preempted", "pods-gone")
    assert job.progress_s == confirmed.progress_s
    kinds = set(job.events.values_list("kind", flat=True))
    assert {"checkpoint-requested", "checkpointed", "preempted"} <= kinds and "failed" not in kinds
    first_run = list(UsageInterval.objects.filter(job=job))
    assert len(first_run) == gpus and len({i.ended_at for i in first_run}) == 1 and first_run[0].ended_at
    assert kube_workers.run(tasks.run_cycle)["placed"] == [serving.pk]

    # Its pods made again rejoin the same job, one gang, at the confirmed progress.
    second = make_again()
    assert len(second) == members and not uids & {p.metadata.uid for p in second}
    assert sorted(kube_workers.run(tasks.poll_agents)["native"]["taken"]) == [job.pk] * members
    assert (
        Job.objects.filter(namespace=MAPPED).exclude(pk__in=[serving.pk] + ([filler.pk] if filler else [])).count() == 1
    )
    job.refresh_from_db()
    assert (job.status, job.pending_reason_code, job.members, job.gpus) == ("preempted", "new", members, gpus)
    assert job.progress_s == confirmed.progress_s
    assert {p.metadata.uid for p in second} == set(job.native_pods.values_list("uid", flat=True))

    # Once serving is done the gang runs again, billed from its new bind only.
    wait_for(
        lambda: kube_workers.run(tasks.reconcile)["finished"].get("completed") == [serving.pk],
        what="serving done",
        timeout=60,
        every=0.5,
    )
    assert kube_workers.run(tasks.run_cycle)["placed"] == [job.pk]
    wait_for(lambda: binds_confirmed(job) == 2 * members, what="the new pods bound", timeout=60)
    for pod in second:
        again = test_native_pods.read_pod(core, MAPPED, pod.metadata.name)
        assert again.spec.node_name and again.metadata.labels[LABEL_JOB] == str(job.pk)
        assert ANNOTATION_CHECKPOINT not in (again.metadata.annotations or {})
    intervals = list(UsageInterval.objects.filter(job=job))
    second_run = [i for i in intervals if i.ended_at is None]
    assert len(intervals) == 2 * gpus and len(second_run) == gpus
    assert min(i.started_at for i in second_run) >= first_run[0].ended_at, "no GPU-second twice"
    assert core.read_namespaced_secret(channel, MAPPED).metadata.uid == secret.metadata.uid  # the same channel
    assert CheckpointToken.objects.get(job=job).revoked_at is None  # live again for this run
    assert Checkpointer.from_env(ranks.ckpt_dir, handle_sigterm=False, env={}).resume() == step
    return job


def test_a_jobset_gang_is_preempted_with_a_confirmed_checkpoint_and_its_child_jobs_pods_rejoin_it(
    operators, native, kube_admin, kube_workers, control_plane, live_server, tmp_path
):
    """Both nodes' GPUs are the gang's (the example's two 8-GPU pods, scaled to the harness's 4):
    one GPU of production serving stops it whole. The real Job controller makes the pods again
    (the child Job's backoffLimit, 4 in the example, is above this one preemption)."""
    kube_workers.env["TESSERA_CHECKPOINT_URL"] = f"{live_server.url}/api/v1/checkpoints/"
    jobset = operators("JobSet")
    batch = client.BatchV1Api(kube_admin)
    play_jobset_controller(batch, jobset)
    selector = "jobset.sigs.k8s.io/jobset-name=ddp-js"
    made_again = job_controller_makes_again(native, selector)

    job = preempted_with_a_checkpoint_and_rejoined(
        kube_workers,
        native,
        control_plane,
        tmp_path,
        selector=selector,
        channel="tessera-checkpoint-ddp-js",
        owner=("Job", "ddp-js-workers-0"),
        gpus=8,
        serving_gpus=1,
        make_again=made_again,
    )
    assert job.name == "JobSet ddp-js"
    child = batch.read_namespaced_job("ddp-js-workers-0", MAPPED)
    assert not [c for c in child.status.conditions or [] if c.type == "Failed"], child.status.conditions
    nodes = sorted(p.spec.node_name for p in live_pods(native, selector))
    assert nodes == ["gpu-01", "gpu-02"]  # a member a node, both under leaf-1


def test_a_pytorchjob_gang_is_preempted_with_a_confirmed_checkpoint_and_the_operators_new_pods_rejoin_it(
    operators, native, kube_admin, kube_workers, control_plane, live_server, tmp_path
):
    """Production holds one node; 4 GPUs of production serving need the other, where the gang
    runs. The test plays the operator: restartPolicy ExitCode makes the pods again, under the same
    names with new uids, once the old ones are gone."""
    kube_workers.env["TESSERA_CHECKPOINT_URL"] = f"{live_server.url}/api/v1/checkpoints/"
    ptj = operators("PyTorchJob")
    for pod in pytorchjob_pods(ptj):  # the training operator's part
        native.create_namespaced_pod(MAPPED, pod)
    selector = "training.kubeflow.org/job-name=ddp-ptj"

    def made_again():
        wait_for(
            lambda: not native.list_namespaced_pod(MAPPED, label_selector=selector).items,
            what="the old pods gone",
            timeout=60,
        )
        for pod in pytorchjob_pods(ptj):  # ended on SIGTERM (143): the operator makes each again
            native.create_namespaced_pod(MAPPED, pod)
        return live_pods(native, selector)

    job = preempted_with_a_checkpoint_and_rejoined(
        kube_workers,
        native,
        control_plane,
        tmp_path,
        selector=selector,
        channel="tessera-checkpoint-ddp-ptj",
        owner=("PyTorchJob", "ddp-ptj"),
        gpus=2,
        serving_gpus=4,
        filler_gpus=4,
        make_again=made_again,
    )
    assert job.name == "PyTorchJob ddp-ptj"
    assert set(job.native_pods.values_list("name", flat=True)) == {"ddp-ptj-master-0", "ddp-ptj-worker-0"}


def test_an_indexed_job_gang_with_a_podgroup_is_preempted_with_a_confirmed_checkpoint_and_its_new_pods_rejoin_it(
    podgroups, native, kube_admin, kube_workers, control_plane, live_server, tmp_path
):
    """The example's PodGroup (minMember 2) and Job, its pods scaled to the harness's 4-GPU nodes
    (v1.20 drops completionMode: Indexed); its headless Service, which only DNS reads, is left out."""
    kube_workers.env["TESSERA_CHECKPOINT_URL"] = f"{live_server.url}/api/v1/checkpoints/"
    docs = {d["kind"]: d for d in yaml.safe_load_all((ROOT / "examples/k8s/pytorch-ddp-indexed-job.yaml").read_text())}
    podgroups.create_namespaced_custom_object(PODGROUP_GROUP, PODGROUP_VERSION, MAPPED, "podgroups", docs["PodGroup"])
    job_body = copy.deepcopy(docs["Job"])
    template = job_body["spec"]["template"]
    template["spec"] = runs_in_harness(template["spec"], gpus=4)
    batch = client.BatchV1Api(kube_admin)
    batch.create_namespaced_job(MAPPED, job_body)
    selector = "job-name=ddp"
    made_again = job_controller_makes_again(native, selector)

    job = preempted_with_a_checkpoint_and_rejoined(
        kube_workers,
        native,
        control_plane,
        tmp_path,
        selector=selector,
        channel="tessera-checkpoint-ddp",
        owner=("Job", "ddp"),
        gpus=8,
        serving_gpus=1,
        make_again=made_again,
    )
    assert (job.name, job.project.name) == ("Job ddp", "detection")
    conditions = batch.read_namespaced_job("ddp", MAPPED).status.conditions or []
    assert not [c for c in conditions if c.type == "Failed"], conditions
