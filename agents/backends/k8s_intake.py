"""Native pods on Kubernetes: finding them, telling them why they wait, labelling them as a job's,
and stopping their owner (part of KubernetesBackend; docs/reference/native-submission.md).

The intake lists only pods still to take in: our schedulerName, not bound, Pending, not created by
Tessera (managed-by) and not yet labelled with a job id. The label is the last step of taking one
in, so a worker that dies before it leaves the pod in the list, and the next poll finds its job by
the pod's uid instead of writing another.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.backends import k8s_manifests as m
from agents.backends.base import Outcome, Refused
from agents.backends.k8s_native import DELETE_OWNER_KINDS, NativePod, RefusedPod, is_native, read_native

JSON_PATCH = "application/json-patch+json"
# The custom owners a cancel deletes, by kind: (group, plural). A JobSet (kubernetes-sigs/jobset)
# makes a batch/v1 Job per replicated job and makes a deleted one again; so its Jobs' pods are
# stopped by deleting the JobSet.
CUSTOM_OWNERS = {"PyTorchJob": ("kubeflow.org", "pytorchjobs"), "JobSet": ("jobset.x-k8s.io", "jobsets")}


class NativeIntake:
    """The native half of KubernetesBackend; it brings `core`, `config`, `events`."""

    core: Any
    config: Any
    events: Any

    def native_pods(self) -> list[NativePod | RefusedPod]:
        """Every native pod still to take in, read (or refused, with why)."""
        pods = self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.schedulerName={self.config.scheduler_name},spec.nodeName=,status.phase=Pending",
            label_selector=f"{m.LABEL_MANAGED_BY}!={m.MANAGED_BY},!{m.LABEL_JOB}",
            _request_timeout=self.config.request_timeout_s,
        )
        return [read_native(pod) for pod in pods.items if is_native(pod, self.config.scheduler_name)]

    def native_refuse(self, refused: RefusedPod) -> None:
        """Say on the pod why Tessera leaves it Pending; a repeat raises the Event's count."""
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name=refused.name, namespace=refused.namespace, uid=refused.uid)
        )
        self.events.record(pod, refused.reason, refused.message, warning=True)

    def native_label(self, pod: NativePod, job_id: str, team: str) -> Outcome:
        """Label the pod as job `job_id`'s: from now on the observations (and the pod watch) see it.
        GONE when the pod was deleted (or replaced under its name) since it was listed."""
        patch = m.native_label_patch(pod.uid, pod.labels, job_id, team)
        try:
            self.core.patch_namespaced_pod(
                pod.name, pod.namespace, patch, _content_type=JSON_PATCH, _request_timeout=self.config.request_timeout_s
            )
        except ApiException as exc:
            if exc.status in (404, 422):  # 422: the uid test failed, a new pod holds the name
                return Outcome.GONE
            raise
        return Outcome.DONE

    def native_delete_owner(self, namespace: str, api_version: str, kind: str, name: str, uid: str) -> Outcome:
        """Delete the owner of native pods (a batch/v1 Job, the JobSet that controls such a Job, a
        PyTorchJob) with its pods; only the owner the pods named (the uid precondition), never a
        new one under its name."""
        if (api_version, kind) not in DELETE_OWNER_KINDS:
            raise Refused(f"Tessera does not delete {kind} objects; stop {kind} {name} yourself")
        if kind == "Job":
            api_version, kind, name, uid = self._jobset_of(namespace, name, uid) or (api_version, kind, name, uid)
        # Both in the body: the API server reads a body's options and ignores the query's, and
        # a Job deleted without a policy orphans its pods (the REST default for Jobs), which
        # then run on with no owner.
        options = client.V1DeleteOptions(propagation_policy="Background", preconditions=client.V1Preconditions(uid=uid))
        try:
            if kind == "Job":
                client.BatchV1Api(self.core.api_client).delete_namespaced_job(
                    name, namespace, body=options, _request_timeout=self.config.request_timeout_s
                )
            else:
                group, plural = CUSTOM_OWNERS[kind]
                client.CustomObjectsApi(self.core.api_client).delete_namespaced_custom_object(
                    group,
                    api_version.split("/", 1)[1],
                    namespace,
                    plural,
                    name,
                    body=options,
                    _request_timeout=self.config.request_timeout_s,
                )
        except ApiException as exc:
            if exc.status in (404, 409):  # 409: the precondition failed, the owner was replaced
                return Outcome.GONE
            raise
        return Outcome.DONE

    def _jobset_of(self, namespace: str, name: str, uid: str) -> tuple[str, str, str, str] | None:
        """The JobSet that controls this batch/v1 Job (api version, kind, name, uid), else None."""
        try:
            job = client.BatchV1Api(self.core.api_client).read_namespaced_job(
                name, namespace, _request_timeout=self.config.request_timeout_s
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        if job.metadata.uid != uid:
            return None
        for ref in job.metadata.owner_references or []:
            if ref.controller and ref.kind == "JobSet" and ref.api_version.startswith(CUSTOM_OWNERS["JobSet"][0] + "/"):
                return ref.api_version, ref.kind, ref.name, ref.uid
        return None
