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

import os
from typing import TYPE_CHECKING

from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.errors import CceError, StoreError
from cce_knowledge.store.vectors import VectorFile, model_key, parse_name, vectors_path
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
) -> str:
    """Fetch, verify and install the published vectors for cfg's model. Returns a line
    for the user saying what happened (installed, none published, or why not)."""

    key = vectors_key(corpus_id, snapshot, cfg.model)
    if not cache.has(key):
        names = cache.ls_tree_names(
            "-r", "--name-only", cache.origin, vectors_prefix(corpus_id) + "/"
        )
        others = [n for n in names if n.rsplit("/", 1)[-1].startswith(snapshot + "-")]
        if not others:
            return "no vectors published with this snapshot"
        models = []
        for n in others:
            try:
                models.append(VectorFile(cache.read_artifact(n), where=n).meta.model)
            except StoreError:
                continue
        return (
            f"published vectors were made with {', '.join(sorted(models)) or 'another model'}, "
            f"not {cfg.model}: not fetched"
        )
    data = cache.read_artifact(key)
    try:
        vf = VectorFile(data, verify=True, where=key)
    except StoreError as e:
        return f"published vectors refused: {e.message}"
    if vf.meta.model != cfg.model or vf.meta.snapshot != snapshot:
        return f"published vectors refused: {key} names model {vf.meta.model}@{vf.meta.snapshot}"
    dest = vectors_path(root, snapshot, cfg.model)
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(dest, data)
    return (
        f"installed published vectors: {vf.present()}/{vf.meta.count} chunks, "
        f"{vf.meta.model} ({vf.meta.dim} dimensions)"
    )


def pull_published_vectors(
    root: str | os.PathLike[str],
    corpus_id: str,
    snapshot: str,
    remote: str | None,
    settings: Settings,
) -> str | None:
    """After a pull: install the corpus's published vectors for the configured model.
    None when semantic retrieval is not configured; else a line for the user. Never
    raises for a vectors problem: the pulled store is what matters."""
    # GitPython (~50 ms) only when vectors are configured and a cache is opened.
    from cce_knowledge.sync.clone import open_cache
    from cce_knowledge.sync.remote import resolve_remote  # with the line above

    try:
        cfg = settings.knowledge.semantic_config()
    except CceError:
        return None  # the embed step that follows names the config problem
    if cfg is None:
        return None
    try:
        rem = resolve_remote(settings, remote)
        with open_cache(rem) as cache:
            return install_pulled_vectors(root, cache, corpus_id, snapshot, cfg)
    except CceError as e:
        return f"published vectors not fetched: {e.message}"
