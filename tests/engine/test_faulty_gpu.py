"""One bad MIG layout row must not stop the cycle (issue 16.1): a typo'd profile made every cycle
fail with `KeyError: unknown MIG profile`; now that GPU takes no work and the plan names it."""

from scheduling.engine import Allocation, schedule

from .builders import inference, job, node, running, snap


def test_an_unknown_profile_takes_its_gpu_out_and_the_cycle_goes_on():
    bad = node("a100-1", model="A100-80GB", gpus=2, layouts={0: [("9g.999gb", 0, None)]})
    plan = schedule(snap([bad], pending=[inference("1", mem=8.0), job("2", gpus=1)]))
    assert set(plan.faulty_gpus) == {"a100-1/0"}
    assert "unknown MIG profile '9g.999gb'" in plan.faulty_gpus["a100-1/0"][0]
    assert all(alloc.gpu_index != 0 for bind in plan.binds for alloc in bind.allocations)
    assert plan.binds  # GPU 1 still takes work


def test_overlapping_slices_are_reported_and_never_placed_on():
    overlap = node("a100-1", model="A100-80GB", gpus=1, layouts={0: [("3g.40gb", 0, None), ("3g.40gb", 2, None)]})
    plan = schedule(snap([overlap], pending=[inference("1", mem=8.0)]))
    assert "a100-1/0" in plan.faulty_gpus
    assert any("overlaps" in error or "cannot start" in error for error in plan.faulty_gpus["a100-1/0"])
    assert plan.binds == ()


def test_a_job_still_running_on_a_faulty_gpu_keeps_it_and_its_quota():
    held = job("7", gpus=0, mem=8.0, kind="inference")
    bad = node("a100-1", model="A100-80GB", gpus=1, layouts={0: [("9g.999gb", 0, "7")]})
    member = running(held, "a100-1", allocations=(Allocation(gpu_index=0, milli=0, memory_gb=8.0,
                                                             mig_profile="9g.999gb", mig_start=0),))
    plan = schedule(snap([bad], pending=[job("8", gpus=1)], running=[member]))
    assert plan.binds == () and "a100-1/0" in plan.faulty_gpus
    assert plan.preemptions == () or all(p.job_id != "7" for p in plan.preemptions)


def test_a_valid_layout_reports_nothing():
    good = node("a100-1", model="A100-80GB", gpus=1, layouts={0: [("3g.40gb", 0, None), ("3g.40gb", 4, None)]})
    assert schedule(snap([good], pending=[inference("1", mem=8.0)])).faulty_gpus == {}
