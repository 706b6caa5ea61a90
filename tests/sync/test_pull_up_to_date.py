"""A pull that finds nothing new does nothing (issue 21 §2), and the store ignores itself
in the user's git repository (§3). Real `cce` processes, real bare caches (LFS on), real
git repositories."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cce_proc import run_cce
from tests.helpers.paths import REPO, TEST_IDENTITY
from tests.helpers.sync import CURATED, bare_ls, feed, index
from tests.helpers.sync import knowledge_files as tree
from tests.helpers.sync_env import SyncEnv, cli

pytestmark = pytest.mark.slow

SNAP = "598e1b3891572bbb"


def cce(*argv: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("CCE_SYNC_TOKEN", "GITHUB_TOKEN")}
    full["PYTHONPATH"] = str(REPO / "src")
    full.update(env)
    return run_cce(*argv, cwd=cwd, env=full, timeout=300)


def push(env: SyncEnv, capsys: pytest.CaptureFixture[str], corpus: str, raw: bytes) -> None:
    prod = env.root(f"producer-{corpus}")
    index(prod, raw)
    rc, _, err = cli(
        capsys, "knowledge", "push", "--corpus", corpus, "--remote", env.url, "--dir", str(prod)
    )
    assert rc == 0, err


def test_second_pull_of_an_unchanged_remote_fetches_and_rewrites_nothing(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    push(env, capsys, "fixture", CURATED.read_bytes())
    cons = env.root("consumer")
    args = ("knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons))
    first = cce(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"Pulled corpus fixture@{SNAP}\n")
    before = tree(cons)
    assert f"{SNAP}.json" in before and "synced.json" in before
    assert any(k.startswith("search/") for k in before)

    again = cce(*args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"Up to date: corpus fixture@{SNAP} is already installed\n")
    assert "up to date" in again.stdout.lower()
    assert "  records  : 2 · chunks : 2\n" in again.stdout
    # Not one file under .cce/knowledge/ written: same names, bytes and mtimes.
    assert tree(cons) == before

    doc = json.loads(cce(*args, "--json").stdout)
    assert doc["up_to_date"] is True and doc["snapshot"] == SNAP and doc["chunks"] == 2
    assert tree(cons) == before

    # `sync pull --all` says the same through the same check, and writes nothing either.
    every = cce("sync", "pull", "--all", "--into", str(cons), "--remote", env.url)
    assert every.returncode == 0, every.stderr
    assert f"up-to-date  fixture@{SNAP}" in every.stdout
    assert tree(cons) == before

    # --force reinstalls: the store file is written again (same bytes, new mtime).
    forced = cce(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.startswith(f"Pulled corpus fixture@{SNAP}\n")
    after = tree(cons)
    assert after[f"{SNAP}.json"][0] == before[f"{SNAP}.json"][0]
    assert after[f"{SNAP}.json"][1] != before[f"{SNAP}.json"][1]


def test_a_deleted_search_index_is_rebuilt_and_nothing_else_is_written(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    push(env, capsys, "fixture", CURATED.read_bytes())
    cons = env.root("consumer")
    args = ("knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons))
    assert cce(*args).returncode == 0
    for p in (cons / ".cce" / "knowledge" / "search").iterdir():
        p.unlink()
    before = tree(cons)
    again = cce(*args)
    assert again.returncode == 0 and again.stdout.startswith("Up to date:"), again.stderr
    assert "search index: built" in again.stderr
    after = tree(cons)
    assert {k: v for k, v in after.items() if not k.startswith("search/")} == before
    assert any(k.startswith("search/") and k.endswith(".idx") for k in after)


SECRET_BODY = "Rotate it.\n\nDB_PASSWORD=hunter2-correct-horse-battery"


def test_a_new_snapshot_a_republished_one_or_a_damaged_store_is_pulled(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    raw = feed(["a", ("b", SECRET_BODY)])
    prod = env.root("producer-c1")
    (prod / "feed.jsonl").write_bytes(raw)
    r = cce("knowledge", "index", str(prod / "feed.jsonl"), "--dir", str(prod))
    assert r.returncode == 0, r.stderr
    r = cce("knowledge", "push", "--corpus", "c1", "--remote", env.url, "--dir", str(prod))
    assert r.returncode == 0, r.stderr
    cons = env.root("consumer")
    args = ("knowledge", "pull", "--corpus", "c1", "--remote", env.url, "--dir", str(cons))
    assert cce(*args).returncode == 0
    kd = cons / ".cce" / "knowledge"
    # A store edited after the pull no longer has its recorded sha256: not up to date.
    snap = (kd / "current").read_text().strip()
    store = kd / f"{snap}.json"
    good = store.read_bytes()
    store.write_bytes(good.replace(b"Body of a.", b"Body of A."))
    healed = cce(*args)
    assert healed.stdout.startswith("Pulled corpus c1@"), healed.stderr
    assert store.read_bytes() == good
    # The same feed indexed again another way (here: the reference's redaction) and
    # re-published is the same snapshot id but another artifact: pulled, not "up to date".
    assert cce(*args).stdout.startswith("Up to date:")
    prod = env.root("producer-c1")
    r = cce("knowledge", "index", str(prod / "feed.jsonl"), "--dir", str(prod), "--redaction",
            "reference")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (prod / ".cce" / "knowledge" / f"{snap}.json").read_bytes() != good
    # (push refuses to overwrite a published snapshot with different bytes unless --force)
    r = cce("knowledge", "push", "--corpus", "c1", "--remote", env.url, "--dir", str(prod),
            "--force")  # fmt: skip
    assert r.returncode == 0, r.stderr
    again = cce(*args)
    assert again.stdout.startswith(f"Pulled corpus c1@{snap}\n"), again.stderr
    assert store.read_bytes() != good
    # A new snapshot on the remote is pulled.
    push(env, capsys, "c1", feed(["a", "b", "c"]))
    newer = cce(*args)
    assert newer.returncode == 0 and newer.stdout.startswith("Pulled corpus c1@"), newer.stderr
    assert (kd / "current").read_text().strip() != snap


def test_pull_without_corpus_takes_the_caches_only_one_and_a_typo_lists_the_corpora(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    empty = cce("knowledge", "pull", "--corpus", "acme-docs", "--remote", env.url,
                "--dir", str(env.root("early")))  # fmt: skip
    assert empty.returncode == 1
    assert "no `current` pointer for corpus acme-docs on the remote — has anything" in empty.stderr
    push(env, capsys, "acme-docs", feed(["a"]))
    cons = env.root("consumer")
    only = cce("knowledge", "pull", "--remote", env.url, "--dir", str(cons))
    assert only.returncode == 0, only.stderr
    assert only.stdout.startswith("Pulled corpus acme-docs@")

    push(env, capsys, "zeta", feed(["z"]))
    push(env, capsys, "acme-issues", feed(["i"]))
    typo = cce("knowledge", "pull", "--corpus", "acme-doc", "--remote", env.url, "--dir", str(cons))
    assert typo.returncode == 1
    assert (
        "error: corpus `acme-doc` is not in the cache, which holds (nearest first): "
        "acme-docs, acme-issues, zeta — pass one of them as --corpus"
    ) in typo.stderr
    assert "has anything been pushed" not in typo.stderr

    several = cce("knowledge", "pull", "--remote", env.url, "--dir", str(env.root("other")))
    assert several.returncode == 1
    assert "cannot determine corpus_id" in several.stderr
    assert "the cache holds acme-docs, acme-issues, zeta" in several.stderr


def test_up_to_date_over_a_network_remote(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """The working-clone path (a remote that is not on this machine) decides the same."""
    from tests.helpers.git_http import git_http_server

    env = sync_env
    prod = env.root("producer")
    index(prod, CURATED.read_bytes())
    rc, _, err = cli(
        capsys, "knowledge", "push", "--no-lfs", "--corpus", "fixture", "--remote", env.url,
        "--dir", str(prod),
    )  # fmt: skip
    assert rc == 0, err
    subprocess.run(["git", "-C", str(env.bare), "config", "http.receivepack", "true"], check=True)
    cons = env.root("consumer")
    with git_http_server(env.bare.parent) as srv:
        url = f"{srv.base}/{env.bare.name}"
        args = ("knowledge", "pull", "--corpus", "fixture", "--remote", url, "--dir", str(cons))
        first = cce(*args, CCE_ALLOW_INSECURE_HTTP="1")
        assert first.returncode == 0, first.stderr
        before = tree(cons)
        again = cce(*args, CCE_ALLOW_INSECURE_HTTP="1")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"Up to date: corpus fixture@{SNAP}")
    assert tree(cons) == before


# ---------------------------------------------------------------- §3: self-ignoring store


def _git(repo: Path, *argv: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *argv],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **TEST_IDENTITY},
    ).stdout


def test_index_and_pull_inside_a_git_repository_leave_git_status_clean(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    env = sync_env
    feed_file = tmp_path / "feed.jsonl"
    feed_file.write_bytes(CURATED.read_bytes())
    # A producer's repository: `cce knowledge index` inside it.
    prod = tmp_path / "producer-repo"
    _git(tmp_path, "init", "-q", "-b", "main", str(prod))
    (prod / ".cce").mkdir()
    (prod / ".cce" / "config").write_text("knowledge:\n  sync:\n    corpus_id: fixture\n")
    r = cce("knowledge", "index", str(feed_file), "--dir", str(prod))
    assert r.returncode == 0, r.stderr
    kd = prod / ".cce" / "knowledge"
    assert (kd / ".gitignore").read_text().splitlines()[-1] == "*"
    status = _git(prod, "status", "--porcelain", "--untracked-files=all")
    assert status == "?? .cce/config\n"  # the config stays committable; the store is not seen
    r = cce("knowledge", "push", "--remote", env.url, "--dir", str(prod))
    assert r.returncode == 0, r.stderr
    # The .gitignore never travels: the cache holds the artifact, pointer and metadata.
    assert not any(".gitignore" in k for k in bare_ls(env.bare))

    # A consumer's repository: `cce knowledge pull` inside it.
    cons = tmp_path / "consumer-repo"
    _git(tmp_path, "init", "-q", "-b", "main", str(cons))
    (cons / "README.md").write_text("app\n")
    _git(cons, "add", "README.md")
    _git(cons, "commit", "-q", "-m", "init")
    r = cce("knowledge", "pull", "--corpus", "fixture", "--remote", env.url, "--dir", str(cons))
    assert r.returncode == 0, r.stderr
    assert _git(cons, "status", "--porcelain", "--untracked-files=all") == ""
    ckd = cons / ".cce" / "knowledge"
    assert (ckd / f"{SNAP}.json").read_bytes() == (kd / f"{SNAP}.json").read_bytes()
    # The reference's prune only touches `<16 hex>.json`; status and doctor do not mind.
    st = cce("knowledge", "status", "--dir", str(cons))
    assert st.returncode == 0, st.stderr
    doc = cce("doctor", "--dir", str(cons))
    assert doc.returncode == 0, doc.stdout + doc.stderr
    assert ".gitignore" not in doc.stdout + doc.stderr
    ver = cce("sync", "verify", "--checksum-only", "--dir", str(cons))
    assert ver.returncode == 0, ver.stdout + ver.stderr


def test_a_users_gitignore_or_a_symlink_in_its_place_is_left_alone(tmp_path: Path) -> None:
    feed_file = tmp_path / "feed.jsonl"
    feed_file.write_bytes(CURATED.read_bytes())
    mine = tmp_path / "mine"
    kd = mine / ".cce" / "knowledge"
    kd.mkdir(parents=True)
    (kd / ".gitignore").write_text("search/\n")
    assert cce("knowledge", "index", str(feed_file), "--dir", str(mine)).returncode == 0
    assert (kd / ".gitignore").read_text() == "search/\n"

    linked = tmp_path / "linked"
    lkd = linked / ".cce" / "knowledge"
    lkd.mkdir(parents=True)
    target = tmp_path / "elsewhere.txt"
    (lkd / ".gitignore").symlink_to(target)  # dangling: writing through it would create it
    assert cce("knowledge", "index", str(feed_file), "--dir", str(linked)).returncode == 0
    assert not target.exists() and (lkd / ".gitignore").is_symlink()
    leftovers = [p.name for p in lkd.iterdir() if ".tmp." in p.name]
    assert leftovers == []
