"""Markdown docs tree → one `cce.knowledge/v1` record per file (docs-flatten).

Title: frontmatter `title`, else the first heading, else the file name. A leading
heading used as the title is removed from the body (the indexer renders
`# {title}` itself). Labels: frontmatter `labels`/`tags`; group: `group`/`category`.
`updated_at` and `url` come from the last commit that touched the file; a shallow clone
is refused (its history cannot say when a file last changed) unless `allow_shallow`,
which leaves `updated_at` out of the files the cut history cannot date.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.errors import ExtractError, UsageError
from cce_knowledge.core.hidden_text import Removed
from cce_knowledge.core.urls import display_url
from cce_knowledge.extract.feed import sanitize_record
from cce_knowledge.extract.frontmatter import first_heading, meta_list, meta_str, split_frontmatter
from cce_knowledge.extract.gitmeta import GitInfo, git_info, shallow_refusal
from cce_knowledge.extract.mdtree import DEFAULT_GLOBS, Warn, read_text, walk


@dataclass(slots=True)
class DocsOptions:
    root: str | None = None
    repo: str | None = None
    ref: str | None = None
    globs: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    source: str = "docs"
    id_prefix: str = "docs:"
    url_base: str | None = None  # overrides the web URL derived from the remote
    #: Read a shallow clone anyway, leaving out the `updated_at` it cannot know.
    allow_shallow: bool = False

    def __post_init__(self) -> None:
        if (self.root is None) == (self.repo is None):
            raise UsageError("give exactly one of --root DIR or --repo GIT_URL")
        if self.ref and not self.repo:
            raise UsageError("--ref only applies with --repo")


def title_and_body(meta: dict[str, object] | None, body: str, fallback: str) -> tuple[str, str]:
    """Pick the title; drop a leading heading that merely repeats it."""
    title = meta_str(meta, "title") if meta else None
    head = first_heading(body)
    lines = body.split("\n")
    leading = head is not None and all(not ln.strip() for ln in lines[: head[2]])
    if head is not None and leading and (title is None or head[0] == title):
        title = title or head[0]
        end = head[3]
        body = "\n".join(lines[end:])
    elif title is None and head is not None:
        title = head[0]
    if not title:
        title = fallback
    return title, body.lstrip("\n")


def markdown_record(
    rel: str,
    path: Path,
    *,
    display: str,
    rec_id: str,
    source: str,
    info: GitInfo | None,
    url_base: str | None = None,
) -> KnowledgeRecord:
    doc = split_frontmatter(read_text(path, display), path=display)
    meta = doc.meta or {}
    title, body = title_and_body(doc.meta, doc.body, Path(rel).stem)
    updated = url = None
    hit = info.lookup(path) if info else None
    if hit and info is not None:
        top_rel, commit = hit
        updated = info.updated_at(commit)
        if url_base:
            url = f"{url_base.rstrip('/')}/{commit.sha}/{quote(top_rel, safe='/')}"
        else:
            url = info.file_url(top_rel, commit)
    return KnowledgeRecord(
        id=rec_id,
        title=title,
        body=body,
        source=source,
        url=meta_str(meta, "url") or url,
        state=meta_str(meta, "status", "state"),
        updated_at=meta_str(meta, "updated_at", "updated") or updated,
        labels=list(dict.fromkeys(meta_list(meta, "labels", "tags"))),
        group=meta_str(meta, "group", "category"),
    )


@contextmanager
def checkout(opts: DocsOptions) -> Iterator[tuple[Path, str | None]]:
    """The tree to read: `--root` as is, or a temporary clone of `--repo` at `--ref`."""
    if opts.root is not None:
        root = Path(opts.root)
        if not root.is_dir():
            raise ExtractError(f"--root {opts.root}: not a directory")
        yield root, None
        return
    # Lazy: GitPython costs ~60-130 ms; only a docs tree inside a git work tree needs it.
    import git

    assert opts.repo is not None
    shown = display_url(opts.repo)
    with tempfile.TemporaryDirectory(prefix="cce-docs-") as tmp:
        try:
            repo = git.Repo.clone_from(opts.repo, tmp, multi_options=["--no-recurse-submodules"])
        except git.GitCommandError as e:
            err = (e.stderr or "").strip().splitlines()
            raise ExtractError(
                f"cannot clone {shown}: {err[-1] if err else 'git clone failed'}"
            ) from None
        try:
            if opts.ref:
                try:
                    repo.git.checkout("--detach", opts.ref)
                except git.GitCommandError:
                    try:
                        repo.git.checkout("--detach", f"origin/{opts.ref}")
                    except git.GitCommandError:
                        raise ExtractError(f"--ref {opts.ref} not found in {shown}") from None
        finally:
            repo.close()
        yield Path(tmp), opts.repo


def without_hidden(
    records: list[KnowledgeRecord], hidden: dict[str, Removed] | None
) -> list[KnowledgeRecord]:
    """Each record without hidden text; what went is recorded in `hidden` by id."""
    out = []
    for rec in records:
        clean, removed = sanitize_record(rec)
        if removed and hidden is not None:
            hidden[rec.id] = removed
        out.append(clean)
    return out


def extract_docs(
    opts: DocsOptions, *, warn: Warn | None = None, hidden: dict[str, Removed] | None = None
) -> list[KnowledgeRecord]:
    """One record per Markdown file, without hidden text (counted into `hidden`)."""
    with checkout(opts) as (root, remote):
        info = git_info(root, remote_url=remote)
        shown = opts.root if opts.root is not None else display_url(opts.repo or "")
        if info is not None and info.shallow and not opts.allow_shallow:
            raise ExtractError(shallow_refusal(shown))
        files = walk(root, include=opts.globs or DEFAULT_GLOBS, exclude=opts.exclude, warn=warn)
        records = [
            markdown_record(
                rel,
                p,
                display=f"{shown.rstrip('/')}/{rel}",
                rec_id=opts.id_prefix + rel,
                source=opts.source,
                info=info,
                url_base=opts.url_base,
            )
            for rel, p in files
        ]
        return without_hidden(records, hidden)
