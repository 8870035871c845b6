"""The repository's own files, as the hygiene tests read them."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".html", ".txt", ".toml", ".yaml", ".yml", ".json", ".in", ".cfg", ".sh", ".js",
                 ".css", ""}


def text_files() -> list[Path]:
    """Tracked files and new ones git does not ignore (what a commit would hold), text only."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    paths = [ROOT / name for name in listed if name]
    return [path for path in paths if path.suffix in TEXT_SUFFIXES and path.is_file()]
