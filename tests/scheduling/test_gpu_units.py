"""One definition of GPU units: a MIG instance counts its compute slices over its GPU's, from the
geometry, for the engine, the quota gauge, free capacity and the bill alike.

The A30 has 4 compute slices, not 7, so a `1g.6gb` is a quarter of it. Before this was stored once,
the bill and the portal's gauge divided by 7 (0.142857) while the engine counted 0.25 against quota.
"""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.services import usage_interval_open
from portal.models import BusinessUnit, Project, Team
from scheduling.engine.mig import geometry_for, mig_models
from scheduling.engine.state import GpuState
from scheduling.models import (
    CapacityTier,
    Gpu,
    Job,
    MigInstance,
    NetworkSwitch,
    Node,
    Placement,
    PriorityClass,
    decimal_fraction,
)
from tests.engine.builders import node as engine_node
from ui import selectors

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def a30(db):
    """An A30 in MIG mode cut into four 1g.6gb instances, and a team running one inference job on one."""
    leaf = NetworkSwitch.objects.create(name="leaf-a30", kind="leaf")
    node = Node.objects.create(name="a30-1", tier=CapacityTier.objects.get(name="on-demand"), leaf_switch=leaf,
                               gpu_model="A30-24GB", interconnect="pcie", cpu_cores=32, memory_gb=256)
    gpu = Gpu.objects.create(node=node, index=0, uuid="GPU-a30-0", model="A30-24GB", memory_gb=24,
                             mig_capable=True, mig_enabled=True)
    instances = [MigInstance.for_profile(gpu, "1g.6gb", start) for start in range(4)]
    MigInstance.objects.bulk_create(instances)
    team = Team.objects.create(name="serving", business_unit=BusinessUnit.objects.create(name="BU", cost_center="C"),
                               guaranteed_gpus=1, burst_limit_gpus=2)
    job = Job.objects.create(team=team, project=Project.objects.create(team=team, name="p"), name="asr",
                             kind="inference", priority_class=PriorityClass.objects.get(name="production"),
                             gpus=0, gpu_memory_gb=5, status="running", started_at=T0)
    placement = Placement.objects.create(job=job, gpu=gpu, mig_instance=instances[0], mig_profile="1g.6gb",
                                         share_milli=instances[0].share_milli, memory_gb=5.81, started_at=T0)
    return team, placement


def test_an_a30_slice_is_billed_a_quarter_of_a_gpu(a30):
    _team, placement = a30
    assert usage_interval_open(placement=placement, at=T0).gpu_fraction == Decimal("0.25")


def test_an_a30_slice_counts_a_quarter_against_the_quota_gauge(a30):
    team, _placement = a30
    assert selectors.team_usage(team)["in_use"] == 0.25


def test_free_capacity_counts_the_idle_a30_slices_in_quarters(a30):
    [row] = [r for r in selectors.free_by_model(selectors.cluster_nodes()) if r["model"] == "A30-24GB"]
    assert (row["free_slices"], row["free_units"]) == (3, 0.75)


@pytest.mark.parametrize("model", mig_models())
def test_engine_gauge_and_bill_use_the_same_fraction_for_every_profile(db, model):
    gpu = Gpu(model=model)
    state = GpuState(_any_node_state(model), engine_node("n", model="H100-80GB", gpus=1).gpus[0],
                     geometry_for(model))
    for profile in geometry_for(model).profiles:
        stored = MigInstance.for_profile(gpu, profile.name, profile.starts[0]).gpu_fraction
        engine = state.units(_mig_allocation(profile))
        assert stored == decimal_fraction(engine)
        assert stored == decimal_fraction(profile.compute_slices / geometry_for(model).compute_slices)


def _any_node_state(model):
    from scheduling.engine.state import NodeState
    return NodeState(engine_node("n", model="H100-80GB", gpus=0), model)


def _mig_allocation(profile):
    from scheduling.engine import Allocation
    return Allocation(gpu_index=0, milli=0, memory_gb=profile.memory_gb, mig_profile=profile.name,
                      mig_start=profile.starts[0])
