import pytest

from scheduling.engine import POLICIES, Policy, schedule
from scheduling.engine.features import Features
from scheduling.engine.policies import TESSERA
from scheduling.engine.registry import Registry
from tests.engine.builders import node, snap


def test_it_refuses_duplicate_names():
    registry = Registry("thing")
    registry.register("a", 1)
    with pytest.raises(ValueError):
        registry.register("a", 2)
    with pytest.raises(ValueError):
        POLICIES.register("tessera", TESSERA)


def test_unknown_names_fail_loudly():
    with pytest.raises(KeyError, match="unknown policy"):
        schedule(snap([node("a")]), "nope")
    with pytest.raises(KeyError, match="unknown action 'allocat'.*allocate"):
        Policy(name="bad", features=Features(), actions=("allocat",))


def test_a_misspelt_option_is_an_error_not_a_default():
    with pytest.raises(TypeError, match="layot_min_age_s"):
        Features(layot_min_age_s=60)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="layot_min_age_s"):
        TESSERA.with_features(layot_min_age_s=60)


def test_a_wrongly_typed_option_is_an_error():
    with pytest.raises(ValueError, match="gang"):
        Features(gang="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="packing"):
        Features(packing="tightest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_reservations"):
        Features(max_reservations=True)
    with pytest.raises(ValueError, match="min_runtime_s"):
        Features(min_runtime_s=-1.0)


def test_the_named_policies_exist():
    assert {"tessera", "tessera-consolidate", "k8s-default", "binpack"} <= set(POLICIES.names())


def test_features_are_frozen():
    with pytest.raises(AttributeError):
        TESSERA.features.gang = False  # type: ignore[misc]


def test_team_order_decides_within_a_team_only_when_the_policy_says_so():
    from scheduling.engine.actions.common import ordered
    from scheduling.engine.session import Session
    from tests.engine.builders import job

    first_submitted = job("early", team="ml", queue_order=2, submitted_at=1.0)
    lead_first = job("late", team="ml", queue_order=1, submitted_at=2.0)
    pending = [first_submitted, lead_first]
    for team_order, expected in ((True, ["late", "early"]), (False, ["early", "late"])):
        features = TESSERA.with_features(team_order=team_order).features
        session = Session(snap([node("a")], pending), features)
        assert [j.id for j in ordered(session, pending)] == expected
