"""Turn a published CustomResourceDefinition into the schema test data here (run by hand when a
schema is updated; crd_schemas/README.md records each source, commit and SHA-256):

    .venv/bin/python tests/examples/crd_schemas/extract.py <crd.yaml> <out.json>

Kept: the storage version's openAPIV3Schema, as published. Dropped: every `description` (nine
tenths of the bytes: the embedded pod template's documentation), which no check reads.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import yaml


def without_descriptions(node):
    if isinstance(node, dict):
        return {key: without_descriptions(value) for key, value in node.items() if key != "description"}
    if isinstance(node, list):
        return [without_descriptions(value) for value in node]
    return node


def extract(crd_text: str) -> dict:
    crd = yaml.safe_load(crd_text)
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return {
        "group": crd["spec"]["group"],
        "version": version["name"],
        "kind": crd["spec"]["names"]["kind"],
        "openAPIV3Schema": without_descriptions(version["schema"]["openAPIV3Schema"]),
    }


if __name__ == "__main__":
    source, out = Path(sys.argv[1]), Path(sys.argv[2])
    text = source.read_text()
    out.write_text(json.dumps(extract(text), sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{out}: from {source}, sha256 {hashlib.sha256(text.encode()).hexdigest()}")
