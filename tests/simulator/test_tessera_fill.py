"""tessera's CPU-aware term and model-pressure term: what they count, and when they apply."""

import random

from scheduling.engine.fragment.frag import FragModel, TypicalShape
from scheduling.engine.fragment.shapes import NodeView, Request
from scheduling.engine.fragment.tessera import (
    PRESSURE_MIN_TASKS,
    TesseraScorer,
    cpu_per_gpu,
    model_pressure,
    stranded,
)
from scheduling.simulator.fill import get_policy
from scheduling.simulator.fill.experiment import gpu_capacity
from scheduling.simulator.fill.loop import run_fill
from scheduling.simulator.fill.prior import Binding, FixedPrior, bind
from scheduling.simulator.fill.traces import NodeSpec, TraceTask

FM = FragModel([TypicalShape(4000, 1000, 1, None, 1.0)])
CPU_ONLY = Request(8000, 1, 0, 0)


def test_cpu_per_gpu_ignores_cpu_only_tasks():
    tasks = [Request(10_000, 1, 1, 1000), Request(6000, 1, 2, 500), CPU_ONLY]
    assert cpu_per_gpu(tasks) == 16_000 * 1000 / 2000
    assert cpu_per_gpu([CPU_ONLY]) is None


def test_stranded_counts_gpus_the_cpu_cannot_feed():
    node = NodeView("G2", 12_000, 1, (1000, 1000, 1000))
    assert stranded(node, 4000) == 0.0  # 12 cores feed three 4-core GPUs
    assert stranded(node._replace(cpu_left=4000), 4000) == 2000.0


def test_cpu_only_tasks_go_where_they_strand_no_gpu():
    tessera = TesseraScorer(cpg=4000)
    lean = NodeView("G2", 12_000, 1, (1000, 1000, 1000))  # every core is needed
    rich = NodeView("T4", 104_000, 1, (1000, 1000))
    # FGD scores both 50: the 4-core shape still fits. Only `lean` is left short of CPU.
    assert tessera.score(rich, CPU_ONLY, FM) > tessera.score(lean, CPU_ONLY, FM)


def test_relieving_a_cpu_poor_node_earns_nothing():
    """Only new stranding counts, so unconstrained tasks are not pulled onto CPU-poor nodes."""
    tessera, fgd = TesseraScorer(cpg=16_000), get_policy("fgd")
    poor = NodeView("P100", 8000, 1, (1000, 1000))
    task = Request(2000, 1, 1, 1000)
    assert tessera.score(poor, task, FM)[0] == fgd.score(poor, task, FM)


def test_constrained_tasks_skip_the_cpu_term():
    tessera = TesseraScorer(cpg=4000)
    lean = NodeView("G2", 12_000, 1, (1000, 1000, 1000))
    task = Request(8000, 1, 1, 1000, frozenset({"G2"}))
    assert tessera.score(lean, task, FM)[0] == get_policy("fgd").score(lean, task, FM)


def test_unbound_tessera_is_fgd_plus_affinity():
    node = NodeView("G2", 12_000, 1, (1000, 600))
    task = Request(8000, 1, 1, 400)
    assert get_policy("tessera").score(node, task, FM)[0] == get_policy("fgd").score(node, task, FM)


def test_bound_tessera_fills_without_overcommitting():
    nodes = [NodeSpec("g", 24_000, 1 << 20, 2, "G2"), NodeSpec("t", 104_000, 1 << 20, 2, "T4")]
    seq = [Request(20_000, 1, 0, 0), Request(10_000, 1, 1, 1000), Request(10_000, 1, 1, 1000),
           Request(4000, 1, 1, 500), Request(4000, 1, 1, 500)]
    policy = get_policy("tessera").for_workload(seq)
    fm = FragModel.from_tasks(seq)
    result = run_fill(nodes, seq, FixedPrior(Binding(policy, fm)), fm, random.Random(1))
    assert result.failed == 0 and result.used[-1] == 3000


def test_model_pressure_is_constrained_demand_over_capacity():
    capacity = {"T4": 2000, "G2": 6000}
    tasks = [Request(1000, 1, 1, 1000, frozenset({"T4"})),  # all on T4
             Request(1000, 1, 1, 1000, frozenset({"T4", "G2"})),  # split 1:3 by capacity
             Request(1000, 1, 2, 1000), CPU_ONLY]
    pressure = model_pressure(tasks, capacity)  # 4000 milli arrive; scaled to 8000 capacity
    assert pressure["T4"] == 1250 * 2 / 2000 and pressure["G2"] == 750 * 2 / 6000


def test_free_gpu_tasks_keep_off_models_constrained_tasks_need():
    tessera = TesseraScorer(cpg=4000, pressure={"T4": 0.9})
    t4 = NodeView("T4", 104_000, 1, (1000, 1000))
    g2 = t4._replace(model="G2")
    free = Request(4000, 1, 1, 1000)
    assert tessera.score(g2, free, FM) > tessera.score(t4, free, FM)
    for task in (free._replace(spec=frozenset({"T4", "G2"})), CPU_ONLY):  # no penalty for these
        assert tessera.score(g2, task, FM) == tessera.score(t4, task, FM)


def test_bind_policy_passes_capacity_per_model():
    nodes = [NodeSpec("a", 8000, 1, 2, "T4"), NodeSpec("b", 8000, 1, 2, "T4"),
             NodeSpec("c", 8000, 1, 4, "G2")]
    trace = [TraceTask("p", Request(1000, 1, 1, 1000, frozenset({"T4"})))]
    policy = bind(get_policy("tessera"), [t.task for t in trace], gpu_capacity(nodes)).policy
    assert policy.pressure == {"T4": 8000 / 1000 * 1000 / 4000, "G2": 0.0}


def test_shares_go_where_they_waste_no_priced_room():
    """A 220 on a node with a 450 hole (beside a 550) and a 350 hole (beside a 650). FGD's measure
    ties (FM knows only whole-GPU tasks) and keeps the fuller GPU, leaving a dead 130. At LP
    prices the 350 hole is worth a 320 and the 450 hole 220 + 230, so the 220 takes the 450
    hole and leaves 230 for a 230."""
    prices = {220: 0.0, 230: 0.0, 320: 0.0, 550: 0.0, 650: 0.0, 1000: 0.0}
    node = NodeView("G2", 64_000, 1, (450, 350))
    task = Request(4000, 1, 1, 220)
    assert TesseraScorer(cpg=4000).share_pick(node, task, FM, None) == 350
    assert TesseraScorer(cpg=4000, prices=prices).share_pick(node, task, FM, None) == 450


def test_bound_tessera_learns_prices_only_with_a_node_list():
    tasks = [Request(4000, 1, 1, 810), Request(4000, 1, 1, 470), Request(4000, 1, 1, 1000)]
    assert get_policy("tessera").for_workload(tasks).holes is None
    bound = get_policy("tessera").for_workload(tasks, {"G2": 3000})
    assert bound.holes is not None and len(bound.holes) == 1001


# A CPU-bound prior: 4 cores per GPU task's GPU, 20 per GPU with the 16-core CPU-only tasks.
CPU_BOUND = [Request(4000, 1, 1, 1000), Request(16_000, 1, 0, 0)] * (PRESSURE_MIN_TASKS // 2)


def test_cpu_pressure_moves_stranding_to_all_tasks_cpu_per_gpu():
    """Above a CPU pressure of 1 (here 20 cores asked per GPU, 12 in the cluster) the CPU-only
    tasks take their share of every node's CPU left, so a free GPU needs 20 cores, not 4."""
    bound = get_policy("tessera").for_workload(CPU_BOUND, {"G2": 8000}, cpu=8 * 12_000)
    assert bound.cpg == 20_000
    lean = NodeView("G2", 20_000, 1, (1000, 1000))  # 8 cores spare at 4 per GPU, short at 20
    full = NodeView("G2", 10_000, 1, (0, 0))  # no free GPU: its CPU feeds nothing
    assert bound.score(full, CPU_ONLY, FM) > bound.score(lean, CPU_ONLY, FM)
    old = TesseraScorer(cpg=4000)  # what it was: both score FGD's 50
    assert old.score(full, CPU_ONLY, FM) == old.score(lean, CPU_ONLY, FM)


def test_below_pressure_1_or_on_a_small_prior_stranding_is_unchanged():
    """The scorer's decisions stay those of the GPU tasks' CPU per GPU: on every trace but the
    CPU-bound ones, and on the first doublings of the online prior, whose pressure is noise."""
    tessera = get_policy("tessera")
    assert tessera.for_workload(CPU_BOUND, {"G2": 8000}, cpu=8 * 24_000).cpg == 4000
    assert tessera.for_workload(CPU_BOUND[:-2], {"G2": 8000}, cpu=8 * 12_000).cpg == 4000
    assert tessera.for_workload(CPU_BOUND, {"G2": 8000}).cpg == 4000  # no cluster CPU: live engine
