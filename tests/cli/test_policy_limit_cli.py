"""Issue 34 §11: `validate --kind policy` and `index --chunk-policy` hold a chunk policy
to one size limit and say so in one message (validate accepted a policy over 1 MiB
that index then refused)."""

from __future__ import annotations

import json
from pathlib import Path

from cce_knowledge.contract.chunk_policy import MAX_POLICY_BYTES
from tests.helpers.cce_proc import run_cce
from tests.helpers.paths import TESTS

POLICY = TESTS.parent / "examples" / "chunk-policies" / "discussion.json"
FEED = TESTS.parent / "examples" / "feed.jsonl"
MESSAGE = "$: larger than 1048576 bytes (1 MiB), the limit of a chunk policy"


def _policy_of(tmp_path: Path, size: int) -> Path:
    """A valid policy padded (in its description) to exactly `size` bytes."""
    doc = json.loads(POLICY.read_text(encoding="utf-8"))
    doc["description"] = ""
    base = len(json.dumps(doc).encode())
    doc["description"] = "x" * (size - base)
    p = tmp_path / f"policy-{size}.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    assert p.stat().st_size == size
    return p


def test_validate_and_index_refuse_an_oversized_policy_alike(tmp_path: Path) -> None:
    big = _policy_of(tmp_path, MAX_POLICY_BYTES + 1)
    v = run_cce("knowledge", "validate", "--kind", "policy", str(big))
    assert v.returncode == 1, v.stdout + v.stderr
    assert f"{big}: {MESSAGE}\n" in v.stdout
    i = run_cce(
        "knowledge", "index", str(FEED), "--chunk-policy", str(big), "--dir", str(tmp_path / "p")
    )
    assert i.returncode == 2
    assert i.stderr == f"error: invalid chunk policy {big}: {MESSAGE}\n"
    assert not (tmp_path / "p" / ".cce").exists()


def test_a_policy_at_the_limit_is_accepted_by_both(tmp_path: Path) -> None:
    edge = _policy_of(tmp_path, MAX_POLICY_BYTES)
    v = run_cce("knowledge", "validate", "--kind", "policy", str(edge))
    assert v.returncode == 0, v.stdout + v.stderr
    i = run_cce(
        "knowledge",
        "index",
        str(FEED),
        "--chunk-policy",
        str(edge),
        "--dir",
        str(tmp_path / "p"),
        "-q",
    )
    assert i.returncode == 0, i.stderr
