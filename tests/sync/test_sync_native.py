"""The native pull path: the C renderer, the streamed install and the LFS object source.

Every native result is compared with the strict Python decoder (`cck._parse_chunk`,
the code that decides every error) restricted to canonical lines — a line is rendered
natively only when it is exactly its own canonical form — so the C code can only ever
be a faster spelling of decisions already made in Python.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import random
import re
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cce_knowledge.sync.cck as cck
from cce_knowledge.core import atomic
from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.rustcompat import serde_f64
from cce_knowledge.store.snapshots import KnowledgeStore, chunk_json, dumps
from cce_knowledge.sync import accelerator, pull
from cce_knowledge.sync.accelerator import NotCanonical, stream_store_parts
from cce_knowledge.sync.cck import CckError
from cce_knowledge.sync.clone import lfs_pointer, open_cache
from cce_knowledge.sync.marker import read_marker_strict
from cce_knowledge.sync.remote import make_remote
from tests.helpers.cck import many, mutated_artifacts, raw_cck, stores
from tests.helpers.sync import CURATED, bare_file, index
from tests.helpers.sync_env import SyncEnv, cli

NATIVE = accelerator.native()
needs_native = pytest.mark.skipif(
    NATIVE is None, reason="native accelerator not built (pip install -e . compiles it)"
)


def test_native_accelerator_is_built_where_ci_requires_it() -> None:
    # .ci/run sets CCE_REQUIRE_NATIVE=1: a broken build must fail CI, not silently fall
    # back to the slow path.
    if os.environ.get("CCE_REQUIRE_NATIVE") == "1":
        assert NATIVE is not None


def _py_render(data: bytes) -> tuple[int, bytes] | None:
    """(lines, store chunk texts joined by ",\\n") when every chunk line is valid and
    canonical, else None: what the native renderer must answer."""
    body = data[data.find(b"\n") + 1 :]
    if body and not body.endswith(b"\n"):
        return None
    texts: list[str] = []
    for raw in body.split(b"\n")[:-1]:
        try:
            chunk, canon = cck._parse_chunk(raw.decode("utf-8"))
        except (CckError, UnicodeDecodeError):
            return None
        if canon.encode("utf-8") != raw:
            return None  # valid but not canonical: the strict path decides it
        texts.append(chunk_json(chunk))
    return len(texts), ",\n".join(texts).encode("utf-8")


def _native_render(data: bytes | mmap.mmap) -> tuple[int, bytes] | None:
    assert NATIVE is not None
    lo = data.find(b"\n") + 1
    result: tuple[int, bytes] | None = NATIVE.render(data, lo, len(data), cck._bits_text)
    return result


# ---------------------------------------------------------------- renderer parity


@needs_native
@settings(max_examples=150, deadline=None)
@given(stores())
def test_native_render_equals_python_render(store: KnowledgeStore) -> None:
    data = raw_cck(store)
    got = _native_render(data)
    assert got is not None, "a canonical artifact must render natively"
    assert got == _py_render(data)


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores(max_chunks=3), st.data())
def test_native_accepts_and_rejects_exactly_like_python(
    store: KnowledgeStore, data: st.DataObject
) -> None:
    art = bytearray(raw_cck(store))
    body_at = art.find(b"\n") + 1
    assume(body_at < len(art))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(body_at, len(art) - 1))
        if data.draw(st.booleans()):
            art[pos] = data.draw(st.integers(0, 255))
        else:
            art[pos:pos] = bytes([data.draw(st.integers(0, 255))])
    mutated = bytes(art)
    got = _native_render(mutated)
    assert got == _py_render(mutated)
    # The guard's scan accepts exactly what render accepts.
    assert NATIVE is not None
    toks = NATIVE.tokens(mutated, body_at, len(mutated))
    assert (toks is None) == (got is None)


@needs_native
def test_native_parity_on_named_non_canonical_spellings() -> None:
    tried = 0
    for mutated, data in mutated_artifacts("\x1f\u00e9"):
        assert _native_render(data) == _py_render(data), mutated
        tried += 1
    lines = raw_cck(many(6)).split(b"\n")
    extra = [
        b'"start_line":18446744073709551615',  # u64::MAX: canonical
        b'"start_line":18446744073709551616',  # 2^64: not a u64
        b'"start_line":123456789012345678901',  # 21 digits
        b'"name":"\\u000b"',
        b'"name":"\\u0008"',  # serde writes \b
        b'"name":"\\u001G"',
        b'"name":"\xed\xa0\x80"',  # a UTF-8 surrogate
        b'"name":"\xf4\x90\x80\x80"',  # above U+10FFFF
        b'"name":"\xc0\xaf"',  # overlong
        b'"name":"\xe2\x82"',  # truncated sequence
    ]
    line = lines[1]
    for new in extra:
        key = new.split(b":")[0] + b":"
        at = line.index(key)
        end = line.index(b',"', at + len(key))
        data = b"\n".join([lines[0], line[:at] + new + line[end:], *lines[2:]])
        assert _native_render(data) == _py_render(data), new
        tried += 1
    assert tried > 50


def _bits_of(x: float) -> int:
    return int.from_bytes(struct.pack("<d", x), "little")


@needs_native
@settings(max_examples=3000, deadline=None)
@given(
    st.integers(0, 2**64 - 1)
    | st.floats(allow_nan=True).map(_bits_of)
    | st.builds(
        lambda c, s: _bits_of(c / math.sqrt(s)), st.integers(-60, 60), st.integers(1, 10**7)
    )
    # short decimals and their neighbours: the round-trip boundaries and decimal ties
    # the exact-integer fast path must decide like printf/strtod
    | st.builds(
        lambda d, e, nudge: max(0, _bits_of(float(f"{d}e{e}")) + nudge),
        st.integers(1, 10**17), st.integers(-30, 20), st.integers(-2, 2),
    )
)  # fmt: skip
def test_native_float_text_is_serde_text_or_defers(bits: int) -> None:
    assert NATIVE is not None
    got = NATIVE.float_text(bits)
    x = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    exp, frac = (bits >> 52) & 0x7FF, bits & ((1 << 52) - 1)
    if got is None:
        # Only powers of two and subnormals are left to the Python renderer.
        assert frac == 0 or exp == 0
        assert x != 0.0
    else:
        assert got.decode() == serde_f64(x)


@needs_native
def test_native_float_text_dense_in_the_fast_path_range() -> None:
    # The exact-integer path covers 1e-6 <= |x| < 1e15 (embeddings live there): a
    # seeded sweep of 60 000 values, log-uniform, embedder-like and near short
    # decimals, against the Python renderer.
    assert NATIVE is not None
    rng = random.Random(20261129)
    for i in range(60_000):
        kind = i % 3
        if kind == 0:
            x = 10 ** rng.uniform(-6, 15)
        elif kind == 1:
            x = rng.randint(1, 1 << 20) / math.sqrt(rng.randint(1, 1 << 30))
        else:
            x = float(f"{rng.randint(1, 10 ** rng.randint(1, 17))}e{rng.randint(-6, 14)}")
        bits = _bits_of(x) + rng.randint(-1, 1) * (kind == 2)
        got = NATIVE.float_text(bits)
        y = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
        assert got is None or got.decode() == serde_f64(y), y


# ---------------------------------------------------------------- streamed import


def _stream_bytes(data: object, jobs: int | None = None) -> tuple[cck.CckManifest, bytes]:
    streamed = stream_store_parts(data, jobs)
    assert streamed is not None
    m, parts = streamed
    return m, b"".join(parts)


@needs_native
@settings(max_examples=80, deadline=None)
@given(stores())
def test_stream_equals_strict_import(store: KnowledgeStore) -> None:
    data = raw_cck(store)
    assert _stream_bytes(data) == cck.import_to_store_bytes(data)


@needs_native
@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_stream_many_ranges_on_threads_from_a_mapped_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    monkeypatch.setattr(accelerator, "RANGE_BYTES", 3000)  # dozens of ranges
    store = many(400)
    data = raw_cck(store)
    f = tmp_path / "a.cck"
    f.write_bytes(data)
    with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        m, out = _stream_bytes(mm, jobs)
    assert out == dumps(store)
    assert m.chunk_count == 400


@needs_native
def test_stream_of_an_empty_store() -> None:
    store = KnowledgeStore("0123456789abcdef", 0, [])
    data = raw_cck(store)
    assert _stream_bytes(data)[1] == dumps(store)


@needs_native
@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.replace(b'"records":', b'"records":1', 1),  # sealed digest now wrong
        lambda d: d.replace(b'"kind":"', b'"kind": "', 1),  # not canonical (raw-sealed below)
        lambda d: d.replace(b"\n", b"\n\n", 2),  # line count
    ],
)
def test_stream_defers_to_the_strict_path(damage: object) -> None:
    data = damage(raw_cck(many(30)))  # type: ignore[operator]
    streamed = stream_store_parts(data)
    if streamed is None:
        return  # undecided up front (e.g. a broken manifest): the strict path runs
    _, parts = streamed
    with pytest.raises(NotCanonical):
        for _ in parts:
            pass


@needs_native
@settings(max_examples=80, deadline=None)
@given(stores())
def test_native_chunk_digests_equal_strict(store: KnowledgeStore) -> None:
    data = raw_cck(store)
    got = accelerator.chunk_digests(data, 2)
    assert got is not None
    assert got == cck.import_chunk_digests(data, 1)


def test_stream_returns_none_without_the_native_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accelerator.CCK, "module", None)
    assert stream_store_parts(raw_cck(many(3))) is None
    assert accelerator.chunk_digests(raw_cck(many(3))) is None


# ---------------------------------------------------------------- install: failures leave nothing


def _knowledge_files(root: Path) -> list[str]:
    d = root / ".cce" / "knowledge"
    # `.gitignore` keeps the store out of the user's repository: no part of the store.
    return sorted(p.name for p in d.iterdir() if p.name != ".gitignore") if d.exists() else []


@pytest.fixture(params=["native", "python"])
def import_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on the native path and again with the accelerator switched off."""
    if request.param == "python":
        monkeypatch.setattr(accelerator.CCK, "module", None)
    return str(request.param)


@pytest.mark.usefixtures("import_path")
def test_import_and_install_of_a_same_value_variant(tmp_path: Path) -> None:
    base = raw_cck(many(8))
    # A spelling the reference accepts (its checksum re-serialises): the strict path installs it.
    variant = base.replace(b'"name":"#', b'"name":"\\u0023')
    assert variant != base
    _, path, installed = pull._import_and_install(
        tmp_path, "k/x.cck", variant, "corpus", m_snap(base)
    )
    assert path.read_bytes() == cck.import_to_store_bytes(base)[1]
    assert installed == hashlib.sha256(path.read_bytes()).hexdigest()
    assert _knowledge_files(tmp_path) == [
        path.name,
        "current",
        "installed-stat.json",
        "synced.json",
    ]


def m_snap(data: bytes) -> str:
    return str(json.loads(data.split(b"\n", 1)[0])["snapshot"])


@pytest.mark.usefixtures("import_path")
def test_a_corrupt_artifact_installs_nothing(tmp_path: Path) -> None:
    base = raw_cck(many(40))
    at = base.index(b'"content":"') + 15
    bad = base[:at] + (b"X" if base[at : at + 1] != b"X" else b"Y") + base[at + 1 :]
    with pytest.raises(CckError, match=r"^k/x\.cck: checksum mismatch"):
        pull._import_and_install(tmp_path, "k/x.cck", bad, "corpus", m_snap(base))
    assert _knowledge_files(tmp_path) == []  # no store, no temp file, no marker, no pointer


def test_atomic_write_parts_with_early_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(atomic, "FLUSH_STEP", 10)
    parts = [bytes([i]) * (7 + i) for i in range(40)]
    dest = tmp_path / "s.json"
    atomic.atomic_write_parts(dest, parts, flush_early=True)
    assert dest.read_bytes() == b"".join(parts)

    def failing() -> object:
        yield b"x" * 100
        yield b"y" * 100
        raise NotCanonical

    with pytest.raises(NotCanonical):
        atomic.atomic_write_parts(dest, failing(), flush_early=True)  # type: ignore[arg-type]
    assert dest.read_bytes() == b"".join(parts)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


# ---------------------------------------------------------------- real git + LFS


def _published(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    producer = sync_env.root("producer")
    snap = index(producer, CURATED.read_bytes())
    rc, _, err = cli(
        capsys, "knowledge", "push", "--corpus", "fx", "--remote", sync_env.url,
        "--dir", str(producer),
    )  # fmt: skip
    assert rc == 0, err
    return producer, snap


def _pull(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], name: str) -> Path:
    sync_env.home(f"home-pull-{name}")
    dest = sync_env.root(name)
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fx", "--remote", sync_env.url,
        "--dir", str(dest),
    )  # fmt: skip
    assert rc == 0, err
    return dest


@pytest.mark.slow
def test_pull_paths_install_identical_bytes(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    producer, snap = _published(sync_env, capsys)
    want = (producer / ".cce/knowledge" / f"{snap}.json").read_bytes()
    key = f"knowledge/v1/fx/{snap}.cck"
    pointer = lfs_pointer(bare_file(sync_env.bare, key) or b"")
    assert pointer is not None, "artifacts travel through LFS"
    oid = pointer[0]

    # 1. default: the local remote's LFS object is read in place (no copy in the clone).
    a = _pull(sync_env, capsys, "a")
    clone_objects = list((sync_env.tmp / "home-pull-a" / "sync").glob("*/.git/lfs/objects/*/*/*"))
    assert clone_objects == []
    # 2. through `git lfs fetch` into the working clone (what a network remote does).
    monkeypatch.setenv("CCE_LFS_IN_PLACE", "0")
    b = _pull(sync_env, capsys, "b")
    fetched = list((sync_env.tmp / "home-pull-b" / "sync").glob("*/.git/lfs/objects/*/*/*"))
    assert [p.name for p in fetched] == [oid]
    # 3. the pure Python path.
    monkeypatch.setattr(accelerator.CCK, "module", None)
    c = _pull(sync_env, capsys, "c")

    for root in (a, b, c):
        got = (root / ".cce/knowledge" / f"{snap}.json").read_bytes()
        assert got == want
        marker = read_marker_strict(root)
        assert marker is not None
        assert marker.installed_sha256 == hashlib.sha256(want).hexdigest()


@pytest.mark.slow
def test_artifact_source_in_place_and_damaged(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    _, snap = _published(sync_env, capsys)
    key = f"knowledge/v1/fx/{snap}.cck"
    sync_env.home("home-src")
    with open_cache(make_remote(sync_env.url)) as cache:
        src = cache.artifact_source(key)
        assert isinstance(src, Path) and sync_env.bare in src.parents
        # A damaged object on the remote is never used in place (wrong size) and git-lfs
        # refuses it too (its hash): a clean error naming the key, nothing half-read.
        original = src.read_bytes()
        src.chmod(0o644)
        src.write_bytes(original[:-1])
        try:
            with pytest.raises(SyncError, match=re.escape(key)):
                cache.artifact_source(key)
        finally:
            src.write_bytes(original)
        with pytest.raises(SyncError, match=r"cache miss: knowledge/v1/fx/none\.cck"):
            cache.artifact_source("knowledge/v1/fx/none.cck")


@needs_native
def test_a_stale_native_module_is_not_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert accelerator.CCK.load() is NATIVE  # built from the source beside it
    monkeypatch.setattr(NATIVE, "SOURCE_SHA256", "0" * 64)
    assert accelerator.CCK.load() is None
    assert "stale" in capsys.readouterr().err
    monkeypatch.setenv("CCE_NATIVE", "0")
    assert accelerator.CCK.load() is None


# ---------------------------------------------------------------- push: store file -> .cck


def _store_body(raw: bytes) -> tuple[int, int]:
    at = raw.find(cck._STORE_OPEN)
    if at < 0:
        return 0, 0
    return at + len(cck._STORE_OPEN), len(raw) - len(cck._STORE_CLOSE)


def _py_export(raw: bytes, lo: int, hi: int) -> cck.ExportSlice | None:
    cck._FAST_DATA = raw
    try:
        return cck._fast_export_range((lo, hi))
    finally:
        cck._FAST_DATA = b""


def _native_export(raw: bytes, lo: int, hi: int) -> cck.ExportSlice | None:
    got = accelerator.export_slices(raw, [(lo, hi)], 1)
    return None if got is None else got[0]


finite = st.lists(
    st.just(0.0)
    | st.just(-0.0)
    | st.builds(lambda c, s: c / math.sqrt(s), st.integers(-40, 40), st.integers(1, 10_000))
    | st.floats(allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=20,
)


@needs_native
@settings(max_examples=120, deadline=None)
@given(stores(), st.data())
def test_native_export_equals_python_export(store: KnowledgeStore, data: st.DataObject) -> None:
    for c in store.chunks:
        c.embedding = data.draw(finite)
    raw = dumps(store)
    lo, hi = _store_body(raw)
    assume(hi > lo)
    got = _native_export(raw, lo, hi)
    assert got is not None, "our own store layout takes the native path"
    assert got == _py_export(raw, lo, hi)


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores(max_chunks=3), st.data())
def test_native_export_never_disagrees_on_damaged_stores(
    store: KnowledgeStore, data: st.DataObject
) -> None:
    for c in store.chunks:
        c.embedding = data.draw(finite | st.just([]))
    raw = bytearray(dumps(store))
    lo, hi = _store_body(bytes(raw))
    assume(hi > lo)
    pos = data.draw(st.integers(lo, hi - 1))
    raw[pos] = data.draw(st.integers(0, 255))
    mutated = bytes(raw)
    got = _native_export(mutated, lo, hi)
    # The C path may decline more than Python (e.g. 64+ character numbers), never less,
    # and whatever it returns is Python's answer.
    if got is not None:
        assert got == _py_export(mutated, lo, hi)


@pytest.mark.slow
def test_a_local_remote_is_pulled_without_a_working_clone(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    producer, snap = _published(sync_env, capsys)
    want = (producer / ".cce/knowledge" / f"{snap}.json").read_bytes()
    for name, url in (("url", sync_env.url), ("path", str(sync_env.bare))):
        sync_env.home(f"home-direct-{name}")
        dest = sync_env.root(f"direct-{name}")
        rc, _, err = cli(
            capsys, "knowledge", "pull", "--corpus", "fx", "--remote", url, "--dir", str(dest)
        )
        assert rc == 0, err
        assert (dest / ".cce/knowledge" / f"{snap}.json").read_bytes() == want
        # Read in place: no clone of the cache was made for this pull.
        sync_home = sync_env.tmp / f"home-direct-{name}" / "sync"
        assert not sync_home.exists() or not any(p.is_dir() for p in sync_home.iterdir())
    # Misses take the clone path, which words the errors as before.
    sync_env.home("home-direct-miss")
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "nothing-here", "--remote", sync_env.url,
        "--dir", str(sync_env.root("direct-miss")),
    )  # fmt: skip
    assert rc == 1
    assert "corpus `nothing-here` is not in the cache, which holds (nearest first): fx" in err
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "fx", "--snapshot", "0123456789abcdef",
        "--remote", sync_env.url, "--dir", str(sync_env.root("direct-miss")),
    )  # fmt: skip
    assert rc == 1
    assert "cache miss: knowledge/v1/fx/0123456789abcdef.cck not found on the remote" in err


@pytest.mark.slow
def test_a_local_lfs_cache_pulls_without_git_lfs_installed(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cce_knowledge.sync import clone as gitcache

    producer, snap = _published(sync_env, capsys)
    monkeypatch.setattr(gitcache, "lfs_available", lambda: False)
    dest = _pull(sync_env, capsys, "no-lfs")
    assert (dest / ".cce/knowledge" / f"{snap}.json").read_bytes() == (
        producer / ".cce/knowledge" / f"{snap}.json"
    ).read_bytes()


@pytest.mark.slow
def test_rapid_same_size_rewrites_are_all_published(sync_env: SyncEnv) -> None:
    # Files are back-dated before `git add`; a rewrite with the same size in the same
    # second must still be staged (not mistaken for the old, stat-identical entry).
    with open_cache(make_remote(sync_env.url), for_write=True) as cache:
        for i in range(6):
            payload = f"{i:016x}\n".encode()
            cache.put_many([("knowledge/v1/fx/current", payload)], f"rewrite {i}")
            assert bare_file(sync_env.bare, "knowledge/v1/fx/current") == payload
