"""The elector's decisions (agents/leader.py) with a clock the test moves and an in-memory Lease
that answers like the API server: a write must name the resourceVersion it read (409 if not)."""

from __future__ import annotations

import itertools

import pytest

from agents.leader import Elector, Lease, LeaseConflict, LeaseUnavailable

DURATION, DEADLINE, RETRY = 15.0, 10.0, 2.0


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class MemoryLease:
    """One Lease object; `down` makes every call fail the way a partition does."""

    def __init__(self):
        self.lease: Lease | None = None
        self.versions = itertools.count(1)
        self.down = False

    def read(self) -> Lease | None:
        if self.down:
            raise LeaseUnavailable("partitioned")
        return self.lease

    def write(self, previous, *, holder, duration_s, acquired):
        if self.down:
            raise LeaseUnavailable("partitioned")
        current = self.lease.resource_version if self.lease else None
        if (previous.resource_version if previous else None) != current:
            raise LeaseConflict("the object has been modified")
        transitions = (previous.transitions if previous else 0) + (1 if acquired and previous else 0)
        self.lease = Lease(holder=holder, duration_s=duration_s, renew_time=None, acquire_time=None,
                           transitions=transitions, resource_version=str(next(self.versions)))


def elector(store, name, clock):
    return Elector(store, name, lease_duration_s=DURATION, renew_deadline_s=DEADLINE, retry_period_s=RETRY,
                   clock=clock)


@pytest.fixture
def world():
    clock, store = Clock(), MemoryLease()
    return clock, store, elector(store, "a", clock), elector(store, "b", clock)


def test_the_first_candidate_creates_the_lease_and_leads_the_second_follows(world):
    clock, store, a, b = world
    assert a.step() and a.leading()
    assert not b.step() and not b.leading()
    assert store.lease.holder == "a"


def test_a_leader_that_renews_keeps_leading_and_the_follower_never_takes_over(world):
    clock, store, a, b = world
    a.step()
    for _ in range(50):
        clock.now += RETRY
        assert a.step()
        assert not b.step()
    assert store.lease.holder == "a" and store.lease.transitions == 0


def test_a_killed_leader_is_replaced_one_lease_duration_after_the_follower_last_saw_it_renewed(world):
    clock, store, a, b = world
    a.step()
    b.step()  # b sees a's record at t0
    seen = clock.now
    while not b.step():
        clock.now += 0.5
    assert clock.now - seen == DURATION  # not a moment before, and at its first look after
    assert store.lease.holder == "b" and store.lease.transitions == 1
    assert not a.leading()


def test_a_partitioned_leader_stops_before_the_follower_may_take_over(world):
    clock, store, a, b = world
    a.step()
    renewed_at = clock.now
    b.step()
    a.store = Partitioned()
    while not b.step():
        clock.now += 0.25
        a.step()
        if clock.now - renewed_at >= DEADLINE:
            assert not a.leading()  # stopped at the renew deadline, lease still not free
    assert not a.leading() and b.leading()
    assert clock.now - renewed_at >= DURATION > DEADLINE


class Partitioned:
    def read(self):
        raise LeaseUnavailable("no route to host")

    def write(self, *args, **kwargs):
        raise LeaseUnavailable("no route to host")


def test_leadership_is_counted_from_before_the_renew_was_sent():
    """A renew that takes a while to answer does not stretch leadership by its latency."""
    clock, store = Clock(), MemoryLease()
    slow = SlowWrites(store, clock, latency=3.0)
    a = elector(slow, "a", clock)
    sent = clock.now
    a.step()
    clock.now = sent + DEADLINE - 0.01
    assert a.leading()
    clock.now = sent + DEADLINE
    assert not a.leading()


class SlowWrites:
    def __init__(self, store, clock, latency):
        self.store, self.clock, self.latency = store, clock, latency

    def read(self):
        return self.store.read()

    def write(self, *args, **kwargs):
        self.clock.now += self.latency
        return self.store.write(*args, **kwargs)


def test_of_two_followers_racing_for_an_expired_lease_exactly_one_wins(world):
    clock, store, a, b = world
    c = elector(store, "c", clock)
    a.step()
    b.step(), c.step()
    clock.now += DURATION
    stale = store.lease
    assert b.step()
    # c read the same expired record before b's write landed: its write names a stale version
    store_read = store.read
    store.read = lambda: stale
    assert not c.step()
    store.read = store_read
    assert store.lease.holder == "b" and b.leading() and not c.leading()


def test_a_leader_that_sees_someone_else_holding_the_lease_stops_at_once(world):
    clock, store, a, b = world
    a.step()
    store.lease = Lease(holder="b", duration_s=DURATION, renew_time=None, acquire_time=None, transitions=1,
                        resource_version="99")
    assert not a.step() and not a.leading()


def test_a_released_lease_is_taken_without_waiting(world):
    clock, store, a, b = world
    a.step()
    store.lease = Lease(holder=None, duration_s=DURATION, renew_time=None, acquire_time=None, transitions=0,
                        resource_version="7")
    assert b.step()


def test_the_timings_must_leave_the_leader_time_to_stop():
    with pytest.raises(ValueError, match="renew_deadline_s < lease_duration_s"):
        Elector(MemoryLease(), "a", lease_duration_s=10, renew_deadline_s=10, retry_period_s=2)


def test_run_steps_every_retry_period_until_stopped(world):
    clock, store, a, b = world
    slept = []
    a.run(stop=lambda: len(slept) >= 3, sleep=slept.append)
    assert slept == [RETRY] * 3 and a.leading()


def test_a_released_lease_is_taken_at_the_followers_next_look_and_the_old_leader_stops_first(world):
    clock, store, a, b = world
    a.step()
    b.step()
    a.release()
    assert not a.leading() and store.lease.holder == ""
    clock.now += RETRY
    assert b.step() and store.lease.holder == "b"


def test_release_by_a_partitioned_or_former_leader_changes_nothing_it_does_not_hold(world):
    clock, store, a, b = world
    a.step()
    store.down = True
    a.release()  # cannot reach the server: leadership ends here, the lease runs out by itself
    assert not a.leading() and store.lease.holder == "a"
    store.down = False
    b.release()  # never led
    assert store.lease.holder == "a"
