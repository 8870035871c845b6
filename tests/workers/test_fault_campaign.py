"""The fault campaign (bench/faults/, run by bench/fault_campaign.py) in the suite: a seeded, modest run that injects
every kind of fault into the real workers and checks the invariants after each one. The full
figure is `python bench/fault_campaign.py --faults 1000`."""

import os

import pytest

from bench.faults.driver import Campaign
from bench.faults.injection import FAULTS

pytestmark = pytest.mark.django_db(transaction=True)
COUNT = int(os.environ.get("TESSERA_CAMPAIGN_FAULTS", str(len(FAULTS))))
REDIS_PORT = int(os.environ.get("TESSERA_CAMPAIGN_REDIS_PORT", "18610"))
KINDS = tuple(os.environ.get("TESSERA_CAMPAIGN_KINDS", ",".join(FAULTS)).split(","))


def test_no_fault_breaks_an_invariant(tmp_path):
    with Campaign(seed=15, workdir=tmp_path, redis_port=REDIS_PORT) as campaign:
        report = campaign.run(COUNT, kinds=KINDS)
    print(report.table())
    assert set(report.faults) == set(KINDS) and sum(report.faults.values()) == COUNT
    assert report.violations == []
