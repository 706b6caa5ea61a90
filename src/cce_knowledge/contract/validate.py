"""Validate feeds, manifests, ask suites and chunk policies, reporting *every* bad line.

`index` stops at the first bad line (no partial store); an adapter author wants the
whole list at once. The rules are the parsers' own — a file validates clean exactly
when `index` / `ask` / `index --manifest` would accept it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cce_knowledge.contract.asksuite import ASK_SCHEMA_ID, AskCase, iter_suite
from cce_knowledge.contract.chunk_policy import (
    CHUNK_POLICY_SCHEMA_ID,
    MAX_POLICY_BYTES,
    POLICY_TOO_LARGE,
    policy_problems,
)
from cce_knowledge.contract.jsonparse import ScanError, scan_value
from cce_knowledge.contract.manifest import (
    FEED_MANIFEST_SCHEMA_ID,
    FeedManifest,
    ManifestParseError,
    digest_problem,
    scan_manifest,
    verify_problem,
)
from cce_knowledge.contract.ndjson import FeedLineError, iter_feed
from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.errors import UsageError
from cce_knowledge.core.hidden_text import scan
from cce_knowledge.core.rustcompat import io_error_text, rs_is_blank, rs_lines

Kind = Literal["feed", "manifest", "suite", "policy", "config"]
_MANIFEST_MAX_CHARS = 1 << 20


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding: `FILE:LINE: $.path: message`. `line` is None for whole-file
    problems (unreadable, no cases)."""

    file: str
    line: int | None
    path: str
    message: str
    column: int | None = None

    def text(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        col = f" (column {self.column})" if self.column is not None else ""
        return f"{where}: {self.path}: {self.message}{col}"

    def as_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "message": self.message,
        }


@dataclass(slots=True)
class FileReport:
    file: str
    kind: Kind
    count: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: Findings that do not make the file invalid (hidden text): exit status stays 0.
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        if self.kind == "feed":
            what = f"{self.count} record{'s' if self.count != 1 else ''}"
        elif self.kind == "suite":
            what = f"{self.count} case{'s' if self.count != 1 else ''}"
        elif self.kind == "config":
            what = "project settings"
        elif self.kind == "policy":
            what = f"chunk policy of {self.count} rule{'s' if self.count != 1 else ''}"
        else:
            what = f"manifest for {self.count} record{'s' if self.count != 1 else ''}"
        return f"{self.file}: ok — {what} ({self._contract()})"

    def _contract(self) -> str:
        return {
            "feed": "cce.knowledge/v1",
            "suite": ASK_SCHEMA_ID,
            "manifest": FEED_MANIFEST_SCHEMA_ID,
            "config": "cce.config",
            "policy": CHUNK_POLICY_SCHEMA_ID,
        }[self.kind]


def _read(path: Path, shown: str) -> tuple[bytes, str] | Problem:
    if path.exists() and not path.is_file():
        return Problem(shown, None, "$", f"not a file: {shown}")
    try:
        raw = path.read_bytes()
    except OSError as e:
        return Problem(shown, None, "$", f"could not read {shown}: {io_error_text(e)}")
    return _decode(raw, shown)


def _decode(raw: bytes, shown: str) -> tuple[bytes, str] | Problem:
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        return Problem(
            shown, line, "$", f"stream did not contain valid UTF-8 (byte offset {e.start})", col
        )


def is_config_name(name: str) -> bool:
    """`.cce/config` (a project's settings file, YAML) by its path."""
    p = Path(name)
    return p.name == "config" and p.parent.name == ".cce"


def detect_kind(name: str, text: str) -> Kind:
    """A `.cce/config` path is a config; a `.manifest.json` name or a single
    `cce.feed-manifest/v1` object is a manifest; a first line whose `schema` is
    `cce.knowledge.ask/v1` is a suite; a single `cce.chunk-policy/v1` object is a chunk
    policy; else a feed."""
    if is_config_name(name):
        return "config"
    if name.endswith(".manifest.json"):
        return "manifest"
    for line in rs_lines(text):
        if rs_is_blank(line):
            continue
        try:
            first = scan_value(line.encode("utf-8", "surrogatepass"))
        except ScanError:
            break
        if isinstance(first, dict) and first.get("schema") == ASK_SCHEMA_ID:
            return "suite"
        break
    if len(text) > _MANIFEST_MAX_CHARS:
        return "feed"  # a manifest is a few hundred bytes; don't rescan big feeds
    try:
        whole = scan_value(text.encode("utf-8", "surrogatepass"))
    except ScanError:
        return "feed"
    if isinstance(whole, dict) and whole.get("schema") == FEED_MANIFEST_SCHEMA_ID:
        return "manifest"
    if isinstance(whole, dict) and whole.get("schema") == CHUNK_POLICY_SCHEMA_ID:
        return "policy"
    return "feed"


def _feed(report: FileReport, text: str) -> list[int]:
    ok_lines: list[int] = []
    for n, r in iter_feed(text):
        if isinstance(r, FeedLineError):
            report.problems.append(Problem(report.file, n, r.path, r.shown_message, r.column))
        else:
            report.count += 1
            ok_lines.append(n)
            report.warnings.extend(hidden_text_warnings(report.file, n, r))
    return ok_lines


def hidden_text_warnings(file: str, line: int, rec: KnowledgeRecord) -> list[Problem]:
    """One warning per field that carries hidden text (what `index` removes by default):
    what it is and its code points."""
    values: list[tuple[str, str, bool]] = [("$.title", rec.title, True), ("$.body", rec.body, True)]
    for key in ("source", "url", "state", "state_reason", "updated_at", "group"):
        v = getattr(rec, key)
        if v is not None:
            values.append((f"$.{key}", v, False))
    values += [(f"$.labels[{i}]", v, False) for i, v in enumerate(rec.labels)]
    values += [(f"$.links[{i}]", v, False) for i, v in enumerate(rec.links)]
    out = []
    for path, removed in scan(values).items():
        points = f" ({removed.code_points()})" if removed.chars else ""
        out.append(
            Problem(
                file,
                line,
                path,
                f"hidden text: {removed.describe()}{points} — `cce knowledge index` removes "
                "it (unless --redaction reference)",
            )
        )
    return out


def _manifest(report: FileReport, text: str) -> FeedManifest | None:
    m = scan_manifest(text)
    if isinstance(m, ManifestParseError):
        report.problems.append(
            Problem(
                report.file,
                m.line,
                m.path,
                f"invalid {FEED_MANIFEST_SCHEMA_ID} manifest: {m.message}",
                m.column,
            )
        )
        return None
    report.count = m.records
    # The digest's shape is checkable without the feed (verification step 1).
    problem = digest_problem(m)
    if problem is not None:
        report.problems.append(Problem(report.file, _key_line(text, "sha256"), "$.sha256", problem))
    return m


def _key_line(text: str, key: str) -> int:
    needle = f'"{key}"'
    for n, line in enumerate(rs_lines(text), 1):
        if needle in line:
            return n
    return 1


def _suite(report: FileReport, text: str) -> None:
    for n, item, err in iter_suite(text):
        if err is not None:
            report.problems.append(Problem(report.file, n, err.path, err.message, err.column))
        elif isinstance(item, AskCase):
            report.count += 1
    if report.count == 0 and not report.problems:
        report.problems.append(Problem(report.file, None, "$", "suite has no cases"))


def _policy(report: FileReport, raw: bytes, text: str) -> None:
    if len(raw) > MAX_POLICY_BYTES:  # `index --chunk-policy` refuses it: so do we
        report.problems.append(Problem(report.file, None, "$", POLICY_TOO_LARGE))
        return
    problems, line, policy = policy_problems(text)
    for where, message in problems:
        report.problems.append(Problem(report.file, line, where, message))
    if policy is not None:
        report.count = len(policy.rules)


ConfigCheck = Callable[[str, bytes], list[tuple[int | None, str, str]]]


def validate_file(
    path: str | os.PathLike[str],
    *,
    kind: str = "auto",
    manifest: str | os.PathLike[str] | None = None,
    base: str | os.PathLike[str] | None = None,
    data: bytes | None = None,
    config_check: ConfigCheck | None = None,
) -> list[FileReport]:
    """Validate one file (and, for a feed, optionally its manifest).

    Returns the file's report, followed by the manifest's report when one was given.
    `base` resolves relative paths (the paths shown stay as given). With `data`, those
    bytes are validated under the name `path` instead of reading it (standard input).
    `config_check(shown, raw)`: the `.cce/config` checker (config/check.py, a floor
    above this one), given by the caller; a config is refused without it.
    """
    shown = os.fspath(path)
    real = Path(base, shown) if base is not None else Path(shown)
    got = _read(real, shown) if data is None else _decode(data, shown)
    if isinstance(got, Problem):
        k: Kind = "feed" if kind == "auto" else kind  # type: ignore[assignment]
        return [FileReport(shown, k, problems=[got])]
    raw, text = got
    k = detect_kind(shown, text) if kind == "auto" else kind  # type: ignore[assignment]
    report = FileReport(shown, k)
    out = [report]
    if k == "config":
        if config_check is None:
            raise ValueError("validating a .cce/config needs its checker")
        report.problems += [Problem(shown, n, p, m) for n, p, m in config_check(shown, raw)]
    elif k == "feed":
        _feed(report, text)
    elif k == "manifest":
        _manifest(report, text)
    elif k == "policy":
        _policy(report, raw, text)
    else:
        _suite(report, text)
    if manifest is not None:
        mshown = os.fspath(manifest)
        mreal = Path(base, mshown) if base is not None else Path(mshown)
        mgot = _read(mreal, mshown)
        mreport = FileReport(mshown, "manifest")
        out.append(mreport)
        if isinstance(mgot, Problem):
            mreport.problems.append(mgot)
            return out
        m = _manifest(mreport, mgot[1])
        # Like `index --manifest`: the feed's own errors win over any mismatch.
        if m is not None and mreport.ok and report.ok and k == "feed":
            problem = verify_problem(m, raw, report.count)
            if problem is not None:
                mreport.problems.append(Problem(mshown, None, "$", problem))
    return out


def validate_files(
    files: list[str],
    *,
    kind: str = "auto",
    manifest: str | None = None,
    base: str | os.PathLike[str] | None = None,
    stdin: Callable[[], bytes] | None = None,
    config_check: ConfigCheck | None = None,
) -> list[FileReport]:
    """`cce knowledge validate FILE…`: every file's report (and the manifest's). `-`
    reads `stdin()` once. Raises UsageError for arguments that cannot go together."""
    if manifest is not None and len(files) != 1:
        raise UsageError("--manifest verifies a single feed; pass exactly one FILE")
    if files.count("-") > 1:
        raise UsageError("standard input (-) can be read only once")
    reports: list[FileReport] = []
    for f in files:
        data = None
        if f == "-":
            if stdin is None:
                raise UsageError("standard input (-) is not available here")
            data = stdin()
        reports.extend(
            validate_file(
                "<stdin>" if f == "-" else f,
                kind=kind,
                manifest=manifest,
                base=base,
                data=data,
                config_check=config_check,
            )
        )
    return reports
