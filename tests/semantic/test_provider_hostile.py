"""Hostile embedding servers (issue 25, points 3-5): every bad answer is a provider
error — a warning at index, a fallback note at search — decoded bytes stay under the
cap whatever the compression, and a request ends at its total deadline however
slowly the answer drips. Real `cce` processes against loopback servers."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

from cce_knowledge.config.settings import SemanticSettings, load_settings
from cce_knowledge.semantic.provider import (
    MAX_RESPONSE_BYTES,
    Provider,
    ProviderError,
    ProviderUnreachable,
    finite_row,
)
from tests.helpers.embed_server import EmbedServer, embed_server

from .conftest import FEED, write_config

DEEP = b"[" * 200_000
HUGE_INT = b'{"embeddings":[[1' + b"0" * 400 + b",0.5]]}"
HUGE_INT_OPENAI = b'{"data":[{"index":0,"embedding":[1' + b"0" * 400 + b",0.5]}]}"
BIG_SQUARES = b'{"embeddings":[[1e200,1e200]]}'  # each finite, the norm is not


def _p(url: str, provider: str = "ollama", timeout: float | None = None) -> Provider:
    return Provider(SemanticSettings(provider, url, "m"), env={}, timeout=timeout)


def _cce(root: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCE_EMBED", "OLLAMA"))}
    return subprocess.run(
        [sys.executable, "-m", "cce_knowledge", "knowledge", *args, "--dir", str(root)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("ollama", DEEP),
        ("openai", DEEP),
        ("ollama", HUGE_INT),
        ("openai", HUGE_INT_OPENAI),
        ("ollama", BIG_SQUARES),
        ("ollama", b'{"embeddings":[[' + b"[" * 5000 + b"]]}"),
    ],
)
def test_bad_numbers_and_depth_are_provider_errors(provider: str, body: bytes) -> None:
    with embed_server(body=body) as s:
        with pytest.raises(ProviderError) as ei:
            _p(s.url, provider).embed(["x"])
    assert "Traceback" not in ei.value.message


def test_finite_row() -> None:
    assert finite_row([1, 2.5]) == [1.0, 2.5]
    assert finite_row([10**400]) is None
    assert finite_row([1e200, 1e200]) is None
    assert finite_row([True]) is None and finite_row([]) is None and finite_row("x") is None
    assert finite_row([float("nan")]) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "kw", [{"body": DEEP}, {"poison": b"1" + b"0" * 400}, {"poison": b"[" * 100_000}]
)
def test_index_warns_and_hybrid_falls_back_in_real_processes(
    tmp_path: Path, kw: dict[str, bytes]
) -> None:
    root = tmp_path / "r"
    with embed_server(**kw) as s:  # type: ignore[arg-type]
        write_config(root, "ollama", s.url)
        got = _cce(root, "index", str(FEED), "--jobs", "1")
        assert got.returncode == 0, got.stderr
        assert "Traceback" not in got.stderr
        assert "rejected and skipped" in got.stderr
        got = _cce(root, "search", "stop a customer being charged twice", "--ranking", "hybrid")
        assert got.returncode == 0, got.stderr
        assert "Traceback" not in got.stderr
        assert "hybrid ranking unavailable" in got.stderr


def _bomb(decoded: int, layers: int) -> bytes:
    data = b" " * decoded
    for _ in range(layers):
        data = gzip.compress(data, 9)
    return data


def _peak_while(fn: object) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(ProviderError) as ei:
            fn()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1], ei.value.message  # type: ignore[return-value]
    finally:
        tracemalloc.stop()


def test_stacked_gzip_is_refused_before_decoding() -> None:
    # 256 MiB of spaces in two gzip layers: ~600 bytes on the wire.
    with embed_server(body=_bomb(256 << 20, 2), encoding="gzip, gzip") as s:
        peak, msg = _peak_while(lambda: _p(s.url).embed(["x"]))  # type: ignore[misc]
    assert "stacked" in msg
    assert peak < 8 << 20


def test_one_gzip_layer_is_capped_while_decoding() -> None:
    with embed_server(body=_bomb(128 << 20, 1), encoding="gzip") as s:
        peak, msg = _peak_while(lambda: _p(s.url).embed(["x"]))  # type: ignore[misc]
    assert "larger than" in msg
    # The decoded bytes stop at the cap (a bytearray grows by up to ~1/8 at a time).
    assert peak < MAX_RESPONSE_BYTES * 1.5


@pytest.mark.parametrize("coding", ["gzip", "deflate", "identity", "GZIP "])
def test_compressed_answers_still_decode(coding: str) -> None:
    body = json.dumps({"embeddings": [[0.6, 0.8]]}).encode()
    wire = {"gzip": gzip.compress, "deflate": zlib.compress}.get(coding.strip().lower(), bytes)(
        body
    )
    with embed_server(body=wire, encoding=coding) as s:
        assert _p(s.url).embed(["x"]) == [[0.6, 0.8]]
        assert s.requests  # and it asked only for what it decodes


def test_unknown_coding_is_refused() -> None:
    with embed_server(body=b"{}", encoding="br") as s:
        with pytest.raises(ProviderError, match="content coding 'br' refused"):
            _p(s.url).embed(["x"])


def test_a_dripping_answer_ends_at_the_total_deadline() -> None:
    # 26 bytes, one every 0.5 s: no read ever waits 1 s, the whole answer takes 13 s.
    with embed_server(body=b'{"embeddings":[[0.6,0.8]]}', drip=0.5) as s:
        p = _p(s.url, timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises(ProviderUnreachable, match="within 1 s"):
            p.embed(["x"])
        assert time.monotonic() - t0 < 5.0  # 1 s, with room for a loaded machine
        # The provider stays usable: the next request gets a fresh connection.
        s.drip = None
        assert p.embed(["x"]) == [[0.6, 0.8]]


@pytest.mark.slow
def test_timeout_from_config_bounds_index(tmp_path: Path) -> None:
    root = tmp_path / "r"
    # 52 s per answer: one request, cut at 1 s, then unreachable stops the run.
    with embed_server(body=b'{"embeddings":[[0.6,0.8]]}', drip=2.0) as s:
        write_config(root, "ollama", s.url)
        cfg = root / ".cce" / "config"
        cfg.write_text(cfg.read_text() + "    timeout: 1\n")
        t0 = time.monotonic()
        got = _cce(root, "index", str(FEED), "--jobs", "1")
        took = time.monotonic() - t0
    assert got.returncode == 0, got.stderr
    assert "no complete answer within 1 s" in got.stderr
    assert took < 30  # process start-up included, on a loaded machine


@pytest.mark.slow
def test_timeout_setting_is_validated(tmp_path: Path, server: EmbedServer) -> None:
    root = tmp_path / "r"
    write_config(root, "ollama", server.url)
    cfg = root / ".cce" / "config"
    base = cfg.read_text()
    for bad in ("0", "-3", "nan", "1e400", "soon"):
        cfg.write_text(base + f"    timeout: {bad}\n")
        problem = load_settings(root, warn=False, env={}).knowledge.semantic_problem
        assert problem is not None and "knowledge.semantic.timeout" in problem
    cfg.write_text(base + "    timeout: 2.5\n")
    sem = load_settings(root, warn=False, env={}).knowledge.semantic
    assert sem is not None and sem.timeout == 2.5
    cfg.write_text(base + f"    timeout: {'9' * 5000}\n")
    got = _cce(root, "embed")
    assert got.returncode == 2, got.stderr  # a bad value of a known key: a usage error
    # The reader refuses a numeral this long before the timeout check sees it (#25 §7).
    assert "refused: line" in got.stderr and "5000 characters" in got.stderr
    assert "Traceback" not in got.stderr
    cfg.write_text(base + f"    timeout: {'9' * 200}\n")
    got = _cce(root, "embed")
    assert got.returncode == 2, got.stderr
    assert "knowledge.semantic.timeout" in got.stderr and "Traceback" not in got.stderr
