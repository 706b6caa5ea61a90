"""Rust-compatible primitives (docs/spec/core.md §0, §6): floats, rounding, lines,
whitespace, tokenizer and embedder anchors."""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cce_knowledge.core.rustcompat import (
    RUST_WS,
    ascii_lower,
    format6,
    rs_lines,
    rs_split_whitespace,
    rs_trim,
    rust_round,
    score_key,
    serde_f64,
)
from cce_knowledge.engine.embed import DIM, cosine, embed_tokens, fnv1a64, hash_embed
from cce_knowledge.engine.tokenizer import estimate_tokens, tokenize, tokenize_bytes


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (100.0, "100.0"),
        (123.456, "123.456"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1.5e16, "1.5e+16"),
        (1e-5, "0.00001"),
        (1.5e-5, "0.000015"),
        (1e-6, "1e-6"),
        (1.5e-6, "1.5e-6"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-0.20851441405707477, "-0.20851441405707477"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (0.0001, "0.0001"),
        (float("nan"), "null"),
        (float("inf"), "null"),
    ],
)
def test_serde_f64_layout(x: float, text: str) -> None:
    assert serde_f64(x) == text


@settings(max_examples=2000)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_serde_f64_round_trips_and_is_shortest(x: float) -> None:
    s = serde_f64(x)
    back = float(s)
    assert struct.pack("<d", back) == struct.pack("<d", x)
    assert ("e" in s) or ("." in s)  # always reads back as a JSON float
    # same significant digits as Python's shortest repr
    digits = lambda t: t.lstrip("-").split("e")[0].replace(".", "").strip("0")  # noqa: E731
    assert digits(s) == digits(repr(abs(x))) or x == 0.0


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (0.5, 1),
        (1.5, 2),
        (2.5, 3),
        (-0.5, -1),
        (-2.5, -3),
        (0.49999999999999994, 0),
        (1e300, 2**63 - 1),
        (float("nan"), 0),
        (-1e300, -(2**63)),
        (2.4999, 2),
    ],
)
def test_rust_round_half_away_from_zero(x: float, want: int) -> None:
    assert rust_round(x) == want


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (0.1234567, "0.123457"),
        (-0.1234567, "-0.123457"),
        (2.5, "2.500000"),
        (-0.0000001, "0.000000"),
        (0.0000005, "0.000001"),
        (12.0, "12.000000"),
    ],
)
def test_format6(x: float, text: str) -> None:
    assert format6(x) == text


def test_score_key() -> None:
    assert score_key(0.9022735) == 902274
    assert score_key(-0.0000004) == 0


@pytest.mark.parametrize(
    ("s", "lines"),
    [
        ("", []),
        ("a", ["a"]),
        ("a\n", ["a"]),
        ("a\n\n", ["a", ""]),
        ("a\r\nb", ["a", "b"]),
        ("a\rb", ["a\rb"]),
        ("a\r\r\n", ["a\r"]),
        ("\x0bx\x1cy\u2028z", ["\x0bx\x1cy\u2028z"]),
        ("\n", [""]),
    ],
)
def test_rs_lines(s: str, lines: list[str]) -> None:
    assert rs_lines(s) == lines


def test_rust_ws_is_not_isspace() -> None:
    for c in "\x1c\x1d\x1e\x1f":
        assert c.isspace() and c not in RUST_WS
    for c in "\u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\x0b":
        assert c in RUST_WS
    assert "\u200b" not in RUST_WS
    assert rs_trim("\x1c a \u3000") == "\x1c a"
    assert rs_split_whitespace("a\x1cb c\u00a0d") == ["a\x1cb", "c", "d"]


def test_ascii_lower() -> None:
    assert ascii_lower("ABC\u212a\u0130Z") == "abc\u212a\u0130z"


def test_tokenizer_anchors() -> None:
    assert tokenize("hashPassword(user_id)") == ["hashpassword", "user_id"]
    assert tokenize("cafébar") == ["caf", "bar"]
    assert tokenize("_a1_b2") == ["_a1_b2"]
    assert tokenize("A a A") == ["a", "a", "a"]
    assert tokenize("\u212aelvin") == ["elvin"]  # non-ASCII separates, never folds
    assert estimate_tokens("") == 1
    assert estimate_tokens("你好世界") == 3


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_tokenize_bytes_agrees(s: str) -> None:
    assume(_encodable(s))
    b = s.encode("utf-8")
    assert [t.decode() for t in tokenize_bytes(b)] == tokenize(s)


def test_fnv_anchors() -> None:
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_embedding_reference_computation() -> None:
    text = "Repeated login failures must lock the account login"
    v = [0.0] * DIM
    for tok in tokenize(text):
        h = fnv1a64(tok.encode())
        v[h % DIM] += -1.0 if h >> 63 else 1.0
    norm = math.sqrt(sum(x * x for x in v))
    assert hash_embed(text) == [x / norm for x in v]
    assert embed_tokens(tokenize(text)) == hash_embed(text)


@settings(max_examples=200)
@given(st.text(max_size=300))
def test_embedder_properties(s: str) -> None:
    v = hash_embed(s)
    assert len(v) == DIM
    if not tokenize(s):
        assert v == [0.0] * DIM
    elif any(v):  # opposite-signed tokens in one bucket can cancel to all zeros
        assert abs(cosine(v, v) - 1.0) < 1e-12
    assert hash_embed(s) == v  # deterministic (no salted hash())


def test_cancelling_tokens_give_zero_vector() -> None:
    from cce_knowledge.engine.embed import embed_sparse

    assert embed_sparse(b"SC:D") == {}  # `sc` and `d` share a bucket with opposite signs
    assert hash_embed("SC:D") == [0.0] * DIM


def test_cosine_prefix_and_empty() -> None:
    assert cosine([], [1.0]) == 0.0
    assert cosine([1.0, 2.0], [3.0]) == 3.0


def test_store_float_text_matches_serde_for_embeddings() -> None:
    from cce_knowledge.store.snapshots import _float_texts

    vals = [*hash_embed("alpha beta gamma alpha"), -0.0, 1e-6, 0.0]
    assert _float_texts(vals) == [serde_f64(x) for x in vals]
    assert json.loads("[" + ",".join(_float_texts(vals)) + "]") == vals


@settings(max_examples=300)
@given(st.text(max_size=400))
def test_sparse_embedding_text_equals_dense(s: str) -> None:
    from cce_knowledge.engine.embed import dense, embed_sparse
    from cce_knowledge.store.snapshots import embedding_json, embedding_json_sparse

    b = s.encode("utf-8", "surrogatepass")
    comps = embed_sparse(b)
    assert dense(comps) == embed_tokens([t.decode() for t in tokenize_bytes(b)])
    assert embedding_json_sparse(comps) == embedding_json(dense(comps))
    assert all(x != 0 for x in comps.values())


@settings(max_examples=500)
@given(st.text())
def test_store_string_encoder_equals_serde_writer(s: str) -> None:
    from cce_knowledge.core.jsonout import json_str as reference
    from cce_knowledge.store.snapshots import json_str

    assert json_str(s) == reference(s)


def test_rust_debug_str() -> None:
    from cce_knowledge.core.rustcompat import rust_debug_str

    assert rust_debug_str('a"\\\n\r\t\0') == '"a\\"\\\\\\n\\r\\t\\0"'
    assert rust_debug_str("x\x01\u200b") == '"x\\u{1}\\u{200b}"'
    assert rust_debug_str("é") == '"é"'


def _encodable(text: str) -> bool:
    """False for text with lone surrogates (not UTF-8), which hypothesis can draw."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
