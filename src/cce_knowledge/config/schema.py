"""The JSON Schema of `.cce/config`, generated from the settings classes.

Published as schemas/cce.config.schema.json for editors (a test keeps it in step:
regenerate with `python tools/gen_config_schema.py`).
"""

from __future__ import annotations

import json
from typing import Any

from cce_knowledge.config.check import RETENTION_PATTERN
from cce_knowledge.config.settings import Settings
from cce_knowledge.contract.schemas import SCHEMA_BASE_URI, SCHEMA_FILES

SCHEMA_FILE = SCHEMA_FILES["cce.config"]
SCHEMA_ID = SCHEMA_BASE_URI + SCHEMA_FILE


def config_json_schema() -> dict[str, Any]:
    # Lazy: pydantic costs ~80 ms; only the schema tool and its test need it.
    from pydantic import TypeAdapter

    schema = TypeAdapter(Settings).json_schema(mode="validation")
    # Not a key: the reason a configured `knowledge.semantic` is unusable.
    # Not keys either: why a value is unusable, and the file's problems.
    del schema["$defs"]["KnowledgeSettings"]["properties"]["semantic_problem"]
    del schema["$defs"]["KnowledgeSettings"]["properties"]["ranking_problem"]
    del schema["$defs"]["KnowledgeSyncSettings"]["properties"]["retention_problem"]
    del schema["properties"]["problems"]
    # The retention grammar (docs/spec/sync.md §3.4), so `validate` names a typo.
    for blk in ("KnowledgeSyncSettings", "SyncSettings"):
        schema["$defs"][blk]["properties"]["retention"]["pattern"] = RETENTION_PATTERN
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": "cce .cce/config",
        "description": (
            "Project settings of cce-knowledge (YAML). Keys the reference engine also "
            "reads follow its tolerance rules: a value of the wrong type resets its block "
            "to the defaults. Unknown keys are ignored."
        ),
    }


def config_schema_text() -> str:
    return json.dumps(config_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# ------------------------------------------------------------ docs/config.md

#: The commands that read each key (the schema cannot know): a test fails when a key
#: of the schema is missing here, or here but not in the schema.
USED_BY: dict[str, str] = {
    "markdown": "`knowledge index`",
    "knowledge": "`knowledge index`, `search`, `ask`, `push`, `pull`, MCP",
    "sync": "`sync` commands, `knowledge push`, `knowledge pull`",
    "markdown.max_section_tokens": "`knowledge index`",
    "knowledge.enabled": "`knowledge index`",
    "knowledge.min_score": "`knowledge search`, `knowledge ask`, MCP (reference ranking)",
    "knowledge.default_source": "read for the reference's code search; not acted on here",
    "knowledge.ranking": "`knowledge search`, `knowledge ask`, MCP",
    "knowledge.redaction": "`knowledge index`",
    "knowledge.chunk_policy": "`knowledge index`",
    "knowledge.semantic": "`knowledge embed`, `knowledge index`, `search`/`ask`/MCP (hybrid)",
    "knowledge.semantic.provider": "as `knowledge.semantic`",
    "knowledge.semantic.url": "as `knowledge.semantic`",
    "knowledge.semantic.model": "as `knowledge.semantic`",
    "knowledge.semantic.timeout": "as `knowledge.semantic`",
    "knowledge.semantic.query_prefix": "as `knowledge.semantic`",
    "knowledge.semantic.document_prefix": "as `knowledge.semantic`",
    "knowledge.sync": "`knowledge push`, `knowledge pull`, `status`, `doctor`",
    "knowledge.sync.corpus_id": "`knowledge push`, `knowledge pull`",
    "knowledge.sync.remote": "`knowledge push`, `knowledge pull`",
    "knowledge.sync.retention": "`knowledge push`",
    "knowledge.sync.signing_key": "`knowledge push`",
    "knowledge.sync.allowed_signers": "`knowledge pull`, `status`, `doctor`",
    "knowledge.sync.parts": "`knowledge push` (whether the `.cck` is published in parts)",
    "sync.remote": "`sync` commands, `knowledge push`/`pull` (when `knowledge.sync.remote` is unset)",
    "sync.lfs": "`sync` commands, `knowledge push`",
    "sync.repo_id": "`sync init`, `sync` commands",
    "sync.ref": "`sync` commands, `knowledge push`, `knowledge pull`",
    "sync.auto_pull": "nothing (reserved; read for compatibility)",
    "sync.retention": "`sync push`",
}

#: An example value for keys whose default says little.
_EXAMPLES: dict[str, str] = {
    "knowledge.sync.corpus_id": "acme-app",
    "knowledge.sync.remote": "https://github.com/acme/knowledge-cache.git",
    "knowledge.sync.retention": "keep-last-10",
    "knowledge.sync.signing_key": ".cce/keys/publish",
    "knowledge.sync.allowed_signers": ".cce/allowed_signers",
    "knowledge.ranking": "reference",
    "knowledge.chunk_policy": ".cce/chunk-policy.yml",
    "knowledge.semantic.model": "nomic-embed-text",
    "knowledge.semantic.query_prefix": '"search_query: "',
    "sync.remote": "https://github.com/acme/knowledge-cache.git",
    "sync.repo_id": "acme/app",
    "sync.ref": "main",
    "sync.retention": "keep-last-10",
}


def _type_text(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return "mapping"
    if "anyOf" in prop:
        parts = [_type_text(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(parts) + ", or unset"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    t = prop.get("type", "any")
    return {"integer": "integer", "number": "number", "boolean": "boolean"}.get(t, t)


def _yaml_scalar(v: Any) -> str:
    if v is None:
        return "unset"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v) if v != "" else '""'


def config_keys() -> list[tuple[str, dict[str, Any]]]:
    """Every key of `.cce/config` (dotted) with its schema, in schema order."""
    schema = config_json_schema()
    defs = schema["$defs"]
    out: list[tuple[str, dict[str, Any]]] = []

    def walk(props: dict[str, Any], prefix: str) -> None:
        for name, prop in props.items():
            out.append((prefix + name, prop))
            ref = prop.get("$ref") or next(
                (p["$ref"] for p in prop.get("anyOf", []) if "$ref" in p), None
            )
            if ref:
                walk(defs[ref.rsplit("/", 1)[1]]["properties"], f"{prefix}{name}.")

    walk(schema["properties"], "")
    return out


def config_reference_markdown() -> str:
    """docs/config.md: every key, its type, default, an example and who reads it."""
    lines = [
        "# `.cce/config` — every key",
        "",
        "<!-- Generated from the settings classes by tools/gen_config_schema.py; do not",
        "     edit by hand (tests/config/test_config_docs.py keeps it in step). -->",
        "",
        "The project's settings, in YAML, at `.cce/config` under the project root. Keys the",
        "reference engine also reads keep its tolerance: a value of the wrong type resets",
        "its whole block to the defaults, and a file that is not YAML (or not UTF-8) reads",
        "as defaults. Every command that reads the file says so on stderr — the file, the",
        "line, the key and what is used instead — and `cce doctor` lists it under `config`;",
        "the settings used, and so every byte written, are the reference's. Unknown keys",
        "are warned about with the closest known key. `cce knowledge validate .cce/config`",
        "checks the file against [the schema](../schemas/cce.config.schema.json).",
        "",
        "| key | type | default | used by |",
        "|---|---|---|---|",
    ]
    keys = config_keys()
    for key, prop in keys:
        default = _yaml_scalar(prop.get("default")) if "$ref" not in prop else "(a block)"
        lines.append(f"| `{key}` | {_type_text(prop)} | {default} | {USED_BY[key]} |")
    lines.append("")
    for key, prop in keys:
        lines += [f"## `{key}`", ""]
        desc = " ".join(str(prop.get("description", "")).split())
        if desc:
            lines += [desc, ""]
        leaf = "$ref" not in prop and not any("$ref" in p for p in prop.get("anyOf", []))
        if leaf:
            example = _EXAMPLES.get(key, _yaml_scalar(prop.get("default")))
            parts = key.split(".")
            yaml_lines = [f"{'  ' * i}{p}:" for i, p in enumerate(parts[:-1])]
            yaml_lines.append(f"{'  ' * (len(parts) - 1)}{parts[-1]}: {example}")
            lines += ["```yaml", *yaml_lines, "```", ""]
        lines += [f"Used by: {USED_BY[key]}.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
