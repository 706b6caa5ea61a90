"""A3S knowledge base → records from its promoted `wiki/**/*.md` tree only.

Per the A3S knowledge-compilation protocol, only the managed, promoted `wiki/` tree is
searchable: `sources/` and `.a3s/compilation-output/` (staged, possibly failed output)
are never read — we only ever walk `wiki/`. A document must be lowercase-`.md`, a
regular file (symlinks are not a publication mechanism), with closed YAML frontmatter
carrying the OKF `type` field; anything else is skipped with a warning naming the file.

Mapping: title ← `title` (else first heading, else file name); group ← `type`;
labels ← `tags`; updated_at ← `updated_at`/`updated`/`last_updated`/`date` (else the
file's last commit); url ← `url`/`source_url` (else the file at its last commit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.errors import ExtractError
from cce_knowledge.core.hidden_text import Removed
from cce_knowledge.extract.docs import title_and_body, without_hidden
from cce_knowledge.extract.frontmatter import (
    FrontmatterError,
    meta_list,
    meta_str,
    split_frontmatter,
)
from cce_knowledge.extract.gitmeta import git_info
from cce_knowledge.extract.mdtree import Warn, read_text


@dataclass(slots=True)
class OkfOptions:
    root: str
    source: str = "okf"
    id_prefix: str = "okf:"


def _wiki_files(wiki: Path, warn: Warn) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(wiki, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            p = Path(dirpath, name)
            rel = p.relative_to(wiki).as_posix()
            if name.startswith(".") or not name.endswith(".md"):
                continue
            if p.is_symlink() or not p.is_file():
                warn(f"skipping wiki/{rel}: not a regular file (symlinks are not published)")
                continue
            found.append((rel, p))
    found.sort(key=lambda t: t[0])
    return found


def extract_okf(
    opts: OkfOptions, *, warn: Warn, hidden: dict[str, Removed] | None = None
) -> list[KnowledgeRecord]:
    """The promoted wiki's records, without hidden text (counted into `hidden`)."""
    kb = Path(opts.root)
    if not kb.is_dir():
        raise ExtractError(f"--root {opts.root}: not a directory")
    wiki = kb / "wiki"
    if wiki.is_symlink() or not wiki.is_dir():
        raise ExtractError(
            f"{opts.root} has no promoted wiki/ tree — a knowledge base with no successful "
            "compilation has nothing searchable (sources/ and staged output are never read)"
        )
    info = git_info(kb)
    if info is not None and info.shallow:
        # A wiki's pages usually carry their own date; the cut history cannot date the
        # others, so they go without one rather than with the cut's (docs refuses).
        warn(
            f"{opts.root} is in a shallow git clone: pages without a date of their own get "
            "no updated_at (fetch the whole history, `fetch-depth: 0`, to date them)"
        )
    out: list[KnowledgeRecord] = []
    for rel, p in _wiki_files(wiki, warn):
        display = f"{opts.root.rstrip('/')}/wiki/{rel}"
        try:
            doc = split_frontmatter(read_text(p, display), path=display)
        except FrontmatterError as e:
            warn(f"skipping {e.message}")
            continue
        meta = doc.meta
        okf_type = meta_str(meta, "type") if meta is not None else None
        if okf_type is None:
            why = "no YAML frontmatter" if meta is None else "frontmatter has no OKF `type` field"
            warn(f"skipping {display}: {why}")
            continue
        assert meta is not None
        title, body = title_and_body(meta, doc.body, Path(rel).stem)
        updated = meta_str(meta, "updated_at", "updated", "last_updated", "date")
        url = meta_str(meta, "url", "source_url")
        hit = info.lookup(p) if info else None
        if hit and info is not None:
            updated = updated or info.updated_at(hit[1])
            url = url or info.file_url(*hit)
        out.append(
            KnowledgeRecord(
                id=opts.id_prefix + rel,
                title=title,
                body=body,
                source=opts.source,
                url=url,
                state=meta_str(meta, "status", "state"),
                updated_at=updated,
                labels=list(dict.fromkeys(meta_list(meta, "tags", "labels"))),
                group=okf_type,
            )
        )
    return without_hidden(out, hidden)
