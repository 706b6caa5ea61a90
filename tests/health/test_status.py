"""`cce knowledge status` and the freshness facts shared with MCP index_status."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cce_knowledge.cli.main import main
from cce_knowledge.config.settings import load_settings
from cce_knowledge.health.status import knowledge_status, lookup_remote, strip_credentials
from cce_knowledge.store import snapshots as S
from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.sync.marker import SyncMarker, write_marker
from tests.helpers.paths import REPO

FEED = b"".join(
    json.dumps(r).encode() + b"\n"
    for r in [
        {
            "id": "docs:policies/password-hashing.md",
            "title": "Password hashing policy",
            "body": "## Algorithm\n\nUse argon2id.\n\n## Pepper\n\nA server-side pepper.",
            "source": "docs",
            "state": "active",
            "updated_at": "2026-03-01T09:00:00Z",
        },
        {
            "id": "docs:adr/0002.md",
            "title": "Idempotency keys",
            "body": "Retries reuse the idempotency key.",
            "source": "docs",
            "updated_at": "2026-04-02T10:00:00Z",
        },
    ]
)


def make_store(root: Path, feed: bytes = FEED) -> S.KnowledgeStore:
    st_ = ingest_feed(feed)
    S.save(root, st_)
    return st_


def mark_pulled(root: Path, corpus: str, snapshot: str) -> None:
    data = S.store_path(root, snapshot).read_bytes()
    write_marker(
        root,
        SyncMarker(corpus, snapshot, "c" * 64, hashlib.sha256(data).hexdigest()),
    )


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def publish(bare: Path, work: Path, corpus: str, snapshot: str, pushed_at: str) -> None:
    """Write the cache keys a push leaves (pointer + corpus.json) with plain git."""
    if not work.exists():
        git("clone", "-q", str(bare), str(work), cwd=bare.parent)
    d = work / "knowledge" / "v1" / corpus
    d.mkdir(parents=True, exist_ok=True)
    (d / "current").write_text(snapshot + "\n")
    meta = {"corpus_id": corpus, "current": snapshot, "pushed_at": pushed_at,
            "schema": "cce.knowledgemeta/v1", "records": 2, "chunk_count": 3,
            "data_as_of": None}  # fmt: skip
    (d / "corpus.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    git("add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "publish", cwd=work)
    git("push", "-q", "origin", "HEAD", cwd=work)


@pytest.fixture()
def cce_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cce-home"
    monkeypatch.setenv("CCE_HOME", str(home))
    monkeypatch.delenv("CCE_SYNC_TOKEN", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    return home


def test_local_ingest_human_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cce_home: Path
) -> None:
    st_ = make_store(tmp_path)
    rc, out, err = run(["knowledge", "status", "--dir", str(tmp_path)], capsys)
    assert rc == 0, err
    assert "  corpus         : (local ingest)\n" in out
    assert f"  snapshot       : {st_.snapshot}\n" in out
    assert f"  records/chunks : 2 / {len(st_.chunks)}\n" in out
    assert "  data as-of     : 2026-04-02T10:00:00Z\n" in out
    assert "  checksum       : n/a (local ingest" in out
    assert "  remote current : - (no remote configured)\n" in out


def test_json_report_is_sorted_and_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cce_home: Path
) -> None:
    st_ = make_store(tmp_path)
    mark_pulled(tmp_path, "acme-docs", st_.snapshot)
    rc, out, _ = run(["knowledge", "status", "--dir", str(tmp_path), "--json", "--offline"], capsys)
    assert rc == 0
    obj = json.loads(out)
    assert list(obj) == sorted(obj)
    assert obj["schema"] == "cce.knowledge.status/v1"
    assert obj["contract"] == "cce.knowledge/v1"
    assert obj["corpus"] == "acme-docs"
    assert obj["snapshot"] == st_.snapshot
    assert obj["chunks"] == len(st_.chunks)
    assert obj["checksum"]["state"] == "ok"
    assert obj["remote_checked"] is False
    assert obj["behind_remote"] is None


def test_no_store_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["knowledge", "status", "--dir", str(tmp_path)], capsys)
    assert rc == 1 and out == ""
    assert err.startswith("error: no knowledge store under ")
    assert f"`cce knowledge index FEED --dir {tmp_path}`" in err
    assert f"`cce knowledge pull --dir {tmp_path}`" in err


def test_corrupt_store_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st_ = make_store(tmp_path)
    S.store_path(tmp_path, st_.snapshot).write_text("{ not json")
    rc, _, err = run(["knowledge", "status", "--dir", str(tmp_path)], capsys)
    assert rc == 1
    assert "the store cannot be loaded" in err


def test_marker_for_another_snapshot_reads_as_local_ingest(tmp_path: Path, cce_home: Path) -> None:
    st_ = make_store(tmp_path)
    write_marker(tmp_path, SyncMarker("acme-docs", "0123456789abcdef", "c" * 64, "d" * 64))
    status = knowledge_status(tmp_path, offline=True, settings=load_settings(tmp_path))
    assert status.corpus is None
    assert status.marker_corpus == "acme-docs"
    # The marker names another snapshot than `current`: the pulled-bytes check says so
    # instead of judging a store readers do not use.
    assert status.checksum.state == "stale-marker"
    assert f"but `current` names {st_.snapshot}" in (status.checksum.error or "")
    assert status.snapshot == st_.snapshot


def test_tampered_pulled_store_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cce_home: Path
) -> None:
    st_ = make_store(tmp_path)
    mark_pulled(tmp_path, "acme-docs", st_.snapshot)
    p = S.store_path(tmp_path, st_.snapshot)
    p.write_bytes(p.read_bytes() + b"\n")
    rc, out, _ = run(["knowledge", "status", "--dir", str(tmp_path), "--offline"], capsys)
    assert rc == 0
    assert "  checksum       : MISMATCH" in out
    assert "cce knowledge pull --corpus acme-docs" in out


@pytest.mark.slow
def test_remote_moved_and_pushed_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cce_home: Path
) -> None:
    root = tmp_path / "consumer"
    st_ = make_store(root)
    mark_pulled(root, "acme-docs", st_.snapshot)
    bare = tmp_path / "cache.git"
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    remote = bare.as_uri()

    publish(bare, tmp_path / "w", "acme-docs", st_.snapshot, "2026-05-01T12:00:00Z")
    rc, out, _ = run(["knowledge", "status", "--dir", str(root), "--remote", remote], capsys)
    assert rc == 0
    assert f"  remote current : {st_.snapshot}\n" in out
    assert "  pushed at      : 2026-05-01T12:00:00Z\n" in out
    assert "  behind remote  : no\n" in out

    publish(bare, tmp_path / "w", "acme-docs", "fedcba9876543210", "2026-05-02T12:00:00Z")
    rc, out, _ = run(["knowledge", "status", "--dir", str(root), "--remote", remote], capsys)
    assert "  remote current : fedcba9876543210\n" in out
    assert "  behind remote  : yes — run `cce knowledge pull`\n" in out


@pytest.mark.slow
def test_unreachable_remote_is_unknown_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cce_home: Path
) -> None:
    make_store(tmp_path)
    missing = (tmp_path / "nope.git").as_uri()
    rc, out, err = run(["knowledge", "status", "--dir", str(tmp_path), "--remote", missing], capsys)
    assert rc == 0, err
    # No marker and no knowledge.sync.corpus_id: there is no corpus to look up.
    assert "remote current : - (no corpus id" in out

    (tmp_path / ".cce" / "config").write_text("knowledge:\n  sync:\n    corpus_id: acme-docs\n")
    rc, out, err = run(["knowledge", "status", "--dir", str(tmp_path), "--remote", missing], capsys)
    assert rc == 0, err
    assert "  remote current : - (unreachable" in out
    assert "  behind remote  : unknown\n" in out


@pytest.mark.slow
def test_hanging_remote_is_bounded(tmp_path: Path, cce_home: Path) -> None:
    """A host that accepts the connection and never answers costs the timeout, once."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{srv.getsockname()[1]}/cache.git"
        t0 = time.monotonic()
        info = lookup_remote(url, "acme-docs", timeout=1.0)
        assert time.monotonic() - t0 < 3.0
        assert info.current is None and info.problem is not None
        assert info.problem.startswith("timeout")
    finally:
        stop.set()
        t.join()
        for c in conns:
            c.close()
        srv.close()


def test_credentials_are_stripped_from_the_shown_remote() -> None:
    assert strip_credentials("https://x-access-token:ghp_abc123def456@github.com/o/r.git") == (
        "https://github.com/o/r.git"
    )
    assert strip_credentials("https://TOKEN123456@host/r.git?token=abc") == "https://host/r.git"
    assert strip_credentials("git@github.com:o/r.git") == "git@github.com:o/r.git"
    assert strip_credentials("file:///tmp/cache.git") == "file:///tmp/cache.git"


_secret = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789_-", min_size=6, max_size=40
)


@given(user=_secret, secret=_secret, path=st.sampled_from(["/o/r.git", "/cache", "/a/b/c.git"]))
def test_stripped_remote_never_contains_the_secret(user: str, secret: str, path: str) -> None:
    shown = strip_credentials(f"https://{user}:{secret}@git.example.test{path}")
    assert shown == f"https://git.example.test{path}"


def _help(*path: str) -> str:
    from cce_knowledge.cli.main import build_parser

    p = build_parser()
    for name in path:
        sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
        p = sub.choices[name]
    return p.format_help().rstrip("\n")


@pytest.mark.parametrize(
    ("page", "path"),
    [("status.md", ("knowledge", "status")), ("mcp.md", ("mcp",)), ("doctor.md", ("doctor",))],
)
def test_docs_pages_show_the_real_help(
    page: str, path: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    text = (REPO / "docs" / "cli" / page).read_text()
    assert f"```text\n{_help(*path)}\n```" in text


def test_config_warnings_are_said_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cce_home: Path
) -> None:
    """status reads .cce/config like every command: a misspelt key is warned about on
    stderr (naming file, line and key), and --json's stdout stays one JSON object."""
    from cce_knowledge.config import settings as cfg

    cfg._WARNED.clear()  # once per process: other tests may have warned the same line
    make_store(tmp_path)
    (tmp_path / ".cce" / "config").write_text("knowledge:\n  rankng: default\n")
    rc, out, err = run(
        ["knowledge", "status", "--dir", str(tmp_path), "--json", "--offline"], capsys
    )
    assert rc == 0, err
    json.loads(out)
    assert "warning: " in err and "config:2" in err and "rankng" in err
