"""`cce knowledge pull --no-search-index`: a nightly builder pulls the previous store only
to index incrementally; the derived search index is left to the first search."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.pulled import cce, publish
from tests.helpers.sync import make_bare


def _indexes(root: Path) -> list[str]:
    d = root / ".cce" / "knowledge" / "search"
    return sorted(p.name for p in d.iterdir() if p.suffix == ".idx") if d.is_dir() else []


def test_pull_can_leave_the_search_index_to_the_first_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CCE_HOME", str(tmp_path / "home"))
    url = make_bare(tmp_path / "cache.git")
    publish(tmp_path, url, "acme", ["r1", "r2"])
    builder, consumer = tmp_path / "builder", tmp_path / "consumer"
    for root, extra in ((builder, ["--no-search-index"]), (consumer, [])):
        root.mkdir()
        p = cce(
            "knowledge", "pull", "--corpus", "acme", "--remote", url, "--dir", str(root), *extra
        )
        assert p.returncode == 0, p.stderr
    assert _indexes(builder) == [] and len(_indexes(consumer)) == 1
    # Up to date: still nothing built under the flag.
    p = cce("knowledge", "pull", "--dir", str(builder), "--no-search-index")
    assert p.returncode == 0 and p.stdout.startswith("Up to date"), p.stderr
    assert _indexes(builder) == []
    # The first search builds it and answers as the consumer's does.
    a = cce("knowledge", "search", "r1", "--dir", str(builder), "--json")
    b = cce("knowledge", "search", "r1", "--dir", str(consumer), "--json")
    assert a.returncode == 0 and "building the search index" in a.stderr, a.stderr
    assert a.stdout == b.stdout
    assert _indexes(builder) == _indexes(consumer)
