"""bench/make_feed.py: same arguments, same bytes; originals first; a valid feed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cce_knowledge.contract.ndjson import parse_feed
from tests.helpers.bench import load_bench_script

make_feed = load_bench_script("make_feed")


def _source_bytes() -> bytes:
    lines = []
    for i in range(5):
        body = (
            f"- Start Date: 2020-01-0{i + 1}\n\n## Summary\n\nsummary {i}\n\n"
            f"## Motivation\n\nmotivation {i}\n\n```\n## fenced {i}\n```\n\n"
            f"## Drawbacks\n\ndrawbacks {i}\n"
        )
        rec = {"id": f"rfc:{i}", "title": f"T{i}", "body": body, "source": "s", "url": f"u{i}"}
        lines.append(json.dumps(rec, separators=(",", ":")) + "\n")
    return "".join(lines).encode()


@pytest.fixture(autouse=True)
def _source(tmp_path: Path) -> None:
    (tmp_path / "src.jsonl").write_bytes(_source_bytes())


def _run(tmp_path: Path, name: str, *extra: str, records: int = 40) -> bytes:
    out = tmp_path / name
    src = tmp_path / "src.jsonl"
    args = ["--source", str(src), "--records", str(records), "--out", str(out), *extra]
    assert make_feed.main(args) == 0
    return out.read_bytes()


def test_splitmix64_matches_the_published_sequence() -> None:
    # First outputs for seed 0 of the reference SplitMix64 (Vigna's splitmix64.c).
    rng = make_feed.SplitMix64(0)
    assert [rng.next() for _ in range(3)] == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
    ]


def test_same_arguments_give_the_same_bytes(tmp_path: Path) -> None:
    a = _run(tmp_path, "a.jsonl")
    b = _run(tmp_path, "b.jsonl")
    assert a == b
    assert _run(tmp_path, "c.jsonl", "--seed", "7") != a  # the seed changes the mix


def test_originals_come_first_byte_for_byte_then_synthetic_records(tmp_path: Path) -> None:
    source = _source_bytes()
    data = _run(tmp_path, "f.jsonl")
    n = len(source.splitlines())
    assert data.startswith(source)
    lines = data.splitlines()
    assert len(lines) == 40
    synthetic = [json.loads(line) for line in lines[n:]]
    assert [r["id"] for r in synthetic] == [f"syn:{k:07d}" for k in range(n, 40)]
    originals = {json.loads(line)["id"] for line in source.splitlines()}
    assert {r["group"] for r in synthetic} <= originals
    assert all(r["url"].startswith("https://example.invalid/") for r in synthetic)


def test_no_originals_and_max_sections(tmp_path: Path) -> None:
    data = _run(tmp_path, "s.jsonl", "--no-originals", "--max-sections", "1", records=12)
    recs = [json.loads(line) for line in data.splitlines()]
    assert len(recs) == 12 and all(r["id"].startswith("syn:") for r in recs)
    for r in recs:
        _, sections = make_feed.split_sections(r["body"])
        assert len(sections) <= 1


def test_the_output_is_a_valid_feed_with_a_matching_manifest(tmp_path: Path) -> None:
    data = _run(tmp_path, "v.jsonl")
    records = parse_feed(data.decode())
    assert len(records) == 40
    manifest = json.loads((tmp_path / "v.manifest.json").read_text())
    assert manifest == {
        "schema": "cce.feed-manifest/v1",
        "records": 40,
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def test_a_source_that_does_not_match_its_manifest_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "src.jsonl"
    (tmp_path / "src.manifest.json").write_text(
        json.dumps({"schema": "cce.feed-manifest/v1", "records": 1, "sha256": "0" * 64})
    )
    with pytest.raises(SystemExit, match="does not match"):
        make_feed.main(["--source", str(src), "--records", "3", "--out", str(tmp_path / "o")])


def test_swap_probability_bounds_what_changes(tmp_path: Path) -> None:
    base = {r["id"]: r["body"] for r in map(json.loads, _source_bytes().splitlines())}
    kept = [json.loads(x) for x in _run(tmp_path, "k.jsonl", "--swap-prob", "0").splitlines()]
    assert all(r["body"] == base[r["group"]] for r in kept[5:])
    swapped = [json.loads(x) for x in _run(tmp_path, "w.jsonl", "--swap-prob", "1").splitlines()]
    for r in swapped[5:]:
        own = r["group"].split(":")[1]
        assert f"summary {own}" in r["body"]  # the Summary is always the base's
        assert f"motivation {own}" not in r["body"] and f"drawbacks {own}" not in r["body"]
        assert "## Motivation" in r["body"] and "## Drawbacks" in r["body"]


def test_split_sections_ignores_headings_in_code_fences() -> None:
    body = "pre\n## Summary\ns\n```\n## not a heading\n```\n## Motivation\nm\n"
    preamble, sections = make_feed.split_sections(body)
    assert preamble == "pre"
    assert [name for name, _ in sections] == ["summary", "motivation"]
