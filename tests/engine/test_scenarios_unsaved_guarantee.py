"""Reclaim and a job that never checkpoints (issue 18, `guarantee_covers_unsaved`): the borrowed
mark stays with whichever job of a team bound last, so such a job, reclaimed, bound again as
borrowed and was reclaimed again an hour later. tessera counts it borrowed only where its team's
guarantee, covering first the team's jobs that would lose the most, leaves it out.

Every scenario: one full 8-GPU node; team `a` runs two 4-GPU jobs, "unsaved" (never checkpoints,
5 hours in, marked borrowed when it bound) and "saved" (checkpointed a minute ago, within the
guarantee when it bound); team `b`, within its guarantee, waits for 4 GPUs.
"""

import pytest

from scheduling.engine import schedule
from scheduling.engine.policies import TESSERA
from tests.engine.builders import NOW, job, node, running, snap

HOUR = 3600.0


def reclaimed(a_guarantee, policy=TESSERA, interval=None):
    unsaved = job("unsaved", team="a", gpus=4, checkpoint_interval_s=interval)
    saved = job("saved", team="a", gpus=4, checkpoint_interval_s=600.0, last_checkpoint_at=NOW - 60)
    runs = [running(unsaved, "n1", range(4), started=NOW - 5 * HOUR, borrowed=True),
            running(saved, "n1", range(4, 8), started=NOW - 2 * HOUR)]
    plan = schedule(snap([node("n1")], [job("b1", team="b", gpus=4)], runs,
                         queues=[("a", a_guarantee), ("b", 4)]), policy)
    return [p.job_id for p in plan.preemptions]


def test_a_guarantee_covers_the_job_that_would_lose_the_most_so_it_is_not_reclaimed():
    # 5 hours x 4 GPUs unsaved against a minute: a's guarantee of 4 covers "unsaved"; "saved" was
    # never marked borrowed, so b waits rather than cost a 20 GPU-hours.
    assert reclaimed(a_guarantee=4) == []
    assert reclaimed(a_guarantee=4, policy=TESSERA.with_features(guarantee_covers_unsaved=False)) == ["unsaved"]


def test_a_job_that_never_checkpoints_beyond_its_teams_guarantee_is_still_reclaimed():
    assert reclaimed(a_guarantee=0) == ["unsaved"]
    assert reclaimed(a_guarantee=3) == ["unsaved"]  # the guarantee covers part of it: not all


@pytest.mark.parametrize("a_guarantee", [0, 4])
def test_a_job_that_checkpoints_keeps_its_mark(a_guarantee):
    # It loses at most an interval: the rule leaves it alone whatever the guarantee.
    assert reclaimed(a_guarantee, interval=1800.0) == ["unsaved"]
