"""Table-driven scenarios: cluster + jobs in, binds and reasons out (placement rules)."""

import pytest

from scheduling.engine import schedule
from scheduling.engine.wording import gpu_count
from tests.engine.builders import binds_by_job, inference, job, node, snap


def placed(plan):
    return {j: sorted((b.node, a.gpu_index, a.mig_profile, a.mig_start, a.milli)
                      for b in bs for a in b.allocations)
            for j, bs in binds_by_job(plan).items()}


SCENARIOS = [
    # name, nodes, jobs, policy, expected placements {job: [(node, gpu, profile, start, milli)]}
    ("inference goes to the smallest MIG slice, 1g at slot 6",
     [node("a", mig=range(8))], [inference("inf", 15)], "tessera",
     {"inf": [("a", 0, "1g.20gb", 6, 143)]}),
    ("memory need is never given a smaller slice",
     [node("a", mig=range(8))], [inference("inf", 30)], "tessera",
     {"inf": [("a", 0, "3g.40gb", 4, 429)]}),
    ("an idle existing instance of the right size is reused",
     [node("a", mig=range(8), layouts={3: [("3g.40gb", 0, None), ("1g.10gb", 4, "x")]})],
     [inference("inf", 30)], "tessera",
     {"inf": [("a", 3, "3g.40gb", 0, 429)]}),
    ("no 1g.20gb slot anywhere: the idle 2g.20gb is used, not a repartition",
     [node("h100-04", gpus=1, layouts={0: [("3g.40gb", 0, "x"), ("2g.20gb", 4, None),
                                           ("1g.20gb", 6, "y")]})],
     [inference("inf", 12)], "tessera",
     {"inf": [("h100-04", 0, "2g.20gb", 4, 286)]}),
    ("the smallest idle instance that holds the need, by compute slices",
     [node("a", gpus=2, layouts={0: [("4g.40gb", 0, None), ("3g.40gb", 4, "x")],
                                 1: [("3g.40gb", 0, None), ("3g.40gb", 4, "y")]})],
     [inference("inf", 12)], "tessera",
     {"inf": [("a", 1, "3g.40gb", 0, 429)]}),
    ("an exact-size slot elsewhere still beats a bigger idle instance",
     [node("a", gpus=2, layouts={0: [("3g.40gb", 0, "x"), ("2g.20gb", 4, None),
                                     ("1g.20gb", 6, "y")]}, mig=(1,))],
     [inference("inf", 12)], "tessera",
     {"inf": [("a", 1, "1g.20gb", 6, 143)]}),
    # Each share holds its MPS replica, half a GPU here, however little memory it needs (6 GB: 380).
    ("non-MIG GPUs are shared by MPS replica, fullest first",
     [node("t", model="T4", interconnect="pcie", gpus=2, sharing="mps", replicas=2)],
     [inference("i1", 8), inference("i2", 6), inference("i3", 8)], "tessera",
     {"i1": [("t", 0, None, None, 500)], "i2": [("t", 0, None, None, 500)],
      "i3": [("t", 1, None, None, 500)]}),
    ("k8s-default gives a sub-GPU job a whole GPU",
     [node("a", mig=())], [inference("inf", 5)], "k8s-default",
     {"inf": [("a", 0, None, None, 1000)]}),
    ("k8s-default spreads, tessera packs",
     [node("a", gpus=4), node("b", gpus=4)], [job("j1"), job("j2")], "k8s-default",
     {"j1": [("a", 0, None, None, 1000)], "j2": [("b", 0, None, None, 1000)]}),
    ("tessera packs two 1-GPU jobs on one node",
     [node("a", gpus=4), node("b", gpus=4)], [job("j1"), job("j2")], "tessera",
     {"j1": [("a", 0, None, None, 1000)], "j2": [("a", 1, None, None, 1000)]}),
    ("a 2-GPU job on NVLink-pair nodes takes a whole pair",
     [node("p", model="H100-NVL-94GB" if False else "H100-80GB", interconnect="nvlink-pairs",
           gpus=4)], [job("j1", gpus=1), job("j2", gpus=2)], "tessera",
     {"j1": [("p", 0, None, None, 1000)], "j2": [("p", 2, None, None, 1000),
                                                 ("p", 3, None, None, 1000)]}),
    ("a training gang of 8 stays on one NVSwitch node",
     [node("a"), node("b")], [job("g", gpus=2, gang_size=4)], "tessera",
     {"g": [("a", i, None, None, 1000) for i in range(8)]}),
    ("gpu model constraint is honoured",
     [node("a", model="A100-80GB"), node("h")], [job("j", gpu_models=("NVIDIA H100 80GB HBM3",))],
     "tessera", {"j": [("h", 0, None, None, 1000)]}),
    ("a node that is not ready takes no work",
     [node("a", state="draining"), node("b")], [job("j")], "tessera",
     {"j": [("b", 0, None, None, 1000)]}),
]


@pytest.mark.parametrize("name, nodes, jobs, policy, expected", SCENARIOS,
                         ids=[s[0] for s in SCENARIOS])
def test_placement(name, nodes, jobs, policy, expected):
    assert placed(schedule(snap(nodes, jobs), policy)) == expected


def test_a_big_gang_takes_whole_nodes_under_one_leaf():
    nodes = [node("a1", leaf="l1"), node("b1", leaf="l2"), node("b2", leaf="l2")]
    plan = schedule(snap(nodes, [job("g", gpus=8, gang_size=2)]))
    assert sorted(b.node for b in plan.binds) == ["b1", "b2"]


def test_the_spine_is_used_only_when_needed():
    nodes = [node("a1", leaf="l1"), node("b1", leaf="l2"), node("c1", leaf="l3")]
    plan = schedule(snap(nodes, [job("g", gpus=8, gang_size=2)]))
    assert len({b.node for b in plan.binds}) == 2


def test_a_gang_that_does_not_fit_holds_nothing():
    plan = schedule(snap([node("a"), node("b")], [job("g", gpus=8, gang_size=3)]))
    assert plan.binds == ()
    assert plan.pending["g"].reason == "no-gang-group"


def test_k8s_default_places_gang_members_one_by_one():
    plan = schedule(snap([node("a"), node("b")], [job("g", gpus=8, gang_size=3)]), "k8s-default")
    assert len(plan.binds) == 2


def test_nvswitch_counterfactual_is_explained():
    nodes = [node("a", gpus=3), node("b", gpus=2)]
    plan = schedule(snap(nodes, [job("j", gpus=4)]))
    info = plan.pending["j"]
    assert info.reason == "no-free-gpus"
    assert "needs 4 H100-80GB GPUs on one NVSwitch node; the largest free group is 3" in \
        info.message


def test_memory_too_large_is_explained():
    plan = schedule(snap([node("a")], [job("j", mem=100)]))
    assert plan.pending["j"].reason == "gpu-memory"
    assert "largest allowed GPU has 80 GB" in plan.pending["j"].message


def test_missing_model_is_explained():
    plan = schedule(snap([node("a")], [job("j", gpu_models=("B200",))]))
    assert plan.pending["j"].reason == "no-such-gpu"


def test_cpu_and_ram_bound_placement():
    plan = schedule(snap([node("a", cpu=8)], [job("j", cpu_cores=16)]))
    assert plan.pending["j"].reason == "host-resources"


def test_a_cycle_is_deterministic():
    nodes = [node(f"n{i}", leaf=f"l{i % 2}", mig=range(4) if i % 2 else ()) for i in range(4)]
    jobs = [job(f"t{i}", gpus=1 + i % 3) for i in range(6)] + \
        [inference(f"i{i}", 5 + 7 * i) for i in range(6)]
    first, second = schedule(snap(nodes, jobs)), schedule(snap(nodes, jobs))
    assert first.binds == second.binds and first.pending == second.pending


def test_one_gpu_reads_singular_in_the_sentences():
    """Issue 16: 'needs 1 H100-80GB GPUs' read wrong; one GPU is singular, everything else plural."""
    plan = schedule(snap([node("a", gpus=1)], [job("busy", gpus=1), job("j", gpus=1)]))
    waiting = next(info for info in plan.pending.values())
    assert "needs 1 H100-80GB GPU on one NVSwitch node; the largest free group is 0" in waiting.message
    assert (gpu_count(1, "H100-80GB"), gpu_count(2, free=True), gpu_count(0.5)) == \
        ("1 H100-80GB GPU", "2 free GPUs", "0.5 GPUs")
