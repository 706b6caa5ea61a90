"""`cce knowledge index --redaction` and `knowledge.redaction` (issue 12 item 6), end to end:
what reaches the store, `search` (human and --json), MCP, the shrink guard and a pulled
copy; and the reference's "left alone" unit cases, reproduced in reference mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cce_knowledge.engine.redaction.modes import redact_for_display
from cce_knowledge.store.snapshots import knowledge_dir, read_current
from tests.engine.test_extended_redactor import ISSUE_SHAPES, SECRET_PART
from tests.engine.test_redactor import CASES
from tests.helpers.sync_env import SyncEnv, cli

SECRET_ID = "tickets/" + "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwx"


def _feed(path: Path) -> Path:
    body = "\n\n".join(f"## {name}\n\n{text}" for name, text in sorted(ISSUE_SHAPES.items()))
    recs = [
        {
            "id": SECRET_ID,
            "title": "Rotation notes",
            "body": "# Rotation\n\nHow we rotate credentials.\n\n" + body,
            "source": "tracker",
            "url": "https://ops:" + SECRET_PART["url password"] + "@tracker.example/t/1",
            "links": ["https://admin:" + SECRET_PART["url password"] + "@wiki.example/p"],
            "group": "team-" + ISSUE_SHAPES["stripe test"],
            "updated_at": "2026-03-01T00:00:00Z",
        },
        {
            "id": "tickets/2",
            "title": "Plain",
            "body": "Nothing secret here about rotation.",
            "source": "tracker",
            "updated_at": "2026-03-01T00:00:00Z",
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _store(root: Path) -> bytes:
    return (knowledge_dir(root) / f"{read_current(root)}.json").read_bytes()


def _index(capsys: pytest.CaptureFixture[str], feed: Path, root: Path, *extra: str) -> None:
    rc, _, err = cli(capsys, "knowledge", "index", str(feed), "--dir", str(root), "-q", *extra)
    assert rc == 0, err


def test_default_extended_redaction_leaves_no_listed_secret_anywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = _feed(tmp_path / "feed.jsonl")
    _index(capsys, feed, tmp_path / "a")
    store = _store(tmp_path / "a").decode()
    for name, secret in SECRET_PART.items():
        assert secret not in store, name
    rc, out, err = cli(
        capsys, "knowledge", "search", "rotate credentials", "--dir", str(tmp_path / "a"), "--json"
    )
    assert rc == 0, err
    hits = json.loads(out)
    assert hits and all(SECRET_ID not in json.dumps(h) for h in hits)
    assert {h["record_id"] for h in hits} >= {redact_for_display(SECRET_ID)}
    for secret in SECRET_PART.values():
        assert secret not in out
    rc, out, _ = cli(
        capsys, "knowledge", "search", "rotate credentials", "--dir", str(tmp_path / "a")
    )
    assert rc == 0 and "github_pat_" not in out and "[REDACTED:GITHUB_TOKEN]" in out


def test_reference_mode_by_flag_and_by_config_is_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = _feed(tmp_path / "feed.jsonl")
    _index(capsys, feed, tmp_path / "flag", "--redaction", "reference")
    by_flag = _store(tmp_path / "flag")
    # The reference's rules leave these shapes: reference mode must too (exactness).
    for name in ("fine-grained github", "stripe test", "password prose", "db password line"):
        assert SECRET_PART[name].encode() in by_flag, name
    cfg = tmp_path / "conf"
    (cfg / ".cce").mkdir(parents=True)
    (cfg / ".cce" / "config").write_text("knowledge:\n  redaction: reference\n")
    _index(capsys, feed, cfg)
    assert _store(cfg) == by_flag
    # The flag wins over the config.
    _index(capsys, feed, cfg, "--redaction", "extended")
    _index(capsys, feed, tmp_path / "ext")
    assert _store(cfg) == _store(tmp_path / "ext") != by_flag


def test_a_bad_config_value_names_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = _feed(tmp_path / "feed.jsonl")
    (tmp_path / ".cce").mkdir()
    (tmp_path / ".cce" / "config").write_text("knowledge:\n  redaction: loose\n")
    rc, _, err = cli(capsys, "knowledge", "index", str(feed), "--dir", str(tmp_path))
    assert rc == 2  # a bad config value is a usage error (issue 21 §4)
    assert "knowledge.redaction" in err and str(tmp_path / ".cce" / "config") in err
    assert not (knowledge_dir(tmp_path) / "current").exists()


LEFT_ALONE = [src for src, want in CASES if src == want and src.strip()]


def test_the_reference_unit_cases_pinned_as_left_alone_stay_so_in_reference_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert any("://user:password@" in s for s in LEFT_ALONE)  # the placeholder URL case
    recs = [
        {"id": f"case/{i}", "title": f"Case {i}", "body": src, "source": "unit"}
        for i, src in enumerate(LEFT_ALONE)
    ]
    feed = tmp_path / "cases.jsonl"
    feed.write_text("".join(json.dumps(r) + "\n" for r in recs))
    _index(capsys, feed, tmp_path / "ref", "--redaction", "reference")
    chunks = json.loads(_store(tmp_path / "ref"))["chunks"]
    content = {c["record_id"]: c["content"] for c in chunks}
    for i, src in enumerate(LEFT_ALONE):
        assert src.strip() in content[f"case/{i}"], src
    # Extended mode is free to redact them (the placeholder URL password is a URL password).
    _index(capsys, feed, tmp_path / "ext")
    assert "://user:password@" not in _store(tmp_path / "ext").decode()


def _publish(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """Index the feed in the default mode and push it as corpus `c`: (feed, root)."""
    feed = _feed(sync_env.tmp / "feed.jsonl")
    src = sync_env.root("builder")
    _index(capsys, feed, src)
    rc, _, err = cli(
        capsys, "knowledge", "push", "--corpus", "c", "--remote", sync_env.url, "--dir", str(src)
    )
    assert rc == 0, err
    return feed, src


def test_push_and_pull_carry_the_redacted_store(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    _, src = _publish(sync_env, capsys)
    dst = sync_env.root("consumer")
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "c", "--remote", sync_env.url, "--dir", str(dst)
    )
    assert rc == 0, err
    assert _store(dst) == _store(src)
    for secret in SECRET_PART.values():
        assert secret.encode() not in _store(dst)


def test_the_shrink_guard_lists_record_ids_redacted(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    feed, src = _publish(sync_env, capsys)
    smaller = sync_env.tmp / "smaller.jsonl"
    smaller.write_text(feed.read_text().split("\n")[1] + "\n")
    _index(capsys, smaller, src)
    rc, out, err = cli(
        capsys, "knowledge", "push", "--corpus", "c", "--remote", sync_env.url, "--dir", str(src)
    )
    assert rc == 1
    assert "refusing to push" in err + out
    assert "github_pat_" not in out + err and "[REDACTED:GITHUB_TOKEN]" in out + err


def test_mcp_shows_record_ids_through_the_extended_rules(tmp_path: Path) -> None:
    from cce_knowledge.mcp.tools import KnowledgeTools

    tools = KnowledgeTools(tmp_path)
    assert tools.display(SECRET_ID) == redact_for_display(SECRET_ID) != SECRET_ID


def test_show_finds_a_record_by_the_redacted_id_search_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = _feed(tmp_path / "feed.jsonl")
    root = tmp_path / "a"
    _index(capsys, feed, root)
    rc, out, err = cli(capsys, "knowledge", "search", "rotate credentials", "--dir", str(root))
    assert rc == 0, err
    citation = next(
        ln.split()[0] for ln in out.splitlines() if ln.startswith("    tickets/[REDACTED")
    )
    rc, out, err = cli(capsys, "knowledge", "show", citation, "--dir", str(root), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["citation"] == citation and doc["record_id"] == redact_for_display(SECRET_ID)
    assert "github_pat_" not in out
    # A near miss names the closest record, redacted too.
    miss = citation.replace("tickets/", "ticket/")
    rc, _, err = cli(capsys, "knowledge", "show", miss, "--dir", str(root))
    assert rc == 1 and "github_pat_" not in err
    assert f"the closest record is {redact_for_display(SECRET_ID)} (" in err
