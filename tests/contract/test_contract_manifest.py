"""cce.feed-manifest/v1: parse, verify (messages and order), build."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.contract.manifest import (
    FeedManifest,
    build_manifest,
    feed_sha256,
    parse_manifest,
    read_manifest,
    verify_manifest,
)
from cce_knowledge.contract.ndjson import parse_feed, read_feed
from cce_knowledge.core.errors import ContractError
from tests.helpers.paths import TESTS

FM = TESTS / "contract_examples" / "failure_modes"
FEED = (
    b'{"id":"a","title":"A","body":"x","source":"s"}\n'
    b'{"id":"b","title":"B","body":"y","source":"s"}\n'
)


def _verify_err(m: FeedManifest, raw: bytes, n: int) -> str:
    with pytest.raises(ContractError) as e:
        verify_manifest(m, raw, n)
    return e.value.message


def test_feed_sha256_anchor() -> None:
    assert (
        feed_sha256(b"hello") == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    )


def test_foreign_manifest_maps_on() -> None:
    doc = (
        '{"schema":"thresh.cce_stage/v1","records":2,"sha256":"AB",\n'
        '  "instance_path":"/x","staged":["a.cce.ndjson"],"created_at":"t"}'
    )
    assert parse_manifest(doc) == FeedManifest(records=2, sha256="AB", schema="thresh.cce_stage/v1")


def test_parse_errors_are_prefixed_and_positioned_across_lines() -> None:
    with pytest.raises(ContractError) as e:
        parse_manifest('{"records":2}')
    assert e.value.message == (
        "invalid cce.feed-manifest/v1 manifest: missing field `sha256` at line 1 column 13"
    )
    with pytest.raises(ContractError) as e:
        parse_manifest('{\n  "records": -1,\n  "sha256": "x"\n}')
    assert e.value.message == (
        "invalid cce.feed-manifest/v1 manifest: invalid value: integer `-1`, expected usize "
        "at line 2 column 15"
    )
    with pytest.raises(ContractError) as e:
        parse_manifest("not json")
    assert "cce.feed-manifest/v1" in e.value.message


def test_verify_order_and_messages() -> None:
    good = FeedManifest(records=2, sha256=feed_sha256(FEED))
    verify_manifest(good, FEED, 2)
    verify_manifest(FeedManifest(2, " " + feed_sha256(FEED).upper() + "\n"), FEED, 2)
    # 1. digest shape wins over a count mismatch; the original value is debug-quoted.
    msg = _verify_err(FeedManifest(5, 'not-a-"digest"\n'), FEED, 2)
    assert msg == 'feed manifest sha256 is not a 64-char hex digest: "not-a-\\"digest\\"\\n"'
    # 2. count before checksum.
    msg = _verify_err(FeedManifest(3, "0" * 64), FEED, 2)
    assert msg == (
        "feed does not match its manifest: manifest declares 3 record(s), feed has 2 "
        "— the feed is truncated or incomplete"
    )
    # 3. checksum, declared shown lowercased.
    msg = _verify_err(FeedManifest(2, "A" * 64), FEED, 2)
    assert msg == (
        "feed does not match its manifest checksum (truncated, corrupt, or misdirected feed): "
        f"manifest sha256 {'a' * 64}, feed sha256 {feed_sha256(FEED)}"
    )


def test_non_ascii_digest_is_rejected_by_byte_length() -> None:
    # 63 hex + 'é' is 64 characters but 65 bytes, and not hex anyway.
    assert "64-char hex" in _verify_err(FeedManifest(2, "a" * 63 + "é"), FEED, 2)


def test_truncated_feed_fixture() -> None:
    raw, text = read_feed(FM / "truncated.jsonl")
    m = read_manifest(FM / "truncated.manifest.json")
    msg = _verify_err(m, raw, len(parse_feed(text)))
    assert "declares 2" in msg and "feed has 1" in msg and "truncated or incomplete" in msg


def test_read_manifest_errors(tmp_path: Path) -> None:
    with pytest.raises(ContractError) as e:
        read_manifest(tmp_path / "m.json")
    assert e.value.message == (
        f"could not read feed manifest {tmp_path / 'm.json'}: No such file or directory (os error 2)"
    )


def test_build_matches_the_published_layout() -> None:
    out = build_manifest(FEED, 2)
    assert out == (
        b'{"schema":"cce.feed-manifest/v1","records":2,"sha256":"'
        + hashlib.sha256(FEED).hexdigest().encode()
        + b'"}\n'
    )


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 2**64 - 1))
def test_build_then_parse_then_verify_roundtrips(raw: bytes, n: int) -> None:
    m = parse_manifest(build_manifest(raw, n).decode())
    assert m == FeedManifest(n, feed_sha256(raw), "cce.feed-manifest/v1")
    verify_manifest(m, raw, n)
    if raw:
        with pytest.raises(ContractError):
            verify_manifest(m, raw[:-1], n)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_parse_raises_only_contract_errors(text: str) -> None:
    try:
        parse_manifest(text)
    except ContractError as e:
        assert e.message.startswith("invalid cce.feed-manifest/v1 manifest: ")
