"""`cce doctor` knowledge checks (docs/spec/sync.md §7.2)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.config.settings import load_settings
from cce_knowledge.engine.redaction.reference import redact
from cce_knowledge.health.doctor import run_doctor
from cce_knowledge.store import snapshots as S
from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.sync.marker import SyncMarker, write_marker
from tests.helpers.paths import REPO

AWS = "AKIAIOSFODNN7EXAMPLE"


def feed(*records: dict[str, object]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


CLEAN = feed(
    {"id": "docs:policies/password-hashing.md", "title": "Password hashing policy",
     "body": "## Algorithm\n\nUse argon2id.\n\n## Pepper\n\nRotate yearly.", "source": "docs",
     "state": "active", "updated_at": "2026-03-01T09:00:00Z"},
    {"id": "docs:adr/0002.md", "title": "Idempotency keys", "body": "Retries reuse the key.",
     "source": "docs", "updated_at": "2026-04-02T10:00:00Z"},
)  # fmt: skip


def make_store(root: Path, raw: bytes = CLEAN) -> S.KnowledgeStore:
    st = ingest_feed(raw)
    S.save(root, st)
    return st


def run(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["doctor", "--dir", str(root)])
    out, err = capsys.readouterr()
    return rc, out, err


def lines_of(out: str) -> list[str]:
    assert out.endswith("\n")
    return out[:-1].split("\n")


def test_healthy_local_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = make_store(tmp_path)
    rc, out, err = run(tmp_path, capsys)
    assert rc == 0, out + err
    lines = lines_of(out)
    assert lines[0] == f"cce doctor — {tmp_path}"
    assert lines[1] == "knowledge:"
    assert lines[2] == (
        f"  ok        contract cce.knowledge/v1 · snapshot {st.snapshot} · 2 records · "
        f"{len(st.chunks)} chunks · data as-of 2026-04-02T10:00:00Z"
    )
    # No marker: a local ingest prints no pulled-bytes line at all.
    assert not any("pulled snapshot" in ln for ln in lines)
    advisories = sum(ln.startswith("  advisory  ") for ln in lines)
    assert lines[-1] == (
        f"summary: 1 store checked · 0 failures · {advisories} "
        + ("advisory" if advisories == 1 else "advisories")
    )


def test_singular_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = feed({"id": "r1", "title": "One", "body": "just one line", "source": "docs"})
    st = make_store(tmp_path, raw)
    assert len(st.chunks) == 1
    _, out, _ = run(tmp_path, capsys)
    assert f"snapshot {st.snapshot} · 1 record · 1 chunk · data as-of unknown\n" in out


def test_secret_shaped_record_id_is_shown_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = feed({"id": f"gh:{AWS}", "title": "Leaky id", "body": "body text", "source": "gh"})
    make_store(tmp_path, raw)
    rc, out, _ = run(tmp_path, capsys)
    assert rc == 0  # an advisory, not a failure
    assert AWS not in out
    assert (
        "  advisory  knowledge record id `gh:[REDACTED:AWS_ACCESS_KEY]` contains secret-shaped "
        "content; record ids are addressing keys and cannot be redacted by re-index — fix the "
        "source adapter to remove the secret from the id\n"
    ) in out


def test_unredacted_facets_in_a_tampered_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = make_store(tmp_path)
    leaked = "api_key = s3cr3tK3yF0rD3m0Only123456"
    c0 = dataclasses.replace(st.chunks[0], title=leaked, labels=["ok", leaked])
    c1 = dataclasses.replace(st.chunks[1], url=f"https://x.test/?{leaked}")
    tampered = dataclasses.replace(st, chunks=[c0, c1, *st.chunks[2:]])
    S.store_path(tmp_path, st.snapshot).write_bytes(S.dumps(tampered))
    rc, out, _ = run(tmp_path, capsys)
    assert rc == 0
    assert "s3cr3tK3y" not in out
    assert (
        "  advisory  knowledge store carries un-redacted content in facet(s): labels, title, url"
        " — it predates the redaction fix (or was tampered with); re-index the feed, and if it "
        "was pushed, re-push (a local re-index does NOT scrub the remote .cck)\n"
    ) in out


def test_redacted_store_from_a_secret_feed_is_clean(tmp_path: Path) -> None:
    raw = feed({"id": "docs:secrets.md", "title": "Secrets", "source": "docs",
                "body": "## Example\n\napi_key = s3cr3tK3yF0rD3m0Only123456\n"})  # fmt: skip
    make_store(tmp_path, raw)
    outcome = run_doctor(tmp_path, settings=load_settings(tmp_path))
    assert "un-redacted" not in outcome.report
    assert outcome.healthy


def _pull_marker(root: Path, st: S.KnowledgeStore, installed: str | None) -> None:
    write_marker(root, SyncMarker("acme-docs", st.snapshot, "c" * 64, installed))


def test_pulled_bytes_match(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = make_store(tmp_path)
    sha = hashlib.sha256(S.store_path(tmp_path, st.snapshot).read_bytes()).hexdigest()
    _pull_marker(tmp_path, st, sha)
    rc, out, _ = run(tmp_path, capsys)
    assert rc == 0
    assert (
        f"  ok        pulled snapshot bytes match the install record "
        f"(acme-docs@{st.snapshot} · {sha[:12]})\n"
    ) in out


def test_pulled_bytes_mismatch_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = make_store(tmp_path)
    _pull_marker(tmp_path, st, "0" * 64)
    rc, out, err = run(tmp_path, capsys)
    assert rc == 1
    assert err == "error: doctor found definite corruption or config drift (see above)\n"
    actual = hashlib.sha256(S.store_path(tmp_path, st.snapshot).read_bytes()).hexdigest()
    assert (
        f"  FAIL      verify FAILED (checksum-only) for knowledge corpus `acme-docs` (@{st.snapshot})\n"
        f"            expected : {'0' * 64}\n"
        f"            actual   : {actual}\n"
        "            The pulled knowledge store does not match"
    ) in out
    assert "· 1 failure ·" in out


def test_no_install_record_is_advisory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = make_store(tmp_path)
    _pull_marker(tmp_path, st, None)
    rc, out, _ = run(tmp_path, capsys)
    assert rc == 0
    assert (
        "  advisory  no install checksum recorded (pulled by an older cce) — re-pull with "
        "`cce knowledge pull` to enable checksum verification\n"
    ) in out


def test_local_reindex_after_pull_fails_like_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D7: pull A then index B prunes A.json while the marker still names A."""
    a = make_store(tmp_path)
    _pull_marker(tmp_path, a, "a" * 64)
    make_store(tmp_path, CLEAN + feed({"id": "new", "title": "N", "body": "b", "source": "d"}))
    rc, out, _ = run(tmp_path, capsys)
    assert rc == 1
    # The reason is ours: the marker does not describe the store `current` names.
    assert "the sync marker records acme-docs@" in out
    assert "the active store is not the pulled snapshot" in out
    assert "`cce knowledge pull --corpus acme-docs` installs it again" in out


def test_corrupt_store_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = make_store(tmp_path)
    S.store_path(tmp_path, st.snapshot).write_text("{ not json")
    rc, out, _ = run(tmp_path, capsys)
    assert rc == 1
    assert "  FAIL      knowledge store cannot be loaded: " in out
    assert out.rstrip("\n").split("\n")[2].endswith(" — re-ingest or re-pull")


def test_contract_mismatch_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = make_store(tmp_path)
    S.store_path(tmp_path, st.snapshot).write_bytes(
        S.dumps(dataclasses.replace(st, schema="cce.knowledge/v2"))
    )
    rc, out, _ = run(tmp_path, capsys)
    assert rc == 1
    assert (
        "  FAIL      knowledge contract mismatch: the store says `cce.knowledge/v2`, this binary "
        "speaks `cce.knowledge/v1` — re-ingest the feed (or re-pull the corpus)\n"
    ) in out


def test_nothing_to_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(tmp_path, capsys)
    assert rc == 1 and out == ""
    assert (
        err == f"error: no knowledge store under {tmp_path}/.cce/knowledge — build one with "
        f"`cce knowledge index FEED --dir {tmp_path}` or install a published one with "
        f"`cce knowledge pull --dir {tmp_path}`\n"
    )


def test_derived_search_index_advisory_then_ok(tmp_path: Path) -> None:
    from cce_knowledge.retrieval import Searcher

    make_store(tmp_path)
    before = run_doctor(tmp_path, settings=load_settings(tmp_path)).report
    assert "  advisory  derived search index is missing for snapshot" in before
    Searcher(tmp_path).search("argon2id pepper", 3)
    after = run_doctor(tmp_path, settings=load_settings(tmp_path)).report
    assert "  ok        derived search index is current" in after


def test_scrub_scan_agrees_with_the_redactor(tmp_path: Path) -> None:
    """Every facet the scan names really is one `redact` would change."""
    st = make_store(tmp_path)
    for c in st.chunks:
        for v in (c.content, c.title, c.source, *c.labels, *c.links):
            assert redact(v) == v


def test_docs_page_shows_the_real_help(monkeypatch: pytest.MonkeyPatch) -> None:
    from cce_knowledge.cli.main import build_parser

    monkeypatch.setenv("COLUMNS", "100")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    help_text = sub.choices["doctor"].format_help().rstrip("\n")
    page = (REPO / "docs" / "cli" / "doctor.md").read_text()
    assert f"```text\n{help_text}\n```" in page


def test_native_accelerator_advisory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cce_knowledge.retrieval import analyze_native
    from cce_knowledge.sync import accelerator

    make_store(tmp_path)
    if accelerator.native() is not None:
        _, out, _ = run(tmp_path, capsys)
        assert ".cck accelerator" not in out  # silent when active
    monkeypatch.setattr(accelerator.CCK, "module", None)
    monkeypatch.setenv("CCE_NATIVE", "0")
    rc, out, _ = run(tmp_path, capsys)
    assert rc == 0
    assert "  advisory  the native .cck accelerator is disabled (CCE_NATIVE=0)" in out
    monkeypatch.delenv("CCE_NATIVE")
    _, out, _ = run(tmp_path, capsys)
    assert "the native .cck accelerator is not built — install a C compiler" in out
    # The search-index analyser is the other C module: said apart, the same way.
    if analyze_native.native_module() is not None:
        assert "search-index analyser" not in out  # silent when active
    monkeypatch.setattr(analyze_native.ANALYSER, "module", None)
    _, out, _ = run(tmp_path, capsys)
    assert "  advisory  the native search-index analyser is not built — install" in out


def test_bad_config_is_said_once_and_not_as_a_semantic_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(tmp_path)
    (tmp_path / ".cce" / "config").write_text("knowledge:\n  redaction: bogus\n")
    rc, out, err = run(tmp_path, capsys)
    assert rc == 0, out + err
    lines = lines_of(out)
    assert lines[1] == "config:"
    assert lines[2].startswith(f"  advisory  {tmp_path / '.cce' / 'config'}: knowledge.redaction")
    assert "the checks below assume the defaults" in lines[2]
    assert sum("knowledge.redaction" in ln for ln in lines) == 1
    assert not any("semantic retrieval" in ln for ln in lines)
    # The store itself was still checked.
    assert lines[3] == "knowledge:"
    assert lines[4].startswith("  ok        contract cce.knowledge/v1")


def test_allowed_signers_lines_that_pull_skips_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line for a key type cce does not verify is skipped by pull with a warning;
    doctor lists it too, naming FILE:LINE, without running a pull."""
    import base64
    import struct

    def string(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    make_store(tmp_path)
    sk = string(b"sk-ssh-ed25519@openssh.com") + string(b"k" * 32) + string(b"ssh:")
    ed = string(b"ssh-ed25519") + string(b"e" * 32)
    signers = tmp_path / "allowed_signers"
    signers.write_text(
        f"kn sk-ssh-ed25519@openssh.com {base64.b64encode(sk).decode()}\n"
        f"kn ssh-ed25519 {base64.b64encode(ed).decode()}\n"
    )
    (tmp_path / ".cce" / "config").write_text(
        "knowledge:\n  sync:\n    allowed_signers: allowed_signers\n"
    )
    rc, out, err = run(tmp_path, capsys)
    assert rc == 0, out + err
    hits = [x for x in lines_of(out) if "allowed signers:" in x]
    assert len(hits) == 1, out
    assert "allowed_signers:1: skipped" in hits[0] and "sk-ssh-ed25519" in hits[0]
