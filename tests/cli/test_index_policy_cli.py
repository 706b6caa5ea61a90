"""`cce knowledge index --chunk-policy FILE` and `knowledge.chunk_policy`: the policy
is applied, a bad one is a usage error naming the file and the JSON path, and
nothing is written before it is accepted. `cce knowledge validate` checks one too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.store.ingest import index_feed
from cce_knowledge.store.snapshots import load_current
from tests.helpers.paths import TESTS

MIXED = TESTS / "fixtures" / "feeds" / "policy_mixed.jsonl"
CURATED = TESTS / "vectors" / "knowledge" / "curated.jsonl"
POLICIES = TESTS / "fixtures" / "chunk_policies"
EXAMPLES = TESTS.parent / "examples" / "chunk-policies"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_index_with_a_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pol = str(POLICIES / "discussions.json")
    rc, out, err = run(
        capsys, "knowledge", "index", str(MIXED), "--dir", str(tmp_path), "--chunk-policy", pol
    )
    assert rc == 0, err
    assert f"  policy    : {pol}\n" in out
    store = load_current(tmp_path)
    kinds = [c.kind for c in store.chunks if c.record_id.startswith("docs/discussions/")]
    assert kinds[:2] == ["Discussion: session storage for the auth service", "Discussion Map"]
    assert not any("2026-03-02: opened" in c.content for c in store.chunks)
    # A search answers from the policy's chunk.
    rc, out, err = run(
        capsys, "knowledge", "search", "discussion map outcome", "--dir", str(tmp_path), "--json"
    )
    assert rc == 0, err
    assert json.loads(out)[0]["kind"] == "Discussion Map"


def test_config_key_names_the_policy_relative_to_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".cce").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.json").write_bytes((POLICIES / "discussions.json").read_bytes())
    (tmp_path / ".cce" / "config").write_text("knowledge:\n  chunk_policy: policies/p.json\n")
    rc, out, err = run(capsys, "knowledge", "index", str(MIXED), "--dir", str(tmp_path))
    assert rc == 0, err
    snap = out.split("snapshot  : ")[1].split("\n")[0]
    data = (tmp_path / ".cce" / "knowledge" / f"{snap}.json").read_bytes()
    from cce_knowledge.contract.chunk_policy import load_chunk_policy

    assert (
        data
        == index_feed(MIXED.read_bytes(), policy=load_chunk_policy(POLICIES / "discussions.json"))[
            1
        ]
    )
    assert data != index_feed(MIXED.read_bytes())[1]


def test_a_policy_selecting_nothing_writes_the_reference_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    pol = str(POLICIES / "selects-nothing.json")
    assert run(capsys, "knowledge", "index", str(CURATED), "--dir", str(a))[0] == 0
    assert (
        run(capsys, "knowledge", "index", str(CURATED), "--dir", str(b), "--chunk-policy", pol)[0]
        == 0
    )
    name = "598e1b3891572bbb.json"
    assert (a / ".cce/knowledge" / name).read_bytes() == (b / ".cce/knowledge" / name).read_bytes()


BAD = [
    (
        {"Summary": "own"},
        '$.rules[0].policy.special_sections["Summary"]: unknown action "own"',
    ),
    ({"primary_level": 0}, "$.rules[0].policy.primary_level: must be a heading level"),
    ({"fallback_level": 7}, "$.rules[0].policy.fallback_level: must be a heading level"),
    (
        {"primary_level": 3, "fallback_level": 3},
        "$.rules[0].policy.fallback_level: must be deeper than primary_level (3 <= 3)",
    ),
]


def _policy(policy: dict[str, object], match: dict[str, object] | None = None) -> str:
    if "Summary" in policy:
        policy = {"special_sections": policy}
    return json.dumps(
        {
            "schema": "cce.chunk-policy/v1",
            "rules": [{"match": match or {"source": "discussion"}, "policy": policy}],
        }
    )


@pytest.mark.parametrize(("policy", "why"), BAD)
def test_bad_policy_is_a_usage_error_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: dict[str, object], why: str
) -> None:
    pol = tmp_path / "bad.json"
    pol.write_text(_policy(policy))
    root = tmp_path / "root"
    rc, out, err = run(
        capsys, "knowledge", "index", str(MIXED), "--dir", str(root), "--chunk-policy", str(pol)
    )
    assert (rc, out) == (2, "")
    assert err.startswith(f"error: invalid chunk policy {pol}: {why}")
    assert not root.exists()


def test_unknown_match_key_and_broken_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pol = tmp_path / "bad.json"
    pol.write_text(_policy({}, {"sources": "discussion"}))
    rc, _, err = run(
        capsys, "knowledge", "index", str(MIXED), "--dir", str(tmp_path), "--chunk-policy", str(pol)
    )
    assert rc == 2
    assert f"invalid chunk policy {pol}: $.rules[0].match.sources: unknown key" in err
    pol.write_text('{"schema": "cce.chunk-policy/v1",\n "rules": [,]}')
    rc, _, err = run(
        capsys, "knowledge", "index", str(MIXED), "--dir", str(tmp_path), "--chunk-policy", str(pol)
    )
    assert rc == 2 and f"invalid chunk policy {pol}:2: $: not valid JSON" in err
    rc, _, err = run(
        capsys,
        "knowledge",
        "index",
        str(MIXED),
        "--dir",
        str(tmp_path),
        "--chunk-policy",
        str(tmp_path / "none.json"),
    )
    assert rc == 2 and "none.json: not a file" in err
    assert not (tmp_path / ".cce").exists()


def test_bad_config_policy_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".cce").mkdir()
    (tmp_path / "p.json").write_text(_policy({"max_lines": 0}))
    (tmp_path / ".cce" / "config").write_text("knowledge:\n  chunk_policy: p.json\n")
    rc, _, err = run(capsys, "knowledge", "index", str(MIXED), "--dir", str(tmp_path))
    assert rc == 2
    assert f"{tmp_path / 'p.json'}: $.rules[0].policy.max_lines: must be an integer >= 1" in err
    (tmp_path / ".cce" / "config").write_text("knowledge:\n  chunk_policy: [a]\n")
    rc, _, err = run(capsys, "knowledge", "index", str(MIXED), "--dir", str(tmp_path))
    assert rc != 0 and "knowledge.chunk_policy" in err
    assert not (tmp_path / ".cce" / "knowledge").exists()


def test_validate_recognises_a_chunk_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = sorted(EXAMPLES.glob("*.json"))
    assert len(good) >= 4
    rc, out, err = run(capsys, "knowledge", "validate", *map(str, good))
    assert rc == 0, out + err
    assert all("(cce.chunk-policy/v1)" in line for line in out.splitlines())
    bad = tmp_path / "bad.json"
    bad.write_text(_policy({"primary_level": 9, "Summary": "x"}))
    bad.write_text(
        json.dumps(
            {
                "schema": "cce.chunk-policy/v1",
                "rules": [
                    {"match": {"colour": "red"}, "policy": {"primary_level": 9}},
                    {"match": {}, "policy": {"special_sections": {"Summary": "drop"}}},
                ],
            }
        )
    )
    rc, out, err = run(capsys, "knowledge", "validate", "--json", str(bad))
    assert rc == 1
    found = [(p["path"], p["message"].split(" (")[0]) for p in json.loads(out)]
    assert found == [
        ("$.rules[0].match.colour", "unknown key"),
        ("$.rules[0].policy.primary_level", "must be a heading level, an integer from 1 to 6"),
        ('$.rules[1].policy.special_sections["Summary"]', 'unknown action "drop"'),
    ]
