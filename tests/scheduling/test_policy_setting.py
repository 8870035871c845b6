"""The live cycle runs the engine policy TESSERA_POLICY names (checked at start-up, tests/test_settings.py)."""

import pytest

from agents import services


@pytest.mark.django_db
@pytest.mark.parametrize("policy", ["tessera", "k8s-default"])
def test_the_live_cycle_runs_the_policy_the_setting_names(settings, policy):
    settings.TESSERA_POLICY = policy
    result = services.cycle_run()
    assert result["ran"] and result["summary"].startswith(f"{policy}:")
