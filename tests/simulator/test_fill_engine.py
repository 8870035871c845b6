"""`simulate fill` places every task with the live engine's placement (engine.placement.place_job
and the scorer the policy names), through the adapter for the openb task model: a change in the
live placement or scorer shows up in fill."""

import random

import pytest

from scheduling.engine import placement
from scheduling.engine.fragment import FgdScorer, FragModel, Request
from scheduling.simulator.fill import get_policy
from scheduling.simulator.fill.adapter import EngineCluster, engine_job
from scheduling.simulator.fill.experiment import simulate
from scheduling.simulator.fill.prior import Binding
from scheduling.simulator.fill.traces import NodeSpec, TraceTask

NODES = [NodeSpec("a", 16_000, 65_536, 2, "A"), NodeSpec("b", 16_000, 65_536, 2, "B")]
WHOLE, SHARE, CPU_ONLY = Request(2000, 1024, 1, 1000), Request(2000, 1024, 1, 300), Request(2000, 1024, 0, 0)
TRACE = [TraceTask(f"p{i}", t) for i, t in enumerate([WHOLE, SHARE, CPU_ONLY] * 3)]


def _cluster(policy="fgd"):
    fm = FragModel.from_tasks([WHOLE, SHARE, CPU_ONLY])
    return EngineCluster(NODES, Binding(get_policy(policy), fm), random.Random(1))


def test_every_task_goes_through_the_live_place_job(monkeypatch):
    calls = []

    def spy(session, job, stmt):
        calls.append(job.id)
        return place_job(session, job, stmt)

    place_job = placement.place_job
    monkeypatch.setattr(placement, "place_job", spy)
    seq, result = simulate(NODES, TRACE, "fgd", 3)
    assert len(calls) == len(seq) == len(result.arrived)  # every task tried, placed or dropped
    assert result.failed > 0  # 130% of capacity arrives
    assert len(set(calls)) == len(calls)  # one engine Job per task


@pytest.mark.parametrize("task", [WHOLE, SHARE, CPU_ONLY], ids=["whole", "share", "cpu-only"])
@pytest.mark.parametrize("preferred", ["A", "B"])
def test_the_live_scorer_decides_where_fill_places(monkeypatch, task, preferred):
    # FGD's score replaced by one that wants model `preferred`: fill follows it, for whole GPUs,
    # shares (scored across models, not the first model with room) and CPU-only tasks alike.
    monkeypatch.setattr(FgdScorer, "score", lambda self, node, t, fm: int(node.model == preferred))
    before, after = _cluster().place(task)
    assert before.model == after.model == preferred
    assert after.cpu_left == before.cpu_left - task.cpu and after.mem_left == before.mem_left - task.mem
    assert sum(before.gpus) - sum(after.gpus) == task.total_milli


def test_openb_tasks_become_engine_jobs():
    whole = engine_job("w", Request(8000, 2048, 2, 1000, frozenset({"T4", "P100"})))
    assert (whole.gpus, whole.gpu_milli, whole.gpu_models, whole.cpu_cores, whole.memory_gb) == (
        2, 0, ("P100", "T4"), 8.0, 2.0)
    share = engine_job("s", SHARE)
    assert share.fractional and share.gpu_milli == 300 and share.gpu_memory_gb == 0 and not share.host_only
    assert engine_job("c", CPU_ONLY).host_only
    with pytest.raises(ValueError, match="single-GPU"):
        engine_job("x", Request(1000, 1, 2, 500))


def test_a_task_that_fits_nowhere_is_dropped_and_holds_nothing():
    cluster = _cluster()
    assert cluster.place(Request(1000, 1024, 4, 1000)) is None  # 2 GPUs per node
    assert cluster.place(Request(1000, 1024, 1, 1000, frozenset({"C"}))) is None  # no such model
    assert not cluster.session.members
    assert cluster.place(WHOLE) is not None
