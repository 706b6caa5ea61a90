"""What a `cce knowledge pull` fetches, and from where (issue 35 §2).

Like `git pull` with an upstream: a pull given no corpus and no remote refreshes what is
installed from where it came. The chain for each, first set wins:

- corpus: `--corpus`, `knowledge.sync.corpus_id`, the installed store's marker
  (synced.json); with none, `pull_corpus` asks the cache for its only corpus;
- remote: `--remote`, `knowledge.sync.remote`, `sync.remote`, the remote the installed
  corpus was pulled from (pulled-from.json).

Flags and config always win over the record; where a winner and a value below it
disagree, a note says which one was used. The files under .cce/knowledge are untrusted:
a recorded corpus id that is not a valid one is not used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from cce_knowledge.config.settings import Settings
from cce_knowledge.core.untrusted import shown
from cce_knowledge.core.urls import display_url
from cce_knowledge.sync.keys import valid_corpus_id
from cce_knowledge.sync.marker import read_marker_lenient, read_pulled_from

#: Where a value came from, as a note names it.
CORPUS_FLAG = "--corpus"
CORPUS_CONFIG = "knowledge.sync.corpus_id in .cce/config"
CORPUS_INSTALLED = "the installed store, synced.json"
REMOTE_FLAG = "--remote"
REMOTE_KNOWLEDGE = "knowledge.sync.remote in .cce/config"
REMOTE_SYNC = "sync.remote in the config"
REMOTE_INSTALLED = "where the installed corpus was pulled from, pulled-from.json"


@dataclass(frozen=True)
class PullTarget:
    """The corpus and remote to pull (None: left to `pull_corpus`'s own rules), where
    each came from, and a note per disagreement."""

    corpus: str | None
    remote: str | None
    corpus_source: str | None = None
    remote_source: str | None = None
    notes: list[str] = field(default_factory=list)


def _first(
    candidates: list[tuple[str, str | None]],
    what: str,
    notes: list[str],
    form: Callable[[str], str] = str,
) -> tuple[str | None, str | None]:
    """The first set value and its source; a note for each later one whose `form` (how
    it is compared and shown) differs."""
    chosen = [(src, v) for src, v in candidates if v]
    if not chosen:
        return None, None
    src, value = chosen[0]
    for other_src, other in chosen[1:]:
        if form(other) != form(value):
            notes.append(
                f"{what} {shown(form(value))} ({src}), not {shown(form(other))} ({other_src}): "
                f"{'a flag' if src.startswith('--') else 'the config'} wins"
            )
    return value, src


def resolve_pull_target(
    root: str | os.PathLike[str],
    settings: Settings,
    corpus: str | None,
    remote: str | None,
) -> PullTarget:
    """The pull's corpus and remote by the chains above."""
    marker = read_marker_lenient(root)
    installed = marker.corpus_id if marker is not None else None
    if installed is not None and not valid_corpus_id(installed):
        installed = None
    recorded = read_pulled_from(root, installed) if installed is not None else None
    notes: list[str] = []
    ks = settings.knowledge.sync
    # A --corpus that differs from the installed corpus needs no note: the pull's
    # marker guard names both and asks for --force.
    cid, csrc = _first(
        [(CORPUS_FLAG, corpus), (CORPUS_CONFIG, ks.corpus_id)]
        + ([] if corpus else [(CORPUS_INSTALLED, installed)]),
        "pulling corpus",
        notes,
    )
    if corpus is not None:  # even empty: `pull_corpus` refuses an invalid one by name
        cid, csrc = corpus, CORPUS_FLAG
    url, rsrc = _first(
        [
            (REMOTE_FLAG, remote),
            (REMOTE_KNOWLEDGE, ks.remote),
            (REMOTE_SYNC, settings.sync.remote),
            (REMOTE_INSTALLED, recorded),
        ],
        "pulling from",
        notes,
        display_url,  # compared and shown without credentials
    )
    return PullTarget(cid, url, csrc, rsrc, [f"note: {n}" for n in notes])
