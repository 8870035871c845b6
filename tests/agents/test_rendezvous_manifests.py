"""What a multi-pod run's pods get for torchrun, and what a team attaches, as the backend builds it:
valid against the official schemas, strictly."""

import pytest

from agents.backends import BindRequest
from agents.backends import k8s_manifests as m
from agents.backends.base import Attachments, Rendezvous
from scheduling.kube_names import RESERVED_MOUNTS, attachment_errors, mount_path_problem
from tests.agents.k8s_schema import assert_valid

RUN = "tessera-42-1700000000"


def _bind(member=1, members=2, **overrides):
    rdzv = Rendezvous(
        service=RUN, members=members, member=member, nproc=4, world_size=4 * members, first_rank=4 * member
    )
    fields = dict(
        job_id="42",
        pod_name=f"vision-42-1700000000-{member}",
        namespace="vision",
        project="detector",
        job_kind="training",
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        command=("torchrun", "train.py"),
        node_name="gpu-02",
        gpu_count=4,
        memory_mib=65536,
        rendezvous=rdzv,
    )
    return BindRequest(**{**fields, **overrides})


def _env(pod):
    return {v["name"]: v["value"] for v in pod["spec"]["containers"][0]["env"]}


def test_a_member_finds_member_0_by_name_and_knows_its_ranks():
    pod = m.pod_manifest(_bind(), "tessera")
    assert_valid(pod)
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("member-1", RUN)
    assert pod["metadata"]["labels"][m.LABEL_RENDEZVOUS] == RUN
    env = _env(pod)
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == f"member-0.{RUN}"
    assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"
    assert (env["WORLD_SIZE"], env["RANK"], env["NODE_RANK"], env["NNODES"], env["LOCAL_WORLD_SIZE"]) == (
        "8",
        "4",
        "1",
        "2",
        "4",
    )
    assert (env["PET_NNODES"], env["PET_NODE_RANK"], env["PET_NPROC_PER_NODE"]) == ("2", "1", "4")


def test_the_runs_headless_service_selects_its_pods_before_they_are_ready():
    service = m.rendezvous_service_manifest(_bind())
    assert_valid(service)
    spec = service["spec"]
    assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is True
    assert spec["selector"] == {m.LABEL_RENDEZVOUS: RUN}
    assert service["metadata"]["labels"][m.LABEL_JOB] == "42"


def test_a_pod_of_its_own_gets_no_service_and_no_rendezvous_settings():
    pod = m.pod_manifest(_bind(member=0, members=1), "tessera")
    assert_valid(pod)
    assert "subdomain" not in pod["spec"] and m.LABEL_RENDEZVOUS not in pod["metadata"]["labels"]
    assert not {"MASTER_ADDR", "WORLD_SIZE", "RANK"} & set(_env(pod))
    assert not m.gang_service(_bind(member=0, members=1))


def test_every_pod_gets_a_memory_backed_dev_shm_of_half_its_memory_limit():
    pod = m.pod_manifest(_bind(rendezvous=None), "tessera")
    assert_valid(pod)
    (shm,) = [v for v in pod["spec"]["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "32768Mi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in pod["spec"]["containers"][0]["volumeMounts"]


def test_a_teams_claim_and_secrets_reach_the_container():
    extra = Attachments(volume_claim="ckpt", volume_mount_path="/data/ckpt", env_secret="wandb", file_secret="hf-token")
    pod = m.pod_manifest(_bind(attachments=extra), "tessera")
    assert_valid(pod)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["team-volume"]["persistentVolumeClaim"] == {"claimName": "ckpt"}
    assert volumes["team-secret"]["secret"] == {"secretName": "hf-token"}
    container = pod["spec"]["containers"][0]
    mounts = {v["name"]: v for v in container["volumeMounts"]}
    assert mounts["team-volume"]["mountPath"] == "/data/ckpt"
    assert mounts["team-secret"] == {"name": "team-secret", "mountPath": "/etc/secrets/hf-token", "readOnly": True}
    assert container["envFrom"] == [{"secretRef": {"name": "wandb"}}]


def test_a_bad_name_never_reaches_the_cluster():
    with pytest.raises(ValueError, match="not a valid Kubernetes name"):
        m.pod_manifest(_bind(attachments=Attachments(env_secret="Bad_Name")), "tessera")


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"volume_claim": "other-team/ckpt"}, "volume_claim"),
        ({"env_secret": "UPPER"}, "env_secret"),
        ({"file_secret": "-leading"}, "file_secret"),
        ({"volume_claim": "x" * 254}, "volume_claim"),
        ({"volume_claim": "ckpt", "volume_mount_path": "relative"}, "volume_mount_path"),
        ({"volume_claim": "ckpt", "volume_mount_path": "/dev/shm"}, "volume_mount_path"),
        ({"volume_claim": "ckpt", "volume_mount_path": "/a/../etc"}, "volume_mount_path"),
    ],
)
def test_submit_refuses_names_and_paths_the_cluster_would(fields, field):
    given = {"volume_claim": "", "volume_mount_path": "/checkpoints", "env_secret": "", "file_secret": ""} | fields
    assert set(attachment_errors(**given)) == {field}


def test_tesseras_own_mounts_are_all_reserved():
    for path in (m.PODINFO_DIR, m.TOKEN_DIR, m.SHM_DIR, m.SECRET_FILES_DIR):
        assert mount_path_problem(path) is not None, path
        assert any(path == r or path.startswith(r + "/") for r in RESERVED_MOUNTS)
