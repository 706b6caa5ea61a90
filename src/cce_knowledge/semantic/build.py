"""Embed a root's chunks: the missing ones only, in batches, written atomically.

A chunk's vector is keyed by the provider, the model and the sha256 of the exact
text sent (the model's document prefix included, so changing the prefix re-embeds),
so a rebuild embeds only what changed and a vector is reused across snapshots. A batch the provider rejects is skipped and named; an unreachable
provider stops the run; either way every vector that came back is written.

Lazy imports: numpy loads only when vectors are made or written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cce_knowledge.core import progress
from cce_knowledge.core.atomic import atomic_write, atomic_write_parts, dir_lock
from cce_knowledge.core.errors import CceError, ConfigError, StoreError
from cce_knowledge.retrieval.search_index import INDEX_KEY, SearchIndex, open_or_build
from cce_knowledge.semantic.prefixes import resolve
from cce_knowledge.semantic.provider import MAX_BATCH, Provider, ProviderError, ProviderUnreachable
from cce_knowledge.semantic.textprep import chunk_text, text_key
from cce_knowledge.store.snapshots import load_current, no_store_message, read_current, store_path
from cce_knowledge.store.vectors import (
    KEY_BYTES,
    ZERO_KEY,
    Meta,
    VectorFile,
    encode,
    in_place,
    list_files,
    model_key,
    vectors_dir,
    vectors_path,
)

if TYPE_CHECKING:
    import numpy as np

    from cce_knowledge.config.settings import SemanticSettings, Settings

LAST_RUN = "last-run.json"
#: Vectors that came back are written every CHECKPOINT batches, so a kill loses little.
CHECKPOINT = 16


@dataclass
class EmbedReport:
    provider: str
    model: str
    dim: int | None
    snapshot: str
    total: int  # chunks of the store (live sections)
    embedded: int  # chunks with a vector after the run
    new: int  # texts embedded by this run
    reused: int  # chunks whose vector was already known
    unsendable: int  # binary or empty: never sent
    requests: int
    failed_batches: list[str] = field(default_factory=list)
    unreachable: str | None = None
    path: str = ""
    kept_previous: bool = False  # a --rebuild cut short left the previous file in place

    @property
    def missing(self) -> int:
        return self.total - self.embedded

    @property
    def pending(self) -> int:
        """Chunks that could be sent and still have no vector."""
        return self.missing - self.unsendable

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["missing"] = self.missing
        d["pending"] = self.pending
        return d


def layout_key() -> str:
    """The search index layout the rows follow (its format and parameters)."""
    return INDEX_KEY


def _active_index(root: Path) -> SearchIndex:
    """The search index of the active store, built if missing or stale."""
    try:
        snapshot = read_current(root)
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(no_store_message(root)) from e
    return open_or_build(root, snapshot, lambda: load_current(root))


def chunk_texts(idx: SearchIndex, prefix: str = "") -> list[str | None]:
    """The text sent for each chunk of `idx`, the document `prefix` in front."""
    out: list[str | None] = []
    for c in range(idx.n_chunks):
        doc = idx.doc(c)
        out.append(chunk_text(doc[2], doc[4], doc[10], prefix))
    return out


def _known(
    root: Path, cfg: SemanticSettings, snapshot: str, dim: int | None
) -> tuple[dict[bytes, np.ndarray], int | None]:
    """Vectors already on disk for this model: the current snapshot's file (any
    provider: it may have been pulled) and other snapshots' files of the same provider."""
    known: dict[bytes, np.ndarray] = {}
    mk = model_key(cfg.model)
    for snap, key, path in list_files(root):
        if key != mk:
            continue
        try:
            vf = VectorFile.open(path)
        except StoreError:
            continue
        m = vf.meta
        if m.model != cfg.model or (m.provider != cfg.provider and snap != snapshot):
            continue
        if dim is None:
            dim = m.dim
        if m.dim != dim:
            continue
        for i in vf.present_mask().nonzero()[0].tolist():
            k = vf.key(i)
            if k not in known:
                known[k] = vf.matrix[i].copy()
    return known, dim


def _unit(vec: list[float]) -> np.ndarray | None:
    import numpy as np

    v = np.asarray(vec, dtype=np.float64)
    n = float(np.sqrt(np.dot(v, v)))
    if not n > 0.0:
        return None
    return (v / n).astype("<f4")


def embed_root(
    root: str | os.PathLike[str],
    cfg: SemanticSettings,
    *,
    rebuild: bool = False,
    warn: Callable[[str], None] | None = None,
    provider: Provider | None = None,
    leave_current: bool = False,
) -> EmbedReport:
    """Embed every chunk of the active store that has no vector yet for `cfg`'s model.

    `leave_current` (the step of `index` and `pull`): when the snapshot's file already
    holds every sendable chunk's vector for these texts, touch nothing — no lock, no
    rewrite, no run record — so an unchanged pull leaves the directory as it was."""

    root_p = Path(root)
    idx = _active_index(root_p)
    snapshot = idx.snapshot
    texts = chunk_texts(idx, resolve(cfg).document)
    keys = [text_key(t) if t is not None else ZERO_KEY for t in texts]
    out_path = vectors_path(root_p, snapshot, cfg.model)
    if leave_current and not rebuild:
        meta = in_place(
            out_path, model=cfg.model, layout=layout_key(), count=len(keys), keys=b"".join(keys)
        )
        if meta is not None:
            return _current_report(cfg, keys, texts, meta, out_path)
    own = provider is None
    prov = Provider(cfg) if provider is None else provider
    say = warn or (lambda _m: None)
    if prov.key_note:
        say(prov.key_note)
    d = vectors_dir(root_p)
    try:
        with dir_lock(d, what="embed", wait=True):
            known, dim = ({}, None) if rebuild else _known(root_p, cfg, snapshot, None)
            rep = _new_report(cfg, snapshot, keys, texts, known, dim, out_path)
            run = _Run(cfg, keys, known, out_path, rep, rebuild)
            _embed_missing(run, prov, texts, say)
            if not _keep_previous(run):
                _write(run)
            _prune(root_p, keep=out_path.name)
            _save_last_run(d, rep)
    finally:
        if own:
            prov.close()
    return rep


@dataclass
class _Run:
    """What one embed run's batches and checkpoint writes share (under the lock)."""

    cfg: SemanticSettings
    keys: list[bytes]  # per chunk of the store, ZERO_KEY for an unsendable one
    known: dict[bytes, np.ndarray]  # grows as batches come back
    out_path: Path
    rep: EmbedReport
    rebuild: bool = False  # write only at the end, and not if the provider went away


def _new_report(
    cfg: SemanticSettings,
    snapshot: str,
    keys: list[bytes],
    texts: list[str | None],
    known: dict[bytes, np.ndarray],
    dim: int | None,
    out_path: Path,
) -> EmbedReport:
    return EmbedReport(
        provider=cfg.provider,
        model=cfg.model,
        dim=dim,
        snapshot=snapshot,
        total=len(keys),
        embedded=0,
        new=0,
        reused=sum(1 for k in keys if k != ZERO_KEY and k in known),
        unsendable=sum(1 for t in texts if t is None),
        requests=0,
        path=str(out_path),
    )


def _current_report(
    cfg: SemanticSettings,
    keys: list[bytes],
    texts: list[str | None],
    meta: Meta,
    out_path: Path,
) -> EmbedReport:
    """The report of a run that found every sendable chunk's vector in place (`meta`:
    the header `in_place` read)."""
    rep = _new_report(cfg, meta.snapshot, keys, texts, {}, meta.dim, out_path)
    rep.reused = rep.embedded = sum(1 for k in keys if k != ZERO_KEY)
    return rep


def _todo(
    keys: list[bytes], texts: list[str | None], known: dict[bytes, np.ndarray]
) -> tuple[list[bytes], dict[bytes, str]]:
    """The keys to send, in chunk order, each once (equal texts share a vector)."""
    todo: list[bytes] = []
    text_of: dict[bytes, str] = {}
    for k, t in zip(keys, texts, strict=True):
        if t is not None and k not in known and k not in text_of:
            text_of[k] = t
            todo.append(k)
    return todo, text_of


def _embed_missing(
    run: _Run, prov: Provider, texts: list[str | None], say: Callable[[str], None]
) -> None:
    """Send the missing texts in batches, writing a checkpoint every CHECKPOINT batches."""
    todo, text_of = _todo(run.keys, texts, run.known)
    rep = run.rep
    requests0 = prov.requests
    with progress.task("embed", total=len(todo), unit="chunks") as bar:
        for b, start in enumerate(range(0, len(todo), MAX_BATCH)):
            batch = todo[start : start + MAX_BATCH]
            try:
                vecs = prov.embed([text_of[k] for k in batch])
            except ProviderUnreachable as e:
                rep.unreachable = e.message
                break
            except ProviderError as e:
                if _skip_rejected(run, prov, b, batch, e.message, say):
                    break
                continue
            finally:
                rep.requests = prov.requests - requests0
            _accept(run, prov, batch, vecs)
            bar.advance(len(batch))
            if (b + 1) % CHECKPOINT == 0 and not run.rebuild:
                _write(run)


def _skip_rejected(
    run: _Run,
    prov: Provider,
    b: int,
    batch: list[bytes],
    message: str,
    say: Callable[[str], None],
) -> bool:
    """Name a batch the provider rejected; True when the run must stop because the
    provider's dimension no longer matches the vectors kept so far."""
    name = f"batch {b + 1} ({len(batch)} texts from chunk {run.keys.index(batch[0]) + 1})"
    run.rep.failed_batches.append(f"{name}: {message}")
    say(f"embedding {name} was rejected and skipped: {message}")
    return prov.dim is not None and run.rep.dim is not None and prov.dim != run.rep.dim


def _accept(run: _Run, prov: Provider, batch: list[bytes], vecs: list[list[float]]) -> None:
    """Keep a batch's vectors (unit length); a dimension change needs a rebuild."""
    rep = run.rep
    if rep.dim is None:
        rep.dim = prov.dim
    elif prov.dim != rep.dim:
        raise ConfigError(
            f"{run.cfg.model} now answers {prov.dim}-dimensional vectors but the stored "
            f"ones have {rep.dim}: run `cce knowledge embed --rebuild`"
        )
    for k, v in zip(batch, vecs, strict=True):
        u = _unit(v)
        if u is not None:
            run.known[k] = u
            rep.new += 1


def _keep_previous(run: _Run) -> bool:
    """A `--rebuild` the provider did not see through keeps the previous vectors file:
    replacing it would throw away every vector the run did not get back."""
    if not (run.rebuild and run.rep.unreachable):
        return False
    try:
        vf = VectorFile.open(run.out_path)
    except StoreError:
        return False  # nothing usable to keep: write what came back
    rep = run.rep
    rep.kept_previous = True
    rep.embedded = vf.present() if vf.meta.count == len(run.keys) else 0
    rep.dim = vf.meta.dim
    return True


def _write(run: _Run) -> None:
    """Write the whole file (every known vector, in chunk order) atomically."""
    import numpy as np

    rep, keys = run.rep, run.keys
    if rep.dim is None:
        return  # nothing known and nothing came back: no file to write
    mat = np.zeros((len(keys), rep.dim), dtype="<f4")
    kb = bytearray(len(keys) * KEY_BYTES)
    have = 0
    for i, k in enumerate(keys):
        v = run.known.get(k)
        if v is not None:
            mat[i] = v
            kb[i * KEY_BYTES : (i + 1) * KEY_BYTES] = k
            have += 1
    meta = Meta(run.cfg.provider, run.cfg.model, rep.dim, len(keys), rep.snapshot, layout_key())
    atomic_write_parts(run.out_path, encode(meta, bytes(kb), mat))
    rep.embedded = have


def _prune(root: Path, keep: str) -> None:
    """Drop vectors of snapshots whose store is gone (best effort)."""

    for snap, _mk, path in list_files(root):
        if path.name != keep and not store_path(root, snap).exists():
            try:
                os.unlink(path)
            except OSError:
                pass


def _save_last_run(d: Path, rep: EmbedReport) -> None:

    try:
        atomic_write(d / LAST_RUN, (json.dumps(rep.to_json(), sort_keys=True) + "\n").encode())
    except OSError:
        pass


def last_run(root: str | os.PathLike[str]) -> dict[str, object] | None:
    try:
        doc = json.loads((vectors_dir(root) / LAST_RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def missing_note(rep: EmbedReport, *, rerun: bool = False) -> str | None:
    """The warning for a run that left chunks without vectors (None when complete).
    `rerun`: the run was `cce knowledge embed` itself, so say to run it again."""
    if rep.kept_previous:
        return (
            f"the rebuild did not finish (provider unreachable: {rep.unreachable}); the "
            f"previous vectors are kept ({rep.embedded}/{rep.total} chunks): run "
            "`cce knowledge embed --rebuild` again once that is fixed"
        )
    if rep.pending <= 0:
        return None
    why = []
    if rep.unreachable:
        why.append(f"provider unreachable: {rep.unreachable}")
    if rep.failed_batches:
        why.append(f"{len(rep.failed_batches)} batch(es) rejected")
    if rep.unsendable:
        why.append(f"{rep.unsendable} chunk(s) binary or empty, never sent")
    reason = "; ".join(why) or "not embedded"
    then = (
        "run `cce knowledge embed` again once that is fixed"
        if rerun
        else "`cce knowledge embed` finishes the job"
    )
    return f"{rep.pending} of {rep.total} chunks have no vector ({reason}); {then}"


def embed_after_build(
    root: str | os.PathLike[str],
    settings: Settings,
    *,
    warn: Callable[[str], None],
) -> EmbedReport | None:
    """The embed step of `index`/`pull`: only when semantic is configured, and it never
    fails the build — a problem becomes a warning and `cce knowledge embed` retries."""

    try:
        cfg = settings.knowledge.semantic_config()
    except CceError as e:
        warn(f"semantic vectors not built: {e.message}")
        return None
    if cfg is None:
        return None
    try:
        rep = embed_root(root, cfg, warn=warn, leave_current=True)
    except CceError as e:
        warn(f"semantic vectors not built: {e.message}")
        return None
    note = missing_note(rep)
    if note:
        warn(note)
    return rep
