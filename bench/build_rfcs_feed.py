#!/usr/bin/env python3
"""Build the benchmark corpus `rfcs.jsonl` from a checkout of rust-lang/rfcs.

    git clone https://github.com/rust-lang/rfcs rfcs      # full history: dates come from git log
    git -C rfcs checkout 354518a8c9025f40be6f730452c1bfe71a12dc22
    python bench/build_rfcs_feed.py --repo rfcs --out rfcs.jsonl

One `cce.knowledge/v1` record per markdown file under `text/` (see bench/README.md for
the mapping), in file-name order, one compact JSON object per line, UTF-8. It also
writes `<out stem>.manifest.json` (`cce.feed-manifest/v1`). Standard library and `git`
only; the same checkout gives the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

URL_BASE = "https://github.com/rust-lang/rfcs/blob/master/"
SOURCE = "rust-rfcs"

# Header lines whose URLs become `links` (the label before the colon, any case).
LINK_LABELS = frozenset(
    {
        "rfc pr",
        "erfc pr",
        "rust issue",
        "rust issues",
        "tracking issue",
        "tracking issues",
        "cargo issue",
        "crates.io issue",
    }
)
_HEADER_ITEM = re.compile(r"^[-*]\s*([^:\n]+?)\s*#?\s*:(.*)$")
_URL = re.compile(r"https?://[^\s()<>\[\]]+")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*$")

# A first heading with one of these texts is a section, not the RFC's title.
SECTION_NAMES = frozenset(
    {"summary", "note", "history", "table of contents", "update", "motivation and summary"}
)
# "## This RFC was previously approved, but (part of it) later **withdrawn**"
_BANNER = re.compile(
    r"^this rfc was previously approved, but (part of it )?later \**(withdrawn|rejected)\**$",
    re.IGNORECASE,
)

# How slug words are spelled in a title.
WORD_SPELLING = {
    "abi": "ABI",
    "api": "API",
    "c": "C",
    "dst": "DST",
    "ffi": "FFI",
    "hir": "HIR",
    "io": "IO",
    "llvm": "LLVM",
    "mir": "MIR",
    "msrv": "MSRV",
    "nll": "NLL",
    "os": "OS",
    "rfc": "RFC",
    "rfcs": "RFCs",
    "simd": "SIMD",
    "tls": "TLS",
    "ufcs": "UFCS",
    "utf8": "UTF-8",
}
# Words that stay lower case even at the start of a title (Rust spells them so).
KEEP_LOWER = frozenset({"cfg"})

# The 87-byte "Moved to ..." stub; the RFC itself is 2071-impl-trait-existential-types.md.
SKIP = frozenset({"text/2071-impl-trait-type-alias.md"})
GROUPED_RFC = "3392"  # the Leadership Council RFC has a directory of extra parts
TRANSLATION = re.compile(r"^Leadership-Council-RFC(.+)\.md$")


def humanise(slug: str) -> str:
    """`0243-trait-based-exception-handling` -> `Trait based exception handling`."""
    words = [WORD_SPELLING.get(w, w) for w in slug.split("-")]
    first = words[0]
    if first.isalpha() and first.islower() and first not in KEEP_LOWER:
        words[0] = first[0].upper() + first[1:]
    return " ".join(words)


def _headings(body: str) -> list[tuple[int, str]]:
    out, fence = [], None
    for line in body.split("\n"):
        line = line.rstrip("\r")
        stripped = line.lstrip(" ")
        marker = stripped[:3]
        if marker in ("```", "~~~"):
            fence = None if fence == marker else (fence or marker)
            continue
        if fence is None:
            m = _HEADING.match(line)
            if m:
                out.append((len(m[1]), m[2]))
    return out


def _clean_heading(text: str) -> str:
    return re.sub(r"^RFC:\s*", "", text.replace("`", "")).strip()


def title_and_state(body: str, slug: str) -> tuple[str, str | None]:
    """The record title and, for a withdrawn/rejected banner, its state_reason."""
    heads = _headings(body)
    reason = None
    for _, text in heads:
        m = _BANNER.match(text.strip())
        if m:
            part = "part " if m[1] else ""
            reason = f"approved, {part}later {m[2].lower()}"
            break
    if heads:
        first = heads[0][1].strip()
        if first.lower() not in SECTION_NAMES and not _BANNER.match(first):
            # "# crates.io token scopes RFC" -> "crates.io token scopes"
            return re.sub(r"\s+RFC$", "", _clean_heading(first)), reason
    return humanise(slug), reason


def header_links(body: str) -> list[str]:
    """URLs on the header's PR/issue lines (and their indented continuation lines)."""
    links: list[str] = []
    collecting = seen_item = False
    for raw in body.split("\n"):
        line = raw.rstrip("\r")
        if line.startswith("#") and seen_item:
            break  # the header ends at the first heading after it (a title may precede it)
        m = _HEADER_ITEM.match(line)
        if m:
            seen_item = True
            collecting = m[1].strip().lower() in LINK_LABELS
            rest = m[2]
        elif collecting and line[:1] in (" ", "\t") and line.strip():
            rest = line
        else:
            collecting = False
            continue
        if collecting:
            for url in _URL.findall(rest):
                url = url.rstrip(".,;")
                if url not in links:
                    links.append(url)
    return links


def last_commit_utc(repo: Path, rel: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), "log", "-1", "--format=%cI", "--", rel],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not out:
        raise SystemExit(f"error: git log has no commit for {rel} (is --repo a full clone?)")
    return datetime.fromisoformat(out).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record(
    repo: Path,
    rel: str,
    rid: str,
    title: str,
    body: str,
    *,
    reason: str | None = None,
    group: str | None = None,
) -> dict[str, object]:
    """The record, its keys in the contract's order (absent optionals left out)."""
    rec: dict[str, object] = {
        "id": rid,
        "title": title,
        "body": body,
        "source": SOURCE,
        "url": URL_BASE + rel,
        "state": "accepted",
    }
    if reason:
        rec["state_reason"] = reason
    rec["updated_at"] = last_commit_utc(repo, rel)
    rec["labels"] = []
    if group:
        rec["group"] = group
    rec["links"] = header_links(body)
    return rec


def build(repo: Path) -> list[dict[str, object]]:
    text = repo / "text"
    if not text.is_dir():
        raise SystemExit(f"error: {text} is not a directory (pass a rust-lang/rfcs checkout)")
    records: list[dict[str, object]] = []
    for path in sorted(text.glob("*.md")):
        rel = path.relative_to(repo).as_posix()
        if rel in SKIP:
            continue
        number, _, slug = path.stem.partition("-")
        body = path.read_bytes().decode("utf-8")
        title, reason = title_and_state(body, slug)
        rid = f"rfc:{number}"
        group = rid if number == GROUPED_RFC else None
        records.append(_record(repo, rel, rid, title, body, reason=reason, group=group))
        if number == GROUPED_RFC:
            records.extend(_group_parts(repo, path.with_suffix(""), rid, title))
    return records


def _group_parts(repo: Path, folder: Path, rid: str, title: str) -> list[dict[str, object]]:
    parts = []
    for path in sorted(folder.glob("*.md")):
        rel = path.relative_to(repo).as_posix()
        body = path.read_bytes().decode("utf-8")
        lang = TRANSLATION.match(path.name)
        if lang:
            pid, ptitle = f"{rid}/{lang[1]}", f"{title} (translation, {lang[1]})"
        else:
            heads = _headings(body)
            section = _clean_heading(heads[0][1]) if heads else humanise(path.stem)
            pid, ptitle = f"{rid}/{path.stem}", f"{title}: {section}"
        parts.append(_record(repo, rel, pid, ptitle, body, group=rid))
    return parts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="checkout of rust-lang/rfcs")
    ap.add_argument("--out", type=Path, default=Path("rfcs.jsonl"), help="feed to write")
    args = ap.parse_args(argv)
    records = build(args.repo)
    data = b"".join(
        json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for r in records
    )
    args.out.write_bytes(data)
    manifest = {
        "schema": "cce.feed-manifest/v1",
        "records": len(records),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    mpath = args.out.with_name(args.out.stem + ".manifest.json")
    mpath.write_text(json.dumps(manifest, separators=(",", ":")) + "\n")
    print(
        f"{args.out}: {len(records)} records, {len(data)} bytes, sha256 {manifest['sha256']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
