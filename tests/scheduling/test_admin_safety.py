"""A platform engineer's typo in the admin never stops scheduling (issue 16 items 1-3): MIG
layouts are checked against the geometry, a node typed in waits for its agent, quotas are checked
against the cluster and said in words."""

import logging

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.services import node_heartbeat
from portal.models import Team
from scheduling import engine
from scheduling.cycle import decide_and_apply
from scheduling.models import Gpu, MigInstance, Node
from scheduling.snapshot import build_snapshot
from ui.demo import demo_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    demo_load()
    client.login(username="admin", password="admin-demo-pass")
    return client


def _mig_gpu() -> Gpu:
    return MigInstance.objects.select_related("gpu__node").first().gpu


def _add_instance(client, gpu, profile, start):
    return client.post(reverse("admin:scheduling_miginstance_add"),
                       {"gpu": gpu.pk, "profile": profile, "start_slot": start})


def test_the_admin_refuses_a_made_up_mig_profile_and_names_the_real_ones(staff):
    gpu, before = _mig_gpu(), MigInstance.objects.count()
    response = _add_instance(staff, gpu, "9g.999gb", 0)
    assert response.status_code == 200 and MigInstance.objects.count() == before
    assert "is not a MIG profile of" in response.content.decode() and "1g.10gb" in response.content.decode()


def test_the_admin_refuses_a_slice_that_overlaps_an_existing_one(staff):
    gpu = _mig_gpu()
    taken = gpu.mig_instances.first()
    response = _add_instance(staff, gpu, taken.profile, taken.start_slot + 1)
    assert response.status_code == 200
    assert "overlaps" in response.content.decode() or "cannot start" in response.content.decode()


def test_derived_fields_come_from_the_geometry_not_from_typing(staff):
    gpu = Gpu.objects.filter(model__startswith="A100", mig_instances__isnull=True, node__tier__name="reserved").first()
    Gpu.objects.filter(pk=gpu.pk).update(mig_capable=True, mig_enabled=True)
    response = _add_instance(staff, gpu, "3g.39gb", 4)  # a driver's name for 3g.40gb
    assert response.status_code == 302, response.content.decode()[-2000:]
    instance = MigInstance.objects.get(gpu=gpu)
    assert (instance.profile, instance.compute_slices, instance.size_slots) == ("3g.40gb", 3, 4)


def test_a_bad_row_written_past_the_admin_does_not_stop_the_cycle(staff, caplog):
    gpu = _mig_gpu()
    MigInstance.objects.filter(gpu=gpu).update(profile="9g.999gb")
    report = decide_and_apply(policy="tessera")  # used to raise KeyError every cycle
    assert f"{gpu.node.name}/{gpu.index}" in report.plan.faulty_gpus
    assert all(a.gpu_index != gpu.index or b.node != gpu.node.name
               for b in report.plan.binds for a in b.allocations)
    from agents import observe
    with caplog.at_level(logging.WARNING, logger="tessera.cycle"):
        observe.cycle_finished(report)
    assert "takes no work until its MIG layout is fixed" in caplog.text


def test_a_node_typed_in_the_admin_waits_for_its_agent(staff):
    page = staff.get(reverse("admin:scheduling_node_add")).content.decode()
    assert '<option value="joining" selected>' in page
    node = Node.objects.get(name="h100-01")
    Node.objects.filter(pk=node.pk).update(state=Node.State.JOINING)
    assert not any(b.node == node.name for b in engine.schedule(build_snapshot(), "tessera").binds)
    node_heartbeat(node=node, reading=None, at=timezone.now())
    assert Node.objects.get(pk=node.pk).state == Node.State.READY


def test_a_guarantee_beyond_the_cluster_is_refused_in_words(staff):
    team = Team.objects.first()
    team.guaranteed_gpus, team.burst_limit_gpus = 500, 600
    with pytest.raises(Exception) as refused:
        team.full_clean()
    message = str(refused.value)
    assert f"the cluster has {Gpu.objects.count()}" in message and "at most" in message


def test_burst_below_guarantee_is_refused_in_words_not_a_constraint_name(staff):
    team = Team.objects.first()
    response = staff.post(reverse("admin:portal_team_change", args=[team.pk]), {
        "name": team.name, "business_unit": team.business_unit_id, "guaranteed_gpus": "4",
        "burst_limit_gpus": "2", "weight": "1"})
    body = response.content.decode()
    assert response.status_code == 200 and "must be at least the guarantee (4)" in body
    assert "team_burst_at_least_guaranteed" not in body


def test_quotas_print_as_people_write_them(client):
    demo_load()
    client.login(username="alice", password="alice-demo-pass")
    for url in [reverse("ui:teams"), reverse("ui:dashboard", args=["search"]), "/admin/portal/team/",
                f"/admin/portal/team/{Team.objects.get(name='search').pk}/change/"]:
        if url.startswith("/admin/"):
            client.login(username="admin", password="admin-demo-pass")
        body = client.get(url).content.decode()
        assert ".000<" not in body and '.000"' not in body and "16.000" not in body, url


