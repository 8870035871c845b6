"""The live snapshot says every field the engine relies on; none is left at a default by omission.

The engine's types have no defaults (a field the adapter forgot is a TypeError, not a silent
value), and the three the live path used to drop come from the rows: a GPU's health (from what
its node agent reports), when its layout last changed (a confirmed repartition), and its node's
price (the rate card, through billing's reader).
"""

from dataclasses import MISSING, fields, is_dataclass
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.mig import layout_write
from agents.services import node_heartbeat
from agents.telemetry import GpuReading, NodeReading
from billing.models import Rate
from scheduling import engine
from scheduling.models import Gpu, Node
from scheduling.snapshot import build_snapshot
from ui.demo import demo_load

pytestmark = pytest.mark.django_db
SNAPSHOT_TYPES = (engine.Snapshot, engine.Node, engine.Gpu, engine.MigInstance, engine.Job, engine.Running,
                  engine.Queue, engine.Allocation, engine.Bind, engine.Preempt, engine.Repartition,
                  engine.UsageHistory)


@pytest.fixture
def demo():
    demo_load()


def test_no_snapshot_field_has_a_default():
    defaulted = [f"{cls.__name__}.{f.name}" for cls in SNAPSHOT_TYPES for f in fields(cls)
                 if f.default is not MISSING or f.default_factory is not MISSING]
    assert defaulted == []


def test_every_object_in_the_demo_snapshot_is_an_engine_type_with_every_field_said(demo):
    seen = set()

    def walk(value):
        if is_dataclass(value):
            seen.add(type(value))
            assert type(value) in SNAPSHOT_TYPES
            for f in fields(value):
                walk(getattr(value, f.name))
        elif isinstance(value, tuple):
            for item in value:
                walk(item)

    walk(build_snapshot())
    assert {engine.Snapshot, engine.Node, engine.Gpu, engine.MigInstance, engine.Job, engine.Running,
            engine.Queue, engine.Allocation} <= seen


def test_node_prices_are_the_rate_card_for_model_and_tier(demo):
    now = timezone.now()
    snapshot = build_snapshot(now)
    for node in snapshot.nodes:
        rate = Rate.objects.filter(gpu_model=node.gpu_model, tier__name=node.tier, valid_from__lte=now.date()) \
            .exclude(valid_to__lte=now.date()).get()
        assert node.price_per_gpu_hour == float(rate.price_per_gpu_hour)


def test_a_node_with_no_rate_in_force_has_no_price_rather_than_a_free_one(demo):
    Rate.objects.filter(gpu_model="A100-40GB").delete()
    prices = {n.name: n.price_per_gpu_hour for n in build_snapshot().nodes}
    assert prices["pcie-01"] is None and prices["h100-01"] == float(Decimal("3.6400"))


def test_layout_age_comes_from_the_gpu_row_and_a_confirmed_repartition_resets_it(demo):
    now = timezone.now()
    gpu = Gpu.objects.get(node__name="h100-04", index=0)
    assert _engine_gpu(build_snapshot(now), gpu).layout_changed_at == gpu.layout_changed_at.timestamp()
    never = Gpu.objects.get(node__name="h100-01", index=0)
    assert _engine_gpu(build_snapshot(now), never).layout_changed_at is None
    idle = Gpu.objects.get(node__name="h100-04", index=3)
    assert layout_write(idle, True, [("7g.80gb", 0)]) == ""
    age = now.timestamp() - _engine_gpu(build_snapshot(now), idle).layout_changed_at
    assert abs(age) < 60


def test_a_gpu_its_agent_stops_reporting_is_unhealthy_until_it_is_back(demo):
    node = Node.objects.get(name="a100-02")
    at = timezone.now()
    seven = NodeReading(node=node.name, at=at.timestamp(), gpus=tuple(_reading(i) for i in range(7)))
    node_heartbeat(node=node, reading=seven, at=at)
    health = {g.index: g.healthy for g in _engine_node(build_snapshot(at), node.name).gpus}
    assert health == {**{i: True for i in range(7)}, 7: False}
    eight = NodeReading(node=node.name, at=at.timestamp(), gpus=tuple(_reading(i) for i in range(8)))
    node_heartbeat(node=node, reading=eight, at=at + timedelta(seconds=15))
    assert all(g.healthy for g in _engine_node(build_snapshot(at), node.name).gpus)


def test_an_unhealthy_gpu_takes_no_work_in_the_live_cycle(demo):
    Gpu.objects.exclude(node__name="a100-02").update(healthy=False)
    Gpu.objects.filter(node__name="a100-02", index__gte=1).update(healthy=False)
    plan = engine.schedule(build_snapshot(), "tessera")
    used = {(b.node, a.gpu_index) for b in plan.binds for a in b.allocations}
    assert used <= {("a100-02", 0)}


def _reading(index: int) -> GpuReading:
    return GpuReading(index=index, utilisation=0.5, memory_used_gb=10.0)


def _engine_node(snapshot, name):
    return next(n for n in snapshot.nodes if n.name == name)


def _engine_gpu(snapshot, gpu):
    return next(g for g in _engine_node(snapshot, gpu.node.name).gpus if g.index == gpu.index)
