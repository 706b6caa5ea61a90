"""A `.cck` published in parts (docs/spec/sync.md §13): real bare caches over file://,
parts cut small (monkeypatched sizes) so that a few records make many parts."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from cce_knowledge.sync import parts as P
from cce_knowledge.sync import parts_pull
from cce_knowledge.sync.parts import PartRef, PartsError, parse_index, split
from cce_knowledge.sync.push import _outgoing
from tests.helpers.sshkeys import allowed_line, make_key, needs_ssh_keygen
from tests.helpers.sync import bare_file, bare_ls, feed, index, refs, store_files
from tests.helpers.sync_env import Link, SyncEnv, cli, push_cli

pytestmark = pytest.mark.slow

C = "knowledge/v1/kn"


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "AVG_PART", 2048)
    monkeypatch.setattr(P, "MIN_PART", 512)
    monkeypatch.setattr(P, "MAX_PART", 8192)


def _config(root: Path, parts: str = "always", extra: str = "") -> None:
    (root / ".cce").mkdir(parents=True, exist_ok=True)
    (root / ".cce" / "config").write_text(f"knowledge:\n  sync:\n    parts: {parts}\n{extra}")


def _records(n: int, tag: str = "") -> list[tuple[str, str]]:
    return [
        (f"kn:{i}", f"Body {tag if i == n // 2 else ''} of {i}. " + "word " * 60) for i in range(n)
    ]


def _producer(env: SyncEnv, records: list[tuple[str, str]], parts: str = "always") -> Path:
    root = env.root("p")
    _config(root, parts)
    index(root, feed(records))
    return root


def _push(env: SyncEnv, capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> str:
    rc, out, err = push_cli(env, capsys, root, *extra)
    assert rc == 0, err
    return out


def _pull(
    env: SyncEnv, capsys: pytest.CaptureFixture[str], root: Path, *extra: str
) -> tuple[int, str, str]:
    return cli(
        capsys,
        "knowledge",
        "pull",
        "--corpus",
        "kn",
        "--remote",
        env.url,
        "--dir",
        str(root),
        *extra,
    )


def _parts_in_cache(env: SyncEnv) -> list[str]:
    return [k for k in bare_ls(env.bare, f"{C}/parts") if "/parts/" in k]


def _cck(root: Path) -> bytes:
    return bytes(_outgoing(root, "kn").data)


def test_parted_push_then_pull_is_byte_identical_and_prefers_parts(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    prod = _producer(env, _records(40))
    snap = index(prod, feed(_records(40)))
    out = _push(env, capsys, prod)
    assert "  parts      : " in out
    # The cache: the plain `.cck` (under 32 MiB: the reference reads it), the index, the parts.
    idx = parse_index("i", bare_file(env.bare, f"{C}/{snap}.parts") or b"")
    cck = _cck(prod)
    assert idx.size == len(cck) and idx.sha256 == hashlib.sha256(cck).hexdigest()
    assert len(idx.parts) > 5
    assert sorted(_parts_in_cache(env)) == sorted({P.part_key(C, r.sha256) for r in idx.parts})
    assert bare_file(env.bare, f"{C}/{snap}.cck") is not None
    for r in idx.parts:
        assert (
            hashlib.sha256(bare_file(env.bare, P.part_key(C, r.sha256)) or b"").hexdigest()
            == r.sha256
        )
    # Parts win over the plain `.cck` beside them: a damaged `.cck` is never read.
    env.seed({f"{C}/{snap}.cck": b"not an artifact\n"})
    env.home("home-consumer")
    cons = env.root("c")
    rc, out, err = _pull(env, capsys, cons)
    assert rc == 0, err
    assert store_files(cons)[f"{snap}.json"] == store_files(prod)[f"{snap}.json"]
    # What was fetched is kept: every part of the installed snapshot, nothing else.
    kept = {p.name for p in (env.tmp / "home-consumer" / "sync" / "parts").glob("??/*")}
    assert kept == idx.names()


def test_a_second_pull_fetches_only_the_changed_parts(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = sync_env
    prod = _producer(env, _records(60))
    _push(env, capsys, prod)
    before = set(_parts_in_cache(env))
    env.home("home-consumer")
    cons = env.root("c")
    assert _pull(env, capsys, cons)[0] == 0
    # One record changes: the push adds only the parts around it (and the manifest's).
    snap2 = index(prod, feed(_records(60, tag="edited")))
    env.home("home-a")
    out = _push(env, capsys, prod)
    added = set(_parts_in_cache(env)) - before
    assert 1 <= len(added) <= 4, out
    asked: list[str] = []
    real = P.GitParts.read

    def spy(self: P.GitParts, refs_: list[PartRef]):  # type: ignore[no-untyped-def]
        asked.extend(r.sha256 for r in refs_)
        return real(self, refs_)

    monkeypatch.setattr(P.GitParts, "read", spy)
    env.home("home-consumer")
    rc, _, err = _pull(env, capsys, cons)
    assert rc == 0, err
    assert {P.part_key(C, s) for s in asked} == added
    assert store_files(cons)[f"{snap2}.json"] == store_files(prod)[f"{snap2}.json"]
    # Unchanged remote: up to date, nothing asked.
    asked.clear()
    rc, out, _ = _pull(env, capsys, cons)
    assert rc == 0 and out.startswith("Up to date") and asked == []


def test_auto_publishes_a_small_corpus_as_the_reference_does(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """Default settings under the threshold: a plain `.cck` only, no parts, no index."""
    env = sync_env
    root = env.root("p")
    snap = index(root, feed(_records(40)))
    out = _push(env, capsys, root)
    assert "parts" not in out
    assert sorted(bare_ls(env.bare, C)) == sorted(
        [f"{C}/{snap}.cck", f"{C}/corpus.json", f"{C}/current"]
    )


def test_above_the_threshold_auto_publishes_only_parts(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = sync_env
    monkeypatch.setattr("cce_knowledge.sync.push.PLAIN_CCK_MAX", 1000)
    prod = _producer(env, _records(30), parts="auto")
    snap = index(prod, feed(_records(30)))
    out = _push(env, capsys, prod)
    assert f"  key        : {C}/{snap}.parts\n" in out and "(no plain .cck)" in out
    assert bare_file(env.bare, f"{C}/{snap}.cck") is None
    cons = env.root("c")
    env.home("home-consumer")
    rc, out, err = _pull(env, capsys, cons)
    assert rc == 0, err
    assert store_files(cons)[f"{snap}.json"] == store_files(prod)[f"{snap}.json"]
    rc, out, err = cli(capsys, "sync", "list", "--remote", env.url, "--json")
    assert rc == 0, err
    row = json.loads(out)["knowledge"][0]
    assert (row["snapshots"], row["bytes"]) == (1, len(_cck(prod)))


def _hostile(env: SyncEnv, snap: str, part: PartRef, case: str) -> dict[str, bytes | Link | None]:
    """The cache edit for `case`, on `part` (one the consumer lacks)."""
    key = P.part_key(C, part.sha256)
    body = bare_file(env.bare, key) or b""
    index_key = f"{C}/{snap}.parts"
    if case == "missing part":
        return {key: None}
    if case == "wrong content":
        return {key: bytes([body[0] ^ 1]) + body[1:]}
    if case == "oversized part":
        return {key: body + b"x"}
    if case == "index naming a path":
        raw = bare_file(env.bare, index_key) or b""
        return {index_key: raw.replace(f"{part.sha256} ".encode(), b"../../../../etc/passwd ", 1)}
    return {key: Link("../../../../../../etc/hostname")}


_WORDS = {
    "missing part": "not found on the remote",
    "wrong content": "does not match its name",
    "oversized part": "the index says",
    "index naming a path": "not a part line",
    "symlinked part": "not a regular file",
}


@pytest.mark.parametrize("case", sorted(_WORDS))
def test_a_hostile_parted_cache_is_refused_and_the_store_untouched(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    env = sync_env
    prod = _producer(env, _records(40))
    _push(env, capsys, prod)
    env.home("home-consumer")
    cons = env.root("c")
    assert _pull(env, capsys, cons)[0] == 0
    installed = store_files(cons)
    env.home("home-a")
    snap2 = index(prod, feed(_records(40, tag="two")))
    _push(env, capsys, prod)
    idx = parse_index("i", bare_file(env.bare, f"{C}/{snap2}.parts") or b"")
    env.home("home-consumer")
    new = [r for r in idx.parts if not parts_pull.part_store().has(r)]
    assert new
    env.seed(_hostile(env, snap2, new[-1], case))
    before = refs(env.bare)
    rc, _, err = _pull(env, capsys, cons)
    assert rc == 1 and _WORDS[case] in err, err
    assert store_files(cons) == installed
    assert refs(env.bare) == before
    assert not list((env.tmp / "home-consumer" / "sync" / "parts").glob(".rebuild.*"))


def test_retention_removes_the_parts_no_kept_snapshot_uses(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    _config(root, "always", "    retention: keep-last-1\n")
    snaps = []
    for tag in ("a", "b", "c"):
        snaps.append(index(root, feed(_records(30, tag=tag))))
        out = _push(env, capsys, root)
    assert "removed" in out and "parts no kept snapshot uses" in out
    idx = parse_index("i", bare_file(env.bare, f"{C}/{snaps[-1]}.parts") or b"")
    assert sorted(_parts_in_cache(env)) == sorted({P.part_key(C, n) for n in idx.names()})
    assert [k for k in bare_ls(env.bare, C) if k.endswith((".cck", ".parts"))] == [
        f"{C}/{snaps[-1]}.cck",
        f"{C}/{snaps[-1]}.parts",
    ]


_record = hs.tuples(
    hs.sampled_from([f"kn:{i}" for i in range(12)]),
    hs.text(hs.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=400),
)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=hs.lists(_record, min_size=1, max_size=10, unique_by=lambda r: r[0]),
    second=hs.lists(_record, min_size=1, max_size=10, unique_by=lambda r: r[0]),
)
def test_property_edits_push_pull_round_trip(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], first: list[tuple[str, str]],
    second: list[tuple[str, str]],
) -> None:  # fmt: skip
    """Random edits to a corpus (changed, added, removed, reordered records), each state
    pushed in parts and pulled: the consumer's store and the rebuilt `.cck` are the
    producer's, byte for byte."""
    env = sync_env
    import shutil

    shutil.rmtree(env.tmp / "round", ignore_errors=True)
    prod = env.root("round/p")
    cons = env.root("round/c")
    _config(prod)
    subprocess.run(["git", "-C", str(env.bare), "update-ref", "-d", "refs/heads/main"], check=False)
    for records in (first, second):
        snap = index(prod, feed(records))
        env.home("round/home-a")
        rc, _, err = push_cli(env, capsys, prod, "--force")
        assert rc == 0, err
        env.home("round/home-c")
        rc, _, err = _pull(env, capsys, cons)
        assert rc == 0, err
        assert store_files(cons)[f"{snap}.json"] == store_files(prod)[f"{snap}.json"]
        idx = parse_index("i", bare_file(env.bare, f"{C}/{snap}.parts") or b"")
        cck = _cck(prod)
        rebuilt = b"".join(bare_file(env.bare, P.part_key(C, r.sha256)) or b"" for r in idx.parts)
        assert rebuilt == cck


# ------------------------------------------------------------------ units


def _lines(draw_lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in draw_lines)


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.binary(max_size=3000).map(lambda b: b.replace(b"\n", b" ")), max_size=60))
def test_property_cuts_cover_the_bytes_at_line_ends(lines: list[bytes]) -> None:
    data = _lines(lines)
    spans = list(P.cut_points(data))
    assert b"".join(data[a:b] for a, b in spans) == data
    assert all(0 < b - a <= P.MAX_PART for a, b in spans)
    # Every cut is at a line end, except inside a line longer than MAX_PART.
    ends = {i + 1 for i, c in enumerate(data) if c == 10}
    for a, b in spans:
        assert b in ends or b == len(data) or b - a == P.MAX_PART
    if lines:
        assert spans[0] == (0, len(lines[0]) + 1) or len(lines[0]) + 1 > P.MAX_PART
    assert list(P.cut_points(data)) == spans  # deterministic


@settings(max_examples=100, deadline=None)
@given(
    hs.lists(
        hs.binary(min_size=50, max_size=900).map(lambda b: b.replace(b"\n", b" ")),
        min_size=20,
        max_size=80,
    ),
    hs.data(),
)
def test_property_an_edit_changes_only_the_parts_around_it(
    lines: list[bytes], data: hs.DataObject
) -> None:
    i = data.draw(hs.integers(1, len(lines) - 1))
    edited = [*lines[:i], lines[i] + b" edited", *lines[i + 1 :]]
    a, _ = split(_lines(lines))
    b, _ = split(_lines(edited))
    new = [r for r in b.parts if r not in set(a.parts)]
    # the manifest line's part is always its own; the edited line's part and, while the
    # cuts resynchronise, the next one or two
    assert len(new) <= 3


@settings(max_examples=300, deadline=None)
@given(hs.binary(max_size=400))
def test_property_a_hostile_index_is_refused_or_well_formed(raw: bytes) -> None:
    try:
        idx = parse_index("k", raw)
    except PartsError:
        return
    assert idx.encode() == raw


def test_index_round_trip_and_named_refusals() -> None:
    idx, _ = split(b'{"m":1}\n' + b"x" * 3000 + b"\n")
    assert parse_index("k", idx.encode()) == idx
    raw = idx.encode()
    with pytest.raises(PartsError, match="k:1: not a part index"):
        parse_index("k", b"nope\n")
    with pytest.raises(PartsError, match="says 2 parts but lists 1"):
        parse_index("k", raw.rsplit(b"\n", 2)[0] + b"\n")
    huge = raw.replace(b"parts 2\n", b"parts 3\n") + b"a" * 64 + b" 99999999\n"
    with pytest.raises(PartsError, match="larger than"):
        parse_index("k", huge)
    with pytest.raises(PartsError, match="add up to"):
        parse_index("k", raw.replace(f"size {idx.size}".encode(), b"size 1"))


@needs_ssh_keygen
def test_signing_holds_on_a_parted_corpus(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The statement signs the `.cck` the parts rebuild: a signed parted snapshot is
    verified and installed; parts rebuilding another `.cck` than the signed one are
    refused with the store untouched."""
    env = sync_env
    key = make_key(tmp_path, "ed25519", "publisher")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(allowed_line(key, "ci@example.com,kn"))
    prod = _producer(env, _records(30))
    snap = index(prod, feed(_records(30)))
    _push(env, capsys, prod, "--sign-key", str(key))
    env.home("home-consumer")
    cons = env.root("c")
    rc, out, err = _pull(env, capsys, cons, "--allowed-signers", str(allowed))
    assert rc == 0, err
    assert "(verified, counter " in out
    installed = store_files(cons)
    # Another night, signed; then its parts and index are swapped for an unsigned build's.
    env.home("home-a")
    snap2 = index(prod, feed(_records(30, tag="two")))
    _push(env, capsys, prod, "--sign-key", str(key))
    statement = bare_file(env.bare, f"{C}/{snap2}.statement.json")
    sig = bare_file(env.bare, f"{C}/{snap2}.statement.json.sig")
    index(prod, feed(_records(31, tag="two")))  # another feed, hence another snapshot id
    other = _cck(prod)
    idx, spans = split(other)
    files: dict[str, bytes | Link | None] = {
        P.part_key(C, r.sha256): other[a:b] for r, (a, b) in zip(idx.parts, spans, strict=True)
    }
    files[f"{C}/{snap2}.parts"] = idx.encode()
    env.seed(files)
    assert bare_file(env.bare, f"{C}/{snap2}.statement.json") == statement and sig
    env.home("home-consumer")
    rc, _, err = _pull(env, capsys, cons, "--allowed-signers", str(allowed))
    assert rc == 1 and "does not match the artifact" in err, err
    assert store_files(cons) == installed
    assert snap != snap2


def test_up_to_date_trusts_an_unchanged_stat_and_hashes_a_changed_one(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The up-to-date check hashes the installed store only when its recorded size,
    mtime or inode changed (a multi-GB store is not read on every pull)."""
    env = sync_env
    prod = _producer(env, _records(20))
    snap = index(prod, feed(_records(20)))
    _push(env, capsys, prod)
    env.home("home-consumer")
    cons = env.root("c")
    assert _pull(env, capsys, cons)[0] == 0
    from cce_knowledge.sync import marker

    hashed: list[Path] = []
    real = marker.file_sha256

    def spy(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(marker, "file_sha256", spy)
    rc, out, _ = _pull(env, capsys, cons)
    assert rc == 0 and out.startswith("Up to date") and hashed == []
    # The file rewritten (same bytes, new inode and mtime): hashed, still up to date.
    store = cons / ".cce" / "knowledge" / f"{snap}.json"
    data = store.read_bytes()
    store.unlink()
    store.write_bytes(data)
    rc, out, _ = _pull(env, capsys, cons)
    assert rc == 0 and out.startswith("Up to date") and hashed == [store]
    # Damaged: hashed, and pulled again.
    store.write_bytes(data.replace(b"Body", b"Bodx", 1))
    rc, out, _ = _pull(env, capsys, cons)
    assert rc == 0 and out.startswith("Pulled corpus")
    assert store.read_bytes() == data


def test_doctor_reports_and_repairs_the_local_part_store(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    prod = _producer(env, _records(20))
    _push(env, capsys, prod)
    env.home("home-consumer")
    cons = env.root("c")
    assert _pull(env, capsys, cons)[0] == 0
    root = env.tmp / "home-consumer" / "sync" / "parts"
    parts = sorted(root.glob("??/*"))
    rc, out, _ = cli(capsys, "doctor", "--dir", str(cons))
    assert f"  ok        local part store {root}: {len(parts)} parts" in out, out
    # A damaged part and a stray: removed, said as an advisory; the next pull refetches.
    parts[0].write_bytes(b"damaged")
    (root / "zz").mkdir()
    (root / parts[1].parent.name / "stray").write_bytes(b"x")
    rc, out, _ = cli(capsys, "doctor", "--dir", str(cons))
    assert "removed 2 damaged or unused files" in out, out
    assert not parts[0].exists()
    rc, out, err = _pull(env, capsys, cons, "--force")
    assert rc == 0, err
    assert parts[0].is_file()
