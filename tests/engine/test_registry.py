import pytest

from scheduling.engine import POLICIES, Policy, schedule
from scheduling.engine.plugins import PLUGINS, build_features
from scheduling.engine.registry import Registry
from tests.engine.builders import node, snap


def test_it_refuses_duplicate_names():
    registry = Registry("thing")
    registry.register("a", 1)
    with pytest.raises(ValueError):
        registry.register("a", 2)
    with pytest.raises(ValueError):
        PLUGINS.register("gang", lambda f: None)


def test_unknown_names_fail_loudly():
    with pytest.raises(KeyError, match="unknown plugin 'gnag'.*gang"):
        build_features(["gnag"])
    with pytest.raises(KeyError, match="unknown policy"):
        schedule(snap([node("a")]), "nope")
    with pytest.raises(KeyError, match="unknown action"):
        schedule(snap([node("a")]), Policy("bad", plugins=(), actions=("allocat",)))


def test_the_named_policies_exist():
    assert {"tessera", "k8s-default", "binpack"} <= set(POLICIES.names())


def test_features_are_frozen_once_built():
    features = build_features(["gang"])
    with pytest.raises(AttributeError):
        features.gang = False
