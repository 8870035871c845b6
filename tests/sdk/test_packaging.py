"""`pip install ./sdk` works with no package index, and the package needs nothing but the standard library."""

import ast
import importlib.util
import subprocess
import sys
import tarfile

import pytest

from tests.hygiene.repo import ROOT

SDK = ROOT / "sdk"
CORE = ["__init__", "checkpointer", "confirm", "coordination", "manifest", "podinfo", "stop", "_optional"]


def test_pip_installs_it_offline_and_it_imports_from_there(tmp_path):
    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir", "--quiet",
         "--target", str(target), str(SDK)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    probe = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import tessera_checkpoint as t; "
         "print(t.__file__, t.__version__, t.Checkpointer.__name__)", str(target)],
        capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == [str(target / "tessera_checkpoint" / "__init__.py"), "0.1.0", "Checkpointer"]
    assert (target / "tessera_checkpoint" / "py.typed").exists()
    [info] = target.glob("tessera_checkpoint-0.1.0.dist-info")
    assert "Requires-Python: >=3.9" in (info / "METADATA").read_text()


def test_the_sdist_holds_what_a_rebuild_needs(tmp_path):
    spec = importlib.util.spec_from_file_location("tessera_sdk_build_backend", SDK / "build_backend.py")
    build_backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_backend)
    name = build_backend.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / name) as sdist:
        names = set(sdist.getnames())
    wanted = ["pyproject.toml", "build_backend.py", "PKG-INFO", "README.md", "src/tessera_checkpoint/checkpointer.py"]
    assert {f"tessera_checkpoint-0.1.0/{name}" for name in wanted} <= names


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_only_the_standard_library_and_itself(module):
    tree = ast.parse((SDK / "src" / "tessera_checkpoint" / f"{module}.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert imported <= set(sys.stdlib_module_names) | {"tessera_checkpoint", "__future__"}
