"""bench/build_rfcs_feed.py on a small git repository shaped like rust-lang/rfcs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.helpers.bench import load_bench_script

build_rfcs_feed = load_bench_script("build_rfcs_feed")

FILES = {
    "text/0001-private-fields.md": (
        "- Start Date: 2014-03-11\n"
        "- RFC PR: [rust-lang/rfcs#1](https://github.com/rust-lang/rfcs/pull/1)\n"
        "- Rust Issues:\n"
        "  - [1](https://github.com/rust-lang/rust/issues/1)\n"
        "  - [2](https://github.com/rust-lang/rust/issues/2), again"
        " [1](https://github.com/rust-lang/rust/issues/1)\n"
        "- Pre-RFC: [internals](https://internals.example/t/1)\n\n"
        "## Summary\n\nSee https://example.test/not-a-header-link.\n"
    ),
    "text/0505-api-comment-conventions.md": "## Note\n\ntext\n",
    "text/0809-box-syntax.md": (
        "- RFC PR: [x](https://github.com/rust-lang/rfcs/pull/809)\n\n"
        "## This RFC was previously approved, but part of it later **withdrawn**\n\n"
        "## Summary\n\nbox\n"
    ),
    "text/2657-roadmap-2019.md": (
        "# 2019 Roadmap RFC\n\n- RFC PR: [y](https://github.com/rust-lang/rfcs/pull/2657)\n\n"
        "## Summary\n"
    ),
    "text/2071-impl-trait-type-alias.md": "Moved to ...\n",
    "text/3392-leadership-council.md": "## Summary\n\ncouncil\n",
    "text/3392-leadership-council/Leadership-Council-RFCja.md": "## 概要\n",
    "text/3392-leadership-council/motivation.md": "# Motivation\n\nwhy\n",
}


def _git(repo: Path, *args: str, date: str = "2025-11-28T16:07:16-08:00") -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def test_the_feed_follows_the_documented_mapping(tmp_path: Path) -> None:
    repo = tmp_path / "rfcs"
    repo.mkdir()
    _git(repo, "init", "-q")
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    (repo / "text/0505-api-comment-conventions.md").write_text("## Note\n\nnewer\n")
    _git(repo, "commit", "-qam", "two", date="2026-01-02T03:04:05+02:00")

    out = tmp_path / "rfcs.jsonl"
    assert build_rfcs_feed.main(["--repo", str(repo), "--out", str(out)]) == 0
    recs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    by_id = {r["id"]: r for r in recs}

    assert [r["id"] for r in recs] == [
        "rfc:0001", "rfc:0505", "rfc:0809", "rfc:2657",
        "rfc:3392", "rfc:3392/ja", "rfc:3392/motivation",
    ]  # fmt: skip
    first = by_id["rfc:0001"]
    assert list(first) == [
        "id", "title", "body", "source", "url", "state", "updated_at", "labels", "links",
    ]  # fmt: skip
    assert first["title"] == "Private fields"
    assert first["body"] == FILES["text/0001-private-fields.md"]
    assert first["url"] == (
        "https://github.com/rust-lang/rfcs/blob/master/text/0001-private-fields.md"
    )
    assert first["links"] == [
        "https://github.com/rust-lang/rfcs/pull/1",
        "https://github.com/rust-lang/rust/issues/1",
        "https://github.com/rust-lang/rust/issues/2",
    ]
    assert first["updated_at"] == "2025-11-29T00:07:16Z"
    assert by_id["rfc:0505"]["title"] == "API comment conventions"
    assert by_id["rfc:0505"]["updated_at"] == "2026-01-02T01:04:05Z"
    assert by_id["rfc:0809"]["state_reason"] == "approved, part later withdrawn"
    assert by_id["rfc:0809"]["title"] == "Box syntax"
    assert by_id["rfc:2657"]["title"] == "2019 Roadmap"
    assert by_id["rfc:2657"]["links"] == ["https://github.com/rust-lang/rfcs/pull/2657"]
    assert by_id["rfc:3392/ja"]["title"] == "Leadership council (translation, ja)"
    assert by_id["rfc:3392/motivation"]["title"] == "Leadership council: Motivation"
    assert {by_id[i].get("group") for i in by_id if i.startswith("rfc:3392")} == {"rfc:3392"}
    manifest = json.loads((tmp_path / "rfcs.manifest.json").read_text())
    assert manifest["records"] == 7


def test_humanise_spells_acronyms_and_keeps_code_words() -> None:
    h = build_rfcs_feed.humanise
    assert h("trait-based-exception-handling") == "Trait based exception handling"
    assert h("io-os-reform") == "IO OS reform"
    assert h("no-panic-in-c-string") == "No panic in C string"
    assert h("cfg-target-abi") == "cfg target ABI"
    assert h("entry_v3") == "entry_v3"
    assert h("mixed-utf8-literals") == "Mixed UTF-8 literals"
