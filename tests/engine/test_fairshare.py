import pytest

from scheduling.engine.fairshare import TeamDemand, deserved_shares


@pytest.mark.parametrize("capacity, teams, expected", [
    # Guarantees first, then idle lent by weight.
    (16, {"a": (4, None, 1, 16), "b": (4, None, 1, 16)}, {"a": 8, "b": 8}),
    (16, {"a": (4, None, 3, 16), "b": (4, None, 1, 16)}, {"a": 10, "b": 6}),
    # A team wanting less than its guarantee leaves the rest to others.
    (16, {"a": (8, None, 1, 2), "b": (4, None, 1, 20)}, {"a": 2, "b": 14}),
    # Burst limits cap the lending.
    (16, {"a": (0, 5, 1, 16), "b": (0, None, 1, 16)}, {"a": 5, "b": 11}),
    # Demand caps too.
    (10, {"a": (0, None, 1, 1), "b": (0, None, 1, 3)}, {"a": 1, "b": 3}),
])
def test_deserved_shares(capacity, teams, expected):
    demands = {t: TeamDemand(*v) for t, v in teams.items()}
    got = deserved_shares(capacity, demands)
    assert got == pytest.approx(expected)
