"""Vectors published with a corpus: push writes them beside the artifact, pull installs
the ones made by the consumer's model.

    knowledge/v1/<corpus_id>/vectors/<snapshot>-<model key>.vec

The file is the local vectors file as is (its header names provider, model and
dimension and carries its own checksum). It never changes the `.cck`, `current` or
`corpus.json`; the reference engine lists and prunes only `*.cck` keys, so it neither
reads nor counts these (docs/spec/sync.md §4.7, §6.1). Our push prunes a corpus's
vectors whose snapshot has no artifact any more.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from cce_knowledge.core.atomic import atomic_write_parts
from cce_knowledge.core.errors import CceError, StoreError
from cce_knowledge.core.untrusted import open_regular
from cce_knowledge.store.vectors import (
    CheckedCopy,
    Meta,
    VectorFile,
    in_place,
    list_files,
    max_size,
    model_key,
    parse_name,
    vectors_path,
)
from cce_knowledge.sync import keys as K

if TYPE_CHECKING:
    from cce_knowledge.config.settings import SemanticSettings, Settings
    from cce_knowledge.sync.clone import GitCache

VEC_ATTR_LINE = "*.vec filter=lfs diff=lfs merge=lfs -text"


def vectors_prefix(corpus_id: str) -> str:
    return f"{K.corpus_prefix(corpus_id)}/vectors"


def vectors_key(corpus_id: str, snapshot: str, model: str) -> str:
    return f"{vectors_prefix(corpus_id)}/{snapshot}-{model_key(model)}.vec"


def outgoing_vectors(
    root: str | os.PathLike[str], snapshot: str, model: str | None
) -> list[tuple[str, bytes]]:
    """(model, bytes) of the local vectors file of `snapshot` made by `model` (the
    configured one; None: semantic retrieval is off, nothing is published) when it is
    complete enough: valid, checksum verified, at least one vector. Files another
    model left behind stay local: a consumer pulls only its own model's vectors, and a
    leftover would be published with every snapshot."""
    if not model:
        return []
    path = vectors_path(root, snapshot, model)
    try:
        data = path.read_bytes()  # read once: verified and published as is
        vf = VectorFile(data, verify=True, where=str(path))
    except (OSError, StoreError):
        return []
    m = vf.meta
    if m.snapshot != snapshot or m.model != model or vf.present() == 0:
        return []
    return [(m.model, data)]


def stale_vector_keys(cache: GitCache, corpus_id: str) -> list[str]:
    """Published vectors whose snapshot has no `.cck` on the remote (pruned or never)."""
    names = cache.ls_tree_names("-r", "--name-only", cache.origin, vectors_prefix(corpus_id) + "/")
    snaps = {k.rsplit("/", 1)[-1][: -len(".cck")] for k in cache.list_cck(corpus_id)}
    doomed = []
    for key in names:
        got = parse_name(key.rsplit("/", 1)[-1])
        if got is not None and got[0] not in snaps:
            doomed.append(key)
    return doomed


def install_pulled_vectors(
    root: str | os.PathLike[str],
    cache: GitCache,
    corpus_id: str,
    snapshot: str,
    cfg: SemanticSettings,
    expected: dict[str, str] | None = None,
    *,
    count: int,
    layout: str,
) -> str:
    """Fetch, check and install the published vectors for cfg's model: `count` rows
    (the pulled store's chunks) in search index `layout`. Returns a line for the user
    saying what happened (installed, none published, or why not).

    `expected` (a verified signed statement's `vectors`): the file must be listed there
    with the same sha256, else it is refused (and nothing is installed)."""
    key = vectors_key(corpus_id, snapshot, cfg.model)
    if not cache.has(key):
        return _other_models(cache, corpus_id, snapshot, cfg)
    # The size first: a file larger than `count` rows of the widest vectors is refused
    # before a byte of it is fetched or read (3,000,000 rows for 11 chunks).
    size = cache.artifact_size(key)
    limit = max_size(count)
    if size is None or size > limit:
        return (
            f"published vectors refused: {key} holds {size} bytes, more than {count} "
            f"chunks can take ({limit})"
        )
    if expected is not None and key not in expected:
        return f"published vectors refused: {key} is not listed in the signed statement"
    try:
        meta, present = _install(
            root,
            cache,
            key,
            snapshot,
            cfg,
            count=count,
            layout=layout,
            sha256=None if expected is None else expected[key],
        )
    except StoreError as e:
        return f"published vectors refused: {e.message}"
    return (
        f"installed published vectors: {present}/{meta.count} chunks, "
        f"{meta.model} ({meta.dim} dimensions)"
    )


def _other_models(cache: GitCache, corpus_id: str, snapshot: str, cfg: SemanticSettings) -> str:
    names = cache.ls_tree_names("-r", "--name-only", cache.origin, vectors_prefix(corpus_id) + "/")
    others = [n for n in names if n.rsplit("/", 1)[-1].startswith(snapshot + "-")]
    if not others:
        return "no vectors published with this snapshot"
    models = []
    for n in others:
        size = cache.artifact_size(n)
        if size is None or size > max_size(1 << 20):
            continue  # only its header is wanted: never read a huge file for it
        try:
            models.append(VectorFile(cache.read_artifact(n), where=n).meta.model)
        except StoreError:
            continue
    return (
        f"published vectors were made with {', '.join(sorted(models)) or 'another model'}, "
        f"not {cfg.model}: not fetched"
    )


def _install(
    root: str | os.PathLike[str],
    cache: GitCache,
    key: str,
    snapshot: str,
    cfg: SemanticSettings,
    *,
    count: int,
    layout: str,
    sha256: str | None = None,
) -> tuple[Meta, int]:
    """Copy the published file into place as it is checked (CheckedCopy): all or nothing.
    `sha256`: the digest a signed statement lists for it (checked before the rename)."""
    src = cache.artifact_source(key)
    dest = vectors_path(root, snapshot, cfg.model)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with io.BytesIO(src) if isinstance(src, bytes) else open_regular(src) as f:
            copy = CheckedCopy(f, count=count, layout=layout, where=key)
            own_dim = _local_dim(root, cfg, snapshot)
            parts = _checked(copy, snapshot, cfg, own_dim)
            if sha256 is not None:
                parts = _digest_is(parts, sha256, key)
            atomic_write_parts(dest, parts)
    except OSError as e:
        raise StoreError(f"{key}: cannot be read or installed ({e.strerror or e})") from e
    assert copy.meta is not None
    return copy.meta, copy.present


def _digest_is(parts: Iterator[bytes], sha256: str, key: str) -> Iterator[bytes]:
    """The parts as they come; raises after the last one (before the file is renamed
    into place) when their digest is not `sha256`."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
        yield part
    if h.hexdigest() != sha256:
        raise StoreError(f"{key} is not what the signed statement lists")


def _checked(
    copy: CheckedCopy, snapshot: str, cfg: SemanticSettings, own_dim: int | None
) -> Iterator[bytes]:
    """The copy's parts, refusing after the header a file of another model, snapshot,
    or a dimension this machine's own vectors of the model contradict."""
    for n, part in enumerate(copy.parts()):
        if n == 0:
            m = copy.meta
            assert m is not None
            if m.model != cfg.model or m.snapshot != snapshot:
                raise StoreError(f"{copy.where} names model {m.model}@{m.snapshot}")
            if own_dim is not None and m.dim != own_dim:
                raise StoreError(
                    f"{copy.where} has {m.dim} dimensions, but {cfg.model} answers "
                    f"{own_dim} here (the vectors of other snapshots)"
                )
        yield part


def _local_dim(root: str | os.PathLike[str], cfg: SemanticSettings, snapshot: str) -> int | None:
    """The dimension this machine's own vectors of cfg's provider and model have (other
    snapshots' files), None when there are none."""
    mk = model_key(cfg.model)
    for snap, key, path in list_files(root):
        if key != mk or snap == snapshot:
            continue
        try:
            m = VectorFile.open(path).meta
        except StoreError:
            continue
        if m.model == cfg.model and m.provider == cfg.provider:
            return m.dim
    return None


def pull_published_vectors(
    root: str | os.PathLike[str],
    corpus_id: str,
    snapshot: str,
    remote: str | None,
    settings: Settings,
    expected: dict[str, str] | None = None,
    *,
    count: int,
    layout: str,
) -> str | None:
    """After a pull: install the corpus's published vectors for the configured model
    (`count` rows in search index `layout`, see install_pulled_vectors). None when
    semantic retrieval is not configured; else a line for the user. Never raises for a
    vectors problem: the pulled store is what matters."""
    # GitPython (~50 ms) only when vectors are configured and a cache is opened.
    from cce_knowledge.sync.clone import open_cache
    from cce_knowledge.sync.remote import resolve_remote  # with the line above

    try:
        cfg = settings.knowledge.semantic_config()
    except CceError:
        return None  # the embed step that follows names the config problem
    if cfg is None:
        return None
    here = vectors_path(root, snapshot, cfg.model)
    if in_place(here, model=cfg.model, layout=layout, count=count) is not None:
        return None  # this snapshot's vectors for the model are here: the embed step fills gaps
    try:
        rem = resolve_remote(settings, remote)
        with open_cache(rem) as cache:
            return install_pulled_vectors(
                root, cache, corpus_id, snapshot, cfg, expected, count=count, layout=layout
            )
    except CceError as e:
        return f"published vectors not fetched: {e.message}"
