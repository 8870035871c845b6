"""The Makefile names files that exist, and every `make` command the README shows is a target."""

import re
import subprocess

import pytest

from tests.hygiene.repo import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()


def phony_targets() -> list[str]:
    return [target for line in re.findall(r"^\.PHONY:(.*)$", MAKEFILE, re.MULTILINE) for target in line.split()]


def rule_targets() -> set[str]:
    return {target for line in re.findall(r"^([\w./$() -]+?):(?!=)", MAKEFILE, re.MULTILINE) for target in line.split()}


def test_every_phony_target_has_a_rule():
    assert sorted(set(phony_targets()) - rule_targets()) == []


@pytest.mark.parametrize("target", phony_targets())
def test_every_target_expands_without_error(target):
    result = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_every_file_the_makefile_names_exists():
    path = r"(?<![\w$(/.])((?:requirements|\.ci|scripts|bench|docs|deploy)/[\w./-]+|manage\.py)"
    named = set(re.findall(path, MAKEFILE))
    assert named and sorted(path for path in named if not (ROOT / path).exists()) == []


def test_every_manage_py_command_the_makefile_runs_exists():
    commands = set(re.findall(r"manage\.py (\w+)", MAKEFILE))
    existing = {path.stem for path in ROOT.glob("*/management/commands/*.py")}
    assert commands and commands <= existing


def readme_code() -> str:
    """The README's commands: fenced blocks and inline code (prose such as "make its pods" is not one)."""
    text = (ROOT / "README.md").read_text()
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL))
    return "\n".join(fenced + inline)


def test_every_make_command_in_the_readme_is_a_target():
    shown = set(re.findall(r"(?<![\w-])make ([a-z][\w-]*)", readme_code()))
    assert "demo" in shown and "test" in shown
    assert sorted(shown - rule_targets()) == []
