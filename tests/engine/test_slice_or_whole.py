"""slice_or_whole (tessera): a sub-GPU job not production that finds no slice while every GPU in
MIG mode of its models is full takes a whole GPU of a node already running work, rather than
wait for a whole GPU to be carved (mostly on an empty node, the only kind the node-wide
mig-manager stop leaves reshapable)."""

from scheduling.engine import schedule
from scheduling.engine.policies import get_policy
from tests.engine.builders import binds_by_job, job, node, running, snap

# GPU 0 is in MIG mode and fully used; GPUs 1-3 are whole and idle.
FULL_MIG = node("n", gpus=4, mig=(0,), layouts={0: [("7g.80gb", 0, "busy")]})
ONLY_MIG = node("m", gpus=1, mig=(0,), layouts={0: [("7g.80gb", 0, "busy")]})  # a node of one full MIG GPU
QUEUES = [("ml", 8), ("lab", 8)]


def notebook(id="nb-1", mem=9.7):
    return job(id, team="lab", cls="interactive", gpus=0, mem=mem, kind="interactive")


def bound(plan, job_id):
    [bind] = binds_by_job(plan)[job_id]
    [alloc] = bind.allocations
    return bind.node, alloc


def test_a_notebook_takes_a_whole_gpu_beside_a_full_mig_gpu():
    node_name, alloc = bound(schedule(snap([FULL_MIG], [notebook()], queues=QUEUES)), "nb-1")
    assert node_name == "n" and alloc.milli == 1000 and alloc.mig_profile is None


def test_a_notebook_leaves_an_empty_node_to_whole_node_jobs():
    plan = schedule(snap([ONLY_MIG, node("e", gpus=4)], [notebook()], queues=QUEUES))
    assert "nb-1" not in binds_by_job(plan)


def test_it_takes_the_gpu_of_a_node_already_running_training():
    train = job("train", gpus=2)
    plan = schedule(snap([ONLY_MIG, node("e", gpus=4), node("b", gpus=4)], [notebook()],
                         running=[running(train, "b", (0, 1))], queues=QUEUES))
    assert bound(plan, "nb-1")[0] == "b"


def test_a_mig_gpu_with_room_still_gives_the_slice():
    room = node("n", gpus=4, mig=(0,), layouts={0: [("4g.40gb", 0, "busy")]})
    node_name, alloc = bound(schedule(snap([room], [notebook()], queues=QUEUES)), "nb-1")
    assert alloc.mig_profile and alloc.milli < 1000


def test_without_the_option_it_waits_for_a_slice():
    policy = get_policy("tessera").with_features(slice_or_whole=False)
    plan = schedule(snap([FULL_MIG], [notebook()], queues=QUEUES), policy)
    assert "nb-1" not in binds_by_job(plan)
