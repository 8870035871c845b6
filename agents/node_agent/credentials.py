"""Per-node agent tokens: each node's agent accepts only its own token, HMAC-SHA256 of one
cluster secret and the node's name, which the workers derive the same way for each poll.

Why: the agent speaks plain HTTP on the node network, so a token can be read off the wire; a
derived token read there opens that one node's report, where one shared token opened every
node's. What it does not give: the agent pod still holds the cluster secret (a DaemonSet has no
per-pod Secret), so someone who can read an agent pod's files can derive every node's token.
Closing that needs tokens provisioned per node outside Kubernetes, or mTLS.
"""

from __future__ import annotations

import hashlib
import hmac

_CONTEXT = b"tessera-node-agent/v1:"  # binds the derived token to this use of the secret


def node_token(secret: str, node: str) -> str:
    if not secret or not node:
        raise ValueError("a node token needs a non-empty secret and node name")
    return hmac.new(secret.encode(), _CONTEXT + node.encode(), hashlib.sha256).hexdigest()
