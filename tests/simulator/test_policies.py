"""Each policy's node score and GPU rule, worked out by hand from the README's table (§2.1)."""

import random

import pytest

from scheduling.engine.fragment.baselines import fgd_score
from scheduling.engine.fragment.frag import FragModel, TypicalShape
from scheduling.engine.fragment.shapes import NodeView, Request, fits, place
from scheduling.engine.fragment.tessera import affinity
from scheduling.simulator.fill import REGISTRY, get_policy

NODE = NodeView("G2", 64000, 100_000, (1000, 1000, 600, 0), frozenset({"share"}))  # idle 2600
FRESH = NodeView("G2", 64000, 100_000, (1000,) * 4)
WHOLE = Request(8000, 1000, 1, 1000)
SHARE = Request(4000, 1000, 1, 500)
CPU_ONLY = Request(2000, 1000, 0, 0)
NO_FM = FragModel([])


@pytest.mark.parametrize("policy, node, task, expected", [
    # 100 * (1 - 0.5 * (64/128 * 8/128 + 2600/8000 * 1000/8000)) = 96.4
    ("dotprod", NODE, WHOLE, 96),
    # 100 * (1 - (0.5 * 56000/128000 + 0.5 * 1600/8000)) = 68.1
    ("bestfit", NODE, WHOLE, 68),
    # other tags only: band (0, 25]; 25 * (8000 - 2600) // 8000 = 16
    ("gpuclustering", NODE, WHOLE, 16),
    ("gpuclustering", NODE, SHARE, 16 + 75),  # the only tag on the node is the task's
    ("gpuclustering", FRESH, WHOLE, 12 + 25),  # idle-node band; 25 * 4000 // 8000 = 12
    ("gpuclustering", NODE, CPU_ONLY, 0),
    ("gpupacking", NODE, WHOLE, 49),  # needs one fully free GPU on a used node
    ("gpupacking", NODE, SHARE, 94),  # fits on the 600m GPU: 100 - 60/10
    ("gpupacking", FRESH, WHOLE, 29),  # idle node: 33 - 4 GPUs
    ("gpupacking", NODE, CPU_ONLY, 0),
])
def test_baseline_scores(policy, node, task, expected):
    assert get_policy(policy).score(node, task, NO_FM) == expected


@pytest.mark.parametrize("policy", ["dotprod", "bestfit", "gpuclustering", "gpupacking"])
def test_baselines_pick_gpus_best_fit(policy):
    assert get_policy(policy).share_pick(NODE, SHARE, NO_FM, random.Random(1)) == 600


@pytest.mark.parametrize("drop, expected", [(0, 50), (-1000, 26), (-500, 37), (1000, 73)])
def test_fgd_score_squashes_the_drop(drop, expected):
    assert fgd_score(drop) == expected


def test_fgd_counts_cpu_stranding():
    # One whole-GPU shape; a CPU-only task that leaves too little CPU strands the GPU (-1000m).
    fm = FragModel([TypicalShape(1000, 1000, 1, None, 1.0)])
    node = NodeView("G2", 2000, 10_000, (1000,))
    assert get_policy("fgd").score(node, Request(500, 1, 0, 0), fm) == 50
    assert get_policy("fgd").score(node, Request(1500, 1, 0, 0), fm) == 26


def test_fgd_picks_the_gpu_that_fragments_least():
    fm = FragModel([TypicalShape(0, 600, 1, None, 1.0)])
    node = NodeView("G2", 64000, 10_000, (1000, 700))
    task = Request(0, 1, 1, 300)
    # On the 700m GPU 400m would be left, too small for the 600m shape; a fresh GPU leaves 700m.
    assert get_policy("fgd").share_pick(node, task, fm, None) == 1000
    assert get_policy("bestfit").share_pick(node, task, fm, None) == 700


def test_tessera_breaks_fgd_ties_by_task_class():
    only_share = NodeView("G2", 64000, 1, (1000, 500), frozenset({"share"}))
    mixed = only_share._replace(tags=frozenset({"share", "1gpu"}))
    assert [affinity(n, SHARE) for n in (only_share, mixed, FRESH)] == [2, 1, 0]
    fm = FragModel([TypicalShape(0, 500, 1, None, 1.0)])
    tessera = get_policy("tessera")
    assert tessera.score(only_share, SHARE, fm) > tessera.score(mixed, SHARE, fm)


def test_fits_and_place():
    assert fits(NODE, WHOLE) and fits(NODE, SHARE)
    assert not fits(NODE, Request(8000, 1000, 3, 1000))  # only two fully free GPUs
    assert not fits(NODE, Request(8000, 200_000, 1, 1000))  # memory
    assert not fits(NODE, WHOLE._replace(spec=frozenset({"T4"})))
    after = place(NODE, SHARE, share_pick=1000)
    assert after.gpus == (1000, 600, 500, 0) and after.cpu_left == 60000
    assert place(NODE, WHOLE).gpus == (1000, 600, 0, 0)
    assert place(NODE, WHOLE).tags == {"share", "1gpu"}


def test_registry_refuses_duplicates_and_unknown_names():
    assert set(REGISTRY.names()) == {"tessera", "fgd", "bestfit", "gpupacking", "gpuclustering",
                                     "dotprod"}
    with pytest.raises(ValueError, match="already registered"):
        REGISTRY.register("fgd", get_policy("fgd"))
    with pytest.raises(KeyError, match="unknown placement scorer 'tessera-fill'; known: bestfit"):
        REGISTRY.get("tessera-fill")
