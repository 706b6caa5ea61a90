"""A config that talks back (issue 35 §6): a value of the wrong type, a YAML tag, a
non-UTF-8 byte are warned about by every command that reads the file (file, line, key,
what is used instead) and listed by `doctor`; the settings used stay the reference's,
so the store is byte-identical. Real `cce` processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cce_proc import run_cce

RECORD = {"id": "docs/a.md", "title": "A", "body": "hello world", "source": "docs"}


def _root(tmp_path: Path, config: bytes) -> Path:
    (tmp_path / ".cce").mkdir(parents=True)
    (tmp_path / ".cce" / "config").write_bytes(config)
    (tmp_path / "feed.jsonl").write_text(json.dumps(RECORD) + "\n")
    return tmp_path


def _store_bytes(root: Path) -> bytes:
    snap = (root / ".cce" / "knowledge" / "current").read_text().strip()
    return (root / ".cce" / "knowledge" / f"{snap}.json").read_bytes()


WRONG_TYPE = (
    ".cce/config:2: knowledge.min_score: 'high' is not read (invalid float 'high') — as "
    "the reference engine does, the whole `knowledge` block is used with its defaults "
    "instead (enabled: true, min_score: 0.3, default_source: both)"
)


def test_a_wrong_type_is_warned_about_by_every_command_and_doctor(tmp_path: Path) -> None:
    root = _root(tmp_path, b"knowledge:\n  min_score: high\n")
    for argv in (
        ["knowledge", "index", "feed.jsonl", "-q"],
        ["knowledge", "search", "hello"],
    ):
        r = run_cce(*argv, cwd=root)
        assert r.returncode == 0, (argv, r.stderr)
        assert f"warning: {WRONG_TYPE}\n" in r.stderr, argv
    r = run_cce("doctor", cwd=root)
    assert f"advisory  {WRONG_TYPE}" in r.stdout


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (
            b"knowledge:\n  min_score: !!python/object:os.system 0.5\n",
            ".cce/config:2: knowledge.min_score: the YAML tag `!!python/object:os.system` "
            "is not read",
        ),
        (
            b"knowledge:\n  min_score: 0.3 \xff\n",
            ".cce/config: not valid YAML ('utf-8' codec can't decode byte 0xff in position "
            "28: invalid start byte) — every setting in it is ignored and the defaults are "
            "used instead",
        ),
    ],
)
def test_index_warns_about_a_tag_or_a_non_utf8_byte(
    tmp_path: Path, config: bytes, said: str
) -> None:
    root = _root(tmp_path, config)
    r = run_cce("knowledge", "index", "feed.jsonl", "-q", cwd=root)
    assert r.returncode == 0, r.stderr
    assert f"warning: {said}" in r.stderr
    assert said.split(" — ")[0] in run_cce("doctor", cwd=root).stdout


def test_a_warning_changes_no_byte_of_the_store(tmp_path: Path) -> None:
    bad = _root(tmp_path / "bad", b"knowledge:\n  min_score: high\nmarkdown:\n  x: [\n")
    clean = _root(tmp_path / "clean", b"")
    for root in (bad, clean):
        assert run_cce("knowledge", "index", "feed.jsonl", "-q", cwd=root).returncode == 0
    assert _store_bytes(bad) == _store_bytes(clean)
