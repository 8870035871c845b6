"""A node typed in the admin gets its GPUs in the same step (issue 16 item 2: every GPU used to be
typed by hand, uuid included), with the model and count checked, and takes no work until its agent
reports."""

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.services import node_heartbeat
from scheduling import engine
from scheduling.gpu_catalogue import node_gpus_add
from scheduling.models import CapacityTier, Gpu, NetworkSwitch, Node
from scheduling.snapshot import build_snapshot
from ui.demo import demo_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    demo_load()
    client.login(username="admin", password="admin-demo-pass")
    return client


def _add(client, **changes):
    form = {"name": "h100-new", "tier": CapacityTier.objects.get(name="reserved").pk,
            "leaf_switch": NetworkSwitch.objects.filter(kind="leaf").first().pk, "gpu_model": "H100",
            "gpu_count": "8", "interconnect": "nvswitch", "cpu_cores": "96", "memory_gb": "1024", "nics": "8",
            "nic_gbps": "400", "state": "joining", "agent_url": ""} | changes
    return client.post(reverse("admin:scheduling_node_add"), form)


def test_the_add_form_asks_for_a_count_beside_the_model_and_no_gpu_rows(staff):
    page = staff.get(reverse("admin:scheduling_node_add")).content.decode()
    assert 'name="gpu_count"' in page and "H100-80GB" in page  # the known models are named
    assert page.index('name="gpu_model"') < page.index('name="gpu_count"') < page.index('name="interconnect"')
    assert "gpus-TOTAL_FORMS" not in page  # no GPU rows to type


def test_a_node_and_its_gpus_in_one_step(staff):
    response = _add(staff)
    assert response.status_code == 302, response.content.decode()[-1500:]
    node = Node.objects.get(name="h100-new")
    gpus = list(node.gpus.order_by("index"))
    assert node.gpu_model == "H100-80GB" and node.state == Node.State.JOINING  # 'H100' as the data names it
    assert [g.index for g in gpus] == list(range(8)) and len({g.uuid for g in gpus}) == 8
    assert all((g.model, g.memory_gb, g.mig_capable, g.healthy) == ("H100-80GB", 80, True, True) for g in gpus)
    # Joining: nothing is placed on it until its agent reports, however idle it is.
    assert not any(bind.node == node.name for bind in engine.schedule(build_snapshot(), "tessera").binds)
    node_heartbeat(node=node, reading=None, at=timezone.now())
    assert Node.objects.get(pk=node.pk).state == Node.State.READY


@pytest.mark.parametrize("count", ["0", "17", "", "eight"])
def test_a_count_outside_1_to_16_is_refused(staff, count):
    response = _add(staff, gpu_count=count)
    assert response.status_code == 200 and not Node.objects.filter(name="h100-new").exists()
    assert 'id="id_gpu_count"' in response.content.decode() and "errorlist" in response.content.decode()


def test_an_unknown_model_is_refused_with_the_known_ones_named(staff):
    response = _add(staff, gpu_model="H10O-80GB")
    body = response.content.decode()
    assert response.status_code == 200 and not Node.objects.filter(name="h100-new").exists()
    assert "is not a GPU model Tessera knows" in body and "A100-80GB" in body
    assert not Gpu.objects.filter(model="H10O-80GB").exists()


def test_a_model_the_cluster_already_has_is_known_with_its_memory(staff):
    Gpu.objects.filter(pk=Gpu.objects.first().pk).update(model="L40S", memory_gb=48)  # not in the MIG data
    assert _add(staff, gpu_model="L40S", gpu_count="4").status_code == 302
    node = Node.objects.get(name="h100-new")
    assert {(g.model, g.memory_gb, g.mig_capable) for g in node.gpus.all()} == {("L40S", 48, False)}


def test_an_existing_node_keeps_its_gpu_rows_and_model(staff):
    node = Node.objects.get(name="h100-01")
    Node.objects.filter(pk=node.pk).update(gpu_model="NVIDIA-Future-GPU")  # as an inventory might write it
    page = staff.get(reverse("admin:scheduling_node_change", args=[node.pk]))
    assert page.status_code == 200 and 'name="gpu_count"' not in page.content.decode()
    assert "gpus-TOTAL_FORMS" in page.content.decode()


def test_more_gpus_follow_the_last_index(staff):
    node = Node.objects.get(name="h100-01")
    before = node.gpus.count()
    added = node_gpus_add(node=node, count=2)
    assert [g.index for g in added] == [before, before + 1]
    with pytest.raises(ValueError):
        node_gpus_add(node=node, count=17)


def test_editing_a_node_checks_only_a_changed_model(staff):
    from scheduling.admin import NodeForm

    node = Node.objects.get(name="h100-01")
    Node.objects.filter(pk=node.pk).update(gpu_model="NVIDIA-Future-GPU")  # as an inventory might write it
    node.refresh_from_db()
    data = {name: getattr(node, name) for name in NodeForm.Meta.fields} | {
        "tier": node.tier_id, "leaf_switch": node.leaf_switch_id, "agent_url": ""}
    assert NodeForm(data=data, instance=node).is_valid()  # left as the cluster reported it
    changed = NodeForm(data=data | {"gpu_model": "H10O"}, instance=node)
    assert not changed.is_valid() and "is not a GPU model Tessera knows" in str(changed.errors)
    assert "gpu_count" not in changed.fields
