"""The project's settings: `<root>/.cce/config` read once into one typed object.

`load_settings(root)` is called at the edge (a CLI command, the MCP server, a library
entry point given no settings) and the `Settings` it returns is passed down; nothing
below the edge reads the file again.

The blocks the reference engine also reads (`markdown`, `knowledge`, `knowledge.sync`,
`sync`) keep its tolerance rules (config/reader.py): a type error resets the block to
its defaults and is never an error. Keys that are ours alone (`knowledge.ranking`, and
the blocks listed in `EXTENSION_BLOCKS`) are read on their own, so a bad value never
resets a reference key.

The classes are plain frozen dataclasses so that reading settings costs no pydantic
import (measured: `from pydantic import BaseModel` is ~80 ms, as long as a whole cold
`cce knowledge search`); pydantic validates our extension blocks (config/validate.py)
and generates the published JSON Schema from these same classes (config/schema.py).
"""

from __future__ import annotations

import math
import os
import sys
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from cce_knowledge.config.check import line_of, retention_problem, unknown_keys
from cce_knowledge.config.choices import DEFAULT_REDACTION, Redaction
from cce_knowledge.config.reader import (
    Unparsable,
    WrongType,
    as_bool,
    as_float,
    as_opt_str,
    as_uint,
    block,
    config_path,
    foreign_tags,
    is_null,
    key_of,
    load_document,
    mapping,
    parse_retention,
    to_python,
)
from cce_knowledge.config.validate import validate_value
from cce_knowledge.core.errors import ConfigError
from cce_knowledge.core.untrusted import shown
from cce_knowledge.core.urls import display_url

if TYPE_CHECKING:
    import yaml

#: Lets pydantic take each field's docstring as its JSON Schema description.
_SCHEMA_CONFIG: Any = {"use_attribute_docstrings": True}

Ranking = Literal["default", "reference", "hybrid"]
Source = Literal["code", "knowledge", "both"]
SemanticProvider = Literal["ollama", "openai"]

DEFAULT_SECTION_TOKENS = 400
#: Seconds one embedding request may take in all (connect, headers, body).
DEFAULT_SEMANTIC_TIMEOUT = 120.0
MAX_SEMANTIC_TIMEOUT = 86_400.0
DEFAULT_KNOWLEDGE_MIN_SCORE = 0.30
OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434"
#: Environment overrides of `knowledge.semantic` (the Action and CI jobs set these).
SEMANTIC_ENV = {
    "provider": "CCE_EMBED_PROVIDER",
    "url": "CCE_EMBED_URL",
    "model": "CCE_EMBED_MODEL",
}
#: Keys of `knowledge.semantic` read from the file only (their text kept as is).
SEMANTIC_PREFIX_KEYS = ("query_prefix", "document_prefix")


@dataclass(frozen=True)
class MarkdownSettings:
    """How markdown bodies are split into sections."""

    __pydantic_config__ = _SCHEMA_CONFIG

    max_section_tokens: int = DEFAULT_SECTION_TOKENS
    """Token budget (a non-negative integer) of one section before it is split
    further; 0 means 400."""


@dataclass(frozen=True)
class KnowledgeSyncSettings:
    """Where `cce knowledge push|pull` publish and fetch this project's corpus."""

    __pydantic_config__ = _SCHEMA_CONFIG

    corpus_id: str | None = None
    """The corpus identity in the cache repository (never derived)."""
    remote: str | None = None
    """Git URL of the cache repository; wins over `sync.remote`."""
    retention: str = "all"
    """`all`, or `keep-last-<n>`: snapshots kept on the remote after a push."""
    retention_problem: str | None = None
    """Not a key (left out of the schema): why `retention` is not a policy. The
    reference reads it as `all`; `push` refuses it instead (see `keep_last`)."""
    signing_key: str | None = None
    """Ours: path of the OpenSSH private key `cce knowledge push` signs with (relative
    to the project root; `--sign-key` and CCE_SIGNING_KEY win). Unset: unsigned."""
    allowed_signers: str | None = None
    """Ours: path of an OpenSSH allowed_signers file (relative to the project root;
    `--allowed-signers` wins). Set, pull installs only snapshots signed by a key it
    lets sign in namespace `cce-knowledge`, never older than the one installed."""
    parts: str = "auto"
    """Ours: how `push` publishes the `.cck`: `auto` (a plain `.cck` up to 32 MiB, else
    in parts), `always` (parts, plus the plain `.cck` up to 32 MiB) or `never` (a plain
    `.cck` whatever its size, as the reference does)."""

    @property
    def keep_last(self) -> int | None:
        """n of `keep-last-<n>`; None keeps every snapshot. Raises ConfigError (exit 2)
        naming the value and the allowed ones when `retention` is not a policy."""
        if self.retention_problem is not None:
            raise ConfigError(self.retention_problem)
        return parse_retention(self.retention)


@dataclass(frozen=True)
class SemanticSettings:
    """Where chunks and queries are embedded for semantic retrieval (never the API
    key: that comes from CCE_EMBED_API_KEY only)."""

    __pydantic_config__ = _SCHEMA_CONFIG

    provider: SemanticProvider = "ollama"
    """`ollama` (the default) or `openai` (any OpenAI-compatible embeddings API).
    CCE_EMBED_PROVIDER overrides it."""
    url: str = OLLAMA_DEFAULT_URL
    """Base http(s) URL of the provider; required for `openai`. For `ollama` the
    default is `$OLLAMA_HOST`, else http://127.0.0.1:11434. CCE_EMBED_URL overrides it."""
    model: str = ""
    """The embedding model (e.g. `nomic-embed-text`); required, here or in
    CCE_EMBED_MODEL, which overrides it."""
    timeout: float = DEFAULT_SEMANTIC_TIMEOUT
    """Seconds one request to the provider may take in all, from connecting to the
    last byte of the answer (a slow drip does not extend it); more than 0, at most
    86400. A request past it counts as the provider being unreachable."""
    query_prefix: str | None = None
    """Text put before every query sent to the model. Unset: the model family's own
    instruction (e.g. `search_query: ` for nomic-embed-text, `query: ` for e5; see
    docs/semantic.md); `""` sends none."""
    document_prefix: str | None = None
    """Text put before every chunk sent to the model. Unset: the model family's own
    (e.g. `search_document: ` for nomic-embed-text, `passage: ` for e5); `""` sends
    none. Changing it re-embeds every chunk (a vector is keyed by the text sent)."""


@dataclass(frozen=True)
class KnowledgeSettings:
    """The knowledge layer: indexing and search."""

    __pydantic_config__ = _SCHEMA_CONFIG

    enabled: bool = True
    """`false` refuses `cce knowledge index`."""
    min_score: float = DEFAULT_KNOWLEDGE_MIN_SCORE
    """Score floor of the reference ranking when none is given."""
    default_source: Source = "both"
    """Which source a combined search reads by default."""
    sync: KnowledgeSyncSettings = field(default_factory=KnowledgeSyncSettings)
    """The cache repository of `cce knowledge push|pull`."""
    ranking: Ranking | None = None
    """Ours: the ranking `search`/`ask`/MCP use when `--ranking` is not given."""
    ranking_problem: str | None = None
    """Not a key (left out of the schema): why `ranking` is not a ranking; the
    commands that would use it refuse it (retrieval/rankings.py)."""
    redaction: Redaction = DEFAULT_REDACTION
    """Ours: the secret redaction `cce knowledge index` applies when `--redaction` is
    not given. `extended` (the default): hidden text removed (HTML comments outside code,
    Unicode tag, bidi and zero-width characters), then the reference's rules plus the
    shapes of a maintained secret-scanning rule set; `reference`: the reference engine's
    rules exactly, hidden text kept (byte-exact stores)."""
    chunk_policy: str | None = None
    """Ours: a `cce.chunk-policy/v1` file (relative to the project root) that
    `cce knowledge index` applies when `--chunk-policy` is not given: the records its
    rules select are chunked by their policy, the others by the reference chunker
    (docs/chunk-policies.md)."""
    semantic: SemanticSettings | None = None
    """Ours: the embedding provider of semantic retrieval (`cce knowledge embed`, the
    `hybrid` ranking); unset (and no CCE_EMBED_* variable) means off."""
    semantic_problem: str | None = None
    """Not a key (left out of the schema): why `knowledge.semantic` (with the CCE_EMBED_*
    overlay) is unusable. Kept rather than raised so that only the commands that use
    semantic retrieval fail (or warn) on it; see `semantic_config()`."""

    def semantic_config(self) -> SemanticSettings | None:
        """The embedding provider, or None when semantic retrieval is not configured.
        Raises ConfigError naming the file and the key when it is configured badly."""
        if self.semantic_problem is not None:
            raise ConfigError(self.semantic_problem)
        return self.semantic


@dataclass(frozen=True)
class SyncSettings:
    """The cache remote of `cce sync`; `remote` is inherited from the global file."""

    __pydantic_config__ = _SCHEMA_CONFIG

    remote: str | None = None
    """Git URL of the cache repository."""
    lfs: bool = True
    """Store `*.cck` / `*.cce` artifacts through git-LFS."""
    repo_id: str | None = None
    """`owner/name` of this project (derived from its git origin by `cce sync init`)."""
    ref: str | None = None
    """Branch of the cache repository (the remote's default when unset)."""
    auto_pull: bool = False
    """Reserved: read for compatibility, not acted on."""
    retention: str = "all"
    """`all`, or `keep-last-<n>`."""


@dataclass(frozen=True)
class Settings:
    """Everything `.cce/config` says, resolved once."""

    __pydantic_config__ = _SCHEMA_CONFIG

    markdown: MarkdownSettings = field(default_factory=MarkdownSettings)
    """How markdown bodies are split into sections."""
    knowledge: KnowledgeSettings = field(default_factory=KnowledgeSettings)
    """The knowledge layer: indexing, search and its cache repository."""
    sync: SyncSettings = field(default_factory=SyncSettings)
    """The cache remote of `cce sync`."""
    problems: tuple[str, ...] = ()
    """Not a key (left out of the schema): what is wrong with the file, each naming
    it and the line (YAML that does not parse, unknown keys, bad values); `doctor`
    lists them under `config`."""


#: Our own blocks under `knowledge:`, validated strictly by pydantic: name -> the type
#: of its `KnowledgeSettings` field (a dataclass, or e.g. a Literal for a scalar).
#: Adding a block: a field on KnowledgeSettings (default: off) and a line here.
EXTENSION_BLOCKS: dict[str, Any] = {"redaction": Redaction, "chunk_policy": str}

# ------------------------------------------------------------------ reading


def load_settings_or_problem(root: str | os.PathLike[str]) -> tuple[Settings | None, str | None]:
    """`load_settings` for a report that goes on without settings (doctor): the settings,
    or None and what is wrong with `.cce/config`."""
    try:
        return load_settings(root, warn=False), None
    except ConfigError as e:
        return None, e.message
    except OSError as e:
        return None, f"{os.fspath(root)}/.cce/config: cannot be read ({e.strerror or e})"


def load_settings(
    root: str | os.PathLike[str],
    *,
    warn: bool = True,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """`<root>/.cce/config`, read and parsed once, with the CCE_EMBED_* overlay of
    `knowledge.semantic` from `env` (default: the process environment). A missing file
    gives the defaults without importing a YAML parser (a cold search stays lean).

    Raises ConfigError (naming the file and the key) only for a bad value of one of
    our own extension blocks; reference keys follow the tolerance rules. A bad
    `knowledge.semantic` is kept in `knowledge.semantic_problem` instead.
    """
    path = config_path(root)
    try:
        doc = load_document(path)
        problem: Exception | None = None
    except Unparsable as e:
        doc, problem = None, e
    problems: list[str] = [] if problem is None else [f"{path}: not valid YAML ({problem})"]
    unknown = unknown_keys(doc, path, Settings)
    # (`problems` has said an unparsable file already: doctor lists it once.)
    unreadable = [] if problem is None else [_unreadable_note(path, problem)]
    ignored = [_tag_note(path, doc, n) for n in foreign_tags(doc)]
    markdown = _markdown(doc, path, ignored)
    ranking, ranking_problem = _ranking(doc, path)
    knowledge = _knowledge(doc, path, ignored)
    knowledge = replace(knowledge, ranking=ranking, ranking_problem=ranking_problem)
    if warn:
        _warn_once(unreadable + unknown + ignored)
    problems += unknown + ignored
    problems += [p for p in (ranking_problem, knowledge.sync.retention_problem) if p]
    extensions = _extensions(doc, path)
    if extensions:
        knowledge = replace(knowledge, **extensions)
    try:
        knowledge = replace(knowledge, semantic=_semantic(doc, path, problem, env))
    except ConfigError as e:
        knowledge = replace(knowledge, semantic_problem=e.message)
    sync_notes: list[str] = []
    said: list[str] = []  # said on stderr only (doctor has said it above)
    sync = _sync(path, doc, problem, sync_notes, said)
    if warn:
        _warn_once(sync_notes + said)
    return Settings(
        markdown=markdown,
        knowledge=knowledge,
        sync=sync,
        problems=tuple(problems + sync_notes),
    )


# ------------------------------------------------------------------ what was ignored
#
# The reference's tolerance stays (a value of the wrong type resets its whole block to
# the defaults; a file that does not parse reads as defaults): the same settings, the
# same bytes. What changes is that it is said, by every command that reads the file,
# naming the file, the line, the key and the value used instead (#35 §6).

#: Each reference block's defaults, as the warning names them.
_BLOCK_DEFAULTS = {
    "markdown": f"max_section_tokens: {DEFAULT_SECTION_TOKENS}",
    "knowledge": f"enabled: true, min_score: {DEFAULT_KNOWLEDGE_MIN_SCORE}, default_source: both",
    "knowledge.sync": "corpus_id, remote, signing_key, allowed_signers unset; retention: all",
    "sync": "remote, repo_id, ref unset; lfs: true, auto_pull: false, retention: all",
}


def _value_text(node: yaml.Node | None) -> str:
    # Lazy: PyYAML loads only when a config file has something to warn about.
    import yaml

    if isinstance(node, yaml.ScalarNode):
        v = str(node.value)
        return shown(repr(v if len(v) <= 40 else v[:40] + "…"))
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    return "a list" if isinstance(node, yaml.SequenceNode) else "a value"


def _type_note(path: Path, doc: yaml.Node | None, e: WrongType, blk: str) -> str:
    """`{path}:{line}: {key}: {value} is not {what} — ignored, as the reference does:
    block `{blk}` is read with its defaults (…)`."""
    node = e.node
    line = f":{line_of(node)}" if node is not None else ""
    key = (key_of(doc, node) if node is not None else None) or blk
    what = str(e)
    return (
        f"{path}{line}: {shown(key)}: {_value_text(node)} is not read ({what}) — as the "
        f"reference engine does, the whole `{blk}` block is used with its defaults "
        f"instead ({_BLOCK_DEFAULTS[blk]})"
    )


def _unreadable_note(path: Path, problem: Exception) -> str:
    return (
        f"{path}: not valid YAML ({problem}) — every setting in it is ignored and the "
        "defaults are used instead (`cce knowledge validate .cce/config` shows where)"
    )


def _tag_note(path: Path, doc: yaml.Node | None, node: yaml.Node) -> str:
    key = key_of(doc, node) or "(top level)"
    tag = str(node.tag)
    tag = "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,") else tag
    return (
        f"{path}:{line_of(node)}: {shown(key)}: the YAML tag `{shown(tag)}` "
        "is not read — the value is used as plain data, without it"
    )


_WARNED: set[str] = set()


def _warn_once(warnings: list[str]) -> None:
    """Each warning on stderr once per process (the MCP server reads settings per call)."""
    for w in warnings:
        if w not in _WARNED:
            _WARNED.add(w)
            print(f"warning: {w}", file=sys.stderr)


def _markdown(doc: yaml.Node | None, path: Path, notes: list[str]) -> MarkdownSettings:
    try:
        blk = block(doc, "markdown")
        node = blk.get("max_section_tokens") if blk else None
        if node is None or is_null(node):
            return MarkdownSettings()
        return MarkdownSettings(max_section_tokens=as_uint(node) or DEFAULT_SECTION_TOKENS)
    except WrongType as e:
        notes.append(_type_note(path, doc, e, "markdown"))
        return MarkdownSettings()


def _knowledge(doc: yaml.Node | None, path: Path, notes: list[str]) -> KnowledgeSettings:
    """The reference's `knowledge` block; `knowledge.sync` is also read on its own
    (docs/spec/sync.md §3.4), so a bad `enabled` never loses the corpus id."""
    try:
        ks = _knowledge_sync(block(doc, "knowledge"), path)
    except WrongType as e:
        notes.append(_type_note(path, doc, e, "knowledge.sync"))
        ks = KnowledgeSyncSettings()
    try:
        blk = block(doc, "knowledge")
        if blk is None:
            return KnowledgeSettings(sync=ks)
        enabled, min_score, source = True, DEFAULT_KNOWLEDGE_MIN_SCORE, "both"
        if "enabled" in blk and not is_null(blk["enabled"]):
            enabled = as_bool(blk["enabled"])
        if "min_score" in blk and not is_null(blk["min_score"]):
            f = as_float(blk["min_score"])
            if f == f and f not in (float("inf"), float("-inf")):
                min_score = f
        if "default_source" in blk:
            s = as_opt_str(blk["default_source"])
            if s in ("code", "knowledge", "both"):
                source = s
        # The reference deserialises `knowledge.sync` inside this block too: a type
        # error there is a type error of the whole block.
        _knowledge_sync(blk, path)
        return KnowledgeSettings(
            enabled=enabled,
            min_score=min_score,
            default_source=source,  # type: ignore[arg-type]  # checked just above
            sync=ks,
        )
    except WrongType as e:
        note = _type_note(path, doc, e, "knowledge")
        if not any(n.startswith(note.split(" is not read ")[0]) for n in notes):
            notes.append(note)  # (a bad `knowledge.sync` value is said once, above)
        return KnowledgeSettings(sync=ks)


def _knowledge_sync(knowledge: dict[str, yaml.Node] | None, path: Path) -> KnowledgeSyncSettings:
    m = mapping(knowledge.get("sync")) if knowledge else None
    if m is None:
        return KnowledgeSyncSettings()
    retention = as_opt_str(m.get("retention")) or "all"
    why = retention_problem(retention)
    return KnowledgeSyncSettings(
        corpus_id=as_opt_str(m.get("corpus_id")) or None,
        remote=as_opt_str(m.get("remote")) or None,
        retention=retention,
        retention_problem=(
            None
            if why is None
            else f"{path}:{line_of(m['retention'])}: knowledge.sync.retention: {why}"
        ),
        signing_key=as_opt_str(m.get("signing_key")) or None,
        allowed_signers=as_opt_str(m.get("allowed_signers")) or None,
        parts=as_opt_str(m.get("parts")) or "auto",
    )


def _ranking(doc: yaml.Node | None, path: Path) -> tuple[Ranking | None, str | None]:
    """`knowledge.ranking` and why its value is not a ranking. A bad value never resets
    the block; the commands that would rank with it refuse it (exit 2)."""
    try:
        blk = block(doc, "knowledge")
        node = blk.get("ranking") if blk else None
        value = as_opt_str(node)
    except WrongType:
        return None, None
    if node is None or value is None or value in get_args(Ranking):
        return value, None  # type: ignore[return-value]  # one of the Literal's values
    return None, (
        f"{path}:{line_of(node)}: knowledge.ranking: {shown(repr(value))} is not a ranking; "
        f"allowed: {', '.join(get_args(Ranking))}"
    )


def _extensions(doc: yaml.Node | None, path: Path) -> dict[str, Any]:
    """Our own `knowledge.<name>` blocks of EXTENSION_BLOCKS, validated strictly: a bad
    value is a ConfigError naming the file and the key."""
    try:
        blk = block(doc, "knowledge")
    except WrongType:
        return {}
    out: dict[str, Any] = {}
    for name, form in EXTENSION_BLOCKS.items():
        node = blk.get(name) if blk else None
        if node is not None and not is_null(node):
            try:
                value = to_python(node)
            except WrongType as e:
                raise ConfigError(f"{path}: knowledge.{name}: {e}") from None
            out[name] = validate_value(value, form, f"{path}: knowledge.{name}")
    return out


def _semantic(
    doc: yaml.Node | None,
    path: Path,
    problem: Exception | None,
    env: Mapping[str, str] | None,
) -> SemanticSettings | None:
    """`knowledge.semantic`, each key overridden by its CCE_EMBED_* variable. Any
    scalar is read as its text (a model name may look like a number)."""
    env = os.environ if env is None else env
    where = f"{path}: knowledge.semantic"
    raw = _semantic_keys(doc, path, problem, where)
    timeout = _semantic_timeout(raw.pop("timeout", None), where)
    prefixes = {
        k: check_prefix(raw.pop(k), f"{where}.{k}") for k in SEMANTIC_PREFIX_KEYS if k in raw
    }
    for key, var in SEMANTIC_ENV.items():
        if env.get(var):
            raw[key] = env[var]
    if not any(raw.values()):
        return None
    provider = (raw.get("provider") or "ollama").strip()
    if provider not in get_args(SemanticProvider):
        raise ConfigError(
            f"{where}.provider: {provider!r} is not a provider "
            f"(expected {' or '.join(get_args(SemanticProvider))})"
        )
    model = (raw.get("model") or "").strip()
    if not model:
        raise ConfigError(f"{where}.model: required (e.g. nomic-embed-text)")
    url = (raw.get("url") or "").strip()
    if not url:
        if provider == "openai":
            raise ConfigError(f"{where}.url: required for the openai provider")
        url = _ollama_url(env)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("http", "https"):
        raise ConfigError(f"{where}.url: {display_url(url)!r} is not an http(s) URL")
    return SemanticSettings(
        provider=provider,  # type: ignore[arg-type]  # checked above
        url=url.rstrip("/"),
        model=model,
        timeout=timeout,
        query_prefix=prefixes.get("query_prefix"),
        document_prefix=prefixes.get("document_prefix"),
    )


def _semantic_keys(
    doc: yaml.Node | None, path: Path, problem: Exception | None, where: str
) -> dict[str, str]:
    """The text of each key of the `knowledge.semantic` block (only known keys)."""
    raw: dict[str, str] = {}
    try:
        if problem is not None:
            raise ConfigError(f"{path}: not valid YAML ({problem})")
        blk = block(doc, "knowledge")
        sem = mapping(blk.get("semantic")) if blk else None
        for key, node in (sem or {}).items():
            if key not in SEMANTIC_ENV and key != "timeout" and key not in SEMANTIC_PREFIX_KEYS:
                # By hand, not validate_value: pydantic's import would cost every
                # search ~80 ms once semantic retrieval is configured.
                raise ConfigError(
                    f"{where}.{key}: unknown key (expected provider, url, model, timeout, "
                    "query_prefix, document_prefix)"
                )
            value = as_opt_str(node)
            if value is not None:
                raw[key] = value
    except WrongType as e:
        raise ConfigError(f"{where}: {e}") from None
    return raw


def _semantic_timeout(text: str | None, where: str) -> float:
    """`knowledge.semantic.timeout`: seconds, more than 0 and at most a day."""
    t = (text or "").strip()
    if not t:
        return DEFAULT_SEMANTIC_TIMEOUT
    try:
        value = float(t) if len(t) <= 40 else math.nan  # a 5,000-digit value is no timeout
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_SEMANTIC_TIMEOUT:  # also refuses NaN
        raise ConfigError(
            f"{where}.timeout: {shown(t[:40])!r} is not a number of seconds "
            f"(more than 0, at most {MAX_SEMANTIC_TIMEOUT:g})"
        )
    return value


#: A prefix is an instruction of a few words; a longer one is surely a mistake.
MAX_PREFIX_CHARS = 1024


def check_prefix(value: str, where: str) -> str:
    """A prefix as written (spaces and newlines matter), without control characters
    other than newline and tab, at most MAX_PREFIX_CHARS characters."""
    if len(value) > MAX_PREFIX_CHARS:
        raise ConfigError(f"{where}: longer than {MAX_PREFIX_CHARS} characters")
    for ch in value:
        o = ord(ch)
        if (o < 0x20 and ch not in "\n\t") or 0x7F <= o <= 0x9F:
            raise ConfigError(f"{where}: control character U+{o:04X} is not allowed")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{where}: not valid text (a lone surrogate)") from None
    return value


def _ollama_url(env: Mapping[str, str]) -> str:
    """$OLLAMA_HOST read as Ollama reads it: without a scheme it is http, a missing
    host is 127.0.0.1 and a missing port 11434 (`0.0.0.0`, `:11435`, `host:port`)."""

    host = (env.get("OLLAMA_HOST") or "").strip()
    if not host:
        return OLLAMA_DEFAULT_URL
    if "://" in host:
        return host
    hostport, _, path = host.partition("/")
    try:
        parts = urllib.parse.urlsplit(f"//{hostport}")
        port = parts.port
    except ValueError:
        return f"http://{host}"  # the request then names what is wrong with it
    name = parts.hostname or "127.0.0.1"
    if ":" in name:
        name = f"[{name}]"
    return f"http://{name}:{port or 11434}" + (f"/{path}" if path else "")


def _sync_block(doc: yaml.Node | None) -> SyncSettings:
    m = block(doc, "sync")
    if m is None:
        return SyncSettings()
    flags = {}
    for key, default in (("lfs", True), ("auto_pull", False)):
        node = m.get(key)
        flags[key] = default if node is None or is_null(node) else as_bool(node)
    return SyncSettings(
        remote=as_opt_str(m.get("remote")) or None,
        repo_id=as_opt_str(m.get("repo_id")) or None,
        ref=as_opt_str(m.get("ref")) or None,
        retention=as_opt_str(m.get("retention")) or "all",
        **flags,
    )


def cce_home() -> Path | None:
    """The user's cce directory: `$CCE_HOME`, else `~/.cce`; None without either."""
    home = os.environ.get("CCE_HOME")
    if home:
        return Path(home)
    h = os.environ.get("HOME")
    return Path(h) / ".cce" if h else None


def global_config_path() -> Path | None:
    home = cce_home()
    return home / "config.yml" if home is not None else None


def _global_sync() -> SyncSettings | None:
    glob = global_config_path()
    if glob is None:
        return None
    try:
        doc = load_document(glob)
        return None if doc is None else _sync_block(doc)
    except (Unparsable, WrongType):
        return None


def _sync(
    path: Path,
    doc: yaml.Node | None,
    problem: Exception | None,
    notes: list[str],
    said: list[str],
) -> SyncSettings:
    """The `sync:` block: the project file's, inheriting the global `sync.remote` when
    unset. A malformed project file warns on stderr and stays all-local (no remote)."""
    if doc is None and problem is None and not path.exists():
        return _global_sync() or SyncSettings()
    try:
        if problem is not None:
            raise problem
        cfg = _sync_block(doc)
    except (Unparsable, WrongType) as e:
        if isinstance(e, WrongType):
            notes.append(_type_note(path, doc, e, "sync"))
        said.append(
            f"project sync config {path} is malformed and was ignored ({e}); "
            "staying all-local — fix the file or run `cce sync init` to rewrite it"
        )
        return SyncSettings()
    if cfg.remote is None:
        g = _global_sync()
        if g is not None and g.remote:
            cfg = replace(cfg, remote=g.remote)
    return cfg
