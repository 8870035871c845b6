"""A repartition ActionRequest carried out through the simulated cluster: rows follow the layout."""

import pytest
from django.utils import timezone

from agents import actions
from agents.actions.state import REQUESTED
from scheduling.models import ActionRequest, Gpu, MigInstance, Node

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def mig_capable_gpus(cluster):
    Gpu.objects.update(mig_capable=True)


def repartition_request(node, index, layout, mig_enabled=True) -> ActionRequest:
    return ActionRequest.objects.create(
        key=f"repartition:{node.name}:{index}:test", kind="repartition", node=node,
        payload={"node": node.name, "gpu_index": index, "mig_enabled": mig_enabled,
                 "layout": [list(slot) for slot in layout]})


def advance_until_done(action, backend, steps=10) -> str:
    for _ in range(steps):
        state = actions.action_advance(action_id=action.pk, backend=backend, now=timezone.now())
        if state != REQUESTED:
            return state
        backend.advance(1.0)
    return state


def test_a_whole_gpu_becomes_a_mig_gpu_with_the_planned_instances(cluster):
    node = Node.objects.get(name="r-01")
    action = repartition_request(node, 0, [("3g.40gb", 4), ("2g.20gb", 0)])
    assert advance_until_done(action, cluster) == "confirmed"
    gpu = Gpu.objects.get(node=node, index=0)
    assert gpu.mig_enabled
    assert sorted(MigInstance.objects.filter(gpu=gpu).values_list("profile", "start_slot")) == \
        [("2g.20gb", 0), ("3g.40gb", 4)]
    assert actions.action_advance(action_id=action.pk, backend=cluster) == "confirmed"  # repeat: no change
    assert MigInstance.objects.filter(gpu=gpu).count() == 2


def test_a_second_change_of_the_same_node_waits_for_the_first(cluster):
    node = Node.objects.get(name="r-01")
    first = repartition_request(node, 0, [("7g.80gb", 0)])
    second = ActionRequest.objects.create(
        key="repartition:r-01:1:test", kind="repartition", node=node,
        payload={"node": "r-01", "gpu_index": 1, "mig_enabled": True, "layout": [["7g.80gb", 0]]})
    assert actions.action_advance(action_id=second.pk, backend=cluster) == REQUESTED
    assert not MigInstance.objects.filter(gpu__node=node, gpu__index=1).exists()
    assert advance_until_done(first, cluster) == "confirmed"
    assert advance_until_done(second, cluster) == "confirmed"
    assert MigInstance.objects.filter(gpu__node=node).count() == 2
