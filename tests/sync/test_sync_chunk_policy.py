"""A policy-chunked store is an ordinary store: it pushes to a real bare cache (git-LFS
over file://) and pulls back byte-identical, and the pulled store is searched and
verified like any other (issue 24)."""

from __future__ import annotations

import json

import pytest

from tests.helpers.paths import TESTS
from tests.helpers.sync_env import SyncEnv, cli

pytestmark = pytest.mark.slow

MIXED = TESTS / "fixtures" / "feeds" / "policy_mixed.jsonl"
POLICY = TESTS / "fixtures" / "chunk_policies" / "discussions.json"


def test_policy_chunked_store_pushes_and_pulls_byte_identical(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    prod = env.root("producer")
    rc, out, err = cli(
        capsys,
        "knowledge", "index", str(MIXED), "--dir", str(prod), "--chunk-policy", str(POLICY),
    )  # fmt: skip
    assert rc == 0, err
    snap = out.split("snapshot  : ")[1].split("\n")[0]
    rc, out, err = cli(
        capsys, "knowledge", "push", "--corpus", "wk", "--remote", env.url, "--dir", str(prod)
    )
    assert rc == 0, err
    assert f"Pushed corpus wk@{snap}" in out

    env.home("home-consumer")
    cons = env.root("consumer")
    rc, out, err = cli(
        capsys, "knowledge", "pull", "--corpus", "wk", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 0, err
    name = f".cce/knowledge/{snap}.json"
    produced = (prod / name).read_bytes()
    assert (cons / name).read_bytes() == produced
    assert b'"kind": "Discussion Map"' in produced

    rc, out, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(cons))
    assert rc == 0 and out.startswith(f"verify OK (checksum-only): knowledge corpus wk@{snap}\n"), (
        err
    )
    # expand_chunk's view of the pulled store: its policy chunk, by id.
    from cce_knowledge.store.snapshots import load_current

    pulled = load_current(cons)
    dmap = next(c for c in pulled.chunks if c.kind == "Discussion Map")
    rc, out, err = cli(
        capsys, "knowledge", "search", "discussion map outcome", "--dir", str(cons), "--json"
    )
    assert rc == 0, err
    assert json.loads(out)[0]["chunk_id"] == dmap.chunk_id
