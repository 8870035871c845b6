"""deploy/rbac.yaml as the real API server reads it: the backend and the portal may do what Tessera
needs and nothing next to it (SubjectAccessReview, the server's own RBAC decision)."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.kube.conftest import TEAM
from tests.kube.control_plane import BACKEND_GROUPS, BACKEND_USER

PORTAL_USER = "system:serviceaccount:tessera-system:tessera-portal"
PORTAL_GROUPS = "system:serviceaccounts,system:serviceaccounts:tessera-system,system:authenticated"


def allowed(api_client, user: str, groups: str, verb: str, resource: str, namespace: str | None = TEAM,
            group: str = "") -> bool:
    resource, _sep, subresource = resource.partition("/")
    review = client.AuthorizationV1Api(api_client).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups.split(","), "resourceAttributes": {
            "verb": verb, "group": group, "resource": resource, "subresource": subresource,
            "namespace": namespace or ""}}})
    return review.status.allowed


@pytest.mark.parametrize(("verb", "resource", "namespace"), [
    ("create", "pods", TEAM), ("create", "pods/binding", TEAM), ("patch", "pods", TEAM), ("delete", "pods", TEAM),
    ("watch", "pods", None), ("create", "secrets", TEAM), ("get", "namespaces", None), ("patch", "nodes", None),
    ("create", "events", TEAM), ("patch", "events", TEAM),  # an event's count raised on a repeat
    ("patch", "configmaps", "gpu-operator"),  # the mig-parted ConfigMap
    ("create", "services", TEAM), ("list", "services", None), ("delete", "services", TEAM),  # gangs' DNS
])
def test_the_backend_may_do_what_tessera_needs(kube_admin, verb, resource, namespace):
    assert allowed(kube_admin, BACKEND_USER, BACKEND_GROUPS, verb, resource, namespace)


@pytest.mark.parametrize(("verb", "resource", "namespace"), [
    ("get", "secrets", TEAM), ("list", "secrets", TEAM), ("delete", "nodes", None), ("delete", "events", TEAM),
    ("patch", "configmaps", TEAM), ("create", "pods/eviction", TEAM), ("create", "pods/exec", TEAM),
    ("patch", "services", TEAM),  # nobody else's Service is re-pointed at a job's pods
])
def test_the_backend_may_do_nothing_next_to_it(kube_admin, verb, resource, namespace):
    assert not allowed(kube_admin, BACKEND_USER, BACKEND_GROUPS, verb, resource, namespace)


def test_the_backend_may_delete_the_owners_a_portal_cancel_stops_and_no_more(kube_admin):
    """A cancel deletes a native pod's batch/v1 Job, the JobSet controlling that Job, its
    PyTorchJob or its LeaderWorkerSet (found up the StatefulSets; agents/backends/k8s_intake.py);
    it never makes or changes one, nor deletes a StatefulSet."""
    for verb, resource, group in (("get", "jobs", "batch"), ("delete", "jobs", "batch"),
                                  ("delete", "jobsets", "jobset.x-k8s.io"), ("delete", "pytorchjobs", "kubeflow.org"),
                                  ("get", "statefulsets", "apps"),
                                  ("delete", "leaderworkersets", "leaderworkerset.x-k8s.io")):
        assert allowed(kube_admin, BACKEND_USER, BACKEND_GROUPS, verb, resource, TEAM, group), (verb, resource)
    for verb, resource, group in (("create", "jobs", "batch"), ("patch", "jobsets", "jobset.x-k8s.io"),
                                  ("create", "pytorchjobs", "kubeflow.org"), ("delete", "statefulsets", "apps"),
                                  ("create", "leaderworkersets", "leaderworkerset.x-k8s.io")):
        assert not allowed(kube_admin, BACKEND_USER, BACKEND_GROUPS, verb, resource, TEAM, group), (verb, resource)


def test_the_portal_may_only_read_pod_logs(kube_admin):
    assert allowed(kube_admin, PORTAL_USER, PORTAL_GROUPS, "get", "pods/log")
    for verb, resource in (("get", "pods"), ("list", "pods"), ("create", "pods"), ("get", "secrets")):
        assert not allowed(kube_admin, PORTAL_USER, PORTAL_GROUPS, verb, resource), (verb, resource)


def test_the_node_agent_may_only_review_tokens(kube_admin):
    """Its token is on every GPU node: it may ask whose a caller's token is, and nothing else."""
    agent = "system:serviceaccount:tessera-system:tessera-node-agent"
    assert allowed(kube_admin, agent, PORTAL_GROUPS, "create", "tokenreviews", None, "authentication.k8s.io")
    for verb, resource, group in (("create", "subjectaccessreviews", "authorization.k8s.io"),
                                  ("get", "pods", ""), ("list", "nodes", ""), ("get", "secrets", "")):
        assert not allowed(kube_admin, agent, PORTAL_GROUPS, verb, resource, None, group), (verb, resource)
