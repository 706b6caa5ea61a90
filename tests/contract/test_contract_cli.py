"""`cce knowledge validate` and `cce knowledge manifest` through the real CLI entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cce_knowledge.action.workflow_commands import annotation
from cce_knowledge.cli.main import main
from cce_knowledge.contract.manifest import feed_sha256
from tests.helpers.paths import REPO

ROOT = REPO
EX = ROOT / "tests" / "contract_examples"
VEC = ROOT / "tests" / "vectors"
OK = '{"id":"a","title":"t","body":"b","source":"s"}'


@pytest.fixture
def bad_feed(tmp_path: Path) -> Path:
    p = tmp_path / "feed.jsonl"
    p.write_text(
        "\n".join([OK, "", '{"id":"b","title":"t"}', "not json", OK[:-1] + ',"labels":[1]}']) + "\n"
    )
    return p


def test_validate_reports_every_bad_line(
    bad_feed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["knowledge", "validate", str(bad_feed)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{bad_feed}:3: $: missing field `body` (column 22)",
        f"{bad_feed}:4: $: expected ident (column 2)",
        f"{bad_feed}:5: $.labels[0]: invalid type: integer `1`, expected a string (column 57)",
    ]
    assert err == "validate: 3 problems in 1 of 1 file\n"


def test_validate_json_lists_problems(bad_feed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "validate", "--format", "json", str(bad_feed)]) == 1
    got = json.loads(capsys.readouterr().out)
    assert [(p["line"], p["column"], p["path"]) for p in got] == [
        (3, 22, "$"),
        (4, 2, "$"),
        (5, 57, "$.labels[0]"),
    ]
    assert set(got[0]) == {"file", "line", "column", "path", "message"}
    assert main(["knowledge", "validate", "--json", str(VEC / "knowledge" / "curated.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_validate_clean_files_of_each_kind(capsys: pytest.CaptureFixture[str]) -> None:
    files = [
        VEC / "knowledge" / "curated.jsonl",
        VEC / "ask" / "ask.jsonl",
        EX / "failure_modes" / "truncated.manifest.json",
        EX / "failure_modes" / "empty.jsonl",
    ]
    assert main(["knowledge", "validate", *map(str, files)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{files[0]}: ok — 2 records (cce.knowledge/v1)",
        f"{files[1]}: ok — 7 cases (cce.knowledge.ask/v1)",
        f"{files[2]}: ok — manifest for 2 records (cce.feed-manifest/v1)",
        f"{files[3]}: ok — 0 records (cce.knowledge/v1)",
    ]


def test_validate_detects_a_manifest_by_content_and_honours_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = tmp_path / "m.json"
    m.write_text('{"schema":"cce.feed-manifest/v1","records":1,"sha256":"zz"}')
    assert main(["knowledge", "validate", str(m)]) == 1
    assert capsys.readouterr().out == (
        f'{m}:1: $.sha256: feed manifest sha256 is not a 64-char hex digest: "zz"\n'
    )
    s = tmp_path / "s.jsonl"
    s.write_text('{"query":"q","expect":["r"]}\n{"query":"q2","expect":[]}\n')
    assert main(["knowledge", "validate", "--kind", "suite", str(s)]) == 1
    assert capsys.readouterr().out == f"{s}:2: $.expect: case needs a non-empty `expect` array\n"
    assert main(["knowledge", "validate", str(s)]) == 1  # auto → a feed: both lines fail
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_validate_with_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fm = EX / "failure_modes"
    assert (
        main(
            [
                "knowledge",
                "validate",
                str(fm / "truncated.jsonl"),
                "--manifest",
                str(fm / "truncated.manifest.json"),
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "manifest declares 2 record(s), feed has 1 — the feed is truncated or incomplete" in out
    feed = tmp_path / "f.jsonl"
    feed.write_bytes((OK + "\n").encode())
    man = tmp_path / "f.manifest.json"
    assert main(["knowledge", "manifest", str(feed), "--out", str(man)]) == 0
    capsys.readouterr()
    assert main(["knowledge", "validate", str(feed), "--manifest", str(man)]) == 0
    feed.write_bytes((OK + "\n\n").encode())  # same records, other bytes
    assert main(["knowledge", "validate", str(feed), "--manifest", str(man)]) == 1
    assert "misdirected" in capsys.readouterr().out


def test_validate_unreadable_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.jsonl"
    assert (
        main(
            [
                "knowledge",
                "validate",
                str(missing),
                str(EX / "failure_modes" / "invalid_utf8.jsonl"),
                str(tmp_path),
            ]
        )
        == 1
    )
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0] == f"{missing}: $: could not read {missing}: No such file or directory (os error 2)"
    )
    raw = (EX / "failure_modes" / "invalid_utf8.jsonl").read_bytes()
    off = raw.index(b"\xff")
    col = off - raw.index(b"\n") - 1 + 1  # 1-based byte column within line 2
    assert out[1].endswith(
        f"invalid_utf8.jsonl:2: $: stream did not contain valid UTF-8 (byte offset {off}) (column {col})"
    )
    assert out[2] == f"{tmp_path}: $: not a file: {tmp_path}"


def test_validate_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "validate", "a", "b", "--manifest", "m"]) == 2
    assert "exactly one FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["knowledge", "validate"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["knowledge", "validate", "--kind", "csv", "x"])
    assert e.value.code == 2


def test_github_annotations(
    bad_feed: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert main(["knowledge", "validate", str(bad_feed)]) == 1
    ann = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::error ")]
    assert (
        ann[2]
        == f"::error file={bad_feed},line=5,col=57::$.labels[0]: invalid type: integer `1`, expected a string"
    )
    assert main(["knowledge", "validate", "--json", str(bad_feed)]) == 1
    out, err = capsys.readouterr()
    json.loads(out)  # stdout stays pure JSON
    assert err.count("::error ") == 3


def test_annotation_escaping() -> None:
    assert annotation("error", "50%\r\nnext: x, y", file="a,b:c%.jsonl", line=3) == (
        "::error file=a%2Cb%3Ac%25.jsonl,line=3::50%25%0D%0Anext: x, y"
    )


def test_manifest_to_stdout_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    feed = VEC / "knowledge" / "curated.jsonl"
    assert main(["knowledge", "manifest", str(feed)]) == 0
    raw = feed.read_bytes()
    expected = '{"schema":"cce.feed-manifest/v1","records":2,"sha256":"%s"}\n' % feed_sha256(raw)  # noqa: UP031
    assert capsys.readouterr().out == expected
    out = tmp_path / "sub" / "m.json"
    out.parent.mkdir()
    assert (
        main(
            ["knowledge", "manifest", "curated.jsonl", "--dir", str(feed.parent), "--out", str(out)]
        )
        == 0
    )
    assert out.read_text() == expected
    assert capsys.readouterr().out == f"wrote {out}: 2 records, sha256 {feed_sha256(raw)}\n"
    assert [p.name for p in out.parent.iterdir()] == ["m.json"]  # no temp files left


def test_manifest_refuses_a_malformed_feed_and_writes_nothing(
    bad_feed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.json"
    out.write_text("previous")
    assert main(["knowledge", "manifest", str(bad_feed), "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"error: {bad_feed}:3: $: invalid cce.knowledge/v1 record: missing field `body` at line 1 column 22\n"
    )
    assert out.read_text() == "previous"
    assert main(["knowledge", "manifest", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"error: not a file: {tmp_path}\n"


def _help(*cmd: str) -> str:
    env = dict(os.environ, COLUMNS="80")
    return subprocess.run(
        [sys.executable, "-m", "cce_knowledge", *cmd, "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout


@pytest.mark.parametrize("cmd", ["validate", "manifest"])
def test_docs_quote_the_help_verbatim(cmd: str) -> None:
    doc = (ROOT / "docs" / "cli" / f"{cmd}.md").read_text(encoding="utf-8")
    assert _help("knowledge", cmd).rstrip() in doc


def test_validate_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    class _Stdin:
        buffer = io.BytesIO((OK + "\nnope\n").encode())

    monkeypatch.setattr(sys, "stdin", _Stdin)
    assert main(["knowledge", "validate", "-"]) == 1
    assert capsys.readouterr().out == "<stdin>:2: $: expected ident (column 2)\n"
    assert main(["knowledge", "validate", "-", "-"]) == 2
