"""The hooks' libraries are optional: importing a hook without its library says what to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(hook: str, *candidates: tuple[str, str]) -> ModuleType:
    """The first importable module of (module, pip package) `candidates`, else an ImportError that
    names the hook and what to pip install."""
    for module, _package in candidates:
        try:
            return importlib.import_module(module)
        except ImportError:
            continue
    wanted = " or ".join(package for _module, package in candidates)
    raise ImportError(f"{hook} needs {wanted}, which is not installed in this environment: "
                      f"pip install {candidates[0][1]} (the core tessera_checkpoint needs nothing)")
