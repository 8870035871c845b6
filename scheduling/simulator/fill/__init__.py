"""The FGD paper's fill experiment (ATC'23 "Beware of Fragmentation") over the live engine's
placement scorers: the openb trace and node lists, the workload priors, and the loop that offers
each task to a scorer of scheduling/engine/fragment (tessera, fgd and the paper's baselines).

There is no placement logic here: scoring is the engine's; this package adapts the openb task
model (milli-GPU shares, CPU, memory, GPU-model constraints) to it and measures the result.
"""

from ...engine.fragment import SCORERS, Scorer

REGISTRY = SCORERS


def get_policy(name: str) -> Scorer:
    return SCORERS.get(name)


__all__ = ["REGISTRY", "get_policy"]
