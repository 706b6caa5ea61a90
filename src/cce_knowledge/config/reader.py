"""`<root>/.cce/config` (YAML) read with the reference engine's tolerance rules.

The reference deserialises each block with serde_yaml 0.9 (YAML 1.2 scalars): only
`true`/`false` spellings are booleans, a quoted number is a string, `yes`/`on` are
strings, and a type error anywhere in a block resets the WHOLE block to defaults
(docs/spec/core.md §10.1, docs/spec/sync.md §3.4). PyYAML's `safe_load` resolves
YAML 1.1 types, so we compose the node graph and type each scalar from its source
text ourselves.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.errors import ConfigError
from cce_knowledge.core.urls import display_url

if TYPE_CHECKING:
    import yaml
else:

    class _LazyYaml:
        """PyYAML, imported on first use: most commands never read a config file,
        and the import costs ~15 ms of every cold start."""

        def __getattr__(self, name: str) -> Any:
            import yaml as real

            return getattr(real, name)

    yaml = _LazyYaml()

CONFIG_REL = Path(".cce") / "config"

_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULL = {"~", "null", "Null", "NULL", ""}
_DEC_FLOAT = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
_RUST_SPECIAL_FLOAT = re.compile(r"^[+-]?(?:inf|infinity|nan)$", re.IGNORECASE)


class _TypeError(Exception):
    """A value of the wrong YAML type: the enclosing block falls back to defaults."""


class _Invalid(Exception):
    """The file cannot be parsed as YAML at all."""


def config_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / CONFIG_REL


def _compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        raise _Invalid(str(e)) from e


def _load_root(path: Path) -> yaml.Node | None:
    """The composed document, or None for a missing/empty file. Raises _Invalid."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise _Invalid(str(e)) from e
    return _compose(text)


def _mapping(node: yaml.Node | None) -> dict[str, yaml.Node] | None:
    """A mapping node's entries (None for a null node). Duplicate keys are an error."""
    if node is None or _is_null(node):
        return None
    if not isinstance(node, yaml.MappingNode):
        raise _TypeError("expected a mapping")
    out: dict[str, yaml.Node] = {}
    for k, v in node.value:
        if not isinstance(k, yaml.ScalarNode):
            raise _TypeError("non-scalar key")
        if k.value in out:
            raise _TypeError(f"duplicate entry with key {k.value!r}")
        out[k.value] = v
    return out


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.style is None and node.value in _NULL


def _plain(node: yaml.Node) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise _TypeError("expected a scalar")
    if node.style is not None:
        raise _TypeError("quoted scalar where a number/bool was expected")
    return str(node.value)


def as_bool(node: yaml.Node) -> bool:
    v = _plain(node)
    if v not in _BOOL:
        raise _TypeError(f"invalid bool {v!r}")
    return _BOOL[v]


def _parse_int(v: str) -> int | None:
    s = v
    neg = False
    if s[:1] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    base = 10
    for prefix, b in (("0x", 16), ("0o", 8), ("0b", 2)):
        if s.startswith(prefix):
            s, base = s[2:], b
            break
    if not s or not all(c in "0123456789abcdefABCDEF"[: base if base <= 10 else 22] for c in s):
        return None
    n = int(s, base)
    return -n if neg else n


def as_uint(node: yaml.Node) -> int:
    n = _parse_int(_plain(node))
    if n is None or n < 0 or n >= 2**64:
        raise _TypeError("invalid unsigned integer")
    return n


def as_float(node: yaml.Node) -> float:
    """serde_yaml's f64: ints, `.inf`/`.nan` spellings, or a finite Rust-parsable float."""
    v = _plain(node)
    n = _parse_int(v)
    if n is not None:
        return float(n)
    unpos = v[1:] if v.startswith("+") else v
    if v.startswith("+") and unpos[:1] in "+-":
        raise _TypeError("invalid float")
    if unpos in (".inf", ".Inf", ".INF"):
        return float("inf")
    if v in ("-.inf", "-.Inf", "-.INF"):
        return float("-inf")
    if v in (".nan", ".NaN", ".NAN"):
        return float("nan")
    if _DEC_FLOAT.match(unpos) or _RUST_SPECIAL_FLOAT.match(unpos):
        f = float(unpos)
        if f == f and f not in (float("inf"), float("-inf")):
            return f
    raise _TypeError(f"invalid float {v!r}")


def as_opt_str(node: yaml.Node | None) -> str | None:
    """A string field: any scalar's raw text; null spellings give None."""
    if node is None or _is_null(node):
        return None
    if not isinstance(node, yaml.ScalarNode):
        raise _TypeError("expected a string")
    return str(node.value)


def _block(root_node: yaml.Node | None, *path: str) -> dict[str, yaml.Node] | None:
    m = _mapping(root_node)
    for name in path:
        if m is None:
            return None
        m = _mapping(m.get(name))
    return m


# ---------------------------------------------------------------- markdown / knowledge


@dataclass(frozen=True)
class MarkdownConfig:
    max_section_tokens: int = 400


@dataclass(frozen=True)
class KnowledgeConfig:
    enabled: bool = True
    min_score: float = 0.30
    default_source: str = "both"


def load_markdown_config(root: str | os.PathLike[str]) -> MarkdownConfig:
    try:
        blk = _block(_load_root(config_path(root)), "markdown")
        if blk is None:
            return MarkdownConfig()
        budget = 400
        if "max_section_tokens" in blk and not _is_null(blk["max_section_tokens"]):
            budget = as_uint(blk["max_section_tokens"]) or 400
        return MarkdownConfig(max_section_tokens=budget)
    except (_Invalid, _TypeError):
        return MarkdownConfig()


def load_knowledge_config(root: str | os.PathLike[str]) -> KnowledgeConfig:
    try:
        blk = _block(_load_root(config_path(root)), "knowledge")
        if blk is None:
            return KnowledgeConfig()
        enabled = True
        min_score = 0.30
        default_source = "both"
        if "enabled" in blk and not _is_null(blk["enabled"]):
            enabled = as_bool(blk["enabled"])
        if "min_score" in blk and not _is_null(blk["min_score"]):
            f = as_float(blk["min_score"])
            if f == f and f not in (float("inf"), float("-inf")):
                min_score = f
        if "default_source" in blk:
            s = as_opt_str(blk["default_source"])
            if s in ("code", "knowledge", "both"):
                default_source = s
        # The reference also deserialises `knowledge.sync` inside this block; a type
        # error there is a type error of the block.
        if "sync" in blk:
            _parse_knowledge_sync(blk["sync"])
        return KnowledgeConfig(enabled=enabled, min_score=min_score, default_source=default_source)
    except (_Invalid, _TypeError):
        return KnowledgeConfig()


def load_extra_knowledge_key(root: str | os.PathLike[str], key: str) -> str | None:
    """One of OUR additive `knowledge.<key>` string keys (e.g. `ranking`).

    Read on its own so a bad value never resets the reference's keys, and the
    reference (which ignores unknown keys) reads the same file unchanged.
    """
    try:
        blk = _block(_load_root(config_path(root)), "knowledge")
        if blk is None:
            return None
        return as_opt_str(blk.get(key))
    except (_Invalid, _TypeError):
        return None


# ---------------------------------------------------------------- semantic (ours)

SEMANTIC_PROVIDERS = ("ollama", "openai")
OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434"
#: Environment overrides of `knowledge.semantic` (the Action and CI jobs set these).
SEMANTIC_ENV = {
    "provider": "CCE_EMBED_PROVIDER",
    "url": "CCE_EMBED_URL",
    "model": "CCE_EMBED_MODEL",
}


@dataclass(frozen=True)
class SemanticConfig:
    """`knowledge.semantic`: where chunks and queries are embedded (never the API key)."""

    provider: str
    url: str
    model: str


def _ollama_url(env: Mapping[str, str]) -> str:
    host = (env.get("OLLAMA_HOST") or "").strip()
    if not host:
        return OLLAMA_DEFAULT_URL
    # Ollama accepts `host:port` without a scheme.
    return host if "://" in host else f"http://{host}"


def load_semantic_config(
    root: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> SemanticConfig | None:
    """The embedding provider, or None when semantic retrieval is not configured.

    `knowledge.semantic` in `.cce/config`, each key overridable by CCE_EMBED_PROVIDER /
    CCE_EMBED_URL / CCE_EMBED_MODEL. Our own key: the reference engine ignores it.
    Raises ConfigError naming the field when the block is present but unusable.
    """
    env = os.environ if env is None else env
    path = config_path(root) if root is not None else None
    raw: dict[str, str | None] = {"provider": None, "url": None, "model": None}
    where = f"{path}: knowledge.semantic" if path is not None else "knowledge.semantic"
    if path is not None and path.exists():
        try:
            blk = _block(_load_root(path), "knowledge")
            node = blk.get("semantic") if blk is not None else None
            sem = _mapping(node)
            if sem is not None:
                for key in raw:
                    raw[key] = as_opt_str(sem.get(key))
                extra = sorted(set(sem) - set(raw))
                if extra:
                    raise ConfigError(
                        f"{where}: unknown key {extra[0]!r} (expected provider, url, model)"
                    )
        except _Invalid as e:
            raise ConfigError(f"{path}: not valid YAML ({e})") from e
        except _TypeError as e:
            raise ConfigError(f"{where}: {e}") from e
    for key, var in SEMANTIC_ENV.items():
        v = env.get(var)
        if v:
            raw[key] = v
    if not any(raw.values()):
        return None
    provider = (raw["provider"] or "ollama").strip()
    if provider not in SEMANTIC_PROVIDERS:
        raise ConfigError(
            f"{where}.provider: {provider!r} is not a provider (expected ollama or openai)"
        )
    model = (raw["model"] or "").strip()
    if not model:
        raise ConfigError(f"{where}.model: required (e.g. nomic-embed-text)")
    url = (raw["url"] or "").strip()
    if not url:
        if provider == "openai":
            raise ConfigError(f"{where}.url: required for the openai provider")
        url = _ollama_url(env)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("http", "https"):
        raise ConfigError(f"{where}.url: {display_url(url)!r} is not an http(s) URL")
    return SemanticConfig(provider=provider, url=url.rstrip("/"), model=model)


# ---------------------------------------------------------------- sync blocks


@dataclass(frozen=True)
class KnowledgeSyncConfig:
    corpus_id: str | None = None
    remote: str | None = None
    retention: str = "all"


def _parse_knowledge_sync(node: yaml.Node | None) -> KnowledgeSyncConfig:
    m = _mapping(node)
    if m is None:
        return KnowledgeSyncConfig()
    corpus_id = as_opt_str(m.get("corpus_id")) or None
    remote = as_opt_str(m.get("remote")) or None
    retention = as_opt_str(m.get("retention")) or "all"
    return KnowledgeSyncConfig(corpus_id=corpus_id, remote=remote, retention=retention)


def load_knowledge_sync_config(root: str | os.PathLike[str]) -> KnowledgeSyncConfig:
    """`knowledge.sync` from the PROJECT file only; any error anywhere => defaults."""
    try:
        blk = _block(_load_root(config_path(root)), "knowledge")
        if blk is None:
            return KnowledgeSyncConfig()
        return _parse_knowledge_sync(blk.get("sync"))
    except (_Invalid, _TypeError):
        return KnowledgeSyncConfig()


@dataclass(frozen=True)
class SyncConfig:
    remote: str | None = None
    lfs: bool = True
    repo_id: str | None = None
    ref: str | None = None
    auto_pull: bool = False
    retention: str = "all"


def _parse_sync(root_node: yaml.Node | None) -> SyncConfig:
    m = _block(root_node, "sync")
    if m is None:
        return SyncConfig()
    kw: dict[str, Any] = {}
    for key in ("remote", "repo_id", "ref"):
        kw[key] = as_opt_str(m.get(key)) or None
    for key, default in (("lfs", True), ("auto_pull", False)):
        node = m.get(key)
        kw[key] = default if node is None or _is_null(node) else as_bool(node)
    kw["retention"] = as_opt_str(m.get("retention")) or "all"
    return SyncConfig(**kw)


def global_config_path() -> Path | None:
    home = os.environ.get("CCE_HOME")
    if home:
        return Path(home) / "config.yml"
    h = os.environ.get("HOME")
    return Path(h) / ".cce" / "config.yml" if h else None


def load_sync_config(root: str | os.PathLike[str], *, warn: bool = True) -> SyncConfig:
    """The `sync:` block: project file, inheriting the global `sync.remote` when unset.

    A malformed project file warns on stderr and stays all-local (no remote).
    """
    proj = config_path(root)
    glob = global_config_path()

    def load_global() -> SyncConfig | None:
        if glob is None:
            return None
        try:
            node = _load_root(glob)
        except _Invalid:
            return None
        if node is None:
            return None
        try:
            return _parse_sync(node)
        except _TypeError:
            return None

    if proj.exists():
        try:
            node = _load_root(proj)
            cfg = _parse_sync(node)
        except (_Invalid, _TypeError) as e:
            if warn:
                print(
                    f"warning: project sync config {proj} is malformed and was ignored ({e}); "
                    "staying all-local — fix the file or run `cce sync init` to rewrite it",
                    file=sys.stderr,
                )
            return SyncConfig()
        if cfg.remote is None:
            g = load_global()
            if g is not None and g.remote:
                cfg = SyncConfig(**{**cfg.__dict__, "remote": g.remote})
        return cfg
    return load_global() or SyncConfig()


def parse_retention(value: str | None) -> int | None:
    """`keep-last-<n>` -> n; anything else (including `all` and typos) -> None (keep all)."""
    if value is None:
        return None
    v = value.strip(" \t\n\r\x0b\x0c")
    m = re.fullmatch(r"keep-last-\+?([0-9]+)", v)
    if not m:
        return None
    n = int(m.group(1))
    return n if n < 2**64 else None
