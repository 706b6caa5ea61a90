"""Point every shipped use of this repository's actions and reusable workflow at one
commit: `python tools/pin_action.py <40-hex sha> <version comment>`.

The release procedure (docs/versioning.md) runs it after a release is tagged, so the
ready-to-copy callers in workflows/, the reusable workflow and the docs pin the
release by SHA with its version as a comment (`@<sha> # v2.1.0`), the form
dependabot keeps current in adopters' repositories.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: `cce-knowledge/cce-knowledge[/sub]@<ref>` plus an optional ` # comment` on the line.
PIN = re.compile(r"(cce-knowledge/cce-knowledge(?:/[A-Za-z0-9_./-]+)?)@([0-9a-f]{40})( # [^\n]*)?")
FILES = ("workflows/*.yml", ".github/workflows/*.yml", "docs/**/*.md", "README.md")


def files() -> list[Path]:
    return sorted({p for pattern in FILES for p in REPO.glob(pattern) if p.is_file()})


def pins(text: str) -> list[tuple[str, str, str]]:
    """(action, sha, comment) of every SHA pin in `text`."""
    return [(m[1], m[2], (m[3] or "").removeprefix(" # ")) for m in PIN.finditer(text)]


def repin(text: str, sha: str, version: str) -> str:
    return PIN.sub(lambda m: f"{m[1]}@{sha} # {version}", text)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or not re.fullmatch(r"[0-9a-f]{40}", argv[1]):
        print("usage: python tools/pin_action.py <40-hex sha> <version comment>", file=sys.stderr)
        return 2
    for p in files():
        text = p.read_text(encoding="utf-8")
        new = repin(text, argv[1], argv[2])
        if new != text:
            p.write_text(new, encoding="utf-8")
            print(f"pinned {p.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
