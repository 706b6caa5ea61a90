"""`cce sync init`: point a project at a cache remote (docs/spec/sync.md §3.4).

Unlike the reference (which rewrites `.cce/config` with only a `sync:` block), we
edit the file in place with ruamel.yaml's round-trip mode: `knowledge:`,
`markdown:`, other keys and comments survive. The remote is stored WITHOUT any
credentials; a token belongs in `CCE_SYNC_TOKEN` / `GITHUB_TOKEN` at run time.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from cce_knowledge.config.reader import CONFIG_REL, Unparsable, compose_text, config_path
from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.errors import ConfigError
from cce_knowledge.sync.clone import CCE_ATTR_LINE, CCK_ATTR_LINE, open_cache
from cce_knowledge.sync.remote import make_remote
from cce_knowledge.sync.repo_id import origin_repo_id


@dataclass
class InitResult:
    remote: str
    lfs: bool
    repo_id: str | None
    clone_dir: Path
    config: str
    backup: Path | None = None

    @property
    def report(self) -> str:
        return (
            f"Configured sync remote: {self.remote}\n"
            f"  git-LFS       : {'enabled (*.cck, *.cce)' if self.lfs else 'disabled'}\n"
            f"  repo_id       : {self.repo_id or '(resolved from git origin at push time)'}\n"
            f"  working clone : {self.clone_dir}\n"
            f"  config        : {self.config}\n"
        )


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def _to_text(doc: Any) -> str:
    buf = io.StringIO()
    _yaml().dump(doc, buf)
    return buf.getvalue()


def edit_config_text(
    text: str | None, remote: str, lfs: bool, repo_id: str | None
) -> tuple[str, bool]:
    """New config text with the `sync:` keys set; (text, rewrote_unparsable_file)."""
    doc: Any = None
    rewrote = False
    if text:
        try:
            # The readers use PyYAML: a file they cannot parse is replaced, not patched;
            # one beyond their limits (alias bomb, deep nesting) is refused.
            compose_text(text, CONFIG_REL)
            doc = _yaml().load(text)
        except (YAMLError, Unparsable):
            doc, rewrote = None, True
    if doc is None:
        doc = CommentedMap()
    if not isinstance(doc, CommentedMap):
        doc, rewrote = CommentedMap(), True
    sync = doc.get("sync")
    if not isinstance(sync, CommentedMap):
        sync = CommentedMap()
        doc["sync"] = sync
    sync["remote"] = remote
    sync["lfs"] = lfs
    if repo_id is not None:
        sync["repo_id"] = repo_id
    elif "repo_id" not in sync:
        sync["repo_id"] = None
    if "auto_pull" not in sync:
        sync["auto_pull"] = False
    if "retention" not in sync:
        sync["retention"] = "all"
    return _to_text(doc), rewrote


def sync_init(
    root: str | os.PathLike[str],
    remote: str,
    lfs: bool = True,
    repo_id: str | None = None,
    *,
    configured_repo_id: str | None,
) -> InitResult:
    """Prove `remote`, then point `.cce/config` at it. `configured_repo_id`: the file's
    `sync.repo_id` as the caller loaded it (kept when `repo_id` is not given)."""
    rem = make_remote(remote)
    path = config_path(root)
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {e}") from e
    if repo_id is None and not configured_repo_id:
        # Unset: derive it from the project's own git origin, as the reference does.
        repo_id = origin_repo_id(root)
    text, rewrote = edit_config_text(old, rem.url, lfs, repo_id)
    # The remote is proven (cloned, and its LFS patterns committed) before the config
    # is written: a remote that cannot be reached leaves .cce/config as it was.
    with open_cache(rem, for_write=lfs) as cache:
        if lfs:
            # Both patterns in one commit: knowledge artifacts (*.cck) and the cce
            # engine's code artifacts (*.cce), which may share the cache. The reference
            # commits only *.cce here and *.cck on the first push.
            cache.ensure_attributes(
                {"*.cck": CCK_ATTR_LINE, "*.cce": CCE_ATTR_LINE},
                "cce sync: enable git-LFS for *.cck and *.cce",
            )
        clone = cache.dir
    backup = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if rewrote and old is not None:
            # An unparsable file is replaced (as the reference does) but never lost.
            backup = path.with_name("config.bak")
            atomic_write(backup, old.encode("utf-8"))
        atomic_write(path, text.encode("utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e}") from e
    # The edit keeps a configured repo_id; else it writes the derived or given one.
    kept_repo_id = repo_id if repo_id is not None else configured_repo_id
    return InitResult(
        remote=rem.display,
        lfs=lfs,
        repo_id=kept_repo_id,
        clone_dir=clone,
        config=f"{os.fspath(root)}/.cce/config",
        backup=backup,
    )
