"""Check a release tag before anything is built: `python tools/release_check.py v2.1.0
[--notes FILE]`.

The tag must be `v2.<minor>.<patch>`, equal to `v` + the version in pyproject.toml,
and CHANGELOG.md must have a `## [<version>]` section; with --notes, that section's
text is written to FILE (the GitHub release's notes). Standard library only: the
release workflow runs it before anything is installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TAG = re.compile(r"v(2\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*))")


def release_notes(changelog: str, version: str) -> str | None:
    m = re.search(
        rf"^## \[{re.escape(version)}\][^\n]*\n(.*?)(?=^## \[|\Z)", changelog, re.M | re.S
    )
    return m[1].strip() + "\n" if m else None


def check(tag: str, repo: Path = REPO) -> str:
    """The release notes for `tag`; raises ValueError naming what is wrong."""
    m = TAG.fullmatch(tag)
    if not m:
        raise ValueError(f"tag {tag!r} is not v2.<minor>.<patch>")
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    version = pyproject["project"]["version"]
    if m[1] != version:
        raise ValueError(f"tag {tag} does not match pyproject.toml's version {version}")
    notes = release_notes((repo / "CHANGELOG.md").read_text(encoding="utf-8"), version)
    if not notes:
        raise ValueError(f"CHANGELOG.md has no `## [{version}]` section")
    return notes


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--notes"):
        print("usage: python tools/release_check.py vX.Y.Z [--notes FILE]", file=sys.stderr)
        return 2
    try:
        notes = check(argv[1])
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if len(argv) == 4:
        Path(argv[3]).write_text(notes, encoding="utf-8")
    print(f"{argv[1]}: version and changelog in step")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
