"""mig-manager's ConfigMap stays bounded on a real API server, whose 1 MiB limit refused it after
~1,100 changes (issue 13 point 5), and its writes are conditional on the version they read."""

from __future__ import annotations

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends import MigSlot, RepartitionRequest
from agents.backends import k8s_manifests as m
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from tests.kube.kubelet import GpuNode

NAMESPACE, NAME = "gpu-operator", "tessera-mig-parted-config"
PROFILES = ["1g.10gb", "2g.20gb", "3g.40gb"]


@pytest.fixture
def backend(control_plane):
    """The worker's backend with deploy/rbac.yaml's rights, as in production."""
    with control_plane.backend_client() as api_client:
        yield KubernetesBackend(KubernetesConfig(api_client=api_client))


@pytest.fixture
def mig_nodes(kubelet, kube_admin):
    names = ["mig-01", "mig-02"]
    for name in names:
        kubelet.add_node(GpuNode(name))
    core = client.CoreV1Api(kube_admin)
    yield names, core
    try:
        core.delete_namespaced_config_map(NAME, NAMESPACE)
    except ApiException as error:
        if error.status != 404:
            raise


def test_repartitions_keep_the_mig_parted_config_bounded(backend, mig_nodes):
    """100 changes here (tests/agents has the 1,500-change count on the merge itself)."""
    names, core = mig_nodes
    admin_entry = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    core.create_namespaced_config_map(NAMESPACE, m.config_map_manifest(NAME, NAMESPACE, {
        "config.yaml": yaml.safe_dump({"version": "v1", "mig-configs": admin_entry})}))
    for change in range(100):
        node = names[change % 2]
        layout = tuple((gpu, (MigSlot(PROFILES[(change + gpu) % 3], 0), MigSlot("1g.10gb", 6))) for gpu in range(8))
        backend.repartition(RepartitionRequest(node, change % 8, layout[change % 8][1], f"tessera-{change}",
                                               node_layout=layout))
        core.patch_node(node, m.label_patch({"nvidia.com/mig.config.state": "success"}))  # mig-manager's part
    text = core.read_namespaced_config_map(NAME, NAMESPACE).data["config.yaml"]
    names_kept = list(yaml.safe_load(text)["mig-configs"])
    assert "all-disabled" in names_kept and {"tessera-98", "tessera-99"} <= set(names_kept)
    assert len(names_kept) <= 1 + m.MIG_CONFIGS_RECENT + 2 and len(text) < 64 * 1024


def test_a_write_from_a_stale_read_is_refused_by_the_server(backend, mig_nodes):
    """The precondition the backend relies on to merge again instead of losing a raced entry."""
    _names, core = mig_nodes
    made = core.create_namespaced_config_map(NAMESPACE, m.config_map_manifest(NAME, NAMESPACE, {"config.yaml": ""}))
    core.patch_namespaced_config_map(NAME, NAMESPACE, {"data": {"config.yaml": "a: 1\n"}})
    stale = {"metadata": {"resourceVersion": made.metadata.resource_version}, "data": {"config.yaml": "b: 2\n"}}
    with pytest.raises(ApiException) as refused:
        backend.core.patch_namespaced_config_map(NAME, NAMESPACE, stale, _content_type="application/merge-patch+json")
    assert refused.value.status == 409
