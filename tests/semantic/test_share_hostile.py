"""A hostile cache writer's vectors (issue 25, point 6): refused on install, streamed,
before a large file is read; the pulled store stays installed, stderr says why, and
`--ranking hybrid` falls back with its note. A real bare cache, real pulls."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import pytest

from cce_knowledge.store.snapshots import read_current
from cce_knowledge.store.vectors import KEY_BYTES, Meta, VectorFile, encode, vectors_path
from cce_knowledge.sync.vector_share import vectors_key
from tests.helpers.embed_server import EmbedServer
from tests.helpers.sync import bare_file, feed
from tests.helpers.sync_env import SyncEnv, cli

from .conftest import FEED, write_config

pytestmark = pytest.mark.slow  # a real bare cache, real pulls

MODEL = "tiny-ngrams"
DOWN = "http://127.0.0.1:9"  # the consumer's provider: unreachable, so nothing re-embeds


def _publish(env: SyncEnv, server: EmbedServer, capsys: pytest.CaptureFixture[str]) -> Path:
    root = env.root("builder")
    (root / ".cce").mkdir(exist_ok=True)
    (root / ".cce" / "config").write_text(
        f"knowledge:\n  sync:\n    corpus_id: kn\n    remote: {env.url}\n"
        f"  semantic:\n    provider: ollama\n    url: {server.url}\n    model: {MODEL}\n",
        encoding="utf-8",
    )
    rc, _o, err = cli(capsys, "knowledge", "index", str(FEED), "--dir", str(root))
    assert rc == 0, err
    rc, _o, err = cli(capsys, "knowledge", "push", "--dir", str(root), "--no-lfs")
    assert rc == 0, err
    return root


def _file(meta: Meta, keys: bytes, rows: np.ndarray) -> bytes:
    return b"".join(encode(meta, keys, rows))


def _variant(good: VectorFile, kind: str) -> bytes:
    m = good.meta
    keys = bytes(good.keys)
    rows = np.array(good.matrix, dtype="<f4")
    if kind == "3m-rows":
        n = 3_000_000
        return _file(
            Meta(m.provider, m.model, 1, n, m.snapshot, m.layout),
            bytes(n * KEY_BYTES),
            np.zeros((n, 1), dtype="<f4"),
        )
    if kind == "nan":
        rows[3] = np.nan
    elif kind == "norm-1e30":
        rows[3] *= np.float32(1e30)
    elif kind == "dim-16384":
        wide = np.zeros((m.count, 16_384), dtype="<f4")
        wide[:, 0] = 1.0
        return _file(Meta(m.provider, m.model, 16_384, m.count, m.snapshot, m.layout), keys, wide)
    return _file(m, keys, rows)


def _pull(env: SyncEnv, capsys: pytest.CaptureFixture[str], cons: Path) -> str:
    rc, _o, err = cli(
        capsys, "knowledge", "pull", "--dir", str(cons), "--corpus", "kn", "--remote", env.url
    )
    assert rc == 0, err
    return err


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("3m-rows", "more than 11 chunks can take"),
        ("nan", "row 4 has a vector that is not finite"),
        ("norm-1e30", "row 4 has a vector that is not finite and of unit length"),
    ],
)
def test_hostile_vectors_are_refused_and_hybrid_falls_back(
    sync_env: SyncEnv,
    server: EmbedServer,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    why: str,
) -> None:
    builder = _publish(sync_env, server, capsys)
    snap = read_current(builder)
    key = vectors_key("kn", snap, MODEL)
    good = VectorFile(bare_file(sync_env.bare, key) or b"", verify=True)
    assert good.meta.count == 11
    sync_env.seed({key: _variant(good, kind)})

    sync_env.home("home-b")
    cons = sync_env.root("consumer")
    write_config(cons, "ollama", DOWN)
    t0 = time.monotonic()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    err = _pull(sync_env, capsys, cons)
    took = time.monotonic() - t0
    grew_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
    assert "published vectors refused" in err and why in err, err
    assert read_current(cons) == snap  # the store is installed all the same
    assert not vectors_path(cons, snap, MODEL).exists()
    assert not [p for p in vectors_path(cons, snap, MODEL).parent.glob(".*tmp*")]
    assert took < 20 and grew_kb < 100_000  # never reads the 108 MB file
    rc, _o, err = cli(
        capsys, "knowledge", "search", "charged twice", "--dir", str(cons), "--ranking", "hybrid"
    )
    assert rc == 0 and "hybrid ranking unavailable" in err


def test_a_dimension_this_machine_contradicts_is_refused(
    sync_env: SyncEnv, server: EmbedServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    builder = _publish(sync_env, server, capsys)
    sync_env.home("home-b")
    cons = sync_env.root("consumer")
    write_config(cons, "ollama", DOWN)
    assert "installed published vectors: 11/11" in _pull(sync_env, capsys, cons)
    old = read_current(cons)

    # A new snapshot whose published vectors claim 16,384 dimensions.
    sync_env.home("home-a")
    feed2 = tmp_path / "feed2.jsonl"
    feed2.write_bytes(FEED.read_bytes() + feed([("z:1", "Shard the ledger by tenant.")]))
    assert cli(capsys, "knowledge", "index", str(feed2), "--dir", str(builder))[0] == 0
    assert cli(capsys, "knowledge", "push", "--dir", str(builder), "--no-lfs")[0] == 0
    snap = read_current(builder)
    assert snap != old
    key = vectors_key("kn", snap, MODEL)
    good = VectorFile(bare_file(sync_env.bare, key) or b"", verify=True)
    sync_env.seed({key: _variant(good, "dim-16384")})

    sync_env.home("home-b")
    err = _pull(sync_env, capsys, cons)
    assert "published vectors refused" in err and "16384 dimensions" in err, err
    assert "answers 64 here" in err
    assert read_current(cons) == snap
    # The embed step reused this machine's own vectors of the unchanged chunks instead.
    assert VectorFile.open(vectors_path(cons, snap, MODEL)).meta.dim == 64


def test_an_lfs_pointer_claiming_a_huge_file_is_refused_unread(
    sync_env: SyncEnv, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    builder = _publish(sync_env, server, capsys)
    snap = read_current(builder)
    key = vectors_key("kn", snap, MODEL)
    pointer = (
        "version https://git-lfs.github.com/spec/v1\n"
        f"oid sha256:{'ab' * 32}\nsize {3_000_000 * (32 + 4 * 384)}\n"
    ).encode()
    sync_env.seed({key: pointer})
    sync_env.home("home-b")
    cons = sync_env.root("consumer")
    write_config(cons, "ollama", DOWN)
    err = _pull(sync_env, capsys, cons)
    assert "published vectors refused" in err and "more than 11 chunks can take" in err
    assert read_current(cons) == snap
