"""`cce knowledge ask` (docs/spec/core.md §8): golden bytes, reports, exit codes, errors."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.retrieval import Hit
from cce_knowledge.retrieval.ask import score_case
from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.store.snapshots import save
from tests.helpers.paths import TESTS

ASK = TESTS / "vectors" / "ask"
SUITE = ASK / "ask.jsonl"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_report_is_byte_identical_to_golden(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "knowledge", "ask", str(SUITE), "--json", "--ranking", "reference")
    assert (rc, err) == (0, "")
    assert out.encode() == (ASK / "ask.golden.json").read_bytes()


def test_human_report_matches_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "knowledge", "ask", str(SUITE), "--ranking", "reference")
    assert rc == 0
    assert "  proven   : 7/7\n" in out and "  NO" not in out
    # Prototype-derived digest of the full report (docs/spec/core.md §13, G11), which is
    # ours without its one added line, `source` (issue 21 §6: which corpus answered).
    lines = out.splitlines()
    assert lines[2].startswith("  source   : the suite's `corpus` feed ")
    reference = "".join(ln + "\n" for i, ln in enumerate(lines) if i != 2)
    digest = hashlib.sha256(reference.encode()).hexdigest()
    assert digest.startswith("d64716cf") and digest.endswith("b095cd")
    lines = reference.splitlines()
    assert lines[5] == "  query                           P@k    recall       MRR    rank  proven"
    assert lines[10] == "  ask-session-store           0.200000  1.000000  0.500000       2  yes"
    assert lines[-1] == "  mean                        0.200000  1.000000  0.928571"


def test_default_ranking_proves_the_suite_too(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "knowledge", "ask", str(SUITE))
    assert rc == 0 and "proven   : 7/7" in out and "min_score: 0.050000" in out


def test_dir_uses_the_installed_store_and_its_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save(tmp_path, ingest_feed((ASK / "corpus.knowledge.jsonl").read_bytes(), 400))
    (tmp_path / ".cce" / "config").write_text("knowledge:\n  min_score: 0.25\n")
    rc, out, _ = _run(
        capsys,
        "knowledge",
        "ask",
        str(SUITE),
        "--dir",
        str(tmp_path),
        "--json",
        "--ranking",
        "reference",
    )
    rep = json.loads(out)
    assert (
        rc == 0 and rep["corpus"] == f"{tmp_path}/.cce/knowledge" and rep["min_score"] == "0.250000"
    )
    golden = json.loads((ASK / "ask.golden.json").read_text())
    assert rep["cases"] == golden["cases"]


def test_regression_exits_1_after_printing_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(ASK / "corpus.knowledge.jsonl", tmp_path / "corpus.knowledge.jsonl")
    suite = tmp_path / "s.jsonl"
    suite.write_text(
        SUITE.read_text()
        + json.dumps(
            {
                "id": "a-very-long-case-identifier-that-is-clipped",
                "query": "login lockout",
                "expect": ["gh:acme/shop#999"],
            }
        )
        + "\n"
    )
    rc, out, err = _run(capsys, "knowledge", "ask", str(suite), "--ranking", "reference")
    assert rc == 1
    assert "proven   : 7/8" in out
    assert "  a-very-long-case-identifier…0.000000" in out and out.rstrip().splitlines()[
        -3
    ].endswith("  NO")
    assert out.rstrip().splitlines()[-2] == "      ranked instead: 1. gh:acme/shop#101"
    assert err == "error: knowledge-ask regression: 7/8 queries proven from the corpus\n"


def test_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(capsys, "knowledge", "ask", str(tmp_path / "nope.jsonl"))
    assert rc == 1 and err.startswith(f"error: could not read suite {tmp_path}/nope.jsonl: ")
    s = tmp_path / "s.jsonl"
    s.write_text('{"query":"x","expect":["a"]}\n')
    rc, _, err = _run(capsys, "knowledge", "ask", str(s))
    assert rc == 1 and "suite has no `corpus` header; pass --dir <root>" in err
    s.write_text(
        '{"schema":"cce.knowledge.ask/v1","corpus":"missing.jsonl"}\n{"query":"x","expect":["a"]}\n'
    )
    rc, _, err = _run(capsys, "knowledge", "ask", str(s))
    assert (
        rc == 1
        and f"could not read corpus feed {tmp_path}/missing.jsonl: No such file or directory (os error 2)"
        in err
    )
    empty = tmp_path / "empty"
    rc, _, err = _run(capsys, "knowledge", "ask", str(s), "--dir", str(empty))
    # no store: say what to do, not an OS error
    assert rc == 1 and err == (
        f"error: no knowledge store under {empty}/.cce/knowledge — build one with "
        f"`cce knowledge index FEED --dir {empty}` or install a published one with "
        f"`cce knowledge pull --dir {empty}`\n"
    )
    (empty / ".cce" / "knowledge").mkdir(parents=True)
    (empty / ".cce" / "knowledge" / "current").write_text("0123456789abcdef\n")
    rc, _, err = _run(capsys, "knowledge", "ask", str(s), "--dir", str(empty))
    # a `current` whose store is missing is a broken store: the load error is named
    assert rc == 1 and err.startswith(f"error: could not load knowledge store under {empty}: ")
    s.write_text('{"query":"x","expect":[]}\n')
    rc, _, err = _run(capsys, "knowledge", "ask", str(s))
    assert rc == 1 and "line 1: case needs a non-empty `expect` array" in err


def _hit(rid: str, rank: int) -> Hit:
    return Hit(rank, f"c{rank}", rid, "t", "k", "n", None, None, None, 0.5, "", 1, 1)


def test_case_metrics() -> None:
    hits = [_hit("x", 1), _hit("a", 2), _hit("a", 3), _hit("b", 4)]
    r = score_case("c", 4, ["a", "b", "z"], hits)
    assert r.first_hit_rank == 2 and r.mrr == 0.5
    assert r.precision == 3 / 4 and r.recall == 2 / 3 and not r.proven
    assert r.f1 == pytest.approx(2 * 0.75 * (2 / 3) / (0.75 + 2 / 3))
    # Only the first k hits count.
    assert score_case("c", 1, ["a"], hits).first_hit_rank is None
    assert score_case("c", 2, ["a", "a"], hits).proven
