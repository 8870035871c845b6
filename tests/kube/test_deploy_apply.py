"""`kubectl apply -k deploy/` on a fresh cluster with the GPU Operator's prerequisites: one step, every
object created, every pod template admitted, a second apply changes nothing.

A control plane of its own (not the session's, which already holds deploy/'s RBAC), and kubectl 1.20
from the same source as the API server (tools/kube-control-plane/build.sh): its built-in kustomize
renders the base and it validates each object against the server's own /openapi/v2 schema.
What differs from a current cluster: 1.20 has no policy/v1 PodDisruptionBudget (1.21+; 1.25 removed
v1beta1), so this copy of the base says policy/v1beta1, whose fields are the same for ours.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from tests.kube.control_plane import BUILD_SCRIPT, CACHE, ROOT, ControlPlane, ControlPlaneMissing
from tests.kube.kubelet import GpuNode, Kubelet

KUBECTL = CACHE / "bin" / "kubectl"
# What the GPU Operator brings (README, "Deploying"): its namespace and the nvidia RuntimeClass.
OPERATOR_PREREQUISITES = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}},
    {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"},
]
# Pods the controllers create from deploy/'s templates (the DaemonSet's on the one GPU node below).
EXPECTED_PODS = {"tessera-portal": 2, "tessera-worker": 2, "tessera-beat": 2, "tessera-redis": 1,
                 "tessera-migrate": 1, "tessera-node-agent": 1}


def kubectl_binary() -> Path:
    if not KUBECTL.exists():
        raise ControlPlaneMissing(f"kubectl is missing: {KUBECTL}.\n"
                                  f"Fetch it (seconds): {BUILD_SCRIPT.relative_to(ROOT)}")
    return KUBECTL


@pytest.fixture(scope="module")
def fresh_cluster(tmp_path_factory):
    try:
        kubectl_binary()
        plane = ControlPlane(tmp_path_factory.mktemp("fresh-cluster"))
    except ControlPlaneMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    try:
        plane.start()
        with plane.admin_client() as admin:
            for document in OPERATOR_PREREQUISITES:
                dynamic.DynamicClient(admin).resources.get(
                    api_version=document["apiVersion"], kind=document["kind"]).create(body=document)
        yield plane
    finally:
        plane.cleanup()


def base_for_1_20(folder: Path) -> Path:
    """A copy of deploy/ (and of the OpenShift overlay beside it, as in the repository) that a 1.20
    API server accepts (see the module's docstring)."""
    copy = folder / "deploy"
    shutil.copytree(ROOT / "deploy", copy, ignore=shutil.ignore_patterns("grafana"))
    shutil.copytree(ROOT / "examples" / "openshift", folder / "examples" / "openshift")
    budgets = copy / "disruption.yaml"
    budgets.write_text(budgets.read_text().replace("apiVersion: policy/v1\n", "apiVersion: policy/v1beta1\n"))
    return copy


def kubectl(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(kubectl_binary()), f"--kubeconfig={plane.folder / 'admin.kubeconfig'}", *args],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def pods_by_owner(core: client.CoreV1Api) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in core.list_namespaced_pod("tessera-system").items:
        name = pod.metadata.labels.get("app.kubernetes.io/name", "?")
        counts[name] = counts.get(name, 0) + 1
    return counts


def test_kubectl_apply_k_creates_every_object_of_the_base_in_one_step(fresh_cluster, tmp_path):
    base = base_for_1_20(tmp_path)
    rendered = kubectl(fresh_cluster, "kustomize", str(base))
    assert rendered.returncode == 0, rendered.stderr
    documents = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    assert documents[0]["kind"] == "Namespace"  # kustomize puts it first, whatever the file order

    applied = kubectl(fresh_cluster, "apply", "--validate=true", "-k", str(base))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert applied.stdout.count(" created") == len(documents), applied.stdout

    with fresh_cluster.admin_client() as admin:
        api = dynamic.DynamicClient(admin)
        missing = []
        for doc in documents:
            resource = api.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            try:
                resource.get(name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"))
            except ApiException as error:
                missing.append((doc["kind"], doc["metadata"]["name"], error.status))
        assert missing == []
        images = {container["image"] for doc in documents if doc["kind"] in ("Deployment", "Job")
                  for container in doc["spec"]["template"]["spec"]["containers"]}
        assert "tessera:0.1.0" in images  # the kustomization's image entry, as the Dockerfile tags it

        # The controllers make pods from every template: each passed admission (ServiceAccount,
        # RuntimeClass `nvidia`, the API server's validation) on a stock control plane.
        harness = Kubelet(fresh_cluster.admin_client()).start()
        try:
            harness.add_node(GpuNode("gpu-01", gpus=4))
            core = client.CoreV1Api(admin)
            deadline = time.monotonic() + 90
            while pods_by_owner(core) != EXPECTED_PODS and time.monotonic() < deadline:
                time.sleep(1)
            assert pods_by_owner(core) == EXPECTED_PODS
        finally:
            harness.stop()
        agent = next(pod for pod in core.list_namespaced_pod("tessera-system").items
                     if pod.metadata.labels.get("app.kubernetes.io/name") == "tessera-node-agent")
        assert agent.spec.runtime_class_name == "nvidia"

    again = kubectl(fresh_cluster, "apply", "-k", str(base))
    assert again.returncode == 0, again.stderr
    changed = [line for line in again.stdout.splitlines() if line.strip() and not line.endswith(" unchanged")]
    # 1.20 drops the Job's ttlSecondsAfterFinished (alpha there, off), so kubectl sends it again each
    # time; a 1.23+ server keeps it and the Job is unchanged too.
    assert changed == ["job.batch/tessera-migrate configured"], again.stdout


def test_the_secret_templates_pass_the_servers_validation(fresh_cluster):
    """Server-side dry run: validated and admitted by the real API server, nothing stored."""
    assert kubectl(fresh_cluster, "apply", "-f", str(ROOT / "deploy" / "namespace.yaml")).returncode == 0
    checked = kubectl(fresh_cluster, "apply", "--dry-run=server", "-f", str(ROOT / "deploy" / "secrets.example.yaml"))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.count("(server dry run)") == 1, checked.stdout  # tessera-secrets: the agents need none


def test_the_openshift_overlay_moves_the_mig_config_rights_to_its_operator_namespace(fresh_cluster, tmp_path):
    base = base_for_1_20(tmp_path)
    with fresh_cluster.admin_client() as admin:
        core = client.CoreV1Api(admin)
        core.create_namespace({"metadata": {"name": "nvidia-gpu-operator"}})
        applied = kubectl(fresh_cluster, "apply", "-k", str(base.parent / "examples" / "openshift"))
        assert applied.returncode == 0, applied.stdout + applied.stderr
        rbac = client.RbacAuthorizationV1Api(admin)
        assert rbac.read_namespaced_role("tessera-mig-config", "nvidia-gpu-operator").rules
        binding = rbac.read_namespaced_role_binding("tessera-mig-config", "nvidia-gpu-operator")
        assert binding.subjects[0].name == "tessera-backend"
        config = core.read_namespaced_config_map("tessera-config", "tessera-system").data
        assert config["TESSERA_GPU_OPERATOR_NAMESPACE"] == "nvidia-gpu-operator"
        assert config["TESSERA_MIG_CONFIGMAP"] == "tessera-mig-parted-config"  # the rest as the base says


def test_a_field_the_servers_schema_lacks_is_refused_before_anything_is_created(fresh_cluster, tmp_path):
    """kubectl validates each object against the server's /openapi/v2: what the base passes above."""
    base = base_for_1_20(tmp_path)
    portal = base / "portal.yaml"
    portal.write_text(portal.read_text().replace("  replicas: 2\n", "  replicas: 2\n  replicaz: 2\n", 1))
    refused = kubectl(fresh_cluster, "apply", "--validate=true", "--dry-run=server", "-k", str(base))
    assert refused.returncode != 0 and 'unknown field "replicaz"' in refused.stderr, refused.stderr
