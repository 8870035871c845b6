"""What a policy may know of the workload it places: its workload prior.

FGD scores against the typical task shapes of a target workload; tessera also learns the
CPU per GPU, each GPU model's pressure and the packing LP's prices from a task list. Which list
decides whether a result is one an online scheduler could reach (issue 12):

* online (the default): the tasks that arrived before the one being placed, placed or not. The
  prior is relearned after 1, 2, 4, ... 512 arrivals and then every REFRESH_EVERY, so it lags a
  little and never sees a later task.
* past-half: learned once from the trace's earlier half by creation_time; the experiment runs
  on the later half, so the mix may have shifted as it does in a real cluster.
* oracle: the whole trace's task list, as the FGD artifact does; it reproduces the paper, but the
  list holds every task that will arrive.

The learned values still scale the mix to the cluster's capacity, GPUs and CPU (pressure and LP
prices ask what packing the cluster full with this mix would cost): the policy assumes demand fills the
cluster, which is the experiment's premise, not knowledge of when or what arrives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ...engine.fragment.learn import Binding, bind
from ...engine.fragment.registry import Scorer
from ...engine.fragment.shapes import Request
from .traces import TraceError, TraceTask

PRIORS = ("online", "past-half", "oracle")
REFRESH_EVERY = 1024  # arrivals between relearnings once the prior has 1024 tasks


class Prior(Protocol):
    binding: Binding

    def observe(self, task: Request) -> bool:
        """Told each task once it has been tried; True when `binding` changed."""
        ...


class FixedPrior:
    """Learned before the run (oracle, past-half), or none: policies that use no prior."""

    def __init__(self, binding: Binding):
        self.binding = binding

    def observe(self, task: Request) -> bool:
        return False


class OnlinePrior:
    """Learned from the arrived tasks only; the loop hands them over one by one, after each."""

    def __init__(self, policy: Scorer, capacity: Mapping[str, int] | None, cpu: int = 0):
        self.policy, self.capacity, self.cpu = policy, capacity, cpu
        self.arrived: list[Request] = []
        self.binding = bind(policy, [], capacity, cpu)

    def observe(self, task: Request) -> bool:
        self.arrived.append(task)
        n = len(self.arrived)
        if n & (n - 1) and n % REFRESH_EVERY:  # neither a power of two nor a multiple
            return False
        self.binding = bind(self.policy, self.arrived, self.capacity, self.cpu)
        return True


def split_by_creation(trace: Sequence[TraceTask]) -> tuple[list[TraceTask], list[TraceTask]]:
    """The trace's earlier and later half by creation_time (equal times by name)."""
    if any(t.created is None for t in trace):
        raise TraceError("--prior past-half needs the pod list's creation_time column; this "
                         "list has none (the multigpu lists do not)")
    ordered = sorted(trace, key=lambda t: (t.created or 0, t.name))
    half = len(ordered) // 2
    return ordered[:half], ordered[half:]


def prior_for(kind: str, policy: Scorer, trace: Sequence[TraceTask],
              capacity: Mapping[str, int] | None, cpu: int = 0) -> tuple[Prior, list[TraceTask]]:
    """The policy's prior of this kind and the tasks the experiment then runs on; capacity is
    the cluster's GPU milli per model, cpu its milli-cores."""
    if kind == "past-half":
        earlier, later = split_by_creation(trace)
        return FixedPrior(bind(policy, (t.task for t in earlier), capacity, cpu)), later
    if kind == "oracle":
        return FixedPrior(bind(policy, (t.task for t in trace), capacity, cpu)), list(trace)
    if kind != "online":
        raise ValueError(f"unknown prior {kind!r}; known: {', '.join(PRIORS)}")
    if not policy.uses_prior:
        return FixedPrior(bind(policy, [], capacity, cpu)), list(trace)
    return OnlinePrior(policy, capacity, cpu), list(trace)
