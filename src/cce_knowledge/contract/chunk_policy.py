"""The `cce.chunk-policy/v1` document: per-document-type chunking rules.

A policy file is one JSON object:

    {"schema": "cce.chunk-policy/v1",
     "rules": [{"match": {"source": "discussion"},
                "policy": {"keep_whole_below": 20, "primary_level": 2, ...}}]}

`check_policy_document` lists every problem (`$.json.path`, message) so that
`cce knowledge validate` can report them all; `load_chunk_policy` refuses a file on its
first problem with a UsageError (exit 2) naming the file and the JSON path, before
anything is read from the feed or written. The chunker itself is
`engine/policy_chunker.py`; this module only knows the contract.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from cce_knowledge.core.errors import UsageError
from cce_knowledge.core.rustcompat import io_error_text
from cce_knowledge.core.untrusted import shown as escape_untrusted

CHUNK_POLICY_SCHEMA_ID = "cce.chunk-policy/v1"

Action = Literal["own-chunk", "skip", "merge-up"]
ACTIONS: tuple[str, ...] = ("own-chunk", "skip", "merge-up")
MATCH_KEYS: tuple[str, ...] = ("source", "group", "label", "id")

#: The shared defaults of the workflow-knowledge design (a key left out takes these).
DEFAULT_KEEP_WHOLE_BELOW = 20
DEFAULT_PRIMARY_LEVEL = 2
DEFAULT_FALLBACK_LEVEL = 3
DEFAULT_MAX_LINES = 80
DEFAULT_SKIP_EMPTY = True

#: A policy is a few hundred bytes; anything near this is not one.
MAX_POLICY_BYTES = 1 << 20
#: The one message for a policy over that limit, from `index` and `validate` alike.
POLICY_TOO_LARGE = f"larger than {MAX_POLICY_BYTES} bytes (1 MiB), the limit of a chunk policy"

_POLICY_KEYS = (
    "keep_whole_below",
    "primary_level",
    "fallback_level",
    "max_lines",
    "special_sections",
    "skip_empty_sections",
)
_TOP_KEYS = ("schema", "description", "rules")
_RULE_KEYS = ("description", "match", "policy")


def heading_key(text: str) -> str:
    """How a heading's text is compared with a `special_sections` name: whitespace
    runs collapsed, case folded (`## Discussion  map` matches "Discussion Map")."""
    return " ".join(text.split()).casefold()


@dataclass(frozen=True, slots=True)
class Match:
    """Every given key must hold; an empty match selects every record."""

    source: str | None = None
    group: str | None = None
    label: str | None = None
    id: str | None = None  # a glob (fnmatch, case-sensitive)

    def selects(self, source: str, group: str | None, labels: list[str], rec_id: str) -> bool:
        if self.source is not None and source != self.source:
            return False
        if self.group is not None and group != self.group:
            return False
        if self.label is not None and self.label not in labels:
            return False
        return self.id is None or fnmatchcase(rec_id, self.id)


@dataclass(frozen=True, slots=True)
class Policy:
    keep_whole_below: int = DEFAULT_KEEP_WHOLE_BELOW
    primary_level: int = DEFAULT_PRIMARY_LEVEL
    fallback_level: int = DEFAULT_FALLBACK_LEVEL
    max_lines: int = DEFAULT_MAX_LINES
    #: heading_key(name) -> action, in file order.
    special_sections: tuple[tuple[str, str], ...] = ()
    skip_empty_sections: bool = DEFAULT_SKIP_EMPTY
    _special: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._special.update(self.special_sections)

    def action_for(self, heading_text: str) -> str | None:
        return self._special.get(heading_key(heading_text)) if self._special else None


@dataclass(frozen=True, slots=True)
class Rule:
    match: Match
    policy: Policy


@dataclass(frozen=True, slots=True)
class ChunkPolicy:
    rules: tuple[Rule, ...]
    #: where it was read from (for messages)
    origin: str = ""

    def policy_for(
        self, source: str, group: str | None, labels: list[str], rec_id: str
    ) -> Policy | None:
        """The first matching rule's policy; None: the reference chunker."""
        for rule in self.rules:
            if rule.match.selects(source, group, labels, rec_id):
                return rule.policy
        return None


# ---------------------------------------------------------------- checking


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_policy_json(text: str) -> tuple[Any, str | None, int | None]:
    """(document, problem, line): strict JSON, a duplicate key and NaN refused."""
    try:
        return (
            json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant),
            None,
            None,
        )
    except _Duplicate as e:
        return None, f"duplicate key {json.dumps(str(e))}", None
    except json.JSONDecodeError as e:
        return None, f"not valid JSON: {e.msg} (column {e.colno})", e.lineno
    except (ValueError, RecursionError) as e:
        return None, f"not valid JSON: {e}", None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _unknown(obj: dict[str, Any], allowed: tuple[str, ...], where: str) -> list[tuple[str, str]]:
    return [
        (
            f"{where}.{k}" if k.isidentifier() else f"{where}[{json.dumps(k)}]",
            f"unknown key (expected one of: {', '.join(allowed)})",
        )
        for k in obj
        if k not in allowed
    ]


def _check_match(m: Any, where: str) -> list[tuple[str, str]]:
    if not isinstance(m, dict):
        return [(where, "must be an object")]
    out = _unknown(m, MATCH_KEYS, where)
    for k in MATCH_KEYS:
        if k in m and not (isinstance(m[k], str) and m[k]):
            out.append((f"{where}.{k}", "must be a non-empty string"))
    return out


def _check_policy(p: Any, where: str) -> list[tuple[str, str]]:
    if not isinstance(p, dict):
        return [(where, "must be an object")]
    out = _unknown(p, _POLICY_KEYS, where)
    for k in ("keep_whole_below", "max_lines"):
        if k in p and not (_is_int(p[k]) and p[k] >= (1 if k == "max_lines" else 0)):
            low = 1 if k == "max_lines" else 0
            out.append((f"{where}.{k}", f"must be an integer >= {low}"))
    levels_ok = True
    for k in ("primary_level", "fallback_level"):
        if k in p and not (_is_int(p[k]) and 1 <= p[k] <= 6):
            out.append((f"{where}.{k}", "must be a heading level, an integer from 1 to 6"))
            levels_ok = False
    if levels_ok:
        primary = p.get("primary_level", DEFAULT_PRIMARY_LEVEL)
        fallback = p.get("fallback_level", DEFAULT_FALLBACK_LEVEL)
        if fallback <= primary:
            out.append(
                (
                    f"{where}.fallback_level",
                    f"must be deeper than primary_level ({fallback} <= {primary})",
                )
            )
    if "skip_empty_sections" in p and not isinstance(p["skip_empty_sections"], bool):
        out.append((f"{where}.skip_empty_sections", "must be true or false"))
    if "special_sections" in p:
        sp = p["special_sections"]
        sw = f"{where}.special_sections"
        if not isinstance(sp, dict):
            out.append((sw, "must be an object of heading text -> action"))
        else:
            seen: dict[str, str] = {}
            for name, action in sp.items():
                at = f"{sw}[{json.dumps(name, ensure_ascii=False)}]"
                key = heading_key(name)
                if not key:
                    out.append((at, "a heading text must not be empty"))
                elif key in seen:
                    out.append((at, f"the same heading as {json.dumps(seen[key])}"))
                seen.setdefault(key, name)
                if action not in ACTIONS:
                    shown = json.dumps(action, ensure_ascii=False)
                    out.append(
                        (at, f"unknown action {shown} (expected one of: {', '.join(ACTIONS)})")
                    )
    return out


def check_policy_document(doc: Any) -> list[tuple[str, str]]:
    """Every problem of a decoded policy document, as (JSON path, message)."""
    if not isinstance(doc, dict):
        return [("$", "a chunk policy must be a JSON object")]
    out = _unknown(doc, _TOP_KEYS, "$")
    if doc.get("schema") != CHUNK_POLICY_SCHEMA_ID:
        got = json.dumps(doc.get("schema"), ensure_ascii=False) if "schema" in doc else "nothing"
        out.append(("$.schema", f"must be {json.dumps(CHUNK_POLICY_SCHEMA_ID)} (got {got})"))
    if "description" in doc and not isinstance(doc["description"], str):
        out.append(("$.description", "must be a string"))
    rules = doc.get("rules")
    if not isinstance(rules, list):
        out.append(("$.rules", "must be an array of rules"))
        return out
    for i, rule in enumerate(rules):
        where = f"$.rules[{i}]"
        if not isinstance(rule, dict):
            out.append((where, "must be an object with `match` and `policy`"))
            continue
        out += _unknown(rule, _RULE_KEYS, where)
        if "description" in rule and not isinstance(rule["description"], str):
            out.append((f"{where}.description", "must be a string"))
        for k in ("match", "policy"):
            if k not in rule:
                out.append((f"{where}.{k}", "is required"))
        if "match" in rule:
            out += _check_match(rule["match"], f"{where}.match")
        if "policy" in rule:
            out += _check_policy(rule["policy"], f"{where}.policy")
    return out


def build_policy(doc: dict[str, Any], origin: str = "") -> ChunkPolicy:
    """The model of a document `check_policy_document` found no problem in."""
    rules: list[Rule] = []
    for r in doc["rules"]:
        m, p = r["match"], r["policy"]
        special = tuple((heading_key(k), v) for k, v in p.get("special_sections", {}).items())
        rules.append(
            Rule(
                Match(m.get("source"), m.get("group"), m.get("label"), m.get("id")),
                Policy(
                    keep_whole_below=p.get("keep_whole_below", DEFAULT_KEEP_WHOLE_BELOW),
                    primary_level=p.get("primary_level", DEFAULT_PRIMARY_LEVEL),
                    fallback_level=p.get("fallback_level", DEFAULT_FALLBACK_LEVEL),
                    max_lines=p.get("max_lines", DEFAULT_MAX_LINES),
                    special_sections=special,
                    skip_empty_sections=p.get("skip_empty_sections", DEFAULT_SKIP_EMPTY),
                ),
            )
        )
    return ChunkPolicy(tuple(rules), origin)


def policy_problems(text: str) -> tuple[list[tuple[str, str]], int | None, ChunkPolicy | None]:
    """(problems, line of a syntax error, the policy when there is no problem)."""
    doc, problem, line = parse_policy_json(text)
    if problem is not None:
        return [("$", problem)], line, None
    found = check_policy_document(doc)
    if found:
        return found, None, None
    return [], None, build_policy(doc)


def load_chunk_policy(path: str | os.PathLike[str], shown: str | None = None) -> ChunkPolicy:
    """Read and check a policy file; UsageError (exit 2) naming file and JSON path."""
    shown = os.fspath(path) if shown is None else shown
    name = escape_untrusted(shown)
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"chunk policy {name}: not a file")
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_POLICY_BYTES + 1)
    except OSError as e:
        raise UsageError(f"could not read chunk policy {name}: {io_error_text(e)}") from None
    if len(raw) > MAX_POLICY_BYTES:
        raise UsageError(f"invalid chunk policy {name}: $: {POLICY_TOO_LARGE}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"chunk policy {name}: not valid UTF-8 (byte offset {e.start})") from None
    problems, line, policy = policy_problems(text)
    if policy is None:
        where, message = problems[0]
        at = f"{name}:{line}" if line is not None else name
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise UsageError(f"invalid chunk policy {at}: {where}: {escape_untrusted(message)}{more}")
    return ChunkPolicy(policy.rules, shown)
