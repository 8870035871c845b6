"""Fair share over time from the ledger (billing/fair_usage.py, scheduling/usage_history.py): one
aggregate query gives each team's decayed GPU-seconds, the same integral the engine computes."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.fair_usage import decayed_usage
from billing.services import usage_interval_close, usage_interval_open
from scheduling.engine.fair_history import decayed_gpu_s
from scheduling.usage_history import usage_history_at
from tests.billing.factories import T0, make_world, place

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
H = 168 * 3600.0


def _ran(job, gpu, start, end=None, **kw):
    placement = place(job, gpu, start, **kw)
    usage_interval_open(placement=placement, at=start)
    if end is not None:
        placement.ended_at = end
        placement.save(update_fields=["ended_at"])
        usage_interval_close(placement=placement, at=end, reason="completed")


def test_decayed_use_is_the_exact_integral_per_team_in_one_query():
    world = make_world()
    other = make_world(name="o")
    _ran(world.jobs[0], world.whole, T0, T0 + 10 * HOUR)        # closed, whole GPU
    _ran(world.jobs[1], world.shared, T0 + HOUR, share=250)     # open: counts until now
    _ran(other.jobs[0], other.whole, T0, T0 + 2 * HOUR)
    now = T0 + 24 * HOUR
    with CaptureQueriesContext(connection) as queries:
        used, first = decayed_usage(now, H)
    assert len(queries) == 1
    n, t0 = now.timestamp(), T0.timestamp()
    expected = (decayed_gpu_s(1, t0, t0 + 36000, n, H) + decayed_gpu_s(0.25, t0 + 3600, n, n, H))
    assert used["t-team"] == pytest.approx(expected, rel=1e-9)
    assert used["o-team"] == pytest.approx(decayed_gpu_s(1, t0, t0 + 7200, n, H), rel=1e-9)
    assert first == T0


def test_the_same_use_weighs_half_one_half_life_later():
    world = make_world()
    _ran(world.jobs[0], world.whole, T0, T0 + 10 * HOUR)
    now = T0 + 10 * HOUR
    fresh = decayed_usage(now, H)[0]["t-team"]
    assert decayed_usage(now + timedelta(seconds=H), H)[0]["t-team"] == pytest.approx(fresh / 2, rel=1e-9)


def test_use_older_than_the_window_and_future_intervals_are_left_out():
    world = make_world()
    _ran(world.jobs[0], world.whole, T0, T0 + HOUR)
    assert decayed_usage(T0 + timedelta(seconds=11 * H), H) == ({}, None)
    assert decayed_usage(T0 - HOUR, H) == ({}, None)


def test_the_snapshot_history_uses_the_configured_half_life(settings):
    world = make_world()
    _ran(world.jobs[0], world.whole, T0, T0 + HOUR)
    settings.TESSERA_FAIRSHARE_HALF_LIFE_H = 24
    history = usage_history_at(T0 + 2 * HOUR)
    assert history.half_life_s == 24 * 3600.0
    assert history.since == T0.timestamp()
    n = (T0 + 2 * HOUR).timestamp()
    assert dict(history.team_gpu_s) == pytest.approx(
        {"t-team": decayed_gpu_s(1, T0.timestamp(), T0.timestamp() + 3600, n, 24 * 3600.0)})
