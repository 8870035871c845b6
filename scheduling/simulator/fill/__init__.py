"""The FGD paper's fill experiment (ATC'23 "Beware of Fragmentation") on the live engine's
placement: the openb trace and node lists, the workload priors, and the loop that hands each task
to engine.placement.place_job with a scorer of scheduling/engine/fragment (tessera, fgd and the
paper's baselines but Random, which is no score: baselines.py).

There is no placement logic here: placing and scoring are the engine's; adapter.py maps the openb
task model (milli-GPU shares, CPU, memory, GPU-model constraints) onto engine Nodes and Jobs, and
this package measures the result.
"""

from ...engine.fragment import SCORERS, Scorer

REGISTRY = SCORERS


def get_policy(name: str) -> Scorer:
    return SCORERS.get(name)


__all__ = ["REGISTRY", "get_policy"]
