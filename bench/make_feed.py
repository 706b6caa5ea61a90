#!/usr/bin/env python3
"""Generate a large, deterministic `cce.knowledge/v1` feed from a real one, for scale benches.

    python bench/make_feed.py --source rfcs.jsonl --records 100000 --out big100k.jsonl

The output starts with the source records, byte for byte (`--no-originals` leaves them
out). Every further record `k` is synthetic: it takes source record `k mod N` as its base,
keeps the base's preamble, its top-level section structure and its first section (the
Summary), and replaces each other section, with probability `--swap-prob`, by the
section of the same name ("Motivation", "Drawbacks", ...) from another source record.
The text therefore stays natural markdown; only the id (`syn:<k, 7 digits>`), title,
date, state, labels, group (= the base's id) and links (= the base's url) are invented,
and urls point at example.invalid.

Same arguments, same bytes: each record draws from its own SplitMix64 generator seeded
from `--seed` and the record number; nothing uses `random`, `hash()` or the clock. Writes
`<out stem>.manifest.json` (`cce.feed-manifest/v1`) beside the output, and first checks
the source against `<source stem>.manifest.json` when that file exists, because a changed
source changes every synthetic record.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

MASK64 = (1 << 64) - 1
LABELS = ("T-lang", "T-libs", "T-compiler", "T-cargo", "A-traits", "A-macros", "A-async", "A-ffi")
FIRST_DAY = date(2014, 1, 1)
DAYS = (date(2025, 12, 31) - FIRST_DAY).days + 1


class SplitMix64:
    """Steele, Lea and Flood's SplitMix64: a 64-bit state advanced by the golden gamma."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform in [0, n) (rejection sampling, so no modulo bias)."""
        limit = MASK64 + 1 - (MASK64 + 1) % n
        while True:
            x = self.next()
            if x < limit:
                return x % n

    def chance(self, p: float) -> bool:
        return (self.next() >> 11) * (1.0 / (1 << 53)) < p


def record_rng(seed: int, k: int) -> SplitMix64:
    # Mix the record number through one SplitMix64 step so neighbouring records differ.
    return SplitMix64(SplitMix64((seed << 32) ^ k).next())


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def split_sections(body: str) -> tuple[str, list[tuple[str, str]]]:
    """(preamble, [(normalised name, section text)]) at the body's top heading level.

    RFC sections are `##` headings (a few files use `#`); headings inside code fences
    do not count.
    """
    lines = body.split("\n")
    fenced = [False] * len(lines)
    inside = None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if m:
            inside = None if inside == m[1] else (inside or m[1])
            fenced[i] = True
        else:
            fenced[i] = inside is not None
    level = (
        "## "
        if any(ln.startswith("## ") and not f for ln, f in zip(lines, fenced, strict=True))
        else "# "
    )
    starts = [
        i
        for i, (ln, f) in enumerate(zip(lines, fenced, strict=True))
        if ln.startswith(level) and not f
    ]
    if not starts:
        return body, []
    preamble = "\n".join(lines[: starts[0]])
    sections = []
    for a, b in zip(starts, [*starts[1:], len(lines)], strict=True):
        name = lines[a][len(level) :].strip().strip("#").strip().lower()
        sections.append((name, "\n".join(lines[a:b])))
    return preamble, sections


class Source:
    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines
        self.records = [json.loads(line) for line in lines]
        self.split = [split_sections(r["body"]) for r in self.records]
        # section name -> [(record index, section text)], in source order
        self.by_name: dict[str, list[tuple[int, str]]] = {}
        for idx, (_, sections) in enumerate(self.split):
            for name, text in sections:
                self.by_name.setdefault(name, []).append((idx, text))


def synthetic(src: Source, k: int, args: argparse.Namespace) -> dict[str, object]:
    rng = record_rng(args.seed, k)
    n = len(src.records)
    base_idx = k % n
    base = src.records[base_idx]
    preamble, sections = src.split[base_idx]
    if args.max_sections:
        sections = sections[: args.max_sections]
    parts = [preamble] if preamble or not sections else []
    for pos, (name, text) in enumerate(sections):
        donors = src.by_name.get(name, [])
        if pos > 0 and name != "summary" and len(donors) > 1 and rng.chance(args.swap_prob):
            j = rng.below(len(donors))
            if donors[j][0] == base_idx:  # another RFC's section, never the base's own
                j = (j + 1) % len(donors)
            text = donors[j][1]
        parts.append(text)
    body = "\n".join(parts)
    if not body.endswith("\n"):
        body += "\n"

    rec: dict[str, object] = {
        "id": f"syn:{k:07d}",
        "title": f"{base['title']} (follow-up {k // n})",
        "body": body,
        "source": base["source"],
        "url": f"https://example.invalid/knowledge/syn-{k:07d}",
    }
    roll = rng.below(100)
    if roll < 80:
        rec["state"] = "accepted"
    elif roll < 90:
        rec["state"] = "postponed"
        rec["state_reason"] = "postponed"
    else:
        rec["state"] = "closed"
        rec["state_reason"] = ("superseded", "not_planned", "completed")[rng.below(3)]
    day = FIRST_DAY + timedelta(days=rng.below(DAYS))
    secs = rng.below(86_400)
    rec["updated_at"] = (
        f"{day.isoformat()}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}Z"
    )
    labels: list[str] = []
    for _ in range(rng.below(3)):
        label = LABELS[rng.below(len(LABELS))]
        if label not in labels:
            labels.append(label)
    rec["labels"] = labels
    rec["group"] = base["id"]
    rec["links"] = [base["url"]] if base.get("url") else []
    return rec


def generate(src: Source, args: argparse.Namespace) -> Iterator[bytes]:
    start = 0
    if args.originals:
        for line in src.lines[: args.records]:
            yield line + b"\n"
        start = len(src.lines)
    for k in range(start, args.records if args.originals else start + args.records):
        rec = synthetic(src, k, args)
        yield json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def read_source(path: Path) -> Source:
    data = path.read_bytes()
    manifest = path.with_name(path.stem + ".manifest.json")
    lines = [ln.rstrip(b"\r") for ln in data.split(b"\n") if ln.strip()]
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        actual = hashlib.sha256(data).hexdigest()
        if m.get("sha256", "").lower() != actual or m.get("records") != len(lines):
            raise SystemExit(
                f"error: {path} does not match {manifest} (sha256 {actual}, {len(lines)} "
                "records): the generated feed would differ from the documented one"
            )
    if not lines:
        raise SystemExit(f"error: {path} has no records")
    return Source(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Generate a large deterministic cce.knowledge/v1 feed from a real one.",
    )
    ap.add_argument("--source", type=Path, required=True, help="the real feed (e.g. rfcs.jsonl)")
    ap.add_argument("--records", type=int, required=True, help="records to write in all")
    ap.add_argument("--out", type=Path, required=True, help="feed to write")
    ap.add_argument("--seed", type=int, default=0, help="changes the mix (default 0)")
    ap.add_argument(
        "--max-sections",
        type=int,
        default=0,
        metavar="M",
        help="keep at most M sections per synthetic body (default: all)",
    )
    ap.add_argument(
        "--swap-prob",
        type=float,
        default=0.5,
        help="chance that a non-Summary section is swapped (default 0.5)",
    )
    ap.add_argument(
        "--no-originals",
        dest="originals",
        action="store_false",
        help="write only synthetic records",
    )
    args = ap.parse_args(argv)
    if args.records < 0 or args.max_sections < 0 or not 0.0 <= args.swap_prob <= 1.0:
        ap.error("--records and --max-sections must be >= 0, --swap-prob in [0, 1]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    src = read_source(args.source)
    digest, count, size = hashlib.sha256(), 0, 0
    tmp = args.out.with_name(args.out.name + ".tmp")
    with tmp.open("wb") as out:
        for line in generate(src, args):
            out.write(line)
            digest.update(line)
            count += 1
            size += len(line)
    tmp.replace(args.out)
    manifest = {"schema": "cce.feed-manifest/v1", "records": count, "sha256": digest.hexdigest()}
    mpath = args.out.with_name(args.out.stem + ".manifest.json")
    mpath.write_text(json.dumps(manifest, separators=(",", ":")) + "\n")
    print(
        f"{args.out}: {count} records, {size} bytes, sha256 {manifest['sha256']}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
