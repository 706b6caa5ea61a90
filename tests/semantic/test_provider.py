"""The provider client against the loopback server: credentials, redirects, hostile answers."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cce_knowledge.config.settings import SemanticSettings
from cce_knowledge.semantic.provider import Provider, ProviderError, ProviderUnreachable
from cce_knowledge.semantic.textprep import MAX_TEXT_BYTES, chunk_text, cut_utf8
from tests.helpers.embed_server import ECHO_FORMS, embed_server

KEY = "sk-test-0123456789abcdef"


def _p(url: str, provider: str = "openai", **env: str) -> Provider:
    return Provider(SemanticSettings(provider, url, "m"), env={"CCE_EMBED_API_KEY": KEY, **env})


def test_key_not_sent_over_plain_http_without_opt_in() -> None:
    with embed_server() as s:
        p = _p(s.url)
        assert p.key_note is not None and "CCE_ALLOW_INSECURE_HTTP" in p.key_note
        assert KEY not in p.key_note
        p.embed(["hello"])
        assert s.requests[0]["authorization"] is None
        p2 = _p(s.url, CCE_ALLOW_INSECURE_HTTP="1")
        p2.embed(["hello"])
        assert s.requests[1]["authorization"] == f"Bearer {KEY}"


def test_key_never_sent_to_ollama() -> None:
    with embed_server() as s:
        _p(s.url, "ollama", CCE_ALLOW_INSECURE_HTTP="1").embed(["x"])
        assert s.requests[0]["authorization"] is None


def test_redirect_to_another_origin_is_refused_and_carries_no_key() -> None:
    with embed_server() as other, embed_server() as s:
        s.redirect_to = other.url
        p = _p(s.url, CCE_ALLOW_INSECURE_HTTP="1")
        with pytest.raises(ProviderError, match="redirect refused") as ei:
            p.embed(["x"])
        assert KEY not in ei.value.message
        assert other.requests == []


def test_hostile_answers_are_errors() -> None:
    with embed_server(garbage=True) as s:
        with pytest.raises(ProviderError, match="not JSON"):
            _p(s.url).embed(["x"])
    with embed_server(reject_marker="x") as s:
        with pytest.raises(ProviderError, match="HTTP 400"):
            _p(s.url).embed(["x"])


def test_unreachable() -> None:
    with pytest.raises(ProviderUnreachable):
        _p("http://127.0.0.1:9").embed(["x"])


def test_binary_and_minified_never_sent() -> None:
    assert chunk_text("T", "T", "a\x00b") is None
    assert chunk_text("T", "T", "lone \ud800 surrogate") is None
    blob = '!function(e,t){"use strict";var n=e.x||{};t(n)}(window,function(n){n.a=1});' * 20
    got = chunk_text("Title", "Title > Build", f"Prose line.\n{blob}\nMore prose.")
    assert got is not None and "use strict" not in got and "Prose line." in got
    # Long lines of other scripts are prose, not minified.
    cjk = "漢字" * 400
    got = chunk_text("T", "T", cjk)
    assert got is not None and "漢字" in got


@given(st.text(min_size=0, max_size=3000), st.integers(min_value=0, max_value=4000))
def test_cut_utf8_is_a_prefix_on_a_boundary(text: str, cap: int) -> None:
    assume(_encodable(text))
    out = cut_utf8(text, cap)
    assert text.startswith(out)
    assert len(out.encode("utf-8")) <= max(cap, 0) or out == text
    if len(text.encode("utf-8")) > cap:
        # Nothing more fits: the next character would cross the cap.
        assert len((text[: len(out) + 1]).encode("utf-8")) > cap


def test_long_text_is_capped() -> None:
    got = chunk_text("T", "T", "é word " * 5000)
    assert got is not None and len(got.encode("utf-8")) <= MAX_TEXT_BYTES


def _encodable(text: str) -> bool:
    """False for text with lone surrogates (not UTF-8), which hypothesis can draw."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Issue 25 point 8: a key echoed back re-encoded was printed as is.
HARD_KEY = "sk-proj-Zq9/Kx+2Lm~Tt_0Ab%cD=e"


@pytest.mark.parametrize("form", sorted(ECHO_FORMS))
def test_a_key_echoed_in_any_encoding_is_scrubbed(form: str) -> None:
    with embed_server(echo_key_as=form) as s:
        p = Provider(
            SemanticSettings("openai", s.url, "m"),
            env={"CCE_EMBED_API_KEY": HARD_KEY, "CCE_ALLOW_INSECURE_HTTP": "1"},
        )
        with pytest.raises(ProviderError, match="HTTP 401") as ei:
            p.embed(["x"])
    msg = ei.value.message
    echoed = ECHO_FORMS[form](HARD_KEY)
    assert "***" in msg
    if form.startswith("base64"):
        # Only the characters that encode the key: a key of NULs changes exactly those
        # (and a character at each end that also encodes a neighbour).
        blank = ECHO_FORMS[form]("\0" * len(HARD_KEY))
        echoed = "".join(c if c != b else "\0" for c, b in zip(echoed, blank, strict=True))
    windows = [echoed[i : i + 8] for i in range(len(echoed) - 7)]
    assert not any(w in msg for w in windows if "\0" not in w), msg
