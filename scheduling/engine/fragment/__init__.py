"""Fragmentation-aware node scoring (FGD, ATC'23 "Beware of Fragmentation", and tessera's terms
on top of it), plus the FGD paper's baselines, on one compact node view.

A scorer sees a node as its GPU model, CPU left and free milli per GPU (shapes.NodeView) and a
request as CPU, GPU count, milli per GPU and allowed models (shapes.Request). The live engine's
placement scores candidate nodes with one (placement/scored.py, Features.placement_scorer), and
the fill experiment (scheduling/simulator/fill/) runs that placement over the openb trace. The
scorers are looked up by name in SCORERS.
"""

from .baselines import BestFitScorer, DotProdScorer, FgdScorer, GpuClusteringScorer, GpuPackingScorer
from .frag import FragModel, TypicalShape, node_frag, shape_frag, typical_shapes
from .learn import Binding, bind
from .registry import SCORERS, Scorer
from .shapes import MILLI, NodeView, Request, fits, place
from .tessera import TesseraScorer

for _scorer in (
    TesseraScorer(),
    FgdScorer(),
    BestFitScorer(),
    GpuPackingScorer(),
    GpuClusteringScorer(),
    DotProdScorer(),
):
    SCORERS.register(_scorer.name, _scorer)


__all__ = [
    "MILLI",
    "SCORERS",
    "Binding",
    "FragModel",
    "NodeView",
    "Request",
    "Scorer",
    "TypicalShape",
    "bind",
    "fits",
    "node_frag",
    "place",
    "shape_frag",
    "typical_shapes",
]
