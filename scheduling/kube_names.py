"""Kubernetes' naming rules (plain Python): the submit checks and the manifest builders share them.

The OpenAPI schemas say only "string"; the API server refuses a bad name later, in words a team
never sees (the bind fails), so names are checked where they are typed.
"""

from __future__ import annotations

import re

# RFC 1123 label (namespaces, pod hostnames): at most 63 characters.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# RFC 1123 subdomain (most object names: pods, Secrets, PersistentVolumeClaims): at most 253.
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SUBDOMAIN_MAX = 253


def object_name_problem(value: str, what: str) -> str | None:
    """Why `value` cannot name a namespaced object (a Secret, a claim), or None when it can."""
    if "/" in value:
        return f"{what} {value!r}: give the name alone; it is looked up in the team's own namespace."
    if len(value) > SUBDOMAIN_MAX or not DNS_SUBDOMAIN.match(value):
        return (
            f"{what} {value!r} is not a Kubernetes name: lower-case letters, digits, '-' and '.', "
            f"starting and ending with a letter or digit, at most {SUBDOMAIN_MAX} characters."
        )
    return None


# Where Tessera mounts its own things in a job's container (agents/backends/k8s_manifests.py):
# the checkpoint channel, the pod's token, /dev/shm, the team's Secret as files.
RESERVED_MOUNTS = ("/etc/tessera", "/var/run/secrets", "/dev", "/etc/secrets", "/proc", "/sys")


def mount_path_problem(path: str) -> str | None:
    """Why a team's volume cannot be mounted at `path`, or None when it can."""
    parts = path.split("/")
    if not path.startswith("/") or path == "/" or ".." in parts or "" in parts[1:] or ":" in path:
        return f"{path!r} is not a mount path: an absolute path such as /checkpoints, without '..' or ':'."
    clash = next(
        (r for r in RESERVED_MOUNTS if path == r or path.startswith(r + "/") or r.startswith(path + "/")), None
    )
    if clash:
        return f"{path!r} overlaps {clash}, where Tessera mounts its own files; choose another path."
    return None


def attachment_errors(*, volume_claim: str, volume_mount_path: str, env_secret: str, file_secret: str) -> dict:
    """What the submit refuses in a job's attachments, by field."""
    errors = {}
    for field, value, what in (
        ("volume_claim", volume_claim, "PersistentVolumeClaim"),
        ("env_secret", env_secret, "Secret"),
        ("file_secret", file_secret, "Secret"),
    ):
        problem = value and object_name_problem(value, what)
        if problem:
            errors[field] = problem
    if volume_claim:
        problem = mount_path_problem(volume_mount_path)
        if problem:
            errors["volume_mount_path"] = problem
    return errors
