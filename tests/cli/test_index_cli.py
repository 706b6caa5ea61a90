"""`cce knowledge index` (docs/spec/core.md §5.3, §5.4, §9): check order, texts,
output, exit codes, and that a failure never leaves half-written state."""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.core.atomic import dir_lock
from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.store.snapshots import dumps, load_current, read_current
from tests.helpers.paths import TESTS

CURATED = TESTS / "vectors" / "knowledge" / "curated.jsonl"
ASK_CORPUS = TESTS / "vectors" / "ask" / "corpus.knowledge.jsonl"
FEEDS = TESTS / "fixtures" / "feeds"
SEARCH_LINE = re.compile(r"search index: built in \d+\.\d s \(\d+\.\d MB\)\n")
CURATED_SHA = "ab66052f618f84693cd229a1926dfb28d2570697d803fa9006281ee584a41110"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["knowledge", "index", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def kdir(root: Path) -> Path:
    return root / ".cce" / "knowledge"


def snapshot_files(root: Path) -> list[str]:
    d = kdir(root)
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".json")) if d.exists() else []


def manifest_for(raw: bytes, records: int) -> str:
    return json.dumps(
        {
            "schema": "cce.feed-manifest/v1",
            "records": records,
            "sha256": hashlib.sha256(raw).hexdigest(),
        }
    )


# ---------------------------------------------------------------- success


def test_success_output_and_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, str(CURATED), "--dir", str(tmp_path))
    # stdout is the reference's; our search-index step reports on stderr.
    assert rc == 0 and SEARCH_LINE.fullmatch(err), err
    assert out == (
        f"Indexed knowledge from {CURATED}\n"
        "  schema    : cce.knowledge/v1\n"
        "  records   : 2\n"
        "  chunks    : 2\n"
        "  snapshot  : 598e1b3891572bbb\n"
        f"  store     : {tmp_path}/.cce/knowledge/598e1b3891572bbb.json\n"
    )
    data = (kdir(tmp_path) / "598e1b3891572bbb.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == CURATED_SHA
    assert (kdir(tmp_path) / "current").read_bytes() == b"598e1b3891572bbb\n"


def test_default_dir_is_cwd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run(capsys, str(CURATED))
    assert rc == 0
    assert out.endswith("  store     : ./.cce/knowledge/598e1b3891572bbb.json\n")


def test_manifest_verified_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = CURATED.read_bytes()
    m = tmp_path / "feed.manifest.json"
    m.write_text(
        manifest_for(raw, 2)
        .upper()
        .replace("CCE.FEED-MANIFEST/V1", "x")
        .replace('"SCHEMA"', '"schema"')
        .replace('"RECORDS"', '"records"')
        .replace('"SHA256"', '"sha256"')
    )
    rc, out, err = run(capsys, str(CURATED), "--dir", str(tmp_path), "--manifest", str(m))
    assert rc == 0 and SEARCH_LINE.fullmatch(err), err
    assert f"  manifest  : verified ({m}) \u2014 2 records\n" in out
    assert out.index("manifest  :") < out.index("records   :")


def test_reindex_prunes_old_snapshot_keeps_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, str(CURATED), "--dir", str(tmp_path))[0] == 0
    (kdir(tmp_path) / "synced.json").write_text("{}")
    (kdir(tmp_path) / "notes.json").write_text("{}")
    assert run(capsys, str(ASK_CORPUS), "--dir", str(tmp_path))[0] == 0
    snap = hashlib.sha256(ASK_CORPUS.read_bytes()).hexdigest()[:16]
    assert snapshot_files(tmp_path) == sorted([f"{snap}.json", "synced.json", "notes.json"])
    assert read_current(tmp_path) == snap


def test_budget_from_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".cce").mkdir()
    (tmp_path / ".cce" / "config").write_text("markdown:\n  max_section_tokens: 5\n")
    assert run(capsys, str(CURATED), "--dir", str(tmp_path))[0] == 0
    raw = CURATED.read_bytes()
    got = (kdir(tmp_path) / f"{hashlib.sha256(raw).hexdigest()[:16]}.json").read_bytes()
    assert got == dumps(ingest_feed(raw, 5))
    assert got != dumps(ingest_feed(raw, 400))


def test_jobs_do_not_change_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for jobs in ("1", "2"):
        root = tmp_path / jobs
        assert (
            run(capsys, str(FEEDS / "huge_section.jsonl"), "--dir", str(root), "--jobs", jobs)[0]
            == 0
        )
    assert snapshot_files(tmp_path / "1") == snapshot_files(tmp_path / "2")
    name = snapshot_files(tmp_path / "1")[0]
    assert (kdir(tmp_path / "1") / name).read_bytes() == (kdir(tmp_path / "2") / name).read_bytes()


@pytest.mark.parametrize(
    ("fixture", "records", "chunks"),
    [
        ("crlf.jsonl", 2, 2),
        ("blank_lines.jsonl", 1, 1),
        ("empty.jsonl", 0, 0),
        ("huge_section.jsonl", 1, 2),
    ],
)
def test_edge_feeds_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture: str, records: int, chunks: int
) -> None:
    rc, out, _ = run(capsys, str(FEEDS / fixture), "--dir", str(tmp_path))
    assert rc == 0
    assert f"  records   : {records}\n  chunks    : {chunks}\n" in out
    store = load_current(tmp_path)
    assert (store.records, len(store.chunks)) == (records, chunks)
    if fixture == "huge_section.jsonl":
        # `# Huge` (the title) and `# Part` are sibling sections; `# Part` has no
        # sub-heading, so it is never split, however large.
        assert [c.kind for c in store.chunks] == ["Huge", "Part"]
        assert store.chunks[1].token_count > 400


# ---------------------------------------------------------------- refusals


def assert_untouched(root: Path, before: dict[str, bytes]) -> None:
    d = kdir(root)
    now = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} if d.exists() else {}
    assert now == before


def seeded(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, bytes]:
    assert run(capsys, str(CURATED), "--dir", str(root))[0] == 0
    return {p.name: p.read_bytes() for p in kdir(root).iterdir() if p.is_file()}


@pytest.mark.parametrize(
    ("fixture", "line"),
    [
        ("bom.jsonl", 1),
        ("duplicate_key.jsonl", 2),
        ("null_labels.jsonl", 1),
        ("nan.jsonl", 2),
        ("deep_nesting.jsonl", 1),
    ],
)
def test_bad_lines_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture: str, line: int
) -> None:
    before = seeded(tmp_path, capsys)
    rc, out, err = run(capsys, str(FEEDS / fixture), "--dir", str(tmp_path))
    assert rc == 1 and out == ""
    # FILE:LINE: $.field, as `validate` names it, then the reference's exact text
    assert re.match(
        rf"error: {re.escape(str(FEEDS / fixture))}:{line}: \$[^ ]*: invalid cce.knowledge/v1 record: ",
        err,
    ), err
    assert err.endswith("\n") and err.count("\n") == 1
    assert_untouched(tmp_path, before)


def test_specific_parse_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run(capsys, str(FEEDS / "duplicate_key.jsonl"), "--dir", str(tmp_path))
    assert "duplicate field `id`" in err
    _, _, err = run(capsys, str(FEEDS / "null_labels.jsonl"), "--dir", str(tmp_path))
    assert "invalid type: null, expected a sequence" in err
    _, _, err = run(capsys, str(FEEDS / "deep_nesting.jsonl"), "--dir", str(tmp_path))
    assert "recursion limit exceeded" in err
    assert not kdir(tmp_path).exists()


def test_invalid_utf8_is_a_read_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    feed = FEEDS / "invalid_utf8.jsonl"
    rc, _, err = run(capsys, str(feed), "--dir", str(tmp_path))
    assert rc == 1
    assert err == f"error: could not read {feed}: stream did not contain valid UTF-8\n"
    assert not kdir(tmp_path).exists()


def test_not_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, str(tmp_path), "--dir", str(tmp_path))
    assert (rc, err) == (1, f"error: not a file: {tmp_path}\n")
    rc, _, err = run(capsys, str(tmp_path / "missing.jsonl"), "--dir", str(tmp_path))
    assert (rc, err) == (1, f"error: not a file: {tmp_path / 'missing.jsonl'}\n")


def test_disabled_comes_after_not_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".cce").mkdir()
    (tmp_path / ".cce" / "config").write_text("knowledge:\n  enabled: false\n")
    rc, _, err = run(capsys, str(tmp_path / "nope"), "--dir", str(tmp_path))
    assert err == f"error: not a file: {tmp_path / 'nope'}\n"
    rc, _, err = run(capsys, str(CURATED), "--dir", str(tmp_path))
    assert (rc, err) == (
        1,
        "error: knowledge is disabled (knowledge.enabled: false in .cce/config)\n",
    )
    assert not kdir(tmp_path).exists()


def test_disabled_typo_block_resets_to_enabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".cce").mkdir()
    (tmp_path / ".cce" / "config").write_text(
        "knowledge:\n  enabled: no\n"
    )  # `no` is a string in serde_yaml
    assert run(capsys, str(CURATED), "--dir", str(tmp_path))[0] == 0


def test_truncated_feed_with_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = seeded(tmp_path, capsys)
    rc, out, err = run(
        capsys,
        str(FEEDS / "truncated.jsonl"),
        "--dir",
        str(tmp_path),
        "--manifest",
        str(FEEDS / "truncated.manifest.json"),
    )
    assert (rc, out) == (1, "")
    assert err == (
        "error: feed does not match its manifest: manifest declares 2 record(s), feed has 1 "
        "\u2014 the feed is truncated or incomplete\n"
    )
    assert_untouched(tmp_path, before)


def test_manifest_checksum_and_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = CURATED.read_bytes()
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"records": 2, "sha256": "0" * 64}))
    _, _, err = run(capsys, str(CURATED), "--dir", str(tmp_path), "--manifest", str(m))
    assert err == (
        "error: feed does not match its manifest checksum (truncated, corrupt, or misdirected feed): "
        f"manifest sha256 {'0' * 64}, feed sha256 {hashlib.sha256(raw).hexdigest()}\n"
    )
    m.write_text(json.dumps({"records": 2, "sha256": "abc\n"}))
    _, _, err = run(capsys, str(CURATED), "--dir", str(tmp_path), "--manifest", str(m))
    assert err == 'error: feed manifest sha256 is not a 64-char hex digest: "abc\\n"\n'
    m.write_text("{")
    _, _, err = run(capsys, str(CURATED), "--dir", str(tmp_path), "--manifest", str(m))
    assert err.startswith("error: invalid cce.feed-manifest/v1 manifest: ")
    assert not kdir(tmp_path).exists()


def test_parse_error_wins_over_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(
        capsys,
        str(FEEDS / "bom.jsonl"),
        "--dir",
        str(tmp_path),
        "--manifest",
        str(tmp_path / "absent.json"),
    )
    assert rc == 1 and err.startswith(f"error: {FEEDS / 'bom.jsonl'}:1: ")
    rc, _, err = run(
        capsys, str(CURATED), "--dir", str(tmp_path), "--manifest", str(tmp_path / "absent.json")
    )
    assert err == (
        f"error: could not read feed manifest {tmp_path / 'absent.json'}: "
        "No such file or directory (os error 2)\n"
    )


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["knowledge", "index"])
    assert e.value.code == 2
    rc, _, err = run(capsys, str(CURATED), "--jobs", "0", "--dir", str(tmp_path))
    assert rc == 2 and "--jobs" in err


# ---------------------------------------------------------------- nothing half-written


def test_write_error_leaves_previous_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = seeded(tmp_path, capsys)
    snap = hashlib.sha256(ASK_CORPUS.read_bytes()).hexdigest()[:16]
    blocker = kdir(tmp_path) / f"{snap}.json"
    blocker.mkdir()  # the rename onto the snapshot path fails
    before[blocker.name] = b""
    rc, out, err = run(capsys, str(ASK_CORPUS), "--dir", str(tmp_path))
    assert (rc, out) == (1, "")
    assert err.startswith("error: could not write knowledge store: ")
    assert "(os error " in err
    blocker.rmdir()
    del before[blocker.name]
    assert_untouched(tmp_path, before)  # no temp file left behind either
    assert hashlib.sha256(dumps(load_current(tmp_path))).hexdigest() == CURATED_SHA


def _cce(*args: str, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cce_knowledge", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,  # type: ignore[call-overload]
    )


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


@pytest.mark.slow
def test_disk_full_leaves_previous_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = seeded(tmp_path, capsys)
    p = _cce(
        "knowledge", "index", str(ASK_CORPUS), "--dir", str(tmp_path), preexec_fn=_limit_file_size
    )
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and out == b""
    assert err == b"error: could not write knowledge store: File too large (os error 27)\n"
    assert_untouched(tmp_path, before)


def _big_feed(path: Path, records: int) -> None:
    body = "## Part\n\n" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 60
    with path.open("w") as f:
        for i in range(records):
            f.write(
                json.dumps(
                    {
                        "id": f"big:{i}",
                        "title": f"Big {i}",
                        "body": f"{body}\n\n## Tail {i}\n",
                        "source": "bench",
                    }
                )
                + "\n"
            )


# Runs `cce` with os.replace wrapped so that the process stops itself (SIGSTOP) just
# before a fully written, fsynced snapshot temp is renamed into place: a known point in
# the save, so the test kills there every time instead of after a guessed delay.
_STOP_BEFORE_SNAPSHOT_RENAME = """
import os, re, signal, sys
_replace = os.replace
def _stopping_replace(src, dst, *a, **k):
    if re.fullmatch(r"[0-9a-f]{16}[.]json", os.path.basename(os.fspath(dst))):
        os.kill(os.getpid(), signal.SIGSTOP)
    return _replace(src, dst, *a, **k)
os.replace = _stopping_replace
from cce_knowledge.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _wait_stopped(p: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Wait until `p` is stopped (state T in /proc), or fail if it ends first."""
    deadline = time.monotonic() + timeout
    stat = Path(f"/proc/{p.pid}/stat")
    while time.monotonic() < deadline:
        if p.poll() is not None:
            pytest.fail(f"indexer ended (rc {p.returncode}) before reaching the save")
        # the state follows the parenthesised command name
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
            return
        time.sleep(0.01)
    pytest.fail("indexer never reached the snapshot rename")


@pytest.mark.slow
def test_sigkill_mid_index_keeps_previous_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = seeded(tmp_path, capsys)
    feed = tmp_path / "big.jsonl"
    _big_feed(feed, 300)
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _STOP_BEFORE_SNAPSHOT_RENAME,
            "knowledge",
            "index",
            str(feed),
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _wait_stopped(p)
    d = kdir(tmp_path)
    temps = [q for q in d.iterdir() if q.name.startswith(".") and ".json.tmp." in q.name]
    assert len(temps) == 1 and temps[0].stat().st_size > 0  # killed mid-save, temp written
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    # `current` and the old store are exactly as they were; at most a dot-temp remains.
    # (The lock file records its last holder, so only its presence is compared.)
    now = {
        q.name: q.read_bytes() for q in d.iterdir() if q.is_file() and not q.name.startswith(".")
    }
    assert now == {k: v for k, v in before.items() if not k.startswith(".")}
    assert (d / ".lock").exists()
    assert hashlib.sha256(dumps(load_current(tmp_path))).hexdigest() == CURATED_SHA
    # and the next run completes normally
    assert run(capsys, str(ASK_CORPUS), "--dir", str(tmp_path))[0] == 0
    assert load_current(tmp_path).records == 9


@pytest.mark.slow
def test_lock_serialises_writers(tmp_path: Path) -> None:
    with dir_lock(kdir(tmp_path), what="test"):
        p = _cce("knowledge", "index", str(CURATED), "--dir", str(tmp_path))
        time.sleep(2.0)
        assert p.poll() is None, "indexer did not wait for the lock"
        assert not (kdir(tmp_path) / "current").exists()
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0 and b"snapshot  : 598e1b3891572bbb" in out


@pytest.mark.slow
def test_concurrent_indexers_leave_a_consistent_store(tmp_path: Path) -> None:
    feeds = [CURATED, ASK_CORPUS, FEEDS / "huge_section.jsonl"]
    procs = [_cce("knowledge", "index", str(f), "--dir", str(tmp_path)) for f in feeds * 2]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    snap = read_current(tmp_path)
    names = [n for n in snapshot_files(tmp_path)]
    assert names == [f"{snap}.json"]
    by_snap = {hashlib.sha256(f.read_bytes()).hexdigest()[:16]: f for f in feeds}
    assert dumps(load_current(tmp_path)) == dumps(ingest_feed(by_snap[snap].read_bytes()))
    leftovers = [q.name for q in kdir(tmp_path).iterdir() if ".tmp." in q.name]
    assert leftovers == []


def test_index_help_lists_options(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["knowledge", "index", "--help"])
    out = capsys.readouterr().out
    for opt in ("FEED", "--dir ROOT", "--manifest PATH", "--jobs N"):
        assert opt in out
    doc = (TESTS.parent / "docs" / "cli" / "index.md").read_text(encoding="utf-8")
    assert out.strip() in doc, "docs/cli/index.md must quote `cce knowledge index --help` verbatim"


def test_index_help_states_the_real_record_limit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The help spells the default out (importing the store to format it would slow every
    # command's start): it must stay the limit ingest really applies.
    from cce_knowledge.store.ingest import MAX_RECORD_BYTES

    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["knowledge", "index", "--help"])
    words = " ".join(capsys.readouterr().out.split())
    assert f"(default {MAX_RECORD_BYTES} = {MAX_RECORD_BYTES >> 20} MiB)" in words


def test_empty_feed_replaces_the_store_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seeded(tmp_path, capsys)
    old = read_current(tmp_path)
    rc, out, err = run(capsys, str(FEEDS / "empty.jsonl"), "--dir", str(tmp_path))
    assert rc == 0 and "  records   : 0\n" in out
    new = read_current(tmp_path)
    assert err.endswith(
        f"warning: 0 records: the store for snapshot {new} is now empty "
        f"(it replaced snapshot {old})\n"
    )
    # a feed with records says nothing on stderr but the search index's time
    rc, _, err = run(capsys, str(CURATED), "--dir", str(tmp_path))
    assert rc == 0 and SEARCH_LINE.fullmatch(err), err


def test_a_record_over_the_size_limit_is_refused_by_line_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 12 item 9: one 9 MiB record (a 50 MB one used 2.1 GB) is refused up front."""
    root = tmp_path / "r"
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"id": "a", "title": "A", "body": "small", "source": "t"}) + "\n")
    assert main(["knowledge", "index", str(good), "--dir", str(root)]) == 0
    before = {
        p.name: p.read_bytes() for p in (root / ".cce" / "knowledge").iterdir() if p.is_file()
    }
    big = tmp_path / "big.jsonl"
    rec = {"id": "b", "title": "B", "body": "word " * (9 << 18), "source": "t"}
    big.write_text(good.read_text() + json.dumps(rec) + "\n")
    size = len(json.dumps(rec))
    capsys.readouterr()
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "cce_knowledge", "knowledge", "index", str(big), "--dir", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr == (
        f"error: {big}:2: the record is {size} bytes; index takes records of up to 8388608 "
        "bytes (--max-record-bytes) — indexing one costs ~36x its size in memory; split the "
        "record or raise the limit\n"
    )
    assert time.monotonic() - t0 < 60
    after = {p.name: p.read_bytes() for p in (root / ".cce" / "knowledge").iterdir() if p.is_file()}
    assert after == before
    # The limit is a flag: raised, the same feed indexes.
    rc = main(["knowledge", "index", str(big), "--dir", str(root), "--max-record-bytes", str(size)])
    assert rc == 0


def test_no_search_index_leaves_it_to_the_first_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A publish-only builder skips the derived index: the same store, no index file,
    and the first search builds it (saying so) and answers as usual."""
    rc, out, err = run(capsys, str(CURATED), "--dir", str(tmp_path), "--no-search-index")
    assert rc == 0, err
    assert not SEARCH_LINE.search(err)
    snap = read_current(tmp_path)
    search = kdir(tmp_path) / "search"
    assert not search.exists() or not any(p.suffix == ".idx" for p in search.iterdir())
    other = tmp_path / "other"
    assert run(capsys, str(CURATED), "--dir", str(other))[0] == 0
    assert (kdir(tmp_path) / f"{snap}.json").read_bytes() == (
        kdir(other) / f"{snap}.json"
    ).read_bytes()
    rc = main(["knowledge", "search", "rollback", "--dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "building the search index" in err
    rc = main(["knowledge", "search", "rollback", "--dir", str(other), "--json"])
    assert capsys.readouterr().out == out


def test_a_damaged_rows_file_is_named_and_the_index_is_built_in_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rows an earlier build kept are only a shortcut: a damaged file is named on
    stderr, and the search index is built from scratch, the same as with none."""
    from cce_knowledge.retrieval import search_index as si

    feed = tmp_path / "feed.jsonl"
    lines = CURATED.read_text(encoding="utf-8").splitlines()
    feed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run(capsys, str(feed), "--dir", str(tmp_path))[0] == 0
    (rows,) = (kdir(tmp_path) / "search").glob("*.rows")
    rows.write_bytes(b"CCESRW01" + b"\xff" * 64)
    feed.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")  # another snapshot
    rc, _, err = run(capsys, str(feed), "--dir", str(tmp_path))
    assert rc == 0
    assert f"note: search index: not reusing {rows.name} (bad header length)" in err
    built = si.index_path(tmp_path, read_current(tmp_path))
    got = built.read_bytes()
    fresh = si.build_search_index(tmp_path, reuse=False)
    assert fresh.path == built
    assert got == built.read_bytes()
