"""`cce sync pull --all --into <dir>`: install the cache's knowledge corpus (docs/spec/sync.md §6.3).

cce-knowledge carries no code artifacts, so code-repo members are reported as
skipped; the knowledge step follows the reference's selection rules and never
fails the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cce_knowledge.config.settings import Settings
from cce_knowledge.core.errors import CceError
from cce_knowledge.core.untrusted import shown
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.clone import open_cache
from cce_knowledge.sync.listing import CorpusRow, _repo_rows, corpus_row
from cce_knowledge.sync.pull import pull_corpus
from cce_knowledge.sync.remote import Remote, resolve_listing_remote
from cce_knowledge.sync.signing import SignatureRefused

if TYPE_CHECKING:
    from cce_knowledge.store.snapshots import SearchBuild


@dataclass
class PullAllResult:
    remote: str
    lines: list[str] = field(default_factory=list)
    pulled: int = 0
    up_to_date: int = 0
    skipped: int = 0
    #: "pulled", "up-to-date", "skipped" or None (no corpus in the cache)
    knowledge: str | None = None
    #: the derived search index built (or found stale and rebuilt) for the corpus
    search: SearchBuild | None = None
    #: why the corpus was refused under allowed signers (the command then fails)
    refusal: str | None = None

    @property
    def report(self) -> str:
        return "".join(self.lines) + (
            f"summary       : {self.pulled} pulled · {self.up_to_date} up-to-date · "
            f"{self.skipped} skipped\n"
        )


def _row(status: str, what: str) -> str:
    return f"  {'knowledge':<16} {status:<12}{what}\n"


def pull_all(
    into: str | os.PathLike[str],
    remote: str | Remote | None = None,
    corpus: str | None = None,
    *,
    settings: Settings,
    after_install: Callable[[str], SearchBuild] | None = None,
    allowed_signers: str | None = None,
) -> PullAllResult:
    """`cce sync pull --all`. `after_install(snapshot)` runs under the writer lock after
    a pull, and when the corpus is up to date (the CLI makes sure the search index is
    there: it builds it only when missing or stale). `settings`: `into`'s, loaded by
    the caller.

    `allowed_signers` (else `knowledge.sync.allowed_signers` of `into`): the rules of
    `knowledge pull`; a refusal is reported in `refusal` (the CLI exits 1), unlike the
    other knowledge problems, which are warnings."""
    rem = resolve_listing_remote(settings, remote)
    with open_cache(rem) as cache:
        ids = cache.list_corpora()
        repos = _repo_rows(cache)
        rows: dict[str, CorpusRow] = {i: corpus_row(cache, i) for i in ids}
    res = PullAllResult(remote=rem.display)
    res.lines.append(f"remote        : {rem.display}\n\n")
    if not repos:
        if ids:
            res.lines.append("No code repos cached — the cache carries only knowledge corpora.\n\n")
        else:
            res.lines.append("The cache is empty — nothing has been pushed yet.\n")
    for r in repos:
        res.skipped += 1
        res.lines.append(
            f"  warning: skipped code repo {shown(r.repo_id)} — cce-knowledge installs knowledge "
            "corpora only\n"
        )
    listed = ", ".join(shown(i) for i in ids)
    chosen: str | None = None
    if corpus is not None:
        if corpus in ids:
            chosen = corpus
        else:
            res.lines.append(
                f"  warning: skipped knowledge — corpus `{shown(corpus)}` is not in the cache "
                f"(it carries: {listed})\n"
            )
            res.knowledge = "skipped"
    elif len(ids) == 1:
        chosen = ids[0]
    elif len(ids) > 1:
        res.lines.append(
            f"  warning: skipped knowledge — the cache carries {len(ids)} corpora "
            f"({listed}); one active corpus per root — pass --corpus <id> to install one\n"
        )
        res.knowledge = "skipped"
    if chosen is None:
        if res.knowledge == "skipped":
            res.skipped += 1
        return res
    res.knowledge = _knowledge(
        res, into, rem, settings, chosen, rows[chosen].current, after_install, allowed_signers
    )
    if res.knowledge == "pulled":
        res.pulled += 1
    elif res.knowledge == "up-to-date":
        res.up_to_date += 1
    else:
        res.skipped += 1
    return res


def _knowledge(
    res: PullAllResult,
    into: str | os.PathLike[str],
    rem: Remote,
    settings: Settings,
    chosen: str,
    current: str | None,
    after_install: Callable[[str], SearchBuild] | None = None,
    allowed_signers: str | None = None,
) -> str:
    """Install `chosen` unless the installed store already is its remote `current`; the
    outcome ("pulled", "up-to-date", "skipped") with its row appended to `res.lines`."""
    name = shown(chosen)
    if not current:
        res.lines.append(
            f"  warning: skipped knowledge corpus {name} — no `current` pointer on the remote\n"
        )
        return "skipped"
    if not K.is_snapshot_id(current):
        res.lines.append(
            f"  warning: skipped knowledge corpus {name} — {K.bad_pointer(name, current)}\n"
        )
        return "skipped"
    try:
        # pull_corpus decides "up to date" (and then fetches and writes nothing), as
        # `cce knowledge pull` does.
        pr = pull_corpus(
            into,
            corpus=chosen,
            snapshot=current,
            remote=rem,
            settings=settings,
            after_install=after_install,
            if_current=after_install,
            allowed_signers=allowed_signers,
        )
    except SignatureRefused as e:
        res.lines.append(f"  error: refused knowledge corpus {name} — {e.message}\n")
        res.refusal = e.message
        return "skipped"
    except CceError as e:
        res.lines.append(f"  warning: skipped knowledge corpus {name} — {e.message}\n")
        return "skipped"
    res.search = pr.search
    if pr.up_to_date:
        res.lines.append(_row("up-to-date", f"{chosen}@{current}"))
        return "up-to-date"
    res.lines.append(_row("pulled", f"{chosen}@{pr.snapshot}  → .cce/knowledge/"))
    return "pulled"
