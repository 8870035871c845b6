"""The repository's own files, as the hygiene tests read them."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".html", ".txt", ".toml", ".yaml", ".yml", ".json", ".in", ".cfg", ".sh", ".js",
                 ".css", ""}
NOT_OURS = {".git", ".venv", "var", "staticfiles", "node_modules", "__pycache__", "artifacts"}


def text_files() -> list[Path]:
    """Tracked files and new ones git does not ignore (what a commit would hold), text only; in a
    copy without git, every file outside the local folders."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        paths = [ROOT / name for name in listed.stdout.split("\0") if name]
    else:
        paths = [path for path in ROOT.rglob("*") if not NOT_OURS & set(path.relative_to(ROOT).parts)]
    return [path for path in paths if path.suffix in TEXT_SUFFIXES and path.is_file()]
