"""The Kubernetes backend over real HTTP against the fake API server."""

import threading
import time

import pytest

from agents.backends import (
    BackendError,
    BindRequest,
    CheckpointRequest,
    Conflict,
    JobStatus,
    MigResource,
    MigSlot,
    MigStrategy,
    Outcome,
    PreemptRequest,
    RepartitionPhase,
    RepartitionRequest,
    wait_for_repartition,
)
from agents.backends import k8s_manifests as m
from agents.backends.base import Backend, TransientBackendError

H100_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/mig-1g.10gb.count": "7",
    "nvidia.com/mig-1g.10gb.memory": "9984",
    "nvidia.com/mig-3g.40gb.count": "1",
    "nvidia.com/mig-1g.10gb.me.count": "1",
    "tessera.io/leaf-switch": "leaf-a1",
    "tessera.io/tier": "on-demand",
}


def _bind(**overrides):
    fields = dict(
        job_id="42", pod_name="job-42-0", namespace="team-vision", project="detector",
        job_kind="training", image="nvcr.io/nvidia/pytorch:24.05-py3",
        command=("python", "train.py"), node_name="gpu-h100-01", gpu_count=2,
    )
    fields.update(overrides)
    return BindRequest(**fields)


@pytest.fixture
def cluster(kube):
    kube.add_namespace("team-vision")
    kube.add_node("gpu-h100-01", H100_LABELS, {"cpu": "224", "memory": "2063731088Ki"})
    kube.add_node("gpu-a100-07", {
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.count": "28", "nvidia.com/gpu.memory": "4864",
        "nvidia.com/mig.strategy": "single",
    }, {"cpu": "63500m", "memory": "500Gi"}, ready=False,
        taints=[{"key": "aws.amazon.com/spot-itn", "value": "true", "effect": "NoSchedule"}])
    kube.add_node("cpu-01", {"kubernetes.io/os": "linux"})
    return kube


def test_it_is_a_backend(backend):
    assert isinstance(backend, Backend)


def test_inventory_reads_gfd_labels(backend, cluster):
    nodes = {n.name: n for n in backend.inventory()}
    assert set(nodes) == {"gpu-h100-01", "gpu-a100-07"}  # the CPU node is not ours
    h100 = nodes["gpu-h100-01"]
    assert (h100.gpu_model, h100.gpu_count, h100.gpu_memory_mib) == (
        "NVIDIA-H100-80GB-HBM3", 8, 81559
    )
    assert h100.mig_strategy is MigStrategy.MIXED
    assert h100.mig_resources == (
        MigResource("1g.10gb", 7, 9984), MigResource("1g.10gb+me", 1), MigResource("3g.40gb", 1)
    )
    assert (h100.leaf_switch, h100.tier, h100.ready, h100.schedulable) == (
        "leaf-a1", "on-demand", True, True
    )
    assert (h100.cpu_millicores, h100.memory_mib) == (224000, 2015362)


def test_inventory_reads_single_strategy_and_taints(backend, cluster):
    a100 = {n.name: n for n in backend.inventory()}["gpu-a100-07"]
    assert (a100.gpu_model, a100.gpu_count, a100.mig_strategy) == (
        "A100-SXM4-40GB", 0, MigStrategy.SINGLE
    )
    assert a100.mig_resources == (MigResource("1g.5gb", 28, 4864),)
    assert (a100.ready, a100.cpu_millicores, a100.memory_mib) == (False, 63500, 512000)
    assert a100.taints == ("aws.amazon.com/spot-itn=true:NoSchedule",)


def test_bind_creates_the_pod_and_binds_it(backend, cluster):
    assert backend.bind(_bind()) is Outcome.DONE
    pod = cluster.pod("team-vision", "job-42-0")
    assert pod["spec"]["schedulerName"] == "tessera"
    assert pod["spec"]["nodeName"] == "gpu-h100-01"
    assert pod["metadata"]["labels"][m.LABEL_JOB] == "42"
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert ("POST", "/api/v1/namespaces/team-vision/pods/job-42-0/binding") in cluster.requests


def test_a_repeated_bind_changes_nothing(backend, cluster):
    backend.bind(_bind())
    before = len(cluster.requests)
    assert backend.bind(_bind()) is Outcome.ALREADY_DONE
    assert [r[0] for r in cluster.requests[before:]] == ["GET"]  # one read, no write


def test_bind_on_another_node_or_of_another_job_is_a_conflict(backend, cluster):
    backend.bind(_bind())
    with pytest.raises(Conflict):
        backend.bind(_bind(node_name="gpu-a100-07"))
    with pytest.raises(Conflict):
        backend.bind(_bind(job_id="43"))


def test_bind_of_a_mig_job_asks_for_the_profile_resource(backend, cluster):
    assert backend.bind(_bind(gpu_count=0, mig_profile="1g.10gb+me")) is Outcome.DONE
    limits = cluster.pod("team-vision", "job-42-0")["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/mig-1g.10gb.me"] == "1"


def test_bind_into_a_missing_team_namespace_is_refused(backend, cluster):
    with pytest.raises(BackendError, match="team-nlp"):
        backend.bind(_bind(namespace="team-nlp"))


def test_checkpoint_request_annotates_once(backend, cluster):
    backend.bind(_bind())
    req = CheckpointRequest("42", "job-42-0", "team-vision", checkpoint_id="ckpt-7")
    assert backend.request_checkpoint(req) is Outcome.DONE
    assert backend.request_checkpoint(req) is Outcome.ALREADY_DONE
    annotations = cluster.pod("team-vision", "job-42-0")["metadata"]["annotations"]
    assert annotations[m.ANNOTATION_CHECKPOINT] == "ckpt-7"
    missing = CheckpointRequest("42", "job-42-9", "team-vision", checkpoint_id="ckpt-7")
    assert backend.request_checkpoint(missing) is Outcome.GONE


def test_preempt_annotates_then_deletes_with_grace(backend, cluster):
    backend.bind(_bind())
    req = PreemptRequest("42", "job-42-0", "team-vision", grace_seconds=120, reason="quota")
    assert backend.preempt(req) is Outcome.DONE
    pod = cluster.pod("team-vision", "job-42-0")
    assert pod["metadata"]["annotations"][m.ANNOTATION_PREEMPTED] == "quota"
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 120
    path = "/api/v1/namespaces/team-vision/pods/job-42-0"
    writes = [r for r in cluster.requests if r[1] == path and r[0] in ("PATCH", "DELETE")]
    assert writes == [("PATCH", path), ("DELETE", path)]  # the annotation comes first
    assert backend.preempt(req) is Outcome.ALREADY_DONE  # terminating already
    cluster.finish_deletion("team-vision", "job-42-0")
    assert backend.preempt(req) is Outcome.GONE  # the release is confirmed


def _repartition():
    layout = (MigSlot("3g.40gb", 4), MigSlot("2g.20gb", 0))
    name = m.mig_config_name("gpu-h100-01", {0: layout})
    return RepartitionRequest("gpu-h100-01", 0, layout, name)


def _later(seconds, action):
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def test_repartition_sets_the_label_and_waits_for_success(backend, cluster):
    cluster.set_node_labels("gpu-h100-01", {"nvidia.com/mig.config.state": "success"})  # stale
    req = _repartition()
    assert backend.repartition(req) is Outcome.DONE
    assert backend.repartition(req) is Outcome.ALREADY_DONE
    labels = cluster.nodes["gpu-h100-01"]["metadata"]["labels"]
    assert labels["nvidia.com/mig.config"] == req.config_name
    assert backend.repartition_state("gpu-h100-01").phase is RepartitionPhase.PENDING
    # mig-manager's part, played by the test:
    _later(0.3, lambda: cluster.set_node_labels(
        "gpu-h100-01", {"nvidia.com/mig.config.state": "success"}))
    state = wait_for_repartition(backend, "gpu-h100-01", req.config_name, timeout_s=5, poll_s=0.05)
    assert (state.phase, state.finished, state.config_name) == (
        RepartitionPhase.SUCCESS, True, req.config_name
    )


def test_repartition_publishes_the_node_wide_mig_parted_config_first(backend, cluster):
    import yaml

    new = (MigSlot("3g.40gb", 4), MigSlot("2g.20gb", 0))
    kept = (MigSlot("1g.10gb", 0),)
    node_layout = ((0, new), (1, kept), (2, ()))
    name = m.mig_config_name("gpu-h100-01", dict(node_layout))
    req = RepartitionRequest("gpu-h100-01", 0, new, name, node_layout=node_layout)
    assert backend.repartition(req) is Outcome.DONE
    document = yaml.safe_load(cluster.configmaps[("gpu-operator", "tessera-mig-parted-config")]["data"]["config.yaml"])
    assert document["mig-configs"][name] == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"2g.20gb": 1, "3g.40gb": 1}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.10gb": 1}},
        {"devices": [2], "mig-enabled": False},
    ]
    assert cluster.nodes["gpu-h100-01"]["metadata"]["labels"]["nvidia.com/mig.config"] == name
    other = RepartitionRequest("gpu-h100-01", 2, kept, "tessera-other", node_layout=((2, kept),))
    cluster.set_node_labels("gpu-h100-01", {"nvidia.com/mig.config": None})
    backend.repartition(other)
    document = yaml.safe_load(cluster.configmaps[("gpu-operator", "tessera-mig-parted-config")]["data"]["config.yaml"])
    assert set(document["mig-configs"]) == {name, "tessera-other"}  # recent configs are kept


def _layout(change):
    profiles = ["1g.10gb", "2g.20gb", "3g.40gb"]
    return tuple((gpu, (MigSlot(profiles[(change + gpu) % 3], 0), MigSlot("1g.10gb", 6))) for gpu in range(8))


def test_the_mig_parted_config_stays_bounded_over_1500_repartitions():
    """Each change added an entry, never removed, until the 1 MiB limit answered 422 (~1,100
    changes of 8-GPU layouts). Kept now: what nodes name, the newest few and the admin's own."""
    import yaml

    document = {"version": "v1", "mig-configs": {"all-disabled": [{"devices": "all", "mig-enabled": False}]}}
    labels = {"gpu-h100-01": None, "gpu-h100-02": None}
    most = 0
    for change in range(1500):
        node = ("gpu-h100-01", "gpu-h100-02")[change % 2]
        in_use = {name for name in labels.values() if name}
        document = m.mig_parted_config_merge(document, f"tessera-{change}", dict(_layout(change)), keep=in_use)
        labels[node] = f"tessera-{change}"  # then the backend labels the node
        most = max(most, len(document["mig-configs"]))
    names = list(document["mig-configs"])
    assert names[0] == "all-disabled" and names[-2:] == ["tessera-1498", "tessera-1499"]
    assert most <= 1 + m.MIG_CONFIGS_RECENT + 2
    assert len(yaml.safe_dump(document, sort_keys=False)) < 64 * 1024  # the limit is 1 MiB


def test_repartitions_through_the_api_prune_and_fit_the_limit(backend, cluster):
    import yaml

    cluster.add_node("gpu-h100-02", {"nvidia.com/gpu.present": "true"})
    for change in range(40):
        node = ("gpu-h100-01", "gpu-h100-02")[change % 2]
        layout = _layout(change)
        backend.repartition(RepartitionRequest(node, 0, layout[0][1], f"tessera-{change}", node_layout=layout))
    document = yaml.safe_load(cluster.configmaps[("gpu-operator", "tessera-mig-parted-config")]["data"]["config.yaml"])
    names = list(document["mig-configs"])
    assert names[-1] == "tessera-39" and len(names) == m.MIG_CONFIGS_RECENT + 2  # the two nodes' own, the newest


def test_repartition_reports_failure_and_times_out_cleanly(backend, cluster):
    req = _repartition()
    backend.repartition(req)
    started = time.monotonic()
    state = wait_for_repartition(backend, "gpu-h100-01", req.config_name, timeout_s=0.3,
                                 poll_s=0.05)
    assert state.phase is RepartitionPhase.PENDING and not state.finished
    assert time.monotonic() - started < 2
    cluster.set_node_labels("gpu-h100-01", {"nvidia.com/mig.config.state": "failed"})
    state = wait_for_repartition(backend, "gpu-h100-01", req.config_name, timeout_s=5, poll_s=0.05)
    assert state.phase is RepartitionPhase.FAILED and state.finished


def test_the_fake_reproduces_the_clients_binding_trap(backend, cluster):
    """Why the backend binds with _preload_content=False: the answer is a Status, not a Binding."""
    backend.core.create_namespaced_pod("team-vision", m.pod_manifest(_bind(), "tessera"))
    body = m.binding_manifest("job-42-0", "team-vision", "gpu-h100-01")
    with pytest.raises(ValueError):  # pydantic's ValidationError is a ValueError
        backend.core.create_namespaced_pod_binding("job-42-0", "team-vision", body)
    assert cluster.pod("team-vision", "job-42-0")["spec"]["nodeName"] == "gpu-h100-01"


def test_poll_sees_our_pods_only(backend, cluster):
    backend.bind(_bind())
    stranger = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
    backend.core.create_namespaced_pod("team-vision", stranger)
    (seen,) = backend.poll_observations()
    # Bound, and Pending until its kubelet starts it (as on a real API server).
    assert (seen.job_id, seen.status, seen.node_name) == ("42", JobStatus.PENDING, "gpu-h100-01")


def test_one_jobs_pods_are_read_by_its_label(backend, cluster):
    backend.bind(_bind())
    backend.bind(_bind(job_id="43", pod_name="job-43-0"))
    cluster.set_pod_phase("team-vision", "job-43-0", "Running")
    assert [(o.pod_name, o.status) for o in backend.job_observations("43")] == [("job-43-0", JobStatus.RUNNING)]
    assert backend.job_observations("44") == []


@pytest.mark.parametrize("code", [429, 503])
def test_a_throttled_or_unavailable_api_is_a_transient_error_and_a_retry_succeeds(backend, cluster, code):
    cluster.fail_next(1, code=code, reason="TooManyRequests" if code == 429 else "ServiceUnavailable")
    with pytest.raises(TransientBackendError):
        backend.inventory()
    assert {n.name for n in backend.inventory()} >= {"gpu-h100-01"}


def test_reading_one_jobs_pods_while_the_api_is_away_is_a_transient_error(backend, cluster):
    cluster.fail_next(1, code=503, reason="ServiceUnavailable")
    with pytest.raises(TransientBackendError):
        backend.job_observations("42")
