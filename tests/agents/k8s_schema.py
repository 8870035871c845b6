"""Check manifests against the official Kubernetes schemas (kubernetes-validate, strict)."""

import kubernetes_validate

# A recent release the installed kubernetes-validate ships schemas for.
K8S_VERSION = "1.35.0"


def assert_valid(manifest: dict) -> None:
    """Raises kubernetes_validate.ValidationError, naming the bad field, on any schema breach."""
    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
