"""The dependency lists: hand-written inputs, generated locks, and nothing dev-only in the runtime."""

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements"
# Tools that must never reach the production image (issue 11, point 10).
DEV_ONLY = {"pytest", "pytest-django", "pytest-xdist", "hypothesis", "ruff", "import-linter", "mypy", "playwright",
            "kubernetes-validate", "dockerfile-parse", "uv", "schemathesis",
            "django-oauth-toolkit",  # the SSO tests' OpenID Connect provider
            "aiosmtpd"}  # the notification tests' SMTP server


def direct(name: str) -> dict[str, Requirement]:
    """The requirements an input file names itself (not those it includes with -r)."""
    found = {}
    for line in (REQUIREMENTS / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            requirement = Requirement(line)
            found[canonicalize_name(requirement.name)] = requirement
    return found


def locked(name: str) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) from a generated lock."""
    pins, current = {}, None
    for line in (REQUIREMENTS / name).read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==([^ ;\\]+)", line)
        if pin:
            current = canonicalize_name(pin.group(1).split("[")[0])
            pins[current] = (pin.group(2), 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


@pytest.mark.parametrize("source, lock", [("runtime.in", "runtime.txt"), ("dev.in", "dev.txt")])
def test_every_direct_dependency_is_locked_within_its_range(source, lock):
    pins = locked(lock)
    for name, requirement in direct(source).items():
        assert name in pins, f"{name} is in requirements/{source} but not in {lock}: run `make lock`"
        assert requirement.specifier.contains(pins[name][0], prereleases=True), \
            f"{lock} pins {name}=={pins[name][0]}, outside {requirement.specifier} from {source}: run `make lock`"


@pytest.mark.parametrize("lock", ["runtime.txt", "dev.txt"])
def test_every_locked_package_is_pinned_with_hashes(lock):
    pins = locked(lock)
    assert pins
    assert [name for name, (_version, hashes) in pins.items() if hashes == 0] == []


def test_the_runtime_lock_holds_no_dev_tool():
    assert sorted(DEV_ONLY & set(locked("runtime.txt"))) == []
    assert sorted(DEV_ONLY & set(direct("runtime.in"))) == []


def test_the_dev_lock_runs_the_runtime_at_the_same_versions():
    runtime, dev = locked("runtime.txt"), locked("dev.txt")
    assert {name: dev.get(name, ("missing",))[0] for name in runtime} == \
        {name: version for name, (version, _hashes) in runtime.items()}
