"""Pure sync rules: corpus ids, key confinement, guard texts, remote resolution, config edits."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cce_knowledge.config.settings import load_settings
from cce_knowledge.core.errors import SyncError
from cce_knowledge.store.snapshots import KnowledgeChunk, KnowledgeStore
from cce_knowledge.sync import guard as G
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.remote import (
    NO_REMOTE_KNOWLEDGE,
    make_remote,
    resolve_listing_remote,
    resolve_remote,
    scrub,
    slug,
    split_userinfo,
)
from cce_knowledge.sync.remote_setup import edit_config_text

VALID = [
    "internal-tickets",
    "runbooks_v2.1",
    "my.corpus.v1",
    "a-b_c.2",
    "team.handbook",
    ".hidden",
    "v1.",
    "...",
]
INVALID = ["", "has space", "has/slash", "emoji✨", ".", "..", "é", "a\\b", "x\n"]


@pytest.mark.parametrize("cid", VALID)
def test_valid_corpus_ids(cid: str) -> None:
    assert K.check_corpus_id(cid) == cid


@pytest.mark.parametrize("cid", INVALID)
def test_invalid_corpus_ids(cid: str) -> None:
    with pytest.raises(SyncError, match=r"^invalid corpus_id `"):
        K.check_corpus_id(cid)


@given(st.text(max_size=12))
def test_valid_ids_never_escape_the_namespace(cid: str) -> None:
    if K.valid_corpus_id(cid):
        for key in (K.artifact_key(cid, "0" * 16), K.pointer_key(cid), K.meta_key(cid)):
            assert K.is_confined(key, cid)
            assert key.split("/")[:3] == ["knowledge", "v1", cid]


def test_confinement_check() -> None:
    assert K.is_confined("knowledge/v1/c/x.cck", "c")
    assert K.is_confined("knowledge/v1/c/nested/x.cck", "c")
    for bad in (
        "knowledge/v1/cc/x.cck",
        "knowledge/v1/c",
        "knowledge/v2/c/x.cck",
        "knowledge/v1/c/../d/x.cck",
        "hash/2.3/c/x.cck",
    ):
        assert not K.is_confined(bad, "c")
    with pytest.raises(
        SyncError,
        match=r"^retention refused: key `knowledge/v1/d/x.cck` is not confined to `knowledge/v1/c/`",
    ):
        K.check_prune_key("knowledge/v1/d/x.cck", "c")
    assert (
        K.artifact_key("internal-tickets", "9f1c2a3b4c5d6e7f")
        == "knowledge/v1/internal-tickets/9f1c2a3b4c5d6e7f.cck"
    )


def test_format_id_list() -> None:
    assert G.format_id_list([]) == "0"
    assert G.format_id_list(["kn:1"]) == "1 — kn:1"
    ids = [f"kn:{i:02d}" for i in range(25)]
    text = G.format_id_list(ids)
    assert text.startswith("25 — kn:00, kn:01") and "kn:19" in text and "kn:20" not in text
    assert text.endswith("… and 5 more")


def _c(rid: str, content: str, **kw: object) -> KnowledgeChunk:
    return KnowledgeChunk("0" * 16, rid, "k", "n", 1, 1, 1, content, "s", embedding=[1.0], **kw)  # type: ignore[arg-type]


def test_diff_ignores_facets_and_counts_content() -> None:
    remote = KnowledgeStore(
        "a" * 16, 3, [_c("r1", "x"), _c("r2", "y"), _c("r2", "z"), _c("r3", "w")]
    )
    local = KnowledgeStore(
        "b" * 16,
        3,
        [_c("r1", "x", state="closed", labels=["l"]), _c("r2", "y"), _c("r2", "Z"), _c("r4", "q")],
    )
    d = G.diff_stores(local, remote)
    assert (d.added, d.removed, d.changed) == (["r4"], ["r3"], ["r2"])
    # Chunk boundaries matter: ("ab") differs from ("a", "b").
    a = KnowledgeStore("a" * 16, 1, [_c("r", "ab")])
    b = KnowledgeStore("a" * 16, 1, [_c("r", "a"), _c("r", "b")])
    assert G.diff_stores(a, b).changed == ["r"]


def test_guard_texts() -> None:
    assert G.shrink_refusal("R\n", "kn", 1).endswith(
        "refusing to push: 1 record live on the remote would be dropped (the `removed` list above). Pass --force to shrink corpus kn, or --dry-run to inspect without pushing."
    )
    u = G.unverifiable("c1", "aaaaaaaaaaaaaaaa", "cache miss: x", dry_run=True)
    assert u.endswith(
        "there is no diff to report (--dry-run). A real `--force` push (without --dry-run) would bypass the guard."
    )


# ---------------------------------------------------------------- credentials


def test_split_userinfo() -> None:
    assert split_userinfo("https://x-access-token:abc@github.com/a/b.git") == (
        "https://github.com/a/b.git",
        "x-access-token",
        "abc",
    )
    assert split_userinfo("https://TOKEN@github.com/a/b.git") == (
        "https://github.com/a/b.git",
        None,
        "TOKEN",
    )
    assert split_userinfo("https://u:p%40ss@h/x") == ("https://h/x", "u", "p@ss")
    assert split_userinfo("file:///tmp/x.git") == ("file:///tmp/x.git", None, None)
    assert split_userinfo("git@github.com:a/b.git") == ("git@github.com:a/b.git", None, None)


def test_make_remote_and_scrub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CCE_SYNC_TOKEN", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    tok = make_remote("https://x-access-token:SeCrEt123@github.com/a/b.git")
    plain = make_remote("https://github.com/a/b.git")
    assert tok.url == plain.url == "https://github.com/a/b.git"
    assert slug(tok) == slug(plain)  # the token never shapes the clone directory
    assert "SeCrEt123" not in repr(tok)
    env = tok.git_env()
    # The header is scoped to the origin, and a redirect never carries it elsewhere.
    assert list(env) == ["http.https://github.com/.extraheader", "http.followRedirects"]
    assert env["http.followRedirects"] == "false"
    assert "SeCrEt123" not in env["http.https://github.com/.extraheader"]  # base64'd, env only
    assert make_remote("ssh://git@host/x.git").url == "ssh://git@host/x.git"
    assert make_remote("file:///x").git_env() == {}
    monkeypatch.setenv("CCE_SYNC_TOKEN", "EnvToken99")
    r = make_remote("https://github.com/a/b.git")
    assert r.secret == "EnvToken99" and r.git_env()
    assert (
        scrub("fatal: https://u:EnvToken99@h/x and EnvToken99 and SeCrEt123", tok.secrets())
        == "fatal: https://***@h/x and *** and ***"
    )


def test_resolve_remote_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCE_HOME", str(tmp_path / "home"))
    root = tmp_path / "r"
    (root / ".cce").mkdir(parents=True)
    cfg = root / ".cce" / "config"
    with pytest.raises(SyncError) as e:
        resolve_remote(load_settings(root), None)
    assert e.value.message == NO_REMOTE_KNOWLEDGE
    cfg.write_text("sync:\n  remote: file:///sync\n")
    assert resolve_remote(load_settings(root), None).url == "file:///sync"
    cfg.write_text("sync:\n  remote: file:///sync\nknowledge:\n  sync:\n    remote: file:///k\n")
    assert resolve_remote(load_settings(root), None).url == "file:///k"
    assert (
        resolve_listing_remote(load_settings(root), None).url == "file:///sync"
    )  # knowledge.sync.remote ignored
    assert resolve_remote(load_settings(root), "file:///cli").url == "file:///cli"
    assert K.resolve_corpus_id(load_settings(root), "x") == "x"
    with pytest.raises(SyncError, match=r"^cannot determine corpus_id"):
        K.resolve_corpus_id(load_settings(root), None)


def test_sync_init_edits_in_place_and_keeps_comments() -> None:
    before = (
        "# team config — keep me\n"
        "knowledge:\n  sync:\n    corpus_id: tickets   # the corpus\n    retention: keep-last-2\n"
        "markdown:\n  max_section_tokens: 300\n"
        "sync:\n  remote: old   # old remote\n  ref: dev\n"
    )
    text, rewrote = edit_config_text(before, "https://github.com/acme/cache.git", False, None)
    assert not rewrote
    assert text.startswith(
        "# team config — keep me\nknowledge:\n  sync:\n    corpus_id: tickets   # the corpus\n"
    )
    assert "markdown:\n  max_section_tokens: 300\n" in text
    assert "  remote: https://github.com/acme/cache.git" in text and "  ref: dev\n" in text
    assert "  lfs: false\n" in text
    text2, rewrote2 = edit_config_text("sync: [unclosed\n", "file:///x", True, "r1")
    assert rewrote2 and text2.startswith("sync:\n  remote: file:///x\n  lfs: true\n  repo_id: r1\n")
