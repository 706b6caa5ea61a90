"""Vectors shared through a real git cache: push beside the artifact, pull when the model
matches, pruned with their snapshot; the `.cck` and store bytes never change."""

from __future__ import annotations

from pathlib import Path

import pytest

from cce_knowledge.store.snapshots import read_current
from cce_knowledge.store.vectors import VectorFile, vectors_path
from cce_knowledge.sync.vector_share import vectors_key
from tests.helpers.embed_server import EmbedServer
from tests.helpers.sync import bare_file, bare_ls, feed, knowledge_files
from tests.helpers.sync_env import SyncEnv, cli

from .conftest import write_config

MODEL = "tiny-ngrams"


def _builder(env: SyncEnv, name: str, semantic_url: str | None, raw: bytes) -> Path:
    root = env.root(name)
    (root / ".cce").mkdir(exist_ok=True)
    sem = ""
    if semantic_url:
        sem = f"  semantic:\n    provider: ollama\n    url: {semantic_url}\n    model: {MODEL}\n"
    (root / ".cce" / "config").write_text(
        f"knowledge:\n  sync:\n    corpus_id: kn\n    remote: {env.url}\n    retention: keep-last-1\n{sem}",
        encoding="utf-8",
    )
    (root / "feed.jsonl").write_bytes(raw)
    return root


def _indexed(
    env: SyncEnv,
    capsys: pytest.CaptureFixture[str],
    semantic_url: str | None,
    raw: bytes,
    name: str = "sem",
) -> tuple[Path, str]:
    """A builder that indexed `raw` (embedding it when `semantic_url` is given), and the
    snapshot."""
    root = _builder(env, name, semantic_url, raw)
    assert cli(capsys, "knowledge", "index", str(root / "feed.jsonl"), "--dir", str(root))[0] == 0
    return root, read_current(root)


def _pull(
    env: SyncEnv, capsys: pytest.CaptureFixture[str], name: str, url: str, model: str = MODEL
) -> tuple[Path, int, str]:
    """A consumer on another machine (HOME) pulling corpus kn with `model` at `url`
    configured: its root, exit status and stderr."""
    env.home("home-b")
    cons = env.root(name)
    write_config(cons, "ollama", url, model=model)
    args = ("knowledge", "pull", "--dir", str(cons), "--corpus", "kn", "--remote", env.url)
    rc, _o, err = cli(capsys, *args)
    return cons, rc, err


def test_push_pull_share_vectors_and_keep_cck_identical(
    sync_env: SyncEnv, server: EmbedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    raw = feed(
        [("a:1", "Retry with backoff and jitter."), ("a:2", "Lock accounts after failures.")]
    )
    sem, snap = _indexed(sync_env, capsys, server.url, raw)
    rc, out, err = cli(capsys, "knowledge", "push", "--dir", str(sem))
    assert rc == 0, err
    assert f"vectors    : {MODEL}" in out
    key = vectors_key("kn", snap, MODEL)
    assert key in bare_ls(sync_env.bare, "knowledge/v1/kn/")
    cck_with = bare_file(sync_env.bare, f"knowledge/v1/kn/{snap}.cck")
    meta_keys = set(bare_ls(sync_env.bare, "knowledge/v1/kn/"))
    assert {
        f"knowledge/v1/kn/{snap}.cck",
        "knowledge/v1/kn/current",
        "knowledge/v1/kn/corpus.json",
    } < meta_keys

    # The same feed pushed by a builder without semantic gives the same .cck bytes.
    other = tmp_path / "cache2.git"
    from tests.helpers.sync import make_bare

    url2 = make_bare(other)
    plain = _builder(sync_env, "plain", None, raw)
    cfg = (plain / ".cce" / "config").read_text().replace(sync_env.url, url2)
    (plain / ".cce" / "config").write_text(cfg)
    assert cli(capsys, "knowledge", "index", str(plain / "feed.jsonl"), "--dir", str(plain))[0] == 0
    assert cli(capsys, "knowledge", "push", "--dir", str(plain))[0] == 0
    assert bare_file(other, f"knowledge/v1/kn/{snap}.cck") == cck_with
    assert not [k for k in bare_ls(other, "knowledge/v1/kn/") if k.endswith(".vec")]

    # A consumer with the same model gets the vectors, verified, and embeds nothing.
    n0 = len(server.requests)
    cons, rc, err = _pull(sync_env, capsys, "consumer", server.url)
    assert rc == 0, err
    assert "installed published vectors" in err
    assert len(server.requests) == n0  # nothing re-embedded
    got = VectorFile.open(vectors_path(cons, snap, MODEL), verify=True)
    assert got.meta.model == MODEL and got.present() == got.meta.count
    assert (cons / ".cce" / "knowledge" / f"{snap}.json").read_bytes() == (
        sem / ".cce" / "knowledge" / f"{snap}.json"
    ).read_bytes()

    # A consumer with another model fetches nothing and says why.
    cons2, rc, err = _pull(sync_env, capsys, "consumer2", "http://127.0.0.1:9", "other-model")
    assert rc == 0
    assert f"made with {MODEL}, not other-model: not fetched" in err
    assert not vectors_path(cons2, snap, "other-model").exists()

    # A new snapshot prunes the old one's artifact (keep-last-1) and its vectors with it.
    sync_env.home("home-a")
    raw2 = raw + feed([("a:3", "Rotate keys monthly.")])
    (sem / "feed.jsonl").write_bytes(raw2)
    assert cli(capsys, "knowledge", "index", str(sem / "feed.jsonl"), "--dir", str(sem))[0] == 0
    snap2 = read_current(sem)
    rc, _o, err = cli(capsys, "knowledge", "push", "--dir", str(sem))
    assert rc == 0, err
    names = bare_ls(sync_env.bare, "knowledge/v1/kn/")
    assert vectors_key("kn", snap2, MODEL) in names and key not in names
    assert f"knowledge/v1/kn/{snap}.cck" not in names
    # The listing counts artifacts only.
    rc, out, _e = cli(capsys, "sync", "list", "--remote", sync_env.url)
    assert rc == 0 and "kn" in out


def test_tampered_vectors_are_refused(
    sync_env: SyncEnv, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = feed([("a:1", "Retry with backoff and jitter.")])
    sem, snap = _indexed(sync_env, capsys, server.url, raw)
    assert cli(capsys, "knowledge", "push", "--dir", str(sem), "--no-lfs")[0] == 0
    key = vectors_key("kn", snap, MODEL)
    data = bytearray(bare_file(sync_env.bare, key) or b"")
    data[-1] ^= 0x01
    sync_env.seed({key: bytes(data)})
    cons, rc, err = _pull(sync_env, capsys, "consumer", "http://127.0.0.1:9")
    assert rc == 0
    # The flipped bit makes the last row's length wrong, seen before the checksum.
    assert "published vectors refused" in err and "row" in err
    assert not vectors_path(cons, snap, MODEL).exists()


def test_push_publishes_only_the_configured_models_vectors(
    sync_env: SyncEnv, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = feed([("a:1", "Retry with backoff and jitter."), ("a:2", "Rotate keys monthly.")])
    sem, snap = _indexed(sync_env, capsys, server.url, raw)
    # The builder switches models: the first model's file stays behind, complete.
    cfg_path = sem / ".cce" / "config"
    cfg_path.write_text(cfg_path.read_text().replace(f"model: {MODEL}", "model: newer-model"))
    assert cli(capsys, "knowledge", "embed", "--dir", str(sem))[0] == 0
    assert vectors_path(sem, snap, MODEL).exists()
    assert vectors_path(sem, snap, "newer-model").exists()
    rc, out, err = cli(capsys, "knowledge", "push", "--dir", str(sem), "--no-lfs")
    assert rc == 0, err
    assert "vectors    : newer-model" in out and MODEL not in out
    vecs = [k for k in bare_ls(sync_env.bare, "knowledge/v1/kn/") if k.endswith(".vec")]
    assert vecs == [vectors_key("kn", snap, "newer-model")]
    # The published file is the configured model's, byte for byte.
    assert bare_file(sync_env.bare, vecs[0]) == vectors_path(sem, snap, "newer-model").read_bytes()


def test_push_without_semantic_publishes_no_vectors(
    sync_env: SyncEnv, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = feed([("a:1", "Retry with backoff and jitter.")])
    sem, snap = _indexed(sync_env, capsys, server.url, raw)
    assert vectors_path(sem, snap, MODEL).exists()
    # Semantic retrieval turned off: the leftover vectors stay local.
    cfg_path = sem / ".cce" / "config"
    cfg_path.write_text(cfg_path.read_text().split("  semantic:")[0])
    rc, out, err = cli(capsys, "knowledge", "push", "--dir", str(sem), "--no-lfs")
    assert rc == 0, err
    assert "vectors" not in out
    assert not [k for k in bare_ls(sync_env.bare, "knowledge/v1/kn/") if k.endswith(".vec")]


def test_an_unchanged_pull_with_vectors_in_place_fetches_embeds_and_writes_nothing(
    sync_env: SyncEnv, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = feed([("a:1", "Retry with backoff and jitter."), ("a:2", "Rotate keys monthly.")])
    sem, snap = _indexed(sync_env, capsys, server.url, raw)
    assert cli(capsys, "knowledge", "push", "--dir", str(sem), "--no-lfs")[0] == 0
    cons, rc, err = _pull(sync_env, capsys, "consumer", server.url)
    assert rc == 0 and "installed published vectors" in err, err
    args = ("knowledge", "pull", "--dir", str(cons), "--corpus", "kn", "--remote", sync_env.url)
    before = knowledge_files(cons)
    n0 = len(server.requests)

    # Up to date: the vectors step decides in the library (the vectors are this
    # snapshot's, for this model): no fetch, no embedding request, no file written —
    # not the vectors, not their lock, not the run record.
    rc, out, err = cli(capsys, *args)
    assert rc == 0 and out.startswith(f"Up to date: corpus kn@{snap}"), err
    assert "vectors" not in err
    assert len(server.requests) == n0
    assert knowledge_files(cons) == before

    # A vectors file that no longer matches the store's texts is redone by the embed
    # step (the published one is this snapshot's: not fetched again).
    path = vectors_path(cons, snap, MODEL)
    data = bytearray(path.read_bytes())
    start = len(data) - 2 * VectorFile.open(path).meta.dim * 4 - 2 * 32
    data[start] ^= 0xFF  # the first row's key: its text is no longer the stored one's
    path.write_bytes(bytes(data))
    rc, _o, err = cli(capsys, *args)
    assert rc == 0, err
    assert len(server.requests) > n0  # the changed row is embedded again
    assert VectorFile.open(path, verify=True).present() == 2
