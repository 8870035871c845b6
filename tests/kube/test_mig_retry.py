"""A MIG change that mig-manager fails against its stale mounted copy of the ConfigMap is applied
again, on a real API server (issue 13 point 5): mig-manager is played by tests/agents/mig_manager.py,
fed by a real node watch, so the label's removal and return reach it as two separate changes."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from django.utils import timezone
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from agents import actions
from agents.backends import k8s_manifests as m
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from scheduling.models import ActionRequest, MigInstance
from tests.agents.mig_manager import MigManager
from tests.billing.factories import make_world
from tests.kube.kubelet import GpuNode

NAMESPACE, NAME = "gpu-operator", "tessera-mig-parted-config"
LABEL, STATE = "nvidia.com/mig.config", "nvidia.com/mig.config.state"


class WatchingMigManager(MigManager):
    """Reads its node's changes from a watch, resumed from the last resourceVersion it saw."""

    def __init__(self, core: client.CoreV1Api, node: str) -> None:
        super().__init__(lambda state: core.patch_node(node, m.label_patch({STATE: state})))
        self.core, self.node = core, node
        self.version = core.read_node(node).metadata.resource_version

    def step(self):
        stream = watch.Watch()
        for event in stream.stream(self.core.list_node, field_selector=f"metadata.name={self.node}",
                                   resource_version=self.version, timeout_seconds=1):
            self.version = event["object"].metadata.resource_version
            self.label_seen((event["object"].metadata.labels or {}).get(LABEL))
        return super().step()

    def refresh_mount(self) -> None:
        text = self.core.read_namespaced_config_map(NAME, NAMESPACE).data["config.yaml"]
        self.mounted = set(yaml.safe_load(text)["mig-configs"])


@pytest.fixture
def world(db, kubelet, kube_admin):
    world = make_world(jobs=0, name="migretry")
    kubelet.add_node(GpuNode(world.node.name))
    yield world
    try:
        client.CoreV1Api(kube_admin).delete_namespaced_config_map(NAME, NAMESPACE)
    except ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
def backend(control_plane):
    """The worker's backend with deploy/rbac.yaml's rights, as in production."""
    with control_plane.backend_client() as api_client:
        yield KubernetesBackend(KubernetesConfig(api_client=api_client))


def test_a_change_failed_on_a_stale_mount_is_applied_again_and_succeeds(world, backend, kube_admin):
    mig_manager = WatchingMigManager(client.CoreV1Api(kube_admin), world.node.name)
    node = world.node
    action = ActionRequest.objects.create(
        key=f"repartition:{node.name}:0:test", kind="repartition", node=node,
        payload={"node": node.name, "gpu_index": 0, "mig_enabled": True, "layout": [["7g.80gb", 0]]})
    t0, name = timezone.now(), f"tessera-{action.pk}"

    def advance(seconds: float) -> str:
        return actions.action_advance(action_id=action.pk, backend=backend, now=t0 + timedelta(seconds=seconds))

    assert advance(0) == "requested"
    assert mig_manager.step() == (name, "failed")  # the kubelet has not refreshed its copy yet
    assert advance(5) == "requested"
    mig_manager.refresh_mount()
    assert advance(31) == "requested"  # the retry: the label taken away, then set again
    assert mig_manager.step() == (name, "success")
    assert advance(35) == "confirmed"
    assert list(MigInstance.objects.filter(gpu__node=node, gpu__index=0).values_list("profile", "start_slot")) == \
        [("7g.80gb", 0)]
    assert [run[0] for run in mig_manager.runs] == [name, name]  # the removal woke nothing
