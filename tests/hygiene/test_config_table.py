"""The README's configuration table names exactly the environment variables the code reads.

Read statically: every `env_*("NAME", …)` call (tessera/env.py's typed readers) and every
`os.environ.get("NAME")`, `os.environ["NAME"]`, `os.getenv("NAME")` and `"NAME" in os.environ` in the
code that runs in production (not tests, not benchmarks).
"""

import ast
import re

from tests.hygiene.repo import ROOT

# The code that runs in production: every top-level package but the suite and the benchmarks.
RUNTIME_PACKAGES = sorted(path.parent.name for path in ROOT.glob("*/__init__.py") if path.parent.name not in
                          ("tests", "bench"))
NOT_OURS = {"DJANGO_SETTINGS_MODULE"}  # Django's own; the entry points set it


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and \
        isinstance(node.value, ast.Name) and node.value.id == "os"


def _name(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def names_read(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            env_reader = isinstance(func, ast.Name) and func.id.startswith("env_")
            environ_get = isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value)
            getenv = isinstance(func, ast.Attribute) and func.attr == "getenv"
            if env_reader or environ_get or getenv:
                found.add(_name(node.args[0]))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            found.add(_name(node.slice))
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators) and \
                any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            found.add(_name(node.left))
    return {name for name in found if name}


def code_reads() -> dict[str, str]:
    """variable -> the first file that reads it."""
    reads = {}
    for package in RUNTIME_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for name in names_read(ast.parse(path.read_text(), str(path))):
                reads.setdefault(name, str(path.relative_to(ROOT)))
    return {name: where for name, where in reads.items() if name not in NOT_OURS and name.isupper()}


def readme_table() -> dict[str, str]:
    """variable -> its row's default column, from the table under '## Configuration'."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and not set(cells[0]) <= set("-: "):
            for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_the_reader_finds_each_way_of_reading_the_environment():
    tree = ast.parse("env_int('A', 1)\nos.environ.get('B')\nos.environ['C']\nos.getenv('D')\n"
                     "'E' in os.environ\nos.environ['F'] = 'x'\n")
    assert names_read(tree) == {"A", "B", "C", "D", "E"}


def test_every_variable_the_code_reads_is_in_the_readme_table():
    missing = {name: where for name, where in code_reads().items() if name not in readme_table()}
    assert missing == {}, "add a row to the README's configuration table for each"


def test_the_readme_table_names_no_variable_the_code_ignores():
    assert sorted(set(readme_table()) - set(code_reads())) == []


def test_every_row_says_its_default():
    assert [name for name, default in readme_table().items() if not default] == []
