"""Beat's replicas send the schedule only while they lead (agents/leadership.py), the demo never
elects, and /metrics says who leads and how old the lease is."""

from __future__ import annotations

import threading
import time

import pytest
from celery.beat import ScheduleEntry

from agents import leadership, metrics
from agents.leader import Elector
from tessera.celery import app
from tests.agents.test_leader import Clock, MemoryLease


@pytest.fixture
def elected(settings, monkeypatch):
    """Election on with the kubernetes backend; the candidate's Lease is in memory, its clock ours."""
    settings.TESSERA_BACKEND, settings.TESSERA_LEADER_ELECTION = "kubernetes", True
    clock, store = Clock(), MemoryLease()
    candidate = Elector(store, "beat-a", lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, clock=clock)
    monkeypatch.setattr(leadership, "elector", lambda: candidate)
    monkeypatch.setattr(leadership, "start", lambda: None)  # the tests step it themselves
    monkeypatch.setattr(leadership, "_stopping", threading.Event())
    return candidate, clock, store


def test_the_demo_and_a_single_beat_never_elect(settings):
    settings.TESSERA_BACKEND, settings.TESSERA_LEADER_ELECTION = "simulated", True
    assert leadership.leading() and leadership.start() is None
    settings.TESSERA_BACKEND, settings.TESSERA_LEADER_ELECTION = "kubernetes", False
    assert leadership.leading() and leadership.start() is None


def scheduler(tmp_path):
    return leadership.LeaderScheduler(app=app, schedule_filename=str(tmp_path / "beat-schedule"), lazy=True)


def test_a_follower_sends_nothing_and_the_leader_sends_what_is_due(elected, tmp_path):
    candidate, clock, store = elected
    beat = scheduler(tmp_path)
    entry = ScheduleEntry(name="run-cycle", task="agents.run_cycle", schedule=5.0, app=app,
                          last_run_at=app.now().replace(year=2000))
    assert beat.is_due(entry) == (False, leadership.RETRY_PERIOD_S)  # not yet elected
    candidate.step()
    assert beat.is_due(entry)[0]
    clock.now += leadership.RENEW_DEADLINE_S  # no renewal since: it stops sending
    assert beat.is_due(entry) == (False, leadership.RETRY_PERIOD_S)


def test_with_election_on_a_cycle_expires_before_a_successor_could_start(elected, tmp_path):
    beat = scheduler(tmp_path)
    beat.setup_schedule()
    try:
        assert beat.schedule["run-cycle"].options["expires"] == leadership.CYCLE_EXPIRES_S
        assert leadership.CYCLE_EXPIRES_S == leadership.LEASE_DURATION_S - leadership.RENEW_DEADLINE_S > 0
        assert "expires" not in beat.schedule["poll-agents"].options
    finally:
        beat.close()


def samples(name: str) -> list:
    families = {family.name: family for family in metrics.TesseraCollector().collect()}
    return families[name].samples


@pytest.mark.django_db
def test_metrics_name_the_leader_and_the_lease_age(elected):
    candidate, clock, store = elected
    leadership.step_and_record(candidate)  # beat-a takes the lease (in memory it has no renewTime: now)
    [holder] = samples("tessera_leader")
    assert holder.labels == {"identity": "beat-a"} and holder.value == 1
    assert samples("tessera_leader_lease_age_seconds")[0].value < 1.0
    store.down = True  # a partitioned leader renews nothing, so records nothing: the age grows
    leadership.step_and_record(candidate)
    assert samples("tessera_leader")[0].labels == {"identity": "beat-a"}
    metrics.leader_recorded("beat-b", time.time() - 4.0)  # as a follower read b's lease, renewed 4 s ago
    assert samples("tessera_leader")[0].labels == {"identity": "beat-b"}
    assert 4.0 <= samples("tessera_leader_lease_age_seconds")[0].value < 10.0


def test_a_stopping_beat_hands_the_lease_over(elected, tmp_path):
    candidate, clock, store = elected
    candidate.step()
    beat = scheduler(tmp_path)
    beat.setup_schedule()
    beat.close()
    assert not candidate.leading() and not store.lease.holder and leadership._stopping.is_set()
