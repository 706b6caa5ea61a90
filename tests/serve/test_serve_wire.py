"""The /docs wire rules as pure functions (docs/spec/serve.md): query decoding, the
body fitted to 500 characters, the serde_json bytes and the auth header."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from cce_knowledge.core.rustcompat import RUST_WS
from cce_knowledge.serve import wire


@dataclass
class H:
    chunk_id: str
    title: str
    content: str


def test_percent_decode_is_the_form_component_inverse() -> None:
    assert wire.percent_decode(b"check+out%2F2") == "check out/2"
    assert wire.percent_decode(b"caf%C3%A9") == "café"
    assert wire.percent_decode(b"a%2") == "a%2"
    assert wire.percent_decode(b"a%") == "a%"
    assert wire.percent_decode(b"a%ZZb") == "a%ZZb"
    assert wire.percent_decode(b"a%2F") == "a/"
    assert wire.percent_decode(b"%FF%FEx") == "\ufffd\ufffdx"


def test_service_is_the_first_non_blank_and_q_the_first_fenced() -> None:
    assert wire.service_param(b"service=+&service=checkout") == "checkout"
    assert wire.service_param(b"q=x") is None
    assert wire.service_param(b"service") is None
    assert wire.service_param(b"service=%20api%20") == " api "  # not trimmed
    assert wire.q_param(b"service=a&q=timeout+at+api%2Fgateway") == "timeout at api/gateway"
    assert wire.q_param(b"q=%00%00&q=later") is None  # the first q decides
    assert wire.q_param(b"q=a%0d%0aInjected:+1%00b") == "a  Injected: 1 b"
    assert wire.q_param(b"q=" + b"a" * 5000) == "a" * 500
    assert wire.q_param(b"q=%C2%85x%C2%85") == "x"  # U+0085 is Cc and Rust whitespace
    assert wire.search_query("checkout", "db") == "checkout db"
    assert wire.search_query("checkout", None) == "checkout"


def test_fit_body_cases() -> None:
    short = "## Restart\n\nThe checkout service restarts cleanly."
    assert wire.fit_body(short) == short
    s = "The gateway drains in-flight requests before it exits. " * 20
    got = wire.fit_body(s)
    assert len(got) <= 500 and got.endswith(".") and s.startswith(got)
    words = "alpha beta gamma delta epsilon " * 30
    got = wire.fit_body(words)
    assert got.endswith("…") and len(got) <= 500
    assert words[len(got) - 1] in RUST_WS
    assert wire.fit_body("é" * 600) == "é" * 499 + "…"  # no whitespace: cut at 499
    # "3.14" is no sentence end; a terminator standing last in the cap is.
    assert wire.fit_body("x" * 499 + "." + "y" * 10) == "x" * 499 + "."
    assert wire.fit_body("a" * 100 + " 3.14" + "b" * 500).endswith("…")


def _reference_fit(content: str) -> str:
    """The rule as docs/spec/serve.md words it, written plainly (lists of chars)."""
    chars = list(content)
    if len(chars) <= 500:
        return content
    within = chars[:500]
    for i in reversed(range(500)):
        nxt = within[i + 1] if i + 1 < 500 else None
        if within[i] in ".!?" and (nxt is None or nxt in RUST_WS):
            return "".join(within[: i + 1]).rstrip("".join(RUST_WS))
    window = chars[:499]
    ws = [i for i, c in enumerate(window) if c in RUST_WS]
    cut = ws[-1] if ws else 499
    return "".join(window[:cut]).rstrip("".join(RUST_WS)) + "…"


_text = st.text(
    alphabet=st.sampled_from([*"ab.!? \n\t\u00a0\u2003é😀\x1c", "\u3000"]),
    max_size=900,
)


@given(_text)
def test_fit_body_property(content: str) -> None:
    got = wire.fit_body(content)
    assert got == _reference_fit(content)
    assert len(got) <= 500
    if len(content) <= 500:
        assert got == content
    else:
        kept = got[:-1] if got.endswith("…") and not content.startswith(got) else got
        assert content.startswith(kept)
        assert got.endswith(("…", ".", "!", "?"))


def test_docs_body_is_compact_with_sorted_keys_and_raw_utf8() -> None:
    body = wire.docs_body([H("c1", 'T "q"', "Café\u2028\x01/")])
    assert body == '{"docs":[{"body":"Café\u2028\\u0001/","id":"c1","title":"T \\"q\\""}]}'.encode()
    assert wire.docs_body([]) == wire.EMPTY_DOCS


def test_authorized() -> None:
    tok = b"s3cret"
    ok = [(b"authorization", b"Bearer s3cret")]
    assert wire.authorized(ok, tok)
    assert wire.authorized([(b"Authorization", b"bEaReR   s3cret ")], tok)
    assert not wire.authorized([(b"authorization", b"Bearer s3cre")], tok)
    assert not wire.authorized([(b"authorization", b"Basic s3cret")], tok)
    assert not wire.authorized([(b"authorization", b"Bearer")], tok)
    assert not wire.authorized([(b"authorization", b"Bearer\ts3cret")], tok)
    assert not wire.authorized([], tok)
    # the last Authorization header decides
    assert not wire.authorized([*ok, (b"authorization", b"Bearer x")], tok)
