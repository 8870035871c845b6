"""Preemption that minimises lost work (issue 18): tessera stops the victims that lose the fewest
GPU-seconds since their last checkpoint, then the lowest class, then the shortest runtime; a job
that reports no checkpoint loses everything since it started; a job (re)started within
`min_runtime_s` is stopped only for production.

Every scenario: one full node of the team's own preemptible work and one waiting job that needs
one GPU, so exactly one victim is chosen and the test reads which.
"""

import pytest

from scheduling.engine import schedule
from scheduling.engine.features import Features
from scheduling.engine.policies import TESSERA
from tests.engine.builders import NOW, job, node, running, snap

HOUR = 3600.0


def training(id, started, checkpoint=None, cls="training", gpus=1, interval=600.0):
    """A running training job: (Job, started_at, GPUs); `checkpoint` seconds ago, or None."""
    at = None if checkpoint is None else NOW - checkpoint
    return job(id, cls=cls, gpus=gpus, checkpoint_interval_s=interval, last_checkpoint_at=at), NOW - started, gpus


def first_victim(jobs, preemptor_cls="interactive", policy="tessera"):
    """Fill one node with `jobs` and return the victims one waiting job of `preemptor_cls` gets
    (the team has room in its guarantee for it, so only the victim order decides)."""
    runs, index = [], 0
    for j, started, gpus in jobs:
        runs.append(running(j, "n1", range(index, index + gpus), started=started))
        index += gpus
    kind = "inference" if preemptor_cls == "production" else "training"
    waiting = job("hi", cls=preemptor_cls, kind=kind, gpus=1)
    plan = schedule(snap([node("n1", gpus=index)], [waiting], runs, queues=[("ml", index + 1)]), policy)
    return [p.job_id for p in plan.preemptions]


def test_of_two_equal_class_victims_the_one_with_less_work_since_its_checkpoint_goes_first():
    # "long" has run for hours but saved a minute ago; "recent" has run for less but last saved
    # twenty minutes ago: stopping "long" loses a minute, stopping "recent" twenty.
    jobs = [training("recent", started=1 * HOUR, checkpoint=1200), training("long", started=5 * HOUR, checkpoint=60)]
    assert first_victim(jobs) == ["long"]
    assert first_victim(list(reversed(jobs))) == ["long"]


def test_work_lost_is_counted_in_gpu_seconds_over_all_of_a_jobs_gpus():
    # 4 GPUs x 1,000 s = 4,000 GPU-s lost against 1 GPU x 3,000 s.
    jobs = [training("wide", started=2 * HOUR, checkpoint=1000, gpus=4),
            training("narrow", started=2 * HOUR, checkpoint=3000)]
    assert first_victim(jobs) == ["narrow"]


@pytest.mark.parametrize("interval", [600.0, None])
def test_a_job_without_checkpoint_info_counts_all_its_runtime_as_lost(interval):
    # "silent" reports no checkpoint time: it loses its whole 2,000 s, more than the 1,500 s
    # "saver" loses, so "saver" goes first (were silence read as nothing lost, it would pay).
    jobs = [training("silent", started=2000, interval=interval), training("saver", started=3 * HOUR, checkpoint=1500)]
    assert first_victim(jobs) == ["saver"]


def test_a_reported_checkpoint_time_counts_even_without_a_declared_interval():
    jobs = [training("declared", started=2 * HOUR, checkpoint=600),
            training("reported", started=2 * HOUR, checkpoint=60, interval=None)]
    assert first_victim(jobs) == ["reported"]


@pytest.mark.parametrize("kind", ["inference", "interactive"])
def test_a_service_loses_no_work_so_it_goes_before_training_that_would(kind):
    # A server or notebook holds no training progress; it reports no checkpoint either.
    service = job("service", cls="training", kind=kind)  # the same class: only lost work decides
    jobs = [training("train", started=2 * HOUR, checkpoint=600), (service, NOW - 2 * HOUR, 1)]
    assert first_victim(jobs, preemptor_cls="production") == ["service"]
    assert first_victim(jobs, preemptor_cls="production", policy="kueue") == ["train"]  # class first


def test_equal_work_lost_then_the_lowest_class_then_the_shortest_runtime():
    same_loss = [training("inter", started=3 * HOUR, checkpoint=600, cls="interactive"),
                 training("best", started=3 * HOUR, checkpoint=600, cls="best-effort")]
    assert first_victim(same_loss, preemptor_cls="production") == ["best"]
    same_class = [training("older", started=5 * HOUR, checkpoint=600),
                  training("younger", started=2 * HOUR, checkpoint=600)]
    assert first_victim(same_class) == ["younger"]


def test_min_runtime_protects_a_just_started_job_even_though_it_would_lose_least():
    # "restarted" would lose only 300 s, but it has just paid its restart: it is left alone.
    jobs = [training("restarted", started=300), training("settled", started=3 * HOUR, checkpoint=900)]
    assert first_victim(jobs) == ["settled"]
    assert first_victim(jobs[:1]) == []  # nothing else to stop: the interactive job waits
    assert TESSERA.features.min_runtime_s == 3600.0


def test_a_job_restarted_half_an_hour_ago_is_not_stopped_again():
    # Under "lost-work" the job that restored its checkpoint 30 minutes ago loses least (its
    # 1,800 s against 2,400 s) and was the next victim after 15 minutes' guard; tessera guards an
    # hour, so "settled" goes, and with nothing else to stop the interactive job waits.
    jobs = [training("restarted", started=1800), training("settled", started=3 * HOUR, checkpoint=2400)]
    assert first_victim(jobs) == ["settled"]
    assert first_victim(jobs[:1]) == []
    assert first_victim(jobs, policy=TESSERA.with_features(min_runtime_s=900.0)) == ["restarted"]


def test_min_runtime_is_configurable_per_policy():
    jobs = [training("restarted", started=300), training("settled", started=3 * HOUR, checkpoint=900)]
    assert first_victim(jobs, policy=TESSERA.with_features(min_runtime_s=0.0)) == ["restarted"]
    assert first_victim(jobs, policy=TESSERA.with_features(min_runtime_s=4 * HOUR)) == []


def test_production_inference_still_always_wins():
    # Every candidate just started and one never checkpointed: production takes its GPU anyway,
    # from the one losing least.
    jobs = [training("fresh", started=120), training("fresher", started=60, interval=None)]
    assert first_victim(jobs, preemptor_cls="production") == ["fresher"]


def test_an_unknown_victim_order_is_an_error():
    with pytest.raises(ValueError, match="victim_order"):
        Features(victim_order="newest")  # type: ignore[arg-type]
