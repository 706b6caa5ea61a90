"""`cce doctor` — the knowledge health checks (docs/spec/sync.md §7.2,
docs/spec/core.md §10.2), plus one additive advisory of ours: a stale or
missing derived search index.

Read-only. Failures are definite corruption or contract mismatch (exit 1);
advisories (old or tampered facets, secret-shaped ids, hidden text, no install
record, a stale derived index) keep exit 0. No line ever prints a raw secret: facets are
named, never shown, and record ids are shown through the redactor.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cce_knowledge import KNOWLEDGE_SCHEMA
from cce_knowledge.config.settings import Settings
from cce_knowledge.core.errors import CceError, StoreError
from cce_knowledge.core.hidden_text import Removed, scan
from cce_knowledge.core.native import disabled
from cce_knowledge.core.rustcompat import rs_lines, rs_trim_start
from cce_knowledge.engine.redaction.modes import DEFAULT_REDACTION, redact_for_display, redactor_for
from cce_knowledge.health.status import (
    KNOWLEDGE_NO_RECORD_NOTICE,
    check_installed_bytes,
    signature_info,
)
from cce_knowledge.retrieval import search_index_status
from cce_knowledge.retrieval.analyze_native import native_module
from cce_knowledge.semantic.status import semantic_status
from cce_knowledge.store.snapshots import (
    KnowledgeStore,
    knowledge_dir,
    load_current,
    no_store_message,
)
from cce_knowledge.store.vectors import vectors_path
from cce_knowledge.sync.accelerator import native
from cce_knowledge.sync.marker import read_marker_lenient
from cce_knowledge.sync.parts_pull import part_store
from cce_knowledge.sync.signing import load_allowed

DOCTOR_FAILED = "doctor found definite corruption or config drift (see above)"


@dataclass(slots=True)
class Report:
    lines: list[str] = field(default_factory=list)
    failures: int = 0
    advisories: int = 0

    def line(self, s: str) -> None:
        self.lines.append(s)

    def ok(self, msg: str) -> None:
        self.line(f"  ok        {msg}")

    def advisory(self, msg: str) -> None:
        self.advisories += 1
        self.line(f"  advisory  {msg}")

    def fail(self, msg: str) -> None:
        self.failures += 1
        parts = rs_lines(msg) or [""]
        self.line(f"  FAIL      {parts[0]}")
        for rest in parts[1:]:
            self.line(f"            {rs_trim_start(rest)}")

    @property
    def text(self) -> str:
        return "".join(s + "\n" for s in self.lines)


@dataclass(frozen=True, slots=True)
class DoctorOutcome:
    report: str
    failures: int
    advisories: int

    @property
    def healthy(self) -> bool:
        return self.failures == 0


def _plural(n: int, one: str = "", many: str = "s") -> str:
    return one if n == 1 else many


def scrub_scan(store: KnowledgeStore, redact: Callable[[str], str], r: Report) -> None:
    """Advisories for facets still secret-shaped (`redact(v) != v`) and for secret ids."""
    dirty_facets: set[str] = set()
    dirty_ids: set[str] = set()
    for c in store.chunks:
        if redact(c.record_id) != c.record_id:
            dirty_ids.add(redact(c.record_id))  # keyed by the redacted form: never printed raw
        facets: list[tuple[str, str | None]] = [
            ("content", c.content),
            ("kind", c.kind),
            ("name", c.name),
            ("source", c.source),
            ("title", c.title),
            ("url", c.url),
            ("state", c.state),
            ("state_reason", c.state_reason),
            ("updated_at", c.updated_at),
            ("group", c.group),
        ]
        for name, value in facets:
            if value is not None and name not in dirty_facets and redact(value) != value:
                dirty_facets.add(name)
        if "labels" not in dirty_facets and any(redact(v) != v for v in c.labels):
            dirty_facets.add("labels")
        if "links" not in dirty_facets and any(redact(v) != v for v in c.links):
            dirty_facets.add("links")
    if dirty_facets:
        r.advisory(
            "knowledge store carries un-redacted content in facet(s): "
            f"{', '.join(sorted(dirty_facets))} — it predates the redaction fix (or was "
            "tampered with); re-index the feed, and if it was pushed, re-push (a local "
            "re-index does NOT scrub the remote .cck)"
        )

    for rid in sorted({redact_for_display(i) for i in dirty_ids}):
        r.advisory(
            f"knowledge record id `{rid}` contains secret-shaped content; record ids are "
            "addressing keys and cannot be redacted by re-index — fix the source adapter to "
            "remove the secret from the id"
        )


def hidden_text_scan(store: KnowledgeStore, r: Report) -> None:
    """An advisory when chunks carry hidden text (core/hidden_text.py): a store indexed
    with `--redaction reference`, pulled from one, or from before hidden-text removal."""
    records: set[str] = set()
    total = Removed()
    for c in store.chunks:
        values: list[tuple[str, str, bool]] = [
            ("content", c.content, True),
            ("title", c.title, True),
        ]
        values += [
            (k, v, False)
            for k, v in (("url", c.url), ("source", c.source), ("group", c.group))
            if v is not None
        ]
        values += [("labels", v, False) for v in c.labels]
        found = scan(values)
        if found:
            records.add(c.record_id)
            for removed in found.values():
                total.add(removed)
    if records:
        points = f" ({total.code_points()})" if total.chars else ""
        r.advisory(
            f"knowledge store carries hidden text in {len(records)} record"
            f"{_plural(len(records))}: {total.describe()}{points} — text people do not see "
            "but agents read; it was indexed with --redaction reference (or before hidden "
            "text was removed): re-index with the default redaction"
        )


def _pulled_bytes_check(root: Path, r: Report) -> None:
    marker = read_marker_lenient(root)
    if marker is None:
        return  # a local ingest: provenance, not a finding
    cs = check_installed_bytes(root, marker)
    head = f"verify FAILED (checksum-only) for knowledge corpus `{marker.corpus_id}` (@{marker.snapshot})"
    repull = f"cce knowledge pull --corpus {marker.corpus_id}"
    if cs.state == "ok":
        r.ok(
            "pulled snapshot bytes match the install record "
            f"({marker.corpus_id}@{marker.snapshot} · {(cs.actual or '')[:12]})"
        )
    elif cs.state == "no-record":
        r.advisory(KNOWLEDGE_NO_RECORD_NOTICE)
    elif cs.state == "stale-marker":
        # The reference fails here too (it reads the marker's snapshot file, which
        # index's prune deleted); we say why, judging the store `current` names.
        r.fail(f"{head}\n  {cs.error}")
    elif cs.state == "unreadable":
        r.fail(
            f"{head}\n  the pulled knowledge store could not be read: {cs.error}\n"
            f"  Re-pull it with `{repull}`."
        )
    else:
        r.fail(
            f"{head}\n  expected : {cs.expected}\n  actual   : {cs.actual}\n"
            "  The pulled knowledge store does not match the bytes recorded at pull time — "
            f"corruption or local modification. Re-pull with `{repull}`.\n"
            "  (Checksum-only detects corruption, not a malicious build — and a knowledge "
            "corpus has NO rebuild-verify escalation path at all: the puller lacks the source "
            "feed. Trust stays with the pusher and the git host's access control.)"
        )


def _signature_check(root: Path, r: Report, settings: Settings) -> None:
    """Ours: who signed the pulled snapshot, and whether allowed signers accept it."""
    _allowed_signers_check(root, r, settings)
    info = signature_info(root, read_marker_lenient(root), settings)
    if info is None:
        return
    if info.state == "verified":
        r.ok(f"pulled snapshot {info.line()}")
    elif info.state == "unverified":
        r.advisory(f"pulled snapshot {info.line()}")
    else:
        r.fail(f"pulled snapshot: {info.line()}")


def _allowed_signers_check(root: Path, r: Report, settings: Settings) -> None:
    """The configured allowed-signers file's lines that pull skips (key types cce does
    not verify): listed, so a maintainer sees them without running a pull."""
    configured = settings.knowledge.sync.allowed_signers
    if not configured:
        return
    try:
        allowed = load_allowed(root, None, configured)
    except CceError as e:
        r.fail(f"allowed signers: {e.message}")
        return
    for warning in allowed.skipped if allowed is not None else ():
        r.advisory(f"allowed signers: {warning}")


def _search_index_check(root: Path, store: KnowledgeStore, r: Report) -> None:
    """Ours (additive): the derived search index should exist for the active snapshot.

    Advisory only — search rebuilds it on demand — but a missing or stale one
    makes the first query after a pull or re-index pay the whole build.
    """
    try:
        state = search_index_status(root)
    except Exception as e:  # the derived index is rebuildable: never a failure
        r.advisory(
            f"derived search index could not be inspected ({type(e).__name__}) — it is "
            "rebuilt on the next search"
        )
        return
    if state == "fresh":
        r.ok(f"derived search index is current (snapshot {store.snapshot})")
    elif state in ("stale", "missing"):
        r.advisory(
            f"derived search index is {state} for snapshot {store.snapshot} — the next search "
            "rebuilds it (run `cce knowledge search` once to warm it); it is local, never "
            "pushed, and safe to delete"
        )
    # "absent-store" cannot happen here (the store just loaded); say nothing.


def _semantic_check(root: Path, store: KnowledgeStore, r: Report, settings: Settings) -> None:
    """Ours (additive, silent unless configured or vectors exist): vector coverage, and
    vectors made with a model other than the configured one."""

    st = semantic_status(root, store.snapshot, settings)
    if st is None:
        return
    if st.problem:
        r.advisory(f"semantic retrieval: {st.problem}")
    if st.model is not None and not st.problem:
        if st.complete():
            r.ok(
                f"semantic vectors: {st.model} · {st.dim} dims · {st.embedded}/{st.total} "
                f"chunks{st.never_sent()}"
            )
        elif not st.embedded:
            r.advisory(
                f"semantic vectors: none for {st.model} yet — run `cce knowledge embed` "
                "(until then hybrid ranking shows the default ranking's results)"
            )
        else:
            r.advisory(
                f"semantic vectors: {st.embedded}/{st.total} chunks embedded with "
                f"{st.model} — run `cce knowledge embed` (hybrid ranking finds the others "
                "by their words only)"
            )

    for other in st.other_models:
        r.advisory(
            f"vectors made with {other} are present, but the configured model is "
            f"{st.model or '(none)'} — hybrid ranking does not use them; delete "
            f"{vectors_path(root, store.snapshot, other)} or configure that model"
        )


def _part_store_check(r: Report) -> None:
    """The local part store (`$CCE_HOME/sync/parts`, kept by pulls of parted corpora):
    every part verified against its name; damaged ones, strays and parts no kept
    snapshot names are removed (a later pull fetches what it lacks again)."""
    store = part_store()
    if not store.root.is_dir():
        return
    checked, removed = store.repair()
    n, size = store.usage()
    line = f"local part store {store.root}: {n} part{_plural(n)}, {size / 1e6:.1f} MB"
    if removed:
        r.advisory(f"{line} — removed {removed} damaged or unused file{_plural(removed)}")
    else:
        r.ok(f"{line} ({checked} verified)")


def _native_check(r: Report) -> None:
    """Ours (additive): say so when pulls, pushes or search-index builds run without
    their C accelerator.

    Silent when both are active, so a healthy install prints what the reference prints."""
    if disabled():
        why = "is disabled (CCE_NATIVE=0)"
    else:
        why = (
            "is not built — install a C compiler and the Python headers, then reinstall "
            "(`pip install -e .` in a checkout)"
        )
    if native() is None:
        r.advisory(
            f"the native .cck accelerator {why}; pulls and pushes give the same bytes but "
            "take several times longer on large corpora"
        )
    if native_module() is None:
        r.advisory(
            f"the native search-index analyser {why}; index and pull build the same "
            "search index, about three times slower"
        )


def _unparsable(settings: Settings) -> bool:
    return any(": not valid YAML (" in p for p in settings.problems)


def check_config(
    root: Path, r: Report, settings: Settings | None, config_problem: str | None
) -> None:
    """Ours (additive, silent for a clean or missing file): what is wrong with
    `.cce/config` — YAML that does not parse, unknown keys (each with its line and the
    closest known key), bad values — as advisories under their own heading."""
    problems = [config_problem] if config_problem is not None else []
    problems += list(settings.problems) if settings is not None else []
    if not problems:
        return
    r.line("config:")
    for p in problems:
        if p == config_problem:
            r.advisory(
                f"{p} — the checks below assume the defaults; commands that read "
                ".cce/config refuse it until it is fixed"
            )
        elif " is not read " in p or ": not valid YAML (" in p:
            r.advisory(p)  # says itself what is used instead
        elif "unknown key" in p:
            r.advisory(p)
        else:
            r.advisory(f"{p} — the commands that use this key refuse it until it is fixed")


def check_knowledge(
    root: Path,
    r: Report,
    redact: Callable[[str], str],
    settings: Settings | None = None,
    config_problem: str | None = None,
) -> None:
    """`settings`: the root's (None: read where needed). `config_problem`: why they
    could not be read, said under `config` (check_config), not here."""
    if not (knowledge_dir(root) / "current").exists():
        return
    r.line("knowledge:")
    try:
        store = load_current(root)
    except StoreError as e:
        r.fail(f"knowledge store cannot be loaded: {e.message} — re-ingest or re-pull")
        store = None
    if store is not None:
        if store.schema == KNOWLEDGE_SCHEMA:
            n, c = store.records, len(store.chunks)
            r.ok(
                f"contract {store.schema} · snapshot {store.snapshot} · {n} record{_plural(n)} · "
                f"{c} chunk{_plural(c)} · data as-of {store.data_as_of() or 'unknown'}"
            )
        else:
            r.fail(
                f"knowledge contract mismatch: the store says `{store.schema}`, this binary "
                f"speaks `{KNOWLEDGE_SCHEMA}` — re-ingest the feed (or re-pull the corpus)"
            )
        scrub_scan(store, redact, r)
        hidden_text_scan(store, r)
    _pulled_bytes_check(root, r)
    if settings is not None:
        _signature_check(root, r, settings)
    if store is not None:
        _search_index_check(root, store, r)
        # Without settings, or with YAML that does not parse (said under `config`),
        # the semantic settings are unknown.
        if settings is not None and not _unparsable(settings):
            _semantic_check(root, store, r, settings)
    _part_store_check(r)
    _native_check(r)


def run_doctor(
    root: str | os.PathLike[str],
    *,
    settings: Settings | None,
    config_problem: str | None = None,
    redact: Callable[[str], str] | None = None,
) -> DoctorOutcome:
    """The whole report. Raises StoreError (exit 1) only when there is nothing to check.

    `settings`: the root's, loaded by the caller; None with `config_problem` when
    `.cce/config` could not be read (said once, then each check does what it can)."""
    shown = os.fspath(root)
    if redact is None:
        # Judge the store by the redaction it is indexed with (knowledge.redaction).

        redact = redactor_for(settings.knowledge.redaction if settings else DEFAULT_REDACTION)
    rootp = Path(shown)
    if not rootp.is_dir():
        raise StoreError(f"not a directory: {shown}")
    code_index = rootp / ".cce" / "index.json"
    has_knowledge = (knowledge_dir(rootp) / "current").exists()
    if not code_index.exists() and not has_knowledge:
        # The reference names its code indexer here (`cce index`), which this tool does not
        # have: we name the commands that make a knowledge store instead.
        raise StoreError(no_store_message(shown))
    r = Report()
    r.line(f"cce doctor — {shown}")
    if code_index.exists():
        # We serve knowledge only; the code index belongs to the cce engine.
        r.line(
            f"code index: {shown}/.cce/index.json — not checked here (run the cce engine's `cce doctor`)"
        )
    check_config(rootp, r, settings, config_problem)
    check_knowledge(rootp, r, redact, settings, config_problem)
    r.line(
        f"summary: 1 store checked · {r.failures} failure{_plural(r.failures)} · "
        f"{r.advisories} advisor{_plural(r.advisories, 'y', 'ies')}"
    )
    return DoctorOutcome(report=r.text, failures=r.failures, advisories=r.advisories)
