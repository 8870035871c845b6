"""A MIG change that mig-manager fails against a stale mounted copy of its ConfigMap is applied
again (issue 13 point 5), through the workers' repartition step and the Kubernetes backend, against
the fake API server; mig-manager is played by tests/agents/mig_manager.py."""

from datetime import timedelta

import pytest
import yaml
from django.utils import timezone

from agents import actions
from scheduling.models import ActionRequest, MigInstance
from tests.agents.mig_manager import MigManager
from tests.agents.placing import vision_world

CONFIGMAP = ("gpu-operator", "tessera-mig-parted-config")
LABEL, STATE = "nvidia.com/mig.config", "nvidia.com/mig.config.state"


class FakeNodeMigManager(MigManager):
    """Fed by the fake's log of node patches: every label value, as a node watch delivers them."""

    def __init__(self, kube, node: str) -> None:
        super().__init__(lambda state: kube.set_node_labels(node, {STATE: state}))
        self.kube, self.node, self._read = kube, node, 0

    def step(self):
        for name, labels in self.kube.node_label_log[self._read:]:
            if name == self.node:
                self.label_seen(labels.get(LABEL))
        self._read = len(self.kube.node_label_log)
        return super().step()

    def refresh_mount(self) -> None:
        """The kubelet catches up: the pod's copy is the ConfigMap as it is now."""
        text = self.kube.configmaps[CONFIGMAP]["data"]["config.yaml"]
        self.mounted = set(yaml.safe_load(text)["mig-configs"])


@pytest.fixture
def world(db, kube):
    return vision_world(kube)


@pytest.fixture
def mig_manager(world, kube):
    return FakeNodeMigManager(kube, world.node.name)


def repartition(world) -> ActionRequest:
    node = world.node
    return ActionRequest.objects.create(
        key=f"repartition:{node.name}:0:test", kind="repartition", node=node,
        payload={"node": node.name, "gpu_index": 0, "mig_enabled": True, "layout": [["3g.40gb", 4], ["2g.20gb", 0]]})


def advance(action, backend, t0, seconds) -> str:
    return actions.action_advance(action_id=action.pk, backend=backend, now=t0 + timedelta(seconds=seconds))


def test_a_change_failed_on_a_stale_mount_is_applied_again_and_succeeds(world, backend, mig_manager):
    action, t0 = repartition(world), timezone.now()
    assert advance(action, backend, t0, 0) == "requested"
    name = f"tessera-{action.pk}"
    assert mig_manager.step() == (name, "failed")  # its copy of the ConfigMap predates our entry
    assert advance(action, backend, t0, 5) == "requested"  # not yet: the copy needs time to catch up
    assert mig_manager.step() is None  # nothing changed its label
    mig_manager.refresh_mount()
    assert advance(action, backend, t0, 31) == "requested"  # the retry: label taken away, set again
    assert mig_manager.step() == (name, "success")
    assert advance(action, backend, t0, 35) == "confirmed"
    assert sorted(MigInstance.objects.filter(gpu=world.whole).values_list("profile", "start_slot")) == \
        [("2g.20gb", 0), ("3g.40gb", 4)]
    action.refresh_from_db()
    assert action.payload["mig_retries"] == 1
    assert [run[0] for run in mig_manager.runs] == [name, name]  # the removed label woke nothing


def test_a_change_still_failing_after_the_refresh_window_fails_with_the_reason(world, backend, mig_manager):
    action, t0 = repartition(world), timezone.now()
    advance(action, backend, t0, 0)
    for at in (31, 61, 91):  # spread over the 90 s window: the last try begins at its end
        assert mig_manager.step()[1] == "failed"
        assert advance(action, backend, t0, at - 2) == "requested"
        assert advance(action, backend, t0, at) == "requested"
    assert mig_manager.step()[1] == "failed"
    assert advance(action, backend, t0, 95) == "failed"
    action.refresh_from_db()
    assert "failed after 3 more tries over 95 s" in action.last_error
    assert f"nvidia-mig-manager log on {world.node.name}" in action.last_error
    assert len(mig_manager.runs) == 4 and not MigInstance.objects.filter(gpu=world.whole).exists()


def test_with_no_refresh_window_a_failure_is_final(world, backend, mig_manager, settings):
    settings.TESSERA_MIG_CONFIG_REFRESH_S = 0
    action, t0 = repartition(world), timezone.now()
    advance(action, backend, t0, 0)
    assert mig_manager.step()[1] == "failed"
    assert advance(action, backend, t0, 1) == "failed"
    action.refresh_from_db()
    assert "more tries" not in action.last_error and len(mig_manager.runs) == 1
