"""FGD (ATC'23 "Beware of Fragmentation"): the fragmentation measure and the paper's policies.

Plain Python, no framework imports. Policies are looked up by name in REGISTRY.
"""

from . import policies as _p
from .frag import FragModel, TypicalShape, node_frag, shape_frag, typical_shapes
from .model import MILLI, NodeState, Task, fits, place
from .registry import REGISTRY, Policy, Registry
from .tessera import TesseraPolicy

for _policy in (TesseraPolicy(), _p.FgdPolicy(), _p.BestFitPolicy(), _p.GpuPackingPolicy(),
                _p.GpuClusteringPolicy(), _p.DotProdPolicy(), _p.RandomPolicy()):
    REGISTRY.register(_policy)


def get_policy(name: str) -> Policy:
    return REGISTRY.get(name)


__all__ = [
    "MILLI", "REGISTRY", "FragModel", "NodeState", "Policy", "Registry", "Task", "TypicalShape",
    "fits", "get_policy", "node_frag", "place", "shape_frag", "typical_shapes",
]
