"""A dumped snapshot reads back equal and schedules exactly as the original."""

import pytest

from scheduling.engine import Bind, Preempt, Repartition, schedule
from scheduling.engine.snapshot_io import snapshot_dump, snapshot_from_dict, snapshot_load, snapshot_to_dict
from tests.engine.builders import inference, job, node, running, snap, whole


def sample():
    nodes = [node("n1", mig={0}, layouts={0: [("3g.40gb", 0, None)]}), node("n2", tier="spot")]
    return snap(nodes, [job("t", gpus=4, checkpoint_interval_s=600), inference("i", 12, cls="production")],
                [running(job("r"), "n2", [0, 1])], queues=[("web", 2)],
                in_flight=[Preempt(job_id="r", for_job_id="t", reason="preempt"),
                           Repartition(node="n1", gpu_index=1, mig_enabled=True, layout=(("1g.10gb", 0),)),
                           Bind(job_id="x", team="web", member=0, node="n2", allocations=(whole(2),), borrowed=False)])


def test_a_snapshot_round_trips(tmp_path):
    original = sample()
    snapshot_dump(original, tmp_path / "case.json")
    assert snapshot_load(tmp_path / "case.json") == original


def test_a_replayed_snapshot_schedules_the_same():
    original = sample()
    assert schedule(snapshot_from_dict(snapshot_to_dict(original))).binds == schedule(original).binds


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="format"):
        snapshot_from_dict({"format": 99, "snapshot": {}})
