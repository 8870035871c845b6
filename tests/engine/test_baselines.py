"""The fair baselines of `simulate run` (engine/policies.py), each pinned by the behaviour that
defines the real system it models."""

from scheduling.engine import Allocation, schedule
from tests.engine.builders import NOW, inference, job, node, running, snap


def full_node(name, prefix, team="ml", cls="training", borrowed=False, started=NOW - 3600):
    """Eight 1-GPU jobs filling node `name`."""
    return [running(job(f"{prefix}{i}", team=team, cls=cls), name, [i], started=started,
                    borrowed=borrowed) for i in range(8)]


# --- k8s-default ------------------------------------------------------------------------------

def test_k8s_default_serves_production_within_one_cycle_by_preempting_lower_classes():
    # Another team's training, within no quota at all (k8s has none in the engine), just started:
    # DefaultPreemption stops a lower-priority pod whatever its namespace or age.
    runs = full_node("n1", "t", team="research", started=NOW - 10)
    plan = schedule(snap([node("n1")], [inference("serve", 9, team="search")], runs), "k8s-default")
    assert len(plan.preemptions) == 1
    assert plan.preemptions[0].for_job_id == "serve" and plan.preemptions[0].job_id.startswith("t")
    # The floor it replaces never preempts: production waits for a training job to end.
    naive = schedule(snap([node("n1")], [inference("serve", 9, team="search")], runs), "k8s-naive")
    assert naive.preemptions == () and naive.binds == ()


def test_k8s_default_preempts_only_lower_priority_classes():
    runs = full_node("n1", "p", team="search", cls="production")
    plan = schedule(snap([node("n1")], [job("train", team="research")], runs), "k8s-default")
    assert plan.preemptions == ()
    runs = full_node("n1", "b", team="other", cls="best-effort")
    plan = schedule(snap([node("n1")], [job("train", team="research")], runs), "k8s-default")
    assert [p.for_job_id for p in plan.preemptions] == ["train"]


def test_k8s_default_takes_whole_gpus_and_places_gang_members_one_by_one():
    plan = schedule(snap([node("a")], [inference("inf", 5)]), "k8s-default")
    assert [a.milli for a in plan.binds[0].allocations] == [1000]
    plan = schedule(snap([node("a"), node("b")], [job("g", gpus=8, gang_size=3)]), "k8s-default")
    assert len(plan.binds) == 2  # two of three pods hold GPUs; the third waits


# The device plugin sharing with renameByDefault: false advertises GPUs x replicas nvidia.com/gpu,
# so a sub-GPU pod asking one gets a replica; whole-GPU pods keep off sharing nodes (policies.py).
L4 = dict(model="L4", interconnect="pcie")


def test_k8s_default_sub_gpu_pod_takes_one_mps_replica_before_a_whole_gpu():
    nodes = [node("plain", gpus=1, **L4), node("mps", gpus=2, sharing="mps", replicas=4, **L4)]
    plan = schedule(snap(nodes, [inference("inf", 5)]), "k8s-default")
    [bind] = plan.binds
    assert bind.node == "mps" and [a.milli for a in bind.allocations] == [250]  # a quarter, its replica


def test_k8s_default_spreads_replicas_and_takes_a_whole_gpu_once_they_are_all_held():
    nodes = [node("plain", gpus=1, **L4), node("mps", gpus=2, sharing="mps", replicas=2, **L4)]
    plan = schedule(snap(nodes, [inference(f"i{k}", 5, queue_order=k) for k in range(6)]), "k8s-default")
    where = {b.job_id: (b.node, b.allocations[0].gpu_index, b.allocations[0].milli) for b in plan.binds}
    assert sorted(v for v in where.values() if v[0] == "mps") == [("mps", 0, 500), ("mps", 0, 500),
                                                                  ("mps", 1, 500), ("mps", 1, 500)]
    assert [v for v in where.values() if v[0] == "plain"] == [("plain", 0, 1000)]
    assert len(plan.binds) == 5  # the sixth waits: no replica and no whole GPU left
    # The first two go to different GPUs (the emptiest GPU first).
    assert where["i0"][1] != where["i1"][1]


def test_k8s_default_replica_rules_are_every_policys():
    # 24 GB / 4 replicas = 6 GB pinned: a 7 GB need takes a whole GPU; a time-sliced replica only
    # for a pod that accepts no isolation; a whole-GPU pod never lands on a sharing node.
    mps = [node("plain", gpus=1, **L4), node("mps", gpus=1, sharing="mps", replicas=4, **L4)]
    assert schedule(snap(mps, [inference("big", 7)]), "k8s-default").binds[0].node == "plain"
    ts = [node("plain", gpus=1, **L4), node("ts", gpus=1, sharing="time-slicing", replicas=4, **L4)]
    assert schedule(snap(ts, [inference("nb", 4)]), "k8s-default").binds[0].node == "plain"
    plan = schedule(snap(ts, [inference("nb", 4, accepts_no_isolation=True)]), "k8s-default")
    assert plan.binds[0].node == "ts" and plan.binds[0].allocations[0].milli < 1000
    plan = schedule(snap([node("mps", gpus=8, sharing="mps", replicas=4)], [job("train", gpus=1)]), "k8s-default")
    assert plan.binds == ()


def test_k8s_default_preempts_a_replica_for_a_sub_gpu_pod_but_never_for_a_whole_gpu_one():
    share = Allocation(gpu_index=0, milli=500, memory_gb=4.0, mig_profile=None, mig_start=None)
    runs = [running(inference(f"b{i}", 4, team="other", cls="best-effort"), "mps", allocations=[share])
            for i in range(2)]
    nodes = [node("mps", gpus=1, sharing="mps", replicas=2, **L4)]
    plan = schedule(snap(nodes, [inference("serve", 5, team="search")], runs), "k8s-default")
    assert [p.for_job_id for p in plan.preemptions] == ["serve"]  # one replica frees, one is enough
    plan = schedule(snap(nodes, [job("train", gpus=1, cls="production")], runs), "k8s-default")
    assert plan.preemptions == ()  # stopping both frees a GPU the plugin still offers as replicas only


# --- kueue ------------------------------------------------------------------------------------

def test_kueue_reclaims_borrowed_quota_within_the_cohort():
    # "other" borrowed all of n1 beyond its nominal quota; "ml" asks within its own nominal quota.
    runs = full_node("n1", "b", team="other", borrowed=True)
    plan = schedule(snap([node("n1")], [job("mine", gpus=4)], runs, queues=[("ml", 8), ("other", 0, 8)]),
                    "kueue")
    assert len(plan.preemptions) == 4 and {p.reason.value for p in plan.preemptions} == {"reclaim"}
    assert all(p.for_job_id == "mine" for p in plan.preemptions)


def test_kueue_never_preempts_another_queues_nominal_quota_for_a_borrower():
    runs = full_node("n1", "o", team="other", cls="best-effort")  # within other's nominal quota
    plan = schedule(snap([node("n1")], [job("burst", gpus=4)], runs, queues=[("ml", 0, 16), ("other", 8)]),
                    "kueue")
    assert plan.preemptions == () and plan.binds == ()


def test_kueue_admits_a_workload_whole_or_not_at_all():
    gang = job("g", gpus=8, gang_size=3)
    plan = schedule(snap([node("a"), node("b")], [gang], queues=[("ml", 64)]), "kueue")
    assert plan.binds == ()
    plan = schedule(snap([node("a"), node("b"), node("c")], [gang], queues=[("ml", 64)]), "kueue")
    assert len(plan.binds) == 3


# Kueue over the same device plugin: a sub-GPU pod asks one nvidia.com/gpu, a replica where a node
# shares, and its ClusterQueue counts the request, 1 GPU per replica (policies.py).

def test_kueue_sub_gpu_pod_takes_one_mps_replica_before_a_whole_gpu():
    nodes = [node("plain", gpus=1, **L4), node("mps", gpus=2, sharing="mps", replicas=4, **L4)]
    plan = schedule(snap(nodes, [inference("inf", 5)], queues=[("web", 4)]), "kueue")
    [bind] = plan.binds
    assert bind.node == "mps" and [a.milli for a in bind.allocations] == [250]
    plan = schedule(snap(nodes, [job("train", gpus=1, team="web")], queues=[("web", 4)]), "kueue")
    assert [b.node for b in plan.binds] == ["plain"]  # a whole-GPU pod keeps off the sharing node


def test_kueue_counts_a_replica_as_one_gpu_of_the_cluster_queue():
    # One GPU of four replicas: replicas for all three, but nominalQuota 2 admits two of them.
    nodes = [node("mps", gpus=1, sharing="mps", replicas=4, **L4)]
    pending = [inference(f"i{k}", 5, queue_order=k) for k in range(3)]
    plan = schedule(snap(nodes, pending, queues=[("web", 2, 2)]), "kueue")
    assert len(plan.binds) == 2 and all(b.allocations[0].milli == 250 for b in plan.binds)
    share = Allocation(gpu_index=0, milli=250, memory_gb=5.0, mig_profile=None, mig_start=None)
    runs = [running(inference("r", 5), "mps", allocations=[share])]
    plan = schedule(snap(nodes, pending, runs, queues=[("web", 2, 2)]), "kueue")
    assert len(plan.binds) == 1  # the running replica holds 1 of the 2, not a quarter


def test_kueue_mig_keeps_sub_gpu_pods_off_plain_replicas():
    # kueue-mig's serving takes nvidia.com/gpu.shared; the kueue row's replica_or_whole is not its.
    from scheduling.engine.policies import get_policy
    features, _ = get_policy("kueue-mig").build()
    assert not features.replica_or_whole and not features.replica_counts_one


# --- kueue-mig --------------------------------------------------------------------------------

BALANCED = [("3g.40gb", 4, None), ("2g.20gb", 0, None), ("1g.10gb", 2, None), ("1g.10gb", 3, None)]


def test_kueue_mig_never_changes_mig_modes_or_layouts():
    # Two idle MIG GPUs in the balanced layout, six whole GPUs busy: tessera would turn the idle
    # MIG GPUs back into whole ones for the 2-GPU job; kueue-mig leaves them as they are.
    layouts = {0: BALANCED, 1: BALANCED}
    runs = [running(job(f"r{i}", team="ml", last_checkpoint_at=NOW), "n1", [i]) for i in range(2, 8)]
    pending = [job("two", gpus=2, team="ml"), inference("nb", 30, team="ml", cls="interactive"),
               inference("big", 60, team="ml", cls="interactive")]
    plan = schedule(snap([node("n1", layouts=layouts)], pending, runs, queues=[("ml", 16)]), "kueue-mig")
    assert plan.repartitions == ()
    binds = {b.job_id: b for b in plan.binds}
    # The 30 GB notebook takes an existing 3g.40gb; no 7g.80gb is made for the 60 GB one.
    assert binds["nb"].allocations[0].mig_profile == "3g.40gb"
    assert set(binds) == {"nb"}
    tessera = schedule(snap([node("n1", layouts=layouts)], pending, runs, queues=[("ml", 16)]))
    assert tessera.repartitions  # the same situation makes tessera repartition


def test_kueue_mig_shares_whole_gpus_for_serving_only():
    # n1's device plugin runs MPS (2 replicas of 40 GB); the whole GPUs 1-7 were taken before.
    runs = [running(job(f"r{i}", team="ml"), "n1", [i]) for i in range(1, 8)]
    pending = [inference("serve", 9, team="web"), inference("nb", 9, team="ml", cls="interactive")]
    plan = schedule(snap([node("n1", sharing="mps", replicas=2)], pending, runs, queues=[("ml", 16), ("web", 8)]),
                    "kueue-mig")
    assert [b.job_id for b in plan.binds] == ["serve"]
    assert plan.binds[0].allocations[0].milli < 1000 and plan.binds[0].allocations[0].mig_profile is None


# --- volcano ----------------------------------------------------------------------------------

def test_volcano_places_a_gang_whole_or_not_at_all():
    gang = job("g", gpus=8, gang_size=3)
    plan = schedule(snap([node("a"), node("b")], [gang], queues=[("ml", 64)]), "volcano")
    assert plan.binds == ()
    plan = schedule(snap([node("a"), node("b"), node("c")], [gang], queues=[("ml", 64)]), "volcano")
    assert sorted(b.node for b in plan.binds) == ["a", "b", "c"]


def test_volcano_binpacks_and_shares_gpus_memory_bounded():
    # Shares only where the cluster runs the device plugin in MPS mode (2 replicas of 40 GB).
    nodes = [node("a", gpus=4), node("b", gpus=4), node("m", gpus=4, sharing="mps", replicas=2)]
    pending = [job("j1"), job("j2"), inference("s1", 30), inference("s2", 30), inference("s3", 30)]
    plan = schedule(snap(nodes, pending, queues=[("ml", 8), ("web", 8)]), "volcano")
    assert {b.node for b in plan.binds if b.job_id.startswith("j")} in ({"a"}, {"b"})  # packed
    shared = [b for b in plan.binds if b.job_id.startswith("s")]
    assert {b.node for b in shared} == {"m"} and all(b.allocations[0].milli < 1000 for b in shared)
    assert len({b.allocations[0].gpu_index for b in shared}) == 2  # two 30 GB fit on one GPU, not three


def test_volcano_reclaims_borrowed_capacity_for_a_queue_under_its_share():
    runs = full_node("n1", "b", team="other", borrowed=True)
    plan = schedule(snap([node("n1")], [job("mine", gpus=2)], runs, queues=[("ml", 8), ("other", 0, 8)]),
                    "volcano")
    assert len(plan.preemptions) == 2 and {p.reason.value for p in plan.preemptions} == {"reclaim"}
