"""Issue 34.8: a frontmatter value PyYAML cannot build is an error naming the file and
the line (as invalid YAML already was), from a real `cce` process: no traceback.

One bad file fails the tree, as a frontmatter that is not YAML does: a docs tree is the
project's own, and a document silently left out of its corpus would be worse than a
build that says which line to fix (docs/security.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cce_knowledge.extract.frontmatter import FrontmatterError, split_frontmatter
from tests.helpers.cce_proc import run_cce

BAD = {
    "huge-int": (
        "n: " + "9" * 5001,
        "Exceeds the limit (4300 digits) for integer string conversion",
    ),
    "impossible-date": ("date: 2026-02-30", "day is out of range for month"),
    "impossible-time": ("updated: 2026-01-01T25:00:00Z", "hour must be in 0..23"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_extract_docs_names_the_file_and_line(tmp_path: Path, name: str) -> None:
    value, why = BAD[name]
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "good.md").write_text("# Good\n\ntext\n", encoding="utf-8")
    (root / "sub" / "bad.md").write_text(f"---\ntitle: T\n{value}\n---\n# B\n", encoding="utf-8")
    out = tmp_path / "feed.jsonl"
    p = run_cce("knowledge", "extract", "docs", "--root", str(root), "--out", str(out), "-q")
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert "sub/bad.md: line 3: invalid YAML frontmatter: cannot read the value" in p.stderr
    assert why in p.stderr
    assert not out.exists()


def test_values_that_can_be_built_still_load() -> None:
    doc = split_frontmatter("---\nd: 2024-02-29\nn: " + "9" * 4000 + "\n---\nb", path="x.md")
    assert doc.meta is not None and str(doc.meta["d"]) == "2024-02-29"
    assert len(str(doc.meta["n"])) == 4000
    with pytest.raises(FrontmatterError, match=r"^x\.md: line 4: "):
        split_frontmatter("---\na: 1\nb:\n  c: 2023-02-29\n---\n", path="x.md")
