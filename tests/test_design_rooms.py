"""docs/design.md's "Rooms as built" table names every package and module in the tree,
and nothing that is not there."""

from __future__ import annotations

import re

from tests.helpers.paths import REPO

PACKAGE = REPO / "src" / "cce_knowledge"


def _rooms() -> dict[str, set[str]]:
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    start = text.index("## Rooms as built")
    table = text[start : text.index("\n## ", start + 1)]
    rooms: dict[str, set[str]] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        packages = re.findall(r"`(\w+)/`", cells[0])
        names = set(re.findall(r"`(\w+)`", cells[1]))
        for p in packages:
            rooms[p] = names
    return rooms


def test_rooms_table_matches_the_tree() -> None:
    rooms = _rooms()
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert set(rooms) == packages
    existing: set[str] = set()
    for pkg in packages:
        modules = {m.stem for m in (PACKAGE / pkg).glob("*.py") if m.stem != "__init__"}
        # A subpackage (engine/redaction/) is a room's module too.
        for sub in (d for d in (PACKAGE / pkg).iterdir() if (d / "__init__.py").is_file()):
            modules.add(sub.name)
            existing |= {m.stem for m in sub.glob("*.py") if m.stem != "__init__"}
        existing |= modules
        if pkg != "cli":  # cli: `main` and "one module per command group"
            missing = modules - rooms[pkg]
            assert not missing, f"{pkg}/: {sorted(missing)} not in docs/design.md"
    named = set().union(*rooms.values())
    assert named <= existing, f"named but not in the tree: {sorted(named - existing)}"
