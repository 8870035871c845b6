"""A job's pod logs for its page: read from the cluster when asked, never stored by Tessera."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings

from agents import runtime
from agents.actions.pods import job_pods
from agents.backends.base import Backend, BackendError, TransientBackendError
from scheduling.models import Job

log = logging.getLogger(__name__)

TAIL_LINES = 200
LIMIT_BYTES = 256 * 1024


@dataclass(frozen=True)
class PodLog:
    pod: str
    text: str = ""
    problem: str = ""  # why there is no text, in words for the job's owner


def job_logs(job: Job, backend: Backend | None = None, tail_lines: int = TAIL_LINES) -> list[PodLog]:
    """The last lines of each pod of the job's current (or last) run."""
    pods = job_pods(job)
    if not pods:
        return []
    try:
        backend = backend or _backend()
    except Exception:  # no credentials for the cluster here (a misdeployed portal): words, not a 500
        log.exception("no cluster client for reading logs")
        return [PodLog(pod, problem="Tessera cannot reach the cluster from the portal to read logs; "
                                    "the operators have the details in Tessera's log.") for pod in pods]
    return [_pod_log(backend, job.pod_namespace, pod, tail_lines) for pod in pods]


def _pod_log(backend: Backend, namespace: str, pod: str, tail_lines: int) -> PodLog:
    try:
        text = backend.pod_log(namespace, pod, tail_lines, LIMIT_BYTES)
    except TransientBackendError as error:
        return PodLog(pod, problem=f"The cluster did not answer ({error}); try again in a moment.")
    except BackendError as error:
        return PodLog(pod, problem=f"The cluster would not give this pod's logs: {error}")
    except Exception:  # an API answer no backend maps (a 401, a broken proxy): the page still shows
        log.exception("reading the logs of pod %s/%s failed", namespace, pod)
        return PodLog(pod, problem="Reading this pod's logs failed; the operators have the details in "
                                   "Tessera's log.")
    if text is None:
        return PodLog(pod, problem="The pod is gone, and its logs with it: the cluster keeps a pod's "
                                   "output only while the pod exists.")
    return PodLog(pod, text=text or "", problem="" if text else "The pod has printed nothing yet.")


def _backend() -> Backend:
    if settings.TESSERA_BACKEND == "simulated":  # the demo's cluster, wherever the embedded loop keeps it
        from agents import embedded

        return runtime.simulated_backend(embedded.state_path())
    return runtime.backend()
