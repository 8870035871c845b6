"""The FGD paper's fill experiment (ATC'23 "Beware of Fragmentation"): its task and node model,
the fragmentation measure, the paper's six policies, tessera-fill, and the loop that runs them.

Plain Python (SciPy for the packing LP). Policies are looked up by name in REGISTRY; the live
scheduler's policies are elsewhere (scheduling/engine/policies.py).
"""

from . import baselines as _b
from .frag import FragModel, TypicalShape, node_frag, shape_frag, typical_shapes
from .model import MILLI, NodeState, Task, fits, place
from .registry import REGISTRY, Policy, Registry
from .tessera_fill import TesseraFillPolicy

for _policy in (TesseraFillPolicy(), _b.FgdPolicy(), _b.BestFitPolicy(), _b.GpuPackingPolicy(),
                _b.GpuClusteringPolicy(), _b.DotProdPolicy(), _b.RandomPolicy()):
    REGISTRY.register(_policy)


def get_policy(name: str) -> Policy:
    return REGISTRY.get(name)


__all__ = [
    "MILLI", "REGISTRY", "FragModel", "NodeState", "Policy", "Registry", "Task", "TypicalShape",
    "fits", "get_policy", "node_frag", "place", "shape_frag", "typical_shapes",
]
