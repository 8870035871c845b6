"""A job pinned to one MIG profile (a native pod's nvidia.com/mig-<profile>) gets that profile
or waits: the kubelet gives the pod only an instance of the profile it asked for."""

from scheduling.engine import schedule
from tests.engine.builders import inference, node, snap
from tests.engine.test_scenarios_placement import placed


def test_pinned_profile_is_placed_though_a_smaller_one_holds_the_need():
    # 39.5 GB (what 4g.40gb holds, the need intake gives such a pod) fits 3g.40gb too, the engine's own choice.
    free = schedule(snap([node("a", gpus=1, mig=(0,))], [inference("inf", 39.5)]), "tessera")
    pinned = schedule(snap([node("a", gpus=1, mig=(0,))], [inference("inf", 39.5, mig_profile="4g.40gb")]), "tessera")
    assert [p[2] for p in placed(free)["inf"]] == ["3g.40gb"]
    assert [p[2] for p in placed(pinned)["inf"]] == ["4g.40gb"]


def test_pinned_profile_takes_no_bigger_idle_instance():
    # No 1g.20gb slot anywhere: an unpinned job takes the idle 2g.20gb; a pinned one waits.
    layouts = {0: [("3g.40gb", 0, "x"), ("2g.20gb", 4, None), ("1g.20gb", 6, "y")]}
    nodes = [node("h", gpus=1, layouts=layouts)]
    unpinned = schedule(snap(nodes, [inference("inf", 12)]), "tessera")
    pinned = schedule(snap(nodes, [inference("inf", 12, mig_profile="1g.20gb")]), "tessera")
    assert [p[2] for p in placed(unpinned)["inf"]] == ["2g.20gb"]
    assert "inf" not in placed(pinned)
    assert "inf" in pinned.pending


def test_pinned_profile_takes_no_share_nor_whole_gpu():
    # A production job with no MIG slice free shares or takes a whole GPU; a pinned one cannot.
    nodes = [node("a", gpus=1), node("t", model="T4", interconnect="pcie", gpus=1, sharing="mps", replicas=2)]
    unpinned = schedule(snap(nodes, [inference("inf", 10)]), "tessera")
    pinned = schedule(snap(nodes, [inference("inf", 10, mig_profile="1g.10gb")]), "tessera")
    assert placed(unpinned)["inf"]
    assert "inf" not in placed(pinned)


def test_a_pinned_job_that_cannot_fit_does_not_hold_back_an_unpinned_one_of_the_same_shape():
    # The cycle remembers shapes that failed; a pin is part of the shape (else the free job waits too).
    layouts = {0: [("3g.40gb", 0, "x"), ("2g.20gb", 4, None), ("1g.20gb", 6, "y")]}
    pending = [inference("pinned", 12, mig_profile="1g.20gb", queue_order=0), inference("free", 12, queue_order=1)]
    plan = schedule(snap([node("h", gpus=1, layouts=layouts)], pending), "tessera")
    assert "pinned" not in placed(plan)
    assert [p[2] for p in placed(plan)["free"]] == ["2g.20gb"]
