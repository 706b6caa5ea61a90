"""Embedding a store: providers, batching, caching, failures, and the store's bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.config.settings import SemanticSettings, load_settings
from cce_knowledge.core.errors import ConfigError
from cce_knowledge.semantic import build as B
from cce_knowledge.semantic.provider import MAX_BATCH
from cce_knowledge.store.snapshots import read_current
from cce_knowledge.store.vectors import VectorFile, list_files, vectors_path
from tests.helpers.embed_server import EmbedServer, embed_server, ngram_vector

from .conftest import FEED, index, write_config


def _rec(rid: str, title: str, body: str) -> str:
    return json.dumps({"id": rid, "title": title, "body": body, "source": "t"})


def _cfg(server: EmbedServer, provider: str = "ollama") -> SemanticSettings:
    return SemanticSettings(provider=provider, url=server.url, model="tiny-ngrams")


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_embed_every_chunk_then_nothing(indexed: Path, server: EmbedServer, provider: str) -> None:
    rep = B.embed_root(indexed, _cfg(server, provider))
    assert rep.total > 0 and rep.embedded == rep.total == rep.new
    assert rep.dim == 64 and rep.requests == len(server.requests) == 1
    assert server.requests[0]["path"] == (
        "/api/embed" if provider == "ollama" else "/v1/embeddings"
    )
    assert server.requests[0]["model"] == "tiny-ngrams"
    vf = VectorFile.open(vectors_path(indexed, read_current(indexed), "tiny-ngrams"), verify=True)
    assert vf.meta.provider == provider and vf.meta.dim == 64 and vf.meta.count == rep.total
    # Stored vectors are the provider's, normalised to unit length.
    first = server.requests[0]["input"][0]
    row = next(i for i in range(vf.meta.count) if vf.key(i) == B.text_key(first))
    v = ngram_vector(first)
    n = sum(x * x for x in v) ** 0.5
    assert [round(float(x), 5) for x in vf.matrix[row]] == [round(x / n, 5) for x in v]
    # A second run sends nothing.
    again = B.embed_root(indexed, _cfg(server, provider))
    assert again.requests == 0 and again.new == 0 and again.reused == rep.total
    assert len(server.requests) == 1


def test_batches_of_at_most_64(tmp_path: Path, server: EmbedServer) -> None:
    feed = tmp_path / "big.jsonl"
    lines = [
        _rec(f"r:{i}", f"Record {i}", f"Body of record {i} about topic {i % 7}.")
        for i in range(150)
    ]
    feed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    root = tmp_path / "r"
    assert index(root, feed) == 0
    rep = B.embed_root(root, _cfg(server))
    sizes = [len(r["input"]) for r in server.requests]
    assert max(sizes) <= MAX_BATCH and sum(sizes) == rep.new == 150 and len(sizes) == 3


def test_only_changed_chunks_are_embedded_again(tmp_path: Path, server: EmbedServer) -> None:
    root = tmp_path / "r"
    write_config(root, "ollama", server.url)
    assert index(root) == 0  # embeds at index time
    first = len(server.texts())
    assert first > 0
    old_snap = read_current(root)
    lines = FEED.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[1])
    rec["body"] += "\n\n## Update\n\nA brand new section about sharding.\n"
    lines[1] = json.dumps(rec)
    feed2 = tmp_path / "feed2.jsonl"
    feed2.write_text("\n".join(lines) + "\n", encoding="utf-8")
    server.requests.clear()
    assert index(root, feed2) == 0
    sent = server.texts()
    assert 1 <= len(sent) <= 3 and any("sharding" in t for t in sent)
    # The old snapshot's vectors went with its store.
    snaps = {s for s, _k, _p in list_files(root)}
    assert snaps == {read_current(root)} and old_snap not in snaps


def test_rejected_batch_is_skipped_and_the_rest_lands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = tmp_path / "f.jsonl"
    lines = [_rec(f"r:{i}", f"T{i}", f"text {i}") for i in range(130)]
    lines[70] = _rec("r:70", "T70", "POISON text")
    feed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    root = tmp_path / "r"
    assert index(root, feed) == 0
    with embed_server(reject_marker="POISON") as s:
        write_config(root, "openai", s.url)
        rc = main(["knowledge", "embed", "--dir", str(root)])
        err = capsys.readouterr().err
        assert rc == 1
        assert "batch 2" in err and "rejected and skipped" in err and "HTTP 400" in err
        vf = VectorFile.open(vectors_path(root, read_current(root), "tiny-ngrams"))
        assert vf.present() == 130 - 64  # batches 1 and 3 landed
        # doctor says how many, and that hybrid still ranks the others by their words.
        assert main(["doctor", "--dir", str(root)]) == 0
        out = capsys.readouterr().out
        assert "semantic vectors: 66/130 chunks embedded with tiny-ngrams" in out
        assert "by their words only" in out
        # Once the provider accepts it, only the rejected batch is sent again.
        s.reject_marker = None
        s.requests.clear()
        assert main(["knowledge", "embed", "--dir", str(root)]) == 0
        assert len(s.texts()) == 64
    assert VectorFile.open(vectors_path(root, read_current(root), "tiny-ngrams")).present() == 130


def test_unreachable_provider_does_not_fail_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "r"
    write_config(root, "ollama", "http://127.0.0.1:9")
    assert index(root) == 0
    err = capsys.readouterr().err
    assert "unreachable" in err and "cce knowledge embed" in err
    assert read_current(root)  # the store is there
    assert main(["knowledge", "embed", "--dir", str(root)]) == 1
    err = capsys.readouterr().err
    # `embed` itself does not tell the user to run `embed` to finish the job.
    assert "run `cce knowledge embed` again once that is fixed" in err
    assert "finishes the job" not in err


def test_rebuild_cut_short_keeps_the_previous_vectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = tmp_path / "f.jsonl"
    n = MAX_BATCH * 20  # more batches than a checkpoint
    feed.write_text("".join(_rec(f"r:{i}", f"T{i}", f"text {i}") + "\n" for i in range(n)))
    root = tmp_path / "r"
    assert index(root, feed) == 0
    with embed_server() as s:
        write_config(root, "ollama", s.url)
        assert main(["knowledge", "embed", "--dir", str(root)]) == 0
        path = vectors_path(root, read_current(root), "tiny-ngrams")
        before = path.read_bytes()
        # The provider answers 17 batches, one checkpoint's worth and more, then goes away.
        s.requests.clear()
        s.die_after = 17
        capsys.readouterr()
        assert main(["knowledge", "embed", "--dir", str(root), "--rebuild", "--json"]) == 1
        out, err = capsys.readouterr()
        assert path.read_bytes() == before  # not one vector of it lost
        rep = json.loads(out)
        assert len(s.requests) == 18 and rep["new"] == 17 * MAX_BATCH
        assert rep["kept_previous"] is True and rep["embedded"] == n
        assert "the previous vectors are kept" in err and "--rebuild` again" in err
        # Once the provider is back, the rebuild goes through and replaces the file.
        s.die_after = None
        assert main(["knowledge", "embed", "--dir", str(root), "--rebuild"]) == 0
        assert VectorFile.open(path).present() == n


def test_store_bytes_identical_with_and_without_semantic(
    tmp_path: Path, server: EmbedServer
) -> None:
    plain, sem = tmp_path / "plain", tmp_path / "sem"
    write_config(sem, "ollama", server.url)
    (plain / ".cce").mkdir(parents=True)
    (plain / ".cce" / "config").write_text("knowledge:\n  enabled: true\n", encoding="utf-8")
    assert index(plain) == 0 and index(sem) == 0
    assert server.requests  # the semantic root did embed
    snap = read_current(plain)
    assert snap == read_current(sem)
    a = (plain / ".cce" / "knowledge" / f"{snap}.json").read_bytes()
    b = (sem / ".cce" / "knowledge" / f"{snap}.json").read_bytes()
    assert a == b


def test_embed_without_config_is_a_clear_error(
    indexed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["knowledge", "embed", "--dir", str(indexed)]) == 2  # a usage error
    assert "knowledge.semantic" in capsys.readouterr().err


def _semantic(root: Path, env: dict[str, str]) -> SemanticSettings | None:
    return load_settings(root, warn=False, env=env).knowledge.semantic_config()


def test_config_rules(tmp_path: Path) -> None:
    root = tmp_path
    assert _semantic(root, {}) is None
    write_config(root, "ollama", "http://127.0.0.1:11434/")
    c = _semantic(root, {})
    assert c == SemanticSettings("ollama", "http://127.0.0.1:11434", "tiny-ngrams")
    # Environment overrides each key.
    c = _semantic(root, {"CCE_EMBED_MODEL": "m2", "CCE_EMBED_URL": "https://e.test"})
    assert c is not None and (c.model, c.url) == ("m2", "https://e.test")
    (root / ".cce" / "config").write_text("knowledge:\n  semantic:\n    model: m\n")
    assert _semantic(root, {"OLLAMA_HOST": "10.0.0.2:11434"}) == SemanticSettings(
        "ollama", "http://10.0.0.2:11434", "m"
    )
    # As Ollama reads it: no scheme means http, no host 127.0.0.1, no port 11434.
    for host, url in (
        ("0.0.0.0", "http://0.0.0.0:11434"),
        (":11435", "http://127.0.0.1:11435"),
        ("gpu-box", "http://gpu-box:11434"),
        ("[::1]", "http://[::1]:11434"),
        ("https://ollama.example", "https://ollama.example"),
    ):
        got = _semantic(root, {"OLLAMA_HOST": host})
        assert got is not None and got.url == url, host
    for bad, field in (
        ("provider: llama\n    model: m", "provider"),
        ("provider: openai\n    model: m", "url"),
        ("provider: ollama", "model"),
        ("model: m\n    url: ftp://x", "url"),
        ("model: m\n    token: abc", "unknown key"),
    ):
        (root / ".cce" / "config").write_text(f"knowledge:\n  semantic:\n    {bad}\n")
        with pytest.raises(ConfigError, match=field):
            _semantic(root, {})
        # Kept, not raised: only what uses semantic retrieval fails on it.
        settings = load_settings(root, warn=False, env={})
        assert settings.knowledge.semantic is None
        assert f"{root / '.cce' / 'config'}: knowledge.semantic" in str(
            settings.knowledge.semantic_problem
        )


def test_binary_chunks_never_keep_doctor_advising(
    tmp_path: Path, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = tmp_path / "f.jsonl"
    recs = [_rec("r:1", "Retry policy", "retry with backoff"), _rec("r:2", "Blob", "a\x00b")]
    feed.write_text("\n".join(recs) + "\n", encoding="utf-8")
    root = tmp_path / "r"
    write_config(root, "ollama", server.url)
    assert index(root, feed) == 0
    capsys.readouterr()
    assert main(["knowledge", "embed", "--dir", str(root)]) == 0
    assert "1/2 chunks (1 binary or empty, never sent)" in capsys.readouterr().out
    # Nothing more can be embedded, so doctor is satisfied and says why one is missing.
    assert main(["doctor", "--dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert (
        "  ok        semantic vectors: tiny-ngrams · 64 dims · 1/2 chunks "
        "(1 binary or empty, never sent)" in out
    )
    assert "advisory  semantic" not in out
    assert main(["knowledge", "status", "--dir", str(root), "--offline", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["semantic"]["unsendable"] == 1
