"""`cce knowledge search` and the derived search index's life cycle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.retrieval import Searcher, search_index_status, search_knowledge
from cce_knowledge.retrieval.search_index import build_search_index, index_path, search_dir
from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.store.snapshots import save
from tests.helpers.paths import TESTS

ASK_CORPUS = TESTS / "vectors" / "ask" / "corpus.knowledge.jsonl"
QUERY = "how many failed login attempts before an account is locked"


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    save(tmp_path, ingest_feed(ASK_CORPUS.read_bytes(), 400))
    build_search_index(tmp_path)  # as `cce knowledge index` does
    return tmp_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_human_output_has_provenance_and_citation(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _run(
        capsys,
        "knowledge",
        "search",
        QUERY,
        "--dir",
        str(root),
        "-k",
        "3",
        "--ranking",
        "reference",
    )
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == (
        " 1. [0.946886] [knowledge] Lock accounts after five failed login attempts — closed · "
        "2026-02-11T09:00:00Z · https://github.com/acme/shop/issues/101 #3fcbc81a09bb485e"
    )
    assert lines[1].startswith("    gh:acme/shop#101:1-3")
    # Then the section's best lines, numbered (its heading is not one: #35.5); a blank
    # line between hits.
    assert lines[2].startswith("    3: After five consecutive failed login attempts")
    assert not any(ln.lstrip().startswith("1: #") for ln in lines)
    assert len(out.rstrip("\n").split("\n\n")) == 3


def test_json_output_fields(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "knowledge", "search", QUERY, "--dir", str(root), "--json")
    assert rc == 0
    hits = json.loads(out)
    assert hits[0]["record_id"] == "gh:acme/shop#101"
    assert set(hits[0]) == {
        "rank",
        "record_id",
        "chunk_id",
        "score",
        "title",
        "breadcrumb",
        "kind",
        "lines",
        "url",
        "state",
        "updated_at",
        "snippet",
        "content",
    }
    assert hits[0]["lines"] == [1, 3] and hits[0]["rank"] == 1
    # Same answer as the straightforward in-memory ranking.
    from cce_knowledge.store.snapshots import load_current

    direct = search_knowledge(load_current(root), QUERY, 8, 0.05)
    assert [h["chunk_id"] for h in hits] == [h.chunk_id for h in direct]


def test_no_store_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "knowledge", "search", "x", "--dir", str(tmp_path))
    assert rc == 1 and out == ""
    assert err.startswith("error: no knowledge store under ") and "cce knowledge index" in err
    assert "cce knowledge pull" in err


def test_usage_errors_exit_2(root: Path) -> None:
    for argv in (
        ["knowledge", "search", "x", "-k", "0"],
        ["knowledge", "search", "x", "--ranking", "bm25"],
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


def test_ranking_from_config(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / ".cce" / "config").write_text("knowledge:\n  ranking: reference\n")
    _, out, _ = _run(capsys, "knowledge", "search", QUERY, "--dir", str(root), "-k", "1")
    assert "[0.946886]" in out
    _, out, _ = _run(
        capsys, "knowledge", "search", QUERY, "--dir", str(root), "-k", "1", "--ranking", "default"
    )
    assert "[0.946886]" not in out
    # A bad value refuses the search (exit 2, issue 21 §4), naming it and the choices;
    # `--ranking` still decides without it.
    (root / ".cce" / "config").write_text("knowledge:\n  ranking: fancy\n")
    rc, out, err = _run(capsys, "knowledge", "search", QUERY, "--dir", str(root), "-k", "1")
    assert rc == 2 and out == ""
    assert "knowledge.ranking: 'fancy' is not a ranking; allowed: default, reference, hybrid" in err
    rc, out, _ = _run(
        capsys, "knowledge", "search", QUERY, "--dir", str(root), "-k", "1", "--ranking", "default"
    )
    assert rc == 0 and "[0.946886]" not in out


def test_a_missing_index_is_built_lazily_kept_fresh_and_rebuilt(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert search_index_status(root) == "fresh"  # built with the store
    for p in search_dir(root).glob("*.idx"):
        p.unlink()
    assert search_index_status(root) == "missing"
    s = Searcher(root)
    first = s.search(QUERY, 3)
    # The fallback says what it is doing (it is slow on a big store).
    err = capsys.readouterr().err
    assert err.startswith("building the search index for snapshot ") and "missing or stale" in err
    assert search_index_status(root) == "fresh"
    path = index_path(root, s.store.snapshot if s.store else "")
    assert path.is_file() and path.parent == search_dir(root)

    # Deleting it is safe: the next search rebuilds it with the same answer.
    path.unlink()
    assert search_index_status(root) == "missing"
    assert Searcher(root).search(QUERY, 3) == first

    # A damaged file is never trusted.
    path.write_bytes(b"CCESIX01garbage")
    assert search_index_status(root) in ("stale", "missing")
    assert Searcher(root).search(QUERY, 3) == first
    assert search_index_status(root) == "fresh"

    # A new snapshot makes the old index stale, and the long-lived searcher reloads.
    feed = (
        ASK_CORPUS.read_bytes()
        + json.dumps(
            {
                "id": "gh:acme/shop#999",
                "title": "Account lockout counter",
                "body": "failed login attempts lock",
                "source": "t",
            }
        ).encode()
        + b"\n"
    )
    save(root, ingest_feed(feed, 400))
    assert search_index_status(root) in ("stale", "missing")
    again = s.search("account lockout counter", 3)
    assert again[0].record_id == "gh:acme/shop#999"
    assert search_index_status(root) == "fresh"
    assert [p.name for p in search_dir(root).glob("*.idx")] == [
        index_path(root, s.store.snapshot).name
    ]  # type: ignore[union-attr]


def test_store_states(tmp_path: Path) -> None:
    assert search_index_status(tmp_path) == "absent-store"
    assert Searcher(tmp_path).store is None
    kd = tmp_path / ".cce" / "knowledge"
    kd.mkdir(parents=True)
    (kd / "current").write_text("0123456789abcdef\n")
    (kd / "0123456789abcdef.json").write_text("{not json")
    from cce_knowledge.core.errors import StoreError

    with pytest.raises(StoreError):
        _ = Searcher(tmp_path).store
    with pytest.raises(StoreError):
        Searcher(tmp_path).search("x")


@pytest.mark.slow
def test_cold_search_imports_stay_lean(root: Path) -> None:
    # Build the index first so the measured process only searches.
    Searcher(root).search(QUERY, 1)
    code = (
        "import sys\n"
        "from cce_knowledge.cli.main import main\n"
        f"rc = main(['knowledge', 'search', {QUERY!r}, '--dir', {str(root)!r}])\n"
        "heavy = [m for m in ('tree_sitter', 'git', 'mcp', 'numpy', 'yaml', 'httpx') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert "HEAVY []" in out.stdout, out.stdout


def _no_build(*_a: object, **_k: object) -> None:
    raise AssertionError("the search built the index: index/pull should have")


def test_first_search_after_index_needs_no_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cce_knowledge.retrieval import search_index as si

    rc, _, err = _run(capsys, "knowledge", "index", str(ASK_CORPUS), "--dir", str(tmp_path))
    assert rc == 0 and err.startswith("search index: built in "), err
    assert search_index_status(tmp_path) == "fresh"
    monkeypatch.setattr(si, "build_search_index", _no_build)
    monkeypatch.setattr(si, "build_bytes", _no_build)
    rc, out, err = _run(capsys, "knowledge", "search", QUERY, "--dir", str(tmp_path))
    assert (rc, err) == (0, "") and "gh:acme/shop#101" in out


def test_quiet_index_still_builds_the_search_index_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _run(capsys, "knowledge", "index", str(ASK_CORPUS), "--dir", str(tmp_path), "-q")
    assert (rc, err) == (0, "")
    assert search_index_status(tmp_path) == "fresh"
