"""Why idle GPUs stay idle (engine/idle.py), on situations built by hand: one cause per GPU with
free capacity, by the highest-priority waiting job that could use it."""

from scheduling.engine import schedule
from scheduling.engine.policies import get_policy
from tests.engine.builders import NOW, inference, job, node, running, snap


def busy(node_name, gpus, ends_in=90_000, team="x"):
    return [
        running(
            job(f"{node_name}-r{i}", team=team, expected_runtime_s=ends_in + 100), node_name, [i], started=NOW - 100
        )
        for i in gpus
    ]


def causes(snapshot, policy="tessera"):
    plan = schedule(snapshot, policy, idle_causes=True)
    return plan, {key: str(cause) for key, cause in plan.idle.items()}


def test_idle_gpus_with_nothing_waiting():
    plan, idle = causes(snap([node("n1")], [], busy("n1", range(2))))
    assert idle == {("n1", i): "nothing-waiting" for i in range(2, 8)}


def test_only_asked_for():
    assert schedule(snap([node("n1")])).idle == {}


def test_a_hole_too_small_for_what_waits():
    _, idle = causes(snap([node("n1")], [job("big", gpus=8)], busy("n1", range(4))))
    assert set(idle.values()) == {"nothing-fits"}


def test_free_gpus_held_by_a_reservation():
    # n1 frees first, so the 4-GPU head reserves it; its 2 free GPUs wait for the head, and the
    # long job may not backfill there.
    runs = busy("n1", range(6), ends_in=3500) + busy("n2", range(8))
    plan, idle = causes(
        snap([node("n1"), node("n2")], [job("head", gpus=4), job("long", expected_runtime_s=90_000)], runs)
    )
    assert plan.pending["head"].reason == "reserved"
    assert idle == {("n1", 6): "reserved", ("n1", 7): "reserved"}


def test_production_never_on_spot_is_the_tier_rule():
    nodes = [node("r1"), node("s1", tier="spot")]
    _, idle = causes(snap(nodes, [job("serve", cls="production", gpus=1)], busy("r1", range(8))))
    assert set(idle) == {("s1", i) for i in range(8)} and set(idle.values()) == {"tier"}


def test_a_job_naming_another_model_is_the_model_constraint():
    nodes = [node("h1"), node("a1", model="A100-80GB")]
    pending = [job("a100-only", gpus=1, gpu_models=("A100-80GB",))]
    _, idle = causes(snap(nodes, pending, busy("a1", range(8))))
    assert set(idle.values()) == {"gpu-model"}


def test_a_team_at_its_burst_limit_is_quota():
    runs = busy("n1", range(2), team="ml")
    _, idle = causes(snap([node("n1")], [job("more", team="ml")], runs, queues=[("ml", 0.0, 2.0)]))
    assert set(idle.values()) == {"quota"}


def test_a_draining_node_is_idle_for_its_state():
    _, idle = causes(snap([node("n1", state="draining")], [job("a")]))
    assert set(idle.values()) == {"node-draining"} and len(idle) == 8


def test_the_highest_priority_job_that_fits_decides():
    # The 8-GPU job cannot use the 4-GPU hole; the 1-GPU job could but its team is at its limit.
    runs = busy("n1", range(4), team="ml")
    pending = [job("big", team="ml", gpus=8, cls="interactive"), job("small", team="ml")]
    _, idle = causes(snap([node("n1")], pending, runs, queues=[("ml", 0.0, 4.0)]))
    assert set(idle.values()) == {"quota"}


def test_slices_that_break_up_a_node_are_the_mig_layout():
    # Two GPUs in MIG mode each run one small slice: the six whole GPUs left cannot take an
    # 8-GPU job, which the node could hold were those two GPUs whole.
    layouts = {0: [("1g.10gb", 0, "svc0")], 1: [("1g.10gb", 0, "svc1")]}
    _, idle = causes(snap([node("n1", layouts=layouts)], [job("big", gpus=8)]))
    assert set(idle.values()) == {"mig-layout"} and len(idle) == 8


def test_free_gpus_no_reservation_holds_are_not_reserved():
    # The head reserves n1 (frees first); n3's 4 idle GPUs are in MIG mode and n4 shares its GPUs
    # (never whole): no reservation holds them, so they are not "reserved" after the head's wait
    # reason but what keeps the head off them.
    runs = busy("n1", range(6), ends_in=3500) + busy("n2", range(8)) + busy("n3", range(4))
    nodes = [node("n1"), node("n2"), node("n3", mig=range(4, 8)),
             node("n4", sharing="time-slicing", replicas=4)]
    plan, idle = causes(snap(nodes, [job("head", gpus=4)], runs))
    assert plan.pending["head"].reason == "reserved"
    assert {idle[("n1", i)] for i in (6, 7)} == {"reserved"}
    assert {idle[("n3", i)] for i in range(4, 8)} == {"mig-layout"}
    assert {idle[("n4", i)] for i in range(8)} == {"nothing-fits"}



def test_a_sharing_node_whose_replicas_refuse_the_slice_job_is_no_sharing():
    # A 30 GB inference job waits for a slice. n1's MPS replicas (80/4 = 20 GB) are too small
    # for it and a sharing node is never carved into MIG slices, so its idle GPUs wait for no
    # MIG layout; n2's whole, MIG-capable GPUs beside training that a stop would set back could
    # be carved once n2 stops losing nothing: those are the MIG layout's.
    # (Without slice_or_whole: with it, the job takes a whole GPU of n2 beside the training,
    # test_slice_or_whole.py.)
    nodes = [node("n1", sharing="mps", replicas=4), node("n2")]
    waits = get_policy("tessera").with_features(slice_or_whole=False)
    plan, idle = causes(snap(nodes, [inference("infer", 30.0, cls="interactive")], busy("n2", range(4))), waits)
    assert plan.pending["infer"].reason == "no-slice"
    assert {idle[("n1", i)] for i in range(8)} == {"no-sharing"}
    assert {idle[("n2", i)] for i in range(4, 8)} == {"mig-layout"}


def test_free_nodes_of_two_models_are_not_topology():
    # A gang group is one GPU model (placement/whole.py): one free H100 node and one free A100
    # node under the same leaf cannot take a 2 x 8 gang, so their GPUs are not idle for topology.
    nodes = [node("h1"), node("a1", model="A100-80GB")]
    gang = job("gang", gpus=8, gang_size=2, checkpoint_interval_s=1800.0)
    plan, idle = causes(snap(nodes, [gang]))
    assert plan.pending["gang"].reason == "no-gang-group"
    assert "1 fully free nodes of one model now" in plan.pending["gang"].message
    assert set(idle.values()) == {"nothing-fits"}

