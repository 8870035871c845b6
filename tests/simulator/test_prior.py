"""The workload prior: online never sees a task before it has been tried; past-half learns from the
trace's earlier half and runs the later; policies that learn nothing are unaffected."""

import random

import pytest

from scheduling.engine.fragment.frag import FragModel
from scheduling.engine.fragment.shapes import Request
from scheduling.simulator.cli import main
from scheduling.simulator.fill.experiment import run_one
from scheduling.simulator.fill.loop import run_fill
from scheduling.simulator.fill.prior import (
    REFRESH_EVERY,
    OnlinePrior,
    prior_for,
    split_by_creation,
)
from scheduling.simulator.fill.sets import REPORTING, TUNING
from scheduling.simulator.fill.traces import NodeSpec, TraceError, TraceTask

NODES = [NodeSpec(f"n{i}", 64_000, 1 << 20, 8, "AB"[i % 2]) for i in range(4)]  # room for all


class Spy:
    """A learning policy that records, at every score, the tasks its prior was learned from."""

    name = "tessera"  # the engine's placement takes only its scorers' names (Features)
    uses_prior = True

    def __init__(self, learned=(), seen=None):
        self.learned, self.seen = tuple(learned), [] if seen is None else seen

    def for_workload(self, tasks, capacity, cpu=0):
        return Spy(tasks, self.seen)

    def score(self, node, task, fm):
        self.seen.append((task, self.learned, fm.shapes))
        return 0

    def share_pick(self, node, task, fm, rng):
        return max(node.gpus)


def test_the_online_prior_never_sees_a_task_before_it_is_tried():
    # Every task a distinct shape, so each is scored when it arrives and can be told apart.
    # Memory 0: the engine hands scorers requests without it (placement.scored.request_for).
    seq = [Request(100 + i, 0, 1, (200, 300, 1000)[i % 3]) for i in range(40)]
    spy = Spy()
    run_fill(NODES, seq, OnlinePrior(spy, {"A": 16_000, "B": 16_000}), FragModel([]),
             random.Random(1))
    assert spy.seen
    for task, learned, shapes in spy.seen:
        now = seq.index(task)
        assert learned == tuple(seq[:len(learned)]) and len(learned) <= now
        assert {(s.cpu, s.gpu_milli) for s in shapes} <= {(t.cpu, t.gpu_milli) for t in learned}
    assert max(len(learned) for _, learned, _ in spy.seen) == 32  # relearned as tasks arrived


def test_the_online_prior_relearns_on_doublings_then_every_1024():
    prior = OnlinePrior(Spy(), None)
    changed = [n for n in range(1, 3 * REFRESH_EVERY + 1) if prior.observe(Request(1, 1, 0, 0))]
    assert changed == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3072]
    assert len(prior.binding.policy.learned) == 3072


def _trace(n, created=True):
    return [TraceTask(f"p{i:02d}", Request(1000 + i, 1, 1, 500), (n - i) * 10 if created else None)
            for i in range(n)]


def test_past_half_learns_from_the_earlier_half_and_runs_the_later():
    trace = _trace(10)  # created in reverse name order
    earlier, later = split_by_creation(trace)
    assert [t.name for t in earlier] == ["p09", "p08", "p07", "p06", "p05"]
    prior, workload = prior_for("past-half", Spy(), trace, None)
    assert {t.cpu for t in prior.binding.policy.learned} == {t.task.cpu for t in earlier}
    assert workload == later


def test_past_half_needs_creation_times(tmp_path, capsys):
    with pytest.raises(TraceError, match="creation_time"):
        split_by_creation(_trace(4, created=False))
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,4,A\n")
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\n")
    assert main(["fill", "--nodes", str(nodes), "--trace", str(pods), "--prior", "past-half"]) == 2
    assert "creation_time" in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["bestfit", "gpupacking", "gpuclustering", "dotprod"])
def test_policies_that_learn_nothing_do_not_depend_on_the_prior(policy):
    trace = [TraceTask(f"p{i}", Request(2000 + 500 * (i % 5), 2048, (1, 1, 2, 0)[i % 4],
                                     (300, 1000, 1000, 0)[i % 4]), i) for i in range(40)]
    nodes = [NodeSpec(f"n{i}", 32_000, 131_072, g, m) for i, (g, m) in enumerate([(4, "A"),
                                                                                 (2, "B")] * 4)]
    oracle = run_one(nodes, trace, policy, 3, "oracle")
    assert run_one(nodes, trace, policy, 3, "online").allocation_rate == oracle.allocation_rate


def test_an_unknown_prior_is_refused():
    with pytest.raises(ValueError, match="unknown prior 'future'"):
        prior_for("future", Spy(), _trace(2), None)


def test_tuning_and_reporting_sets_share_no_trace_and_no_seed():
    assert not set(TUNING.traces) & set(REPORTING.traces)
    assert not set(TUNING.seeds) & set(REPORTING.seeds)
