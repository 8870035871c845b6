"""The real control plane (one per test session), the kubelet harness, and Tessera's workers on it.

A test here that cannot have the control plane fails loudly: build it with
tools/kube-control-plane/build.sh (`make test` and `.ci/run` do it when it is missing).
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.utils import timezone
from kubernetes import client, utils
from kubernetes.client.exceptions import ApiException

from portal.models import BusinessUnit, Project, Team
from scheduling.defaults import PRIORITIES
from scheduling.models import CapacityTier, Gpu, NetworkSwitch, Node, PriorityClass
from tests.kube.control_plane import ControlPlane, ControlPlaneMissing
from tests.kube.kubelet import GpuNode, Kubelet
from tests.kube.operator_crds import install_operator_crds
from tests.workers.conftest import Workers, job_add

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
TEAM = "vision"  # the team, and so the namespace its pods go to
# What a cluster admin sets up before Tessera: its namespaces (deploy/ has no ordering of its own).
PREREQUISITE_NAMESPACES = ("tessera-system", "gpu-operator")


def apply(api_client: client.ApiClient, path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        if document is None:
            continue
        try:
            utils.create_from_dict(api_client, document)
        except utils.FailToCreateError as failure:
            if any(error.status != 409 for error in failure.api_exceptions):
                raise


def namespace_ensure(core: client.CoreV1Api, name: str, timeout: float = 60.0) -> None:
    """A namespace whose default ServiceAccount has its token (v1.20 admits no pod before that)."""
    try:
        core.create_namespace({"metadata": {"name": name}})
    except ApiException as error:
        if error.status != 409:
            raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if core.read_namespaced_service_account("default", name).secrets:
                return
        except ApiException as error:
            if error.status != 404:
                raise
        time.sleep(0.2)
    raise AssertionError(f"namespace {name}: no default ServiceAccount token after {timeout:.0f} s")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory):
    try:
        plane = ControlPlane(tmp_path_factory.mktemp("kube-control-plane"))
    except ControlPlaneMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    try:
        plane.start()
        with plane.admin_client() as admin:
            core = client.CoreV1Api(admin)
            for namespace in PREREQUISITE_NAMESPACES:
                namespace_ensure(core, namespace)
            for manifest in ("namespace.yaml", "rbac.yaml", "priorityclasses.yaml"):
                apply(admin, DEPLOY / manifest)
            namespace_ensure(core, TEAM)
            install_operator_crds(admin)  # now: the garbage collector's 30 s sync (operator_crds.py)
        yield plane
    finally:
        plane.cleanup()


CRDS = Path(__file__).resolve().parent / "crds"  # vendored, with their source and licence (crds/README.md)


@pytest.fixture(scope="session")
def podgroup_crd(control_plane):
    """The scheduler-plugins PodGroup CRD, installed and Established (its API served)."""
    with control_plane.admin_client() as admin:
        apply(admin, CRDS / "podgroups.scheduling.x-k8s.io.yaml")
        extensions = client.ApiextensionsV1Api(admin)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            conditions = extensions.read_custom_resource_definition("podgroups.scheduling.x-k8s.io").status.conditions
            if any(c.type == "Established" and c.status == "True" for c in conditions or []):
                return
            time.sleep(0.2)
    raise AssertionError("the PodGroup CRD was not Established within 60 s")


@pytest.fixture
def kube_admin(control_plane):
    with control_plane.admin_client() as api_client:
        yield api_client


@pytest.fixture
def kubelet(control_plane, kube_admin):
    """The harness, with no nodes yet; everything it and the test left behind is gone after."""
    harness = Kubelet(control_plane.admin_client()).start()
    yield harness
    harness.stop()
    core = client.CoreV1Api(kube_admin)
    for pod in core.list_pod_for_all_namespaces(label_selector="app.kubernetes.io/managed-by=tessera").items:
        try:
            core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise
    harness.remove_nodes()
    assert not harness.errors, harness.errors


def team_rows() -> None:
    """The priority classes and one team, vision, that may use 16 GPUs: what no cluster says."""
    for name, value, preemptible, lead_only, description in PRIORITIES:
        PriorityClass.objects.get_or_create(name=name, defaults={
            "value": value, "preemptible": preemptible, "lead_only": lead_only, "description": description})
    unit = BusinessUnit.objects.create(name="Research", cost_center="CC-1")
    team = Team.objects.create(name=TEAM, business_unit=unit, guaranteed_gpus=Decimal(16),
                               burst_limit_gpus=Decimal(16))
    Project.objects.create(team=team, name="detection")


def cluster_rows(nodes: list[GpuNode]) -> None:
    """The database's picture of the harness's nodes, as typed in the admin, and team_rows()."""
    tier = CapacityTier.objects.get_or_create(name="on-demand")[0]
    spine = NetworkSwitch.objects.create(name="spine-1", kind="spine")
    leaf = NetworkSwitch.objects.create(name="leaf-1", kind="leaf", parent=spine)
    for spec in nodes:
        node = Node.objects.create(name=spec.name, tier=tier, leaf_switch=leaf, gpu_model="H100-80GB",
                                   interconnect="nvswitch", cpu_cores=64, memory_gb=512, last_heartbeat=timezone.now())
        for index in range(spec.gpus):
            Gpu.objects.create(node=node, index=index, uuid=f"GPU-{spec.name}-{index}", model="H100-80GB",
                               memory_gb=80)
    team_rows()


IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def kube_job(name: str, **fields):
    """A training job of team vision, as submitted (a real cluster needs its image)."""
    return job_add(name, **{"image": IMAGE, **fields})


NODES = [GpuNode("gpu-01", gpus=4), GpuNode("gpu-02", gpus=4)]


@pytest.fixture
def gpu_cluster(kubelet):
    """Two 4-GPU nodes played by the harness, and the same in the database."""
    for node in NODES:
        kubelet.add_node(node)
    cluster_rows(NODES)
    return kubelet


@pytest.fixture
def kube_workers(control_plane, settings, tmp_path):
    """Real Celery workers whose backend is the real control plane, with deploy/rbac.yaml's rights."""
    settings.TESSERA_BACKEND = "kubernetes"
    pool = Workers(str(tmp_path / "unused.json"), log=str(tmp_path / "workers.log"), env={
        "TESSERA_BACKEND": "kubernetes", "TESSERA_KUBECONFIG": str(control_plane.backend_kubeconfig())})
    yield pool
    pool.stop()
