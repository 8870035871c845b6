"""Named policies. A policy is one literal: a name, its Features (flags and limits, features.py)
and the actions it runs, least disruptive first. A misspelt feature or an unknown action is an
error when this module (or the one declaring the policy) is imported, never a silent default.

The live cycle runs the policy named by TESSERA_POLICY (tessera/settings.py, checked at start-up).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .actions import ACTIONS, Action
from .features import Features
from .registry import Registry

ALL_ACTIONS = ("allocate", "backfill", "reclaim", "preempt", "repartition")


@dataclass(frozen=True, kw_only=True)
class Policy:
    name: str
    features: Features
    actions: tuple[str, ...] = ALL_ACTIONS

    def __post_init__(self) -> None:
        for name in self.actions:
            ACTIONS.get(name)  # KeyError naming the known actions

    def build(self) -> tuple[Features, list[tuple[str, Action]]]:
        """The features and the actions to run, in order."""
        return self.features, [(name, ACTIONS.get(name)) for name in self.actions]

    def with_features(self, **changes: Any) -> Policy:
        """The same policy with some features changed (experiments and tests)."""
        return replace(self, features=replace(self.features, **changes))


POLICIES: Registry[Policy] = Registry("policy")


def register(policy: Policy) -> Policy:
    return POLICIES.register(policy.name, policy)


TESSERA = register(Policy(
    name="tessera",
    features=Features(gang=True, quota=True, fairshare=True, team_order=True, reserve=True,
                      topology=True, tiers=True, mig=True, sharing=True, memory_aware=True,
                      packing="binpack"),
))

# tessera plus consolidation (actions/consolidate.py): moves checkpointing jobs into gaps so a
# blocked whole-node job can start. Not the default: over five generated 256-GPU scenarios it
# raised utilisation by 0.010 on average (-0.009..+0.032, better on four of five) for 1.9x the
# preemptions, and a move costs more on real clusters (checkpoint I/O, image pulls) than the
# simulator's 60 s restart.
register(Policy(
    name="tessera-consolidate",
    features=TESSERA.features,
    actions=("allocate", "backfill", "reclaim", "preempt", "consolidate", "repartition"),
))

# Kubernetes as shipped: GPUs are opaque integers (a sub-GPU job takes a whole GPU), no MIG,
# no sharing, least-allocated spreading, pods placed one by one (no gangs), no topology.
register(Policy(name="k8s-default", features=Features(packing="spread"), actions=("allocate",)))

# Best fit on integer GPUs with memory-bounded sharing and gangs, no MIG, topology or tiers:
# the BestFit baseline of the fragmentation experiments.
register(Policy(
    name="binpack", features=Features(gang=True, sharing=True, memory_aware=True, packing="binpack"),
    actions=("allocate",),
))


def get_policy(config: str | Policy) -> Policy:
    if isinstance(config, Policy):
        return config
    return POLICIES.get(config)
