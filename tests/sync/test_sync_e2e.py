"""End-to-end sync against real bare repos over file:// with git-LFS on."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.store.snapshots import save
from cce_knowledge.sync.listing import read_remote_current
from tests.helpers.paths import TESTS
from tests.helpers.sync import CURATED, bare_file, bare_ls, feed, index, refs, store_files
from tests.helpers.sync_env import SyncEnv, cli, push_cli

pytestmark = pytest.mark.slow

SNAP = "598e1b3891572bbb"
CHECKSUM = "84284a0ad6981d3c40c4dffd6dbb67d7e000cf6e64ff6e75b321d439ee9f452d"
STORE_SHA = "ab66052f618f84693cd229a1926dfb28d2570697d803fa9006281ee584a41110"
KEY = f"knowledge/v1/fixture/{SNAP}.cck"


def _push_fixture(env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> Path:
    prod = env.root("producer")
    index(prod, CURATED.read_bytes())
    rc, out, err = cli(
        capsys, "knowledge", "push", "--corpus", "fixture", "--remote", env.url, "--dir", str(prod)
    )
    assert rc == 0, err
    assert out.startswith(f"Pushed corpus fixture@{SNAP}\n  key        : {KEY}\n")
    assert f"  checksum   : {CHECKSUM}\n" in out
    return prod


def test_index_push_fresh_pull_is_byte_identical(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    prod = _push_fixture(env, capsys)
    # The cache: pointer, metadata, LFS attributes, artifact stored through LFS.
    assert bare_file(env.bare, "knowledge/v1/fixture/current") == f"{SNAP}\n".encode()
    meta = bare_file(env.bare, "knowledge/v1/fixture/corpus.json")
    assert meta is not None
    assert re.fullmatch(
        r'\{\n  "chunk_count": 2,\n  "corpus_id": "fixture",\n  "current": "598e1b3891572bbb",\n'
        r'  "data_as_of": "2026-02-01T10:00:00Z",\n  "pushed_at": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",\n'
        r'  "records": 2,\n  "schema": "cce.knowledgemeta/v1"\n\}\n',
        meta.decode(),
    )
    assert b"*.cck filter=lfs diff=lfs merge=lfs -text\n" in (
        bare_file(env.bare, ".gitattributes") or b""
    )
    pointer = bare_file(env.bare, KEY) or b""
    assert pointer.startswith(b"version https://git-lfs") and b"size 6759" in pointer
    oid = re.search(rb"oid sha256:([0-9a-f]{64})", pointer).group(1).decode()  # type: ignore[union-attr]
    assert (env.bare / "lfs" / "objects" / oid[:2] / oid[2:4] / oid).is_file()

    # A different machine: fresh CCE_HOME, fresh root.
    env.home("home-consumer")
    cons = env.root("consumer")
    rc, out, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 0, err
    assert out == (
        f"Pulled corpus fixture@{SNAP}\n  records  : 2 · chunks : 2\n  checksum : {CHECKSUM}\n"
        f"  store    : {cons}/.cce/knowledge/{SNAP}.json\n"
    )
    kd = cons / ".cce" / "knowledge"
    assert (kd / f"{SNAP}.json").read_bytes() == (
        prod / ".cce" / "knowledge" / f"{SNAP}.json"
    ).read_bytes()
    assert hashlib.sha256((kd / f"{SNAP}.json").read_bytes()).hexdigest() == STORE_SHA
    assert (kd / "current").read_bytes() == f"{SNAP}\n".encode()
    assert (kd / "synced.json").read_bytes() == (
        b'{"corpus_id":"fixture","snapshot":"598e1b3891572bbb","checksum":"' + CHECKSUM.encode()
        + b'","installed_sha256":"' + STORE_SHA.encode() + b'"}'
    )  # fmt: skip
    assert read_remote_current(env.url, "fixture").current == SNAP
    assert read_remote_current(env.url, "nope").current is None

    # list / verify / pull --all on the consumer side.
    rc, out, _ = cli(capsys, "sync", "list", "--remote", env.url)
    assert rc == 0
    assert f"fixture    {SNAP}          1   6759  2026-02-01T10:00:00Z\n" in out
    rc, out, _ = cli(capsys, "sync", "list", "--remote", env.url, "--json")
    row = json.loads(out)["knowledge"][0]
    assert (row["snapshots"], row["bytes"], row["current"]) == (1, 6759, SNAP)
    rc, out, _ = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(cons))
    assert (
        rc == 0
        and out
        == f"verify OK (checksum-only): knowledge corpus fixture@{SNAP}\n  checksum : {STORE_SHA}\n"
    )
    rc, out, _ = cli(capsys, "sync", "pull", "--all", "--into", str(cons), "--remote", env.url)
    assert rc == 0 and f"  knowledge        up-to-date  fixture@{SNAP}\n" in out

    # A flipped byte in the installed store is caught by verify.
    p = kd / f"{SNAP}.json"
    data = bytearray(p.read_bytes())
    data[100] ^= 0x01
    p.write_bytes(bytes(data))
    rc, _, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(cons))
    assert rc == 1
    assert err.startswith(
        f"error: verify FAILED (checksum-only) for knowledge corpus `fixture` (@{SNAP})\n  expected : {STORE_SHA}\n"
    )
    assert "NO rebuild-verify escalation path" in err


def test_pull_all_installs_and_reports(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    prod = _push_fixture(env, capsys)
    into = env.root("ws")
    rc, out, _ = cli(capsys, "sync", "pull", "--all", "--into", str(into), "--remote", env.url)
    assert rc == 0
    assert out.startswith(
        f"remote        : {env.url}\n\nNo code repos cached — the cache carries only knowledge corpora.\n\n"
    )
    assert f"  knowledge        pulled      fixture@{SNAP}  → .cce/knowledge/\n" in out
    assert (into / ".cce/knowledge" / f"{SNAP}.json").read_bytes() == (
        prod / ".cce/knowledge" / f"{SNAP}.json"
    ).read_bytes()
    # A second corpus makes the choice ambiguous.
    rc, _, _ = cli(
        capsys, "knowledge", "push", "--corpus", "runbooks", "--remote", env.url, "--dir", str(prod)
    )
    rc, out, _ = cli(
        capsys, "sync", "pull", "--all", "--into", str(env.root("ws2")), "--remote", env.url
    )
    assert rc == 0
    assert (
        "  warning: skipped knowledge — the cache carries 2 corpora (fixture, runbooks); one active corpus per root — pass --corpus <id> to install one\n"
        in out
    )
    rc, out, _ = cli(
        capsys,
        "sync",
        "pull",
        "--all",
        "--into",
        str(env.root("ws2")),
        "--remote",
        env.url,
        "--corpus",
        "nope",
    )
    assert (
        "  warning: skipped knowledge — corpus `nope` is not in the cache (it carries: fixture, runbooks)\n"
        in out
    )
    # The root holds `fixture`: installing `runbooks` there is refused by the marker guard (a warning).
    rc, out, _ = cli(
        capsys,
        "sync",
        "pull",
        "--all",
        "--into",
        str(into),
        "--remote",
        env.url,
        "--corpus",
        "runbooks",
    )
    assert (
        rc == 0
        and "  warning: skipped knowledge corpus runbooks — the local knowledge store came from corpus `fixture`"
        in out
    )
    rc, _, err = cli(capsys, "sync", "pull", "--corpus", "x", "--into", str(into))
    assert rc == 2 and "--corpus requires --all" in err


def test_sync_list_golden(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = sync_env
    meta = {
        "chunk_count": 9, "corpus_id": "internal-tickets", "current": "9f1c2a3b4c5d6e7f",
        "data_as_of": "2026-07-01T09:00:00Z", "pushed_at": "2026-07-08T03:00:00Z", "records": 2,
        "schema": "cce.knowledgemeta/v1",
    }  # fmt: skip
    env.seed(
        {
            "hash/2.3/aaa__one/1111111.cce": b"AA\n",
            "hash/2.3/aaa__one/refs/main": b"1111111\n",
            "knowledge/v1/internal-tickets/9f1c2a3b4c5d6e7f.cck": b"NEWCORPUS\n",
            "knowledge/v1/internal-tickets/0000000011111111.cck": b"OLD\n",
            "knowledge/v1/internal-tickets/current": b"9f1c2a3b4c5d6e7f\n",
            "knowledge/v1/internal-tickets/corpus.json": (
                json.dumps(meta, indent=2, sort_keys=True) + "\n"
            ).encode(),
            "knowledge/v1/runbooks/aaaabbbbccccdddd.cck": b"R\n",
        }
    )
    rc, out, _ = cli(capsys, "sync", "list", "--remote", env.url)
    assert rc == 0
    assert out == (
        f"remote        : {env.url}\n\n"
        "repo_id   latest   artifacts  bytes\n"
        "aaa__one  1111111          1      3\n\n"
        "total         : 1 repo, 1 artifact, 3 bytes\n\n"
        "knowledge:\n"
        "corpus_id         current           snapshots  bytes  data as-of\n"
        "internal-tickets  9f1c2a3b4c5d6e7f          2     14  2026-07-01T09:00:00Z\n"
        "runbooks          -                         1      2  -\n"
    )
    rc, out, _ = cli(capsys, "sync", "list", "--remote", env.url, "--json")
    expected = (
        '{\n  "knowledge": [\n    {\n      "bytes": 14,\n      "corpus_id": "internal-tickets",\n'
        '      "current": "9f1c2a3b4c5d6e7f",\n      "data_as_of": "2026-07-01T09:00:00Z",\n'
        '      "pushed_at": "2026-07-08T03:00:00Z",\n      "snapshots": 2\n    },\n    {\n'
        '      "bytes": 2,\n      "corpus_id": "runbooks",\n      "current": null,\n'
        '      "data_as_of": null,\n      "pushed_at": null,\n      "snapshots": 1\n    }\n  ],\n'
        f'  "remote": "{env.url}",\n  "repos": [\n    {{\n      "artifacts": 1,\n      "bytes": 3,\n'
        '      "latest_sha": "1111111",\n      "repo_id": "aaa__one"\n    }\n  ],\n'
        '  "schema": "cce.synclist/v1"\n}\n'
    )
    assert out == expected


def test_empty_cache_listing(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(capsys, "sync", "list", "--remote", sync_env.url)
    assert (
        rc == 0
        and out
        == f"remote        : {sync_env.url}\n\nThe cache is empty — nothing has been pushed yet.\n"
    )


def _push(
    env: SyncEnv, capsys: pytest.CaptureFixture[str], root: Path, *extra: str
) -> tuple[int, str, str]:
    return push_cli(env, capsys, root, *extra)


def test_shrink_guard_refuses_and_leaves_remote_untouched(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1", "kn:2", "kn:3"]))
    assert _push(env, capsys, root)[0] == 0
    before = refs(env.bare)
    index(root, feed(["kn:2"]))
    rc, out, err = _push(env, capsys, root)
    assert rc == 1 and out == ""
    assert err.startswith("error: Corpus kn — outgoing ")
    assert "  records : 1 local · 3 remote\n" in err
    assert "  removed : 2 — kn:1, kn:3\n" in err
    assert (
        "refusing to push: 2 records live on the remote would be dropped (the `removed` list above). Pass --force to shrink corpus kn, or --dry-run to inspect without pushing."
        in err
    )
    assert refs(env.bare) == before
    # --force is the intentional shrink.
    rc, out, err = _push(env, capsys, root, "--force")
    assert rc == 0 and refs(env.bare) != before, err


def test_dry_run_diff_and_first_publish(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1", "kn:2"]))
    rc, out, _ = _push(env, capsys, root, "--dry-run")
    snap1 = ingest_feed(feed(["kn:1", "kn:2"])).snapshot
    assert rc == 0 and out == (
        f"Dry-run: corpus kn@{snap1} — no remote `current` pointer; this would be the first publish "
        "(2 records · 2 chunks).\nNothing pushed (--dry-run).\n"
    )
    assert refs(env.bare) == ""  # nothing published, not even .gitattributes
    assert _push(env, capsys, root)[0] == 0
    before = refs(env.bare)
    raw = feed([("kn:1", "Changed body."), "kn:3"])
    index(root, raw)
    rc, out, _ = _push(env, capsys, root, "--dry-run")
    assert rc == 0
    assert out == (
        f"Corpus kn — outgoing {ingest_feed(raw).snapshot} vs remote current {snap1}\n"
        "  records : 2 local · 2 remote\n  added   : 1 — kn:3\n  removed : 1 — kn:2\n"
        "  changed : 1 — kn:1\nNothing pushed (--dry-run).\n"
    )
    assert refs(env.bare) == before
    rc, out, _ = _push(env, capsys, root, "--dry-run", "--json")
    doc = json.loads(out)
    assert (doc["added"], doc["removed"], doc["changed"], doc["published"]) == (
        ["kn:3"],
        ["kn:2"],
        ["kn:1"],
        False,
    )


def test_same_snapshot_different_content(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    body = "\n\n".join(f"## Part {i}\n\n" + " ".join(f"w{j}" for j in range(12)) for i in range(6))
    raw = feed([("kn:1", body)])
    save(root, ingest_feed(raw, budget=400))
    assert _push(env, capsys, root)[0] == 0
    rc, out, _ = _push(env, capsys, root, "--dry-run")
    assert "the remote `current` already names this snapshot" in out
    save(root, ingest_feed(raw, budget=30))
    rc, _, err = _push(env, capsys, root)
    assert (
        rc == 1
        and "is already published with DIFFERENT content" in err
        and "Pass --force to overwrite" in err
    )
    rc, out, _ = _push(env, capsys, root, "--dry-run")
    assert (
        rc == 0
        and out.startswith("Dry-run: corpus kn@")
        and out.endswith("A real `--force` push would overwrite it.\nNothing pushed (--dry-run).\n")
    )
    assert _push(env, capsys, root, "--force")[0] == 0


def test_retention_keep_last_two(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = sync_env
    root = env.root("p")
    (root / ".cce").mkdir()
    (root / ".cce" / "config").write_text(
        "knowledge:\n  sync:\n    corpus_id: kn\n    retention: keep-last-2\n"
    )
    snaps = []
    for i, ids in enumerate([["a"], ["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]]):
        snaps.append(index(root, feed(ids)))
        rc, out, err = cli(capsys, "knowledge", "push", "--remote", env.url, "--dir", str(root))
        assert rc == 0, err
        if i >= 2:
            assert "  retention  : pruned 1 snapshot (keep-last-2)\n" in out
    left = [k for k in bare_ls(env.bare, "knowledge/v1/kn") if k.endswith(".cck")]
    assert sorted(left) == sorted(f"knowledge/v1/kn/{s}.cck" for s in snaps[2:])
    assert bare_file(env.bare, "knowledge/v1/kn/current") == f"{snaps[3]}\n".encode()
    assert bare_file(env.bare, "knowledge/v1/kn/corpus.json") is not None


def test_bad_corpus_ids_refused_before_any_remote_work(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["x"]))
    for bad in ("..", ".", "", "has/slash", "emoji✨"):
        for cmd in ("push", "pull"):
            rc, _, err = cli(
                capsys, "knowledge", cmd, "--corpus", bad, "--remote", env.url, "--dir", str(root)
            )
            assert rc == 1
            assert err == (
                f"error: invalid corpus_id `{bad}`: must be non-empty, charset [A-Za-z0-9._-], and a single "
                "path segment — `.` and `..` are rejected (it is a path segment on the cache, so a "
                "traversal token would escape the corpus namespace)\n"
            )
    assert not (env.tmp / "home-a" / "sync").exists()  # never cloned
    rc, _, err = cli(
        capsys,
        "knowledge",
        "pull",
        "--corpus",
        "ok",
        "--snapshot",
        "../../x",
        "--remote",
        env.url,
        "--dir",
        str(root),
    )
    assert rc == 1 and "invalid snapshot id" in err


def test_unreachable_remote_is_clean_and_local_state_untouched(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["x"]))
    before = store_files(root)
    gone = (env.tmp / "no-such.git").as_uri()
    for cmd in (
        ["knowledge", "push", "--corpus", "c"],
        ["knowledge", "pull", "--corpus", "c"],
        ["sync", "list"],
    ):
        rc, out, err = cli(capsys, *cmd, "--remote", gone, "--dir", str(root))
        assert rc == 1 and out == ""
        assert err.startswith(f"error: could not clone remote {gone}: git clone --quiet {gone} ")
        assert "Traceback" not in err
    assert store_files(root) == before
    rc, _, err = cli(capsys, "knowledge", "push", "--corpus", "c", "--dir", str(root))
    assert rc == 1 and "no sync remote configured" in err


def test_corrupt_pointer_and_flipped_artifact(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    prod = _push_fixture(env, capsys)
    cons = env.root("c")
    index(cons, feed(["local"]))
    before = store_files(cons)

    # Corrupt `current`: names a snapshot that does not exist.
    env.seed({"knowledge/v1/fixture/current": b"deadbeefdeadbeef\n"})
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons)
    )
    assert (
        rc == 1
        and err
        == "error: cache miss: knowledge/v1/fixture/deadbeefdeadbeef.cck not found on the remote\n"
    )
    rc, _, err = cli(
        capsys, "knowledge", "push", "--corpus", "fixture", "--remote", env.url, "--dir", str(prod)
    )
    assert rc == 1 and err.startswith(
        "error: push guard: could not verify the remote's current snapshot (fixture@deadbeefdeadbeef) — cache miss"
    )
    assert err.endswith(
        "Refusing to replace a corpus the guard cannot read. Pass --force to push without the guard.\n"
    )

    # A flipped byte in the published artifact (committed as a plain blob).
    data = bytearray((prod / ".cce/knowledge" / f"{SNAP}.json").read_bytes())
    from cce_knowledge.store.snapshots import loads
    from cce_knowledge.sync.cck import export_cck

    art = bytearray(export_cck(loads(bytes(data)), "fixture").data)
    art[art.index(b"Repeated")] ^= 0x20
    env.seed(
        {
            KEY: bytes(art),
            "knowledge/v1/fixture/current": f"{SNAP}\n".encode(),
            ".gitattributes": None,
        }
    )
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 1 and err.startswith(
        f"error: {KEY}: checksum mismatch: manifest says {CHECKSUM}, recomputed "
    )
    assert store_files(cons) == before


def test_pull_guards_and_usage(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = sync_env
    _push_fixture(env, capsys)
    cons = env.root("c")
    rc, _, _ = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 0
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "other", "--remote", env.url, "--dir", str(cons)
    )
    # Not in the cache, which holds another: named, rather than "has anything been pushed?"
    assert rc == 1 and err == (
        "error: corpus `other` is not in the cache, which holds (nearest first): fixture — "
        "pass one of them as --corpus (`cce sync list` shows them all)\n"
    )
    rc, _, _ = cli(
        capsys,
        "knowledge",
        "push",
        "--corpus",
        "other",
        "--remote",
        env.url,
        "--dir",
        str(env.root("producer")),
    )
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "other", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 1 and "came from corpus `fixture` but you are pulling `other`. Pass --force" in err
    rc, _, _ = cli(
        capsys,
        "knowledge",
        "pull",
        "--corpus",
        "other",
        "--force",
        "--remote",
        env.url,
        "--dir",
        str(cons),
    )
    assert rc == 0
    (cons / ".cce/knowledge/synced.json").write_text("{")
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "other", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 1 and "is unreadable/corrupt" in err
    rc, _, _ = cli(capsys, "knowledge", "pull", "--latest", "--snapshot", SNAP, "--dir", str(cons))
    assert rc == 2
    rc, out, _ = cli(
        capsys,
        "knowledge",
        "pull",
        "--corpus",
        "fixture",
        "--snapshot",
        SNAP,
        "--force",
        "--remote",
        env.url,
        "--dir",
        str(cons),
    )
    assert rc == 0 and out.startswith(f"Pulled corpus fixture@{SNAP}")


def test_plain_git_cache_without_lfs(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = sync_env
    prod = env.root("producer")
    rc, out, err = cli(capsys, "sync", "init", "--remote", env.url, "--no-lfs", "--dir", str(prod))
    assert rc == 0, err
    assert "  git-LFS       : disabled\n" in out
    assert "lfs: false" in (prod / ".cce" / "config").read_text()
    index(prod, CURATED.read_bytes())
    rc, out, err = cli(capsys, "knowledge", "push", "--corpus", "fixture", "--dir", str(prod))
    assert rc == 0, err
    assert bare_file(env.bare, ".gitattributes") is None
    blob = bare_file(env.bare, KEY) or b""
    assert len(blob) == 6759 and hashlib.sha256(blob).hexdigest() == (
        "1f3f81ddf40f563ce24e4b608e025fb0c03d7b907479f383d2f63cc68dbcd706"
    )
    rc, out, _ = cli(capsys, "sync", "list", "--dir", str(prod))
    assert rc == 0 and f"fixture    {SNAP}          1   6759  2026-02-01T10:00:00Z\n" in out


def test_remote_pointer_lookup_never_hangs_on_a_busy_clone(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    from cce_knowledge.sync.clone import open_cache
    from cce_knowledge.sync.remote import make_remote

    _push_fixture(sync_env, capsys)
    with open_cache(make_remote(sync_env.url)):
        assert read_remote_current(sync_env.url, "fixture", lock_timeout=0.2).current is None
    assert read_remote_current(sync_env.url, "fixture").current == SNAP
    assert read_remote_current(sync_env.url, "..").current is None
    assert read_remote_current((sync_env.tmp / "gone.git").as_uri(), "fixture").current is None


def test_unchanged_republish_refreshes_metadata_and_keeps_the_artifact(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = sync_env
    prod = _push_fixture(env, capsys)
    pointer = bare_file(env.bare, KEY)
    meta = bare_file(env.bare, "knowledge/v1/fixture/corpus.json")
    # A second later, the same store again: the guard finds it unchanged.
    import cce_knowledge.sync.push as push_mod

    monkeypatch.setattr(push_mod, "utc_now", lambda: "2099-01-01T00:00:00Z")
    rc, out, err = cli(
        capsys, "knowledge", "push", "--corpus", "fixture", "--remote", env.url, "--dir", str(prod)
    )
    assert rc == 0, err
    assert "pushed at  : 2099-01-01T00:00:00Z" in out
    new_meta = bare_file(env.bare, "knowledge/v1/fixture/corpus.json") or b""
    assert new_meta != meta and b'"pushed_at": "2099-01-01T00:00:00Z"' in new_meta
    # The artifact's pointer blob is untouched (not re-added) and still pulls.
    assert bare_file(env.bare, KEY) == pointer
    changed = subprocess.run(
        ["git", "-C", str(env.bare), "diff", "--name-only", "main~1", "main"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert changed == ["knowledge/v1/fixture/corpus.json"]
    subject = subprocess.run(
        ["git", "-C", str(env.bare), "log", "-1", "--format=%s", "main"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert subject == f"cce sync: re-publish fixture@{SNAP} unchanged (corpus.json refreshed)\n"
    env.home("home-consumer")
    cons = env.root("consumer")
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 0, err
    assert hashlib.sha256((cons / ".cce/knowledge" / f"{SNAP}.json").read_bytes()).hexdigest() == (
        STORE_SHA
    )


def test_sync_init_derives_repo_id_from_the_projects_origin(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    import git

    env = sync_env
    prod = env.root("project")
    repo = git.Repo.init(prod)
    repo.create_remote("origin", "https://x-access-token:s3cr3t-t0ken@github.com/acme/billing.git")
    rc, out, err = cli(capsys, "sync", "init", "--remote", env.url, "--no-lfs", "--dir", str(prod))
    assert rc == 0, err
    assert "  repo_id       : github.com__acme__billing\n" in out
    cfg = (prod / ".cce" / "config").read_text()
    assert "repo_id: github.com__acme__billing" in cfg
    assert "s3cr3t" not in cfg + out + err
    # Set once, it is kept: a later init does not re-derive it.
    repo.delete_remote("origin")
    repo.create_remote("origin", "git@example.org:other/thing.git")
    rc, out, _ = cli(capsys, "sync", "init", "--remote", env.url, "--no-lfs", "--dir", str(prod))
    assert rc == 0 and "  repo_id       : github.com__acme__billing\n" in out
    # No git repository (or no origin): left unset, as before.
    plain = env.root("plain")
    rc, out, _ = cli(capsys, "sync", "init", "--remote", env.url, "--no-lfs", "--dir", str(plain))
    assert rc == 0 and "  repo_id       : (resolved from git origin at push time)\n" in out


@pytest.mark.parametrize(
    ("origin", "repo_id"),
    [
        ("https://github.com/acme/billing.git", "github.com__acme__billing"),
        ("git@github.com:acme/billing.git", "github.com__acme__billing"),
        ("ssh://git@github.com/acme/billing", "github.com__acme__billing"),
        ("https://user:tok@gitlab.example.com/g/sub/proj.git", "gitlab.example.com__g__sub__proj"),
        ("acme/bill ing", "acme__bill_ing"),
        ("/srv/git/cache.git", "srv__git__cache"),
        ("  https://github.com/a/b  ", "github.com__a__b"),
    ],
)
def test_normalize_repo_id(origin: str, repo_id: str) -> None:
    from cce_knowledge.sync.repo_id import normalize_repo_id

    assert normalize_repo_id(origin) == repo_id


def test_sync_init_commits_both_lfs_patterns_in_one_commit(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    prod = env.root("project")
    rc, out, err = cli(capsys, "sync", "init", "--remote", env.url, "--dir", str(prod))
    assert rc == 0, err
    assert "  git-LFS       : enabled (*.cck, *.cce)\n" in out
    attrs = bare_file(env.bare, ".gitattributes")
    assert attrs == (
        b"*.cck filter=lfs diff=lfs merge=lfs -text\n*.cce filter=lfs diff=lfs merge=lfs -text\n"
    )
    assert _commits(env.bare) == 1
    # the first push adds no second attribute commit: one publish commit only
    index(prod, CURATED.read_bytes())
    rc, _, err = cli(capsys, "knowledge", "push", "--corpus", "fixture", "--dir", str(prod))
    assert rc == 0, err
    assert bare_file(env.bare, ".gitattributes") == attrs
    assert _commits(env.bare) == 2
    # again: nothing to add, no commit
    rc, _, _ = cli(capsys, "sync", "init", "--remote", env.url, "--dir", str(prod))
    assert rc == 0 and _commits(env.bare) == 2


def _commits(bare: Path) -> int:
    out = subprocess.run(
        ["git", "-C", str(bare), "rev-list", "--count", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out)


def test_sync_init_leaves_config_unchanged_when_the_remote_fails(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    prod = sync_env.root("project")
    cfg = prod / ".cce" / "config"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("# mine\nknowledge:\n  enabled: true\n")
    before = cfg.read_bytes()
    missing = (sync_env.tmp / "no-such-cache.git").as_uri()
    rc, out, err = cli(capsys, "sync", "init", "--remote", missing, "--dir", str(prod))
    assert rc == 1 and out == "" and err.startswith("error: ")
    assert cfg.read_bytes() == before
    # and a project with no config gets none
    bare_root = sync_env.root("fresh")
    rc, _, _ = cli(capsys, "sync", "init", "--remote", missing, "--dir", str(bare_root))
    assert rc == 1 and not (bare_root / ".cce" / "config").exists()


def test_skip_unchanged_publishes_nothing_and_force_still_publishes(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = sync_env
    prod = _push_fixture(env, capsys)
    import cce_knowledge.sync.push as push_mod

    # A later run: a re-publish would commit a new pushed_at.
    monkeypatch.setattr(push_mod, "utc_now", lambda: "2099-01-01T00:00:00Z")
    before = refs(env.bare)
    base = ["knowledge", "push", "--corpus", "fixture", "--remote", env.url, "--dir", str(prod)]
    rc, out, err = cli(capsys, *base, "--skip-unchanged", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["published"], doc["unchanged_skipped"], doc["guard"]) == (False, True, "unchanged")
    assert (doc["snapshot"], doc["remote_snapshot"], doc["pushed_at"]) == (SNAP, SNAP, None)
    assert "nothing pushed (--skip-unchanged)" in doc["report"]
    assert refs(env.bare) == before  # no cache commit
    rc, out, err = cli(capsys, *base, "--skip-unchanged")
    assert rc == 0 and out.startswith(f"Corpus fixture@{SNAP} — the remote `current`"), err
    assert refs(env.bare) == before
    # --force skips the guard, so it re-publishes even with --skip-unchanged.
    rc, out, err = cli(capsys, *base, "--skip-unchanged", "--force", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["published"], doc["unchanged_skipped"], doc["guard"]) == (True, False, "skipped")
    assert refs(env.bare) != before


def test_push_json_names_the_remote_snapshot_and_retention(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    (root / ".cce").mkdir(parents=True, exist_ok=True)
    (root / ".cce" / "config").write_text("knowledge:\n  sync:\n    retention: keep-last-1\n")
    index(root, feed(["kn:1"]))
    rc, out, err = _push(env, capsys, root, "--json")
    assert rc == 0, err
    first = json.loads(out)
    assert (first["guard"], first["remote_snapshot"], first["retention"]) == (
        "first-publish",
        "",
        "keep-last-1",
    )
    index(root, feed(["kn:1", "kn:2"]))
    rc, out, err = _push(env, capsys, root, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["remote_snapshot"] == first["snapshot"]
    assert doc["pruned"] == [first["key"]]


def _path_without_git_lfs(tmp: Path) -> str:
    """A PATH with git but no git-lfs (a machine that never installed it)."""
    import shutil

    bin_dir = tmp / "bin-no-lfs"
    bin_dir.mkdir()
    git_exe = shutil.which("git")
    assert git_exe is not None
    (bin_dir / "git").symlink_to(git_exe)
    return str(bin_dir)


def test_push_without_git_lfs_refuses_and_no_lfs_publishes_a_plain_blob(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    prod = env.root("producer")
    index(prod, CURATED.read_bytes())
    before = refs(env.bare)
    env.monkeypatch.setenv("PATH", _path_without_git_lfs(env.tmp))
    push = ("knowledge", "push", "--corpus", "fixture", "--remote", env.url, "--dir", str(prod))
    rc, out, err = cli(capsys, *push)
    assert rc == 1 and out == ""
    assert err.startswith("error: git-lfs is not installed") and "--no-lfs" in err
    assert refs(env.bare) == before  # nothing committed
    # the dry run needs no git-lfs: it writes nothing
    rc, out, err = cli(capsys, *push, "--dry-run")
    assert rc == 0, err
    # on purpose: the artifact is a plain git blob, and no LFS attribute is committed
    rc, out, err = cli(capsys, *push, "--no-lfs")
    assert rc == 0, err
    blob = bare_file(env.bare, KEY) or b""
    assert not blob.startswith(b"version https://git-lfs") and len(blob) == 6759
    assert bare_file(env.bare, ".gitattributes") is None


def test_status_after_pull_with_remote_shows_where_it_came_from(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    _push_fixture(env, capsys)
    env.home("home-consumer")
    cons = env.root("consumer")  # no .cce/config: the remote is only on the command line
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 0, err
    rc, out, err = cli(capsys, "knowledge", "status", "--dir", str(cons), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["remote"], doc["remote_current"], doc["behind_remote"]) == (env.url, SNAP, False)
    rc, out, _ = cli(capsys, "knowledge", "status", "--dir", str(cons))
    assert f"  remote         : {env.url}\n" in out and "  behind remote  : no\n" in out
    # the marker's bytes stay the reference's: the remote is kept beside it
    marker = json.loads((cons / ".cce/knowledge/synced.json").read_text())
    assert sorted(marker) == ["checksum", "corpus_id", "installed_sha256", "snapshot"]


def test_first_search_after_pull_needs_no_build(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cce_knowledge.retrieval import search_index as si
    from cce_knowledge.retrieval import search_index_status

    env = sync_env
    _push_fixture(env, capsys)
    env.home("home-consumer")
    cons = env.root("consumer")
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 0 and "search index: built in " in err, err
    assert search_index_status(cons) == "fresh"
    into = env.root("ws")
    rc, _, err = cli(capsys, "sync", "pull", "--all", "--into", str(into), "--remote", env.url)
    assert rc == 0 and "search index: built in " in err, err
    assert search_index_status(into) == "fresh"

    def no_build(*_a: object, **_k: object) -> None:
        raise AssertionError("the search built the index: pull should have")

    monkeypatch.setattr(si, "build_search_index", no_build)
    monkeypatch.setattr(si, "build_bytes", no_build)
    for root in (cons, into):
        rc, out, err = cli(capsys, "knowledge", "search", "retry", "--dir", str(root))
        assert (rc, err) == (0, ""), err
    # Up to date, index present: `sync pull --all` leaves it alone.
    rc, out, err = cli(capsys, "sync", "pull", "--all", "--into", str(into), "--remote", env.url)
    assert rc == 0 and "up-to-date" in out and "search index" not in err


def test_progress_lines_for_push_pull_verify_and_ask_keep_json_pure(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # CI mode with no pacing: every step reports, on stderr only.
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("CCE_PROGRESS_INTERVAL", "0")
    env = sync_env
    prod = env.root("producer")
    index(prod, CURATED.read_bytes())
    rc, out, err = cli(
        capsys, "knowledge", "push", "--corpus", "fixture", "--remote", env.url,
        "--dir", str(prod), "--json",
    )  # fmt: skip
    assert rc == 0, err
    assert json.loads(out)["published"] is True
    for step in (
        "push: export: finished, took",
        "push: commit: finished, took",
        "push: LFS upload: finished, took",
    ):
        assert step in err, err
    assert "\r" not in err
    cons = env.root("consumer")
    rc, out, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url,
        "--dir", str(cons), "--json",
    )  # fmt: skip
    assert rc == 0, err
    assert json.loads(out)["snapshot"] == SNAP
    for step in (
        "pull: fetch: finished, took",
        "pull: verify + render: ",
        "search index: 2/2 chunks",
    ):
        assert step in err, err
    rc, out, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(cons))
    assert rc == 0 and out.startswith("verify OK") and "verify: 8.6 KiB/8.6 KiB (100%), " in err
    suite = TESTS / "vectors" / "ask" / "ask.jsonl"
    rc, out, err = cli(capsys, "knowledge", "ask", str(suite), "--json")
    assert "ask: 1/" in err and "cases (" in err
    json.loads(out)
    # -q: nothing on stderr at all.
    rc, out, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(cons), "-q")
    assert (rc, err) == (0, "")
    rc, out, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fixture", "--remote", env.url,
        "--dir", str(cons), "-q", "--force",
    )  # fmt: skip
    assert (rc, err) == (0, "")
