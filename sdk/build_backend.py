"""A PEP 517 build backend of the standard library alone, for this one pure-Python package.

Why not setuptools: `pip install ./sdk` would then download setuptools (and wheel) first, which a
training image built without a package index cannot do. This backend needs nothing: it zips
src/tessera_checkpoint with the metadata from pyproject.toml into a py3-none-any wheel (PEP 427),
or a .pth file pointing at src/ for `pip install -e` (PEP 660), or an sdist.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PACKAGE = "tessera_checkpoint"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the same source gives the same wheel, byte for byte


def _project() -> dict[str, str]:
    """The [project] table's string fields (tomllib from 3.11; a line reader before it, enough for
    the plain `key = "value"` lines this file has)."""
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib
    except ImportError:
        table = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
        pairs = re.findall(r'^([\w-]+)\s*=\s*"([^"]*)"', table.group(1) if table else "", re.MULTILINE)
        return dict(pairs)
    return {key: value for key, value in tomllib.loads(text)["project"].items() if isinstance(value, str)}


def _names() -> tuple[str, str]:
    project = _project()
    return re.sub(r"[-_.]+", "_", project["name"]).lower(), project["version"]


def _metadata() -> str:
    project = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project.get('description', '')}", f"Requires-Python: {project.get('requires-python', '')}"]
    return "\n".join(lines) + "\n"


def _sources() -> list[Path]:
    folder = ROOT / "src" / PACKAGE
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".typed")
                  and "__pycache__" not in p.parts)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(directory: str, files: dict[str, bytes]) -> str:
    dist, version = _names()
    info = f"{dist}-{version}.dist-info"
    files = {**files, f"{info}/METADATA": _metadata().encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tessera build_backend\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n"}
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel_name = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(directory) / wheel_name, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, FIXED_TIME)
            entry.external_attr = 0o644 << 16
            wheel.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return wheel_name


# -- the PEP 517 / PEP 660 hooks ------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: object = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: object = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: object = None) -> list[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: object = None, metadata_directory: object = None) -> str:
    src = ROOT / "src"
    return _write_wheel(wheel_directory, {p.relative_to(src).as_posix(): p.read_bytes() for p in _sources()})


def build_editable(wheel_directory: str, config_settings: object = None, metadata_directory: object = None) -> str:
    return _write_wheel(wheel_directory, {f"_{PACKAGE}_editable.pth": f"{ROOT / 'src'}\n".encode()})


def build_sdist(sdist_directory: str, config_settings: object = None) -> str:
    dist, version = _names()
    base = f"{dist}-{version}"
    members = [ROOT / "pyproject.toml", ROOT / "build_backend.py", ROOT / "README.md", *_sources()]
    with tarfile.open(Path(sdist_directory) / f"{base}.tar.gz", "w:gz") as sdist:
        for path in members:
            sdist.add(path, arcname=f"{base}/{path.relative_to(ROOT).as_posix()}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        sdist.addfile(info, io.BytesIO(data))
    return f"{base}.tar.gz"
