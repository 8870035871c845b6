"""Cluster state and work: the rows the scheduling engine's snapshot is built from.

Split by what the rows describe (cluster.py, jobs.py, telemetry.py); everything is imported here, so
`from scheduling.models import Job` keeps working and Django finds every model of the app.
"""

from .cluster import CapacityTier, Gpu, MigInstance, NetworkSwitch, Node, decimal_fraction
from .jobs import (
    JOB_KINDS,
    JOB_STATUSES,
    PLACEMENT_UNITS,
    ActionRequest,
    Job,
    JobEvent,
    NativePod,
    Placement,
    PriorityClass,
    run_id,
)
from .telemetry import GpuSample, MigSample

__all__ = [
    "JOB_KINDS", "JOB_STATUSES", "PLACEMENT_UNITS", "ActionRequest", "CapacityTier", "Gpu", "GpuSample",
    "Job", "JobEvent", "MigInstance", "MigSample", "NativePod", "NetworkSwitch", "Node", "Placement",
    "PriorityClass", "decimal_fraction", "run_id",
]
