"""The GitHub Action's pipeline driver (behind `cce action run`).

action.yml hands every input to this command through `CCE_IN_*` environment variables
(never by splicing `${{ inputs.* }}` into shell), and this driver composes the same
`cce` commands a person would run: extract → validate → index → push --dry-run (the
shrink guard) → ask gate → push. It writes step outputs, annotations and the job
summary through `cce_knowledge.action.workflow_commands`.

Each child process gets only the token it needs: the source token (as GITHUB_TOKEN)
reaches `extract` alone, the cache token (as CCE_SYNC_TOKEN) reaches `push` alone.
Child output is logged between `::stop-commands::` markers so feed text can never be
read as a workflow command.

Imported only when `cce action` runs, so other commands never pay for it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cce_knowledge.action.interface import INPUTS, OUTPUTS  # noqa: F401 (re-exported)

# Tokens that must never reach a child that does not need them.
_TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN", "CCE_SYNC_TOKEN")
_RETENTION_RE = re.compile(r"(all|keep-last-[0-9]+)")
_MAX_ANNOTATIONS = 50


def env_name(inp: str) -> str:
    return "CCE_IN_" + inp.upper().replace("-", "_")


# --------------------------------------------------------------------------- parsing


@dataclass
class PushReport:
    """What `cce knowledge push [--dry-run]` said, parsed from its spec-pinned text."""

    kind: str  # diff | first | same | conflict | pushed
    corpus: str = ""
    snapshot: str = ""
    remote_snapshot: str = ""
    added: int = 0
    removed: int = 0
    changed: int = 0
    added_ids: list[str] = field(default_factory=list)
    removed_ids: list[str] = field(default_factory=list)
    changed_ids: list[str] = field(default_factory=list)
    key: str = ""
    checksum: str = ""
    data_as_of: str = ""
    pushed_at: str = ""
    retention: str = ""


_DIFF_HEAD = re.compile(r"Corpus (\S+) — outgoing (\S+) vs remote current (\S+)")
_DIFF_LINE = re.compile(r"  (added|removed|changed) *: (.*)")
_FIRST = re.compile(r"Dry-run: corpus (\S+)@(\S+) — no remote `current` pointer")
_SAME = re.compile(r"Dry-run: corpus (\S+)@(\S+) — the remote `current` already names")
_CONFLICT = re.compile(r"Dry-run: corpus (\S+)@(\S+) is already published with DIFFERENT content")
_PUSHED = re.compile(r"Pushed corpus (\S+)@(\S+)")
_FIELD = re.compile(r"  (key|checksum|data as-of|pushed at|retention) *: (.*)")


def _parse_list(text: str) -> tuple[int, list[str]]:
    """`0` | `{n} — a, b` | `{n} — a, …, t … and {m} more` → (n, listed ids)."""
    text = text.strip()
    if text == "0":
        return 0, []
    n_text, _, rest = text.partition(" — ")
    if not n_text.isdigit():
        raise ValueError(f"unrecognised id list {text!r}")
    rest = re.sub(r" … and [0-9]+ more$", "", rest)
    return int(n_text), [s for s in rest.split(", ") if s]


def parse_push_report(text: str) -> PushReport:
    """Parse push output (stdout of success/dry-run, or the refusal after `error: `)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        line = line.removeprefix("error: ")
        if m := _DIFF_HEAD.match(line):
            rep = PushReport("diff", corpus=m[1], snapshot=m[2], remote_snapshot=m[3])
            for follow in lines[i + 1 : i + 6]:
                if d := _DIFF_LINE.match(follow):
                    n, ids = _parse_list(d[2])
                    setattr(rep, d[1], n)
                    setattr(rep, f"{d[1]}_ids", ids)
            return rep
        if m := _FIRST.match(line):
            return PushReport("first", corpus=m[1], snapshot=m[2])
        if m := _SAME.match(line):
            return PushReport("same", corpus=m[1], snapshot=m[2], remote_snapshot=m[2])
        if m := _CONFLICT.match(line):
            return PushReport("conflict", corpus=m[1], snapshot=m[2], remote_snapshot=m[2])
        if m := _PUSHED.match(line):
            rep = PushReport("pushed", corpus=m[1], snapshot=m[2])
            for follow in lines[i + 1 :]:
                if f := _FIELD.match(follow):
                    val = f[2].strip()
                    name = f[1].replace(" ", "_").replace("-", "_")
                    setattr(rep, name, "" if (name == "data_as_of" and val == "-") else val)
            return rep
    raise ValueError("unrecognised `cce knowledge push` output")


# --------------------------------------------------------------------------- state


@dataclass
class RunState:
    corpus: str = ""
    feed: str = ""
    snapshot: str = ""
    records: int | None = None
    chunks: int | None = None
    distinct_ids: int = 0
    data_as_of: str = ""
    dry_run: bool = False
    force: bool = False
    published: bool = False
    report: PushReport | None = None
    pushed: PushReport | None = None
    feed_errors: list[dict[str, Any]] = field(default_factory=list)
    ask: dict[str, Any] | None = None
    ask_failed: bool = False
    failure: str = ""
    notes: list[str] = field(default_factory=list)

    def outputs(self) -> dict[str, str]:
        rep = self.report
        diff = rep is not None and rep.kind in ("diff", "first", "same", "conflict")
        added = (
            rep.added
            if rep and rep.kind == "diff"
            else (self.distinct_ids if rep and rep.kind == "first" else 0)
        )
        key = self.pushed.key if self.pushed else ""
        return {
            "snapshot": self.snapshot,
            "records": "" if self.records is None else str(self.records),
            "chunks": "" if self.chunks is None else str(self.chunks),
            "added": str(added) if diff else "",
            "removed": str(rep.removed) if diff and rep else "",
            "changed": str(rep.changed) if diff and rep else "",
            "published": "true" if self.published else "false",
            "artifact-key": key,
        }


class StepFailed(Exception):
    """A pipeline step refused; the message is safe to show (no tokens)."""


# --------------------------------------------------------------------------- running


def store_facts(root: str) -> tuple[str, int, int, int, str]:
    """(snapshot, records, chunks, distinct record ids, data_as_of) of the active store.

    Read through the mapped store view (no float decoding), which falls back to the
    full loader for a store not in the pinned layout.
    """
    from cce_knowledge.store import store_file as store
    from cce_knowledge.store.view import open_view

    view = open_view(store.store_path(root, store.read_current(root)))
    return (
        view.snapshot,
        view.records,
        view.chunk_count,
        len(set(view.record_ids)),
        view.data_as_of() or "",
    )


class Driver:
    def __init__(self, inputs: dict[str, str], env: dict[str, str]) -> None:
        self.inputs = inputs
        self.env = env
        self.state = RunState()
        self.secrets = [
            v for v in (inputs.get("cache-token", ""), inputs.get("source-token", "")) if v
        ]

    # -- helpers ---------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    def _child_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            k: v
            for k, v in self.env.items()
            if not k.startswith("CCE_IN_") and k not in _TOKEN_VARS
        }
        # Children print plain text; we emit annotations ourselves from their JSON output.
        env.pop("GITHUB_ACTIONS", None)
        env.update(extra or {})
        return env

    def cce(
        self, title: str, args: list[str], extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `cce ARGS` in this interpreter, log its output safely, return it."""
        from cce_knowledge.action import workflow_commands as actions

        cmd = [sys.executable, "-m", "cce_knowledge", *args]
        print(f"::group::{actions.escape_data(title)}", flush=True)
        try:
            with actions.stop_commands():
                print("$ cce " + self._scrub(shlex.join(args)), flush=True)
                proc = subprocess.run(
                    cmd, env=self._child_env(extra_env), capture_output=True, text=True, check=False
                )
                if proc.stdout:
                    sys.stdout.write(self._scrub(proc.stdout))
                if proc.stderr:
                    sys.stdout.write(self._scrub(proc.stderr))
                print(f"(exit {proc.returncode})", flush=True)
        finally:
            print("::endgroup::", flush=True)
        proc.stdout = self._scrub(proc.stdout)
        proc.stderr = self._scrub(proc.stderr)
        return proc

    @staticmethod
    def _err_text(proc: subprocess.CompletedProcess[str]) -> str:
        text = proc.stderr.strip() or proc.stdout.strip() or f"exit code {proc.returncode}"
        if text.startswith("Traceback"):
            # A crash, not a refusal: the last line names the exception; the log has the rest.
            last = [ln for ln in text.split("\n") if ln.strip()][-1].strip()
            return f"crashed (exit {proc.returncode}): {last}"
        return text.removeprefix("error: ")

    # -- steps ------------------------------------------------------------------------------
    def run(self) -> int:
        from cce_knowledge.action import workflow_commands as actions

        for s in self.secrets:
            actions.add_mask(s)
        try:
            self._pipeline()
            rc = 0
        except StepFailed as e:
            self.state.failure = str(e)
            first = str(e).split("\n", 1)[0]
            print(actions.annotation("error", first, title="cce-knowledge"), flush=True)
            print(f"error: {e}", file=sys.stderr, flush=True)
            rc = 1
        self._write_outputs()
        self._write_summary()
        return rc

    def _pipeline(self) -> None:
        from cce_knowledge.action import workflow_commands as actions

        inp = self.inputs
        st = self.state
        try:
            st.dry_run = actions.parse_bool_input("dry-run", inp.get("dry-run"), False)
            st.force = actions.parse_bool_input("force", inp.get("force"), False)
        except actions.ActionsError as e:
            raise StepFailed(str(e)) from None
        st.corpus = inp.get("corpus", "").strip()
        wd = inp.get("working-directory", "").strip() or "."
        Path(wd).mkdir(parents=True, exist_ok=True)
        os.chdir(wd)
        root = "."

        retention = inp.get("retention", "").strip()
        if retention and not _RETENTION_RE.fullmatch(retention):
            raise StepFailed(
                f"input `retention`: expected `all` or `keep-last-<n>`, got {retention!r}"
            )

        feed = inp.get("feed", "").strip()
        manifest = inp.get("manifest", "").strip()
        extract = inp.get("extract", "").strip()
        if extract:
            feed = feed or str(
                Path(self.env.get("RUNNER_TEMP") or ".cce-action") / "cce-knowledge" / "feed.jsonl"
            )
            manifest = manifest or feed + ".manifest.json"
            self._extract(extract, feed, manifest)
        if not feed:
            raise StepFailed("input `feed` is required unless `extract` produces one")
        if not Path(feed).is_file():
            raise StepFailed(f"feed not found: {feed} (relative to working-directory {wd})")
        st.feed = feed

        self._validate(feed)
        self._index(feed, manifest, root)
        if retention:
            self._write_retention(root, retention)
        self._guard(root)
        suite = inp.get("ask-suite", "").strip()
        if suite:
            self._ask(suite, root)
        if st.dry_run:
            st.notes.append("dry-run: nothing was published")
            return
        self._push(root)

    def _extract(self, extract: str, feed: str, manifest: str) -> None:
        try:
            argv = shlex.split(extract)
        except ValueError as e:
            raise StepFailed(f"input `extract`: cannot split {extract!r}: {e}") from None
        if any(a == "--out" or a.startswith("--out=") or a == "--manifest" for a in argv):
            raise StepFailed(
                "input `extract`: leave out --out/--manifest; use the `feed` and `manifest` inputs"
            )
        Path(feed).parent.mkdir(parents=True, exist_ok=True)
        extra: dict[str, str] = {}
        if self.inputs.get("source-token"):
            extra["GITHUB_TOKEN"] = self.inputs["source-token"]
        proc = self.cce(
            f"extract {argv[0] if argv else ''}",
            ["knowledge", "extract", *argv, "--out", feed, "--manifest", manifest],
            extra,
        )
        if proc.returncode != 0:
            raise StepFailed(f"extract failed: {self._err_text(proc)}")

    def _validate(self, feed: str) -> None:
        from cce_knowledge.action import workflow_commands as actions

        proc = self.cce("validate feed", ["knowledge", "validate", feed, "--format", "json"])
        if proc.returncode == 0:
            return
        errors: list[dict[str, Any]] = []
        try:
            doc = json.loads(proc.stdout) if proc.stdout.strip() else None
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            doc = doc.get("errors")
        if isinstance(doc, list):
            errors = [e for e in doc if isinstance(e, dict)]
        self.state.feed_errors = errors
        ann_file = self._workspace_relative(feed)
        for e in errors[:_MAX_ANNOTATIONS]:
            line = e.get("line")
            path = str(e.get("path") or "")
            msg = f"{path}: {e.get('message', '')}" if path else str(e.get("message", ""))
            print(
                actions.annotation(
                    "error",
                    msg,
                    file=ann_file,
                    line=line if isinstance(line, int) else None,
                    title="invalid cce.knowledge/v1 record",
                ),
                flush=True,
            )
        if errors:
            raise StepFailed(f"feed {feed} failed validation: {len(errors)} problem(s)")
        raise StepFailed(f"feed {feed} failed validation: {self._err_text(proc)}")

    def _workspace_relative(self, path: str) -> str:
        ws = self.env.get("GITHUB_WORKSPACE")
        p = Path(path).resolve()
        if ws:
            try:
                return p.relative_to(Path(ws).resolve()).as_posix()
            except ValueError:
                pass
        return str(p)

    def _index(self, feed: str, manifest: str, root: str) -> None:
        args = ["knowledge", "index", feed, "--dir", root]
        if manifest:
            args += ["--manifest", manifest]
        proc = self.cce("index", args)
        if proc.returncode != 0:
            raise StepFailed(f"index failed: {self._err_text(proc)}")
        try:
            facts = store_facts(root)
        except Exception as e:  # a store we just wrote must be readable; say so plainly if not
            raise StepFailed(f"index wrote no readable store: {e}") from None
        st = self.state
        st.snapshot, st.records, st.chunks, st.distinct_ids, st.data_as_of = facts

    def _write_retention(self, root: str, retention: str) -> None:
        """Set knowledge.sync.retention in <root>/.cce/config, keeping the rest of the file."""
        from ruamel.yaml import YAML

        from cce_knowledge.config.reader import config_path
        from cce_knowledge.core.atomic import atomic_write

        path = config_path(root)
        yaml = YAML()  # round-trip: comments and other keys survive
        doc: Any = None
        if path.is_file():
            try:
                doc = yaml.load(path.read_text(encoding="utf-8"))
            except Exception as e:
                raise StepFailed(f"cannot set retention: {path} is not valid YAML ({e})") from None
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            raise StepFailed(f"cannot set retention: {path} is not a YAML mapping")
        k = doc.get("knowledge")
        if not isinstance(k, dict):
            k = doc["knowledge"] = {}
        s = k.get("sync")
        if not isinstance(s, dict):
            s = k["sync"] = {}
        s["retention"] = retention
        import io

        buf = io.StringIO()
        yaml.dump(doc, buf)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, buf.getvalue().encode("utf-8"))

    def _push_args(self, root: str) -> list[str]:
        args = ["knowledge", "push", "--dir", root]
        if c := self.inputs.get("corpus", "").strip():
            args += ["--corpus", c]
        if r := self.inputs.get("remote", "").strip():
            args += ["--remote", r]
        return args

    def _cache_env(self) -> dict[str, str]:
        tok = self.inputs.get("cache-token", "")
        return {"CCE_SYNC_TOKEN": tok} if tok else {}

    def _guard(self, root: str) -> None:
        st = self.state
        proc = self.cce(
            "shrink guard (push --dry-run)",
            [*self._push_args(root), "--dry-run"],
            self._cache_env(),
        )
        if proc.returncode != 0:
            if st.force and not st.dry_run:
                st.notes.append(
                    "shrink guard could not run; `force` pushes without it: " + self._err_text(proc)
                )
                return
            raise StepFailed(f"shrink guard failed: {self._err_text(proc)}")
        rep = st.report = self._push_report("shrink guard", proc.stdout)
        if rep.kind == "conflict" and not st.force and not st.dry_run:
            raise StepFailed(
                f"corpus {rep.corpus}@{rep.snapshot} is already published with different content; "
                "set `force: true` to overwrite it"
            )
        if rep.removed and not st.force and not st.dry_run:
            raise StepFailed(
                f"refusing to publish: {rep.removed} record{'s' if rep.removed != 1 else ''} live on "
                f"the remote would be dropped from corpus {rep.corpus}. Set `force: true` for an "
                "intentional shrink, or `dry-run: true` to inspect."
            )

    def _push_report(self, step: str, stdout: str) -> PushReport:
        """The push (or dry-run) report; its corpus becomes the run's corpus."""
        try:
            rep = parse_push_report(stdout)
        except ValueError as e:
            raise StepFailed(f"{step}: {e}") from None
        self.state.corpus = rep.corpus
        return rep

    def _ask(self, suite: str, root: str) -> None:
        proc = self.cce("ask gate", ["knowledge", "ask", suite, "--dir", root, "--json"])
        try:
            doc = json.loads(proc.stdout) if proc.stdout.strip() else None
        except json.JSONDecodeError:
            doc = None
        self.state.ask = doc if isinstance(doc, dict) else None
        if proc.returncode != 0:
            self.state.ask_failed = True
            raise StepFailed(f"ask gate failed: {self._err_text(proc)}")

    def _push(self, root: str) -> None:
        st = self.state
        args = self._push_args(root) + (["--force"] if st.force else [])
        proc = self.cce("push", args, self._cache_env())
        if proc.returncode != 0:
            raise StepFailed(f"push failed: {self._err_text(proc)}")
        st.pushed = self._push_report("push", proc.stdout)
        st.published = True
        for line in proc.stdout.split("\n"):
            if line.startswith("  warning: "):
                st.notes.append(line.strip())

    # -- reporting --------------------------------------------------------------------------
    def _write_outputs(self) -> None:
        from cce_knowledge.action import workflow_commands as actions

        if not self.env.get("GITHUB_OUTPUT"):
            for k, v in self.state.outputs().items():
                print(f"{k}={v}")
            return
        for k, v in self.state.outputs().items():
            actions.set_output(k, v, self.env["GITHUB_OUTPUT"])

    def _write_summary(self) -> None:
        from cce_knowledge.action import workflow_commands as actions

        path = self.env.get("GITHUB_STEP_SUMMARY")
        if path:
            actions.append_summary(render_summary(self.state), path)


def _ids_cell(n: int, ids: list[str]) -> str:
    from cce_knowledge.action.workflow_commands import md_code

    if not n:
        return "—"
    shown = ", ".join(md_code(i) for i in ids)
    more = n - len(ids)
    return shown + (f" … and {more} more" if more > 0 else "")


def render_summary(st: RunState) -> str:
    """The job summary: status, counts, diff, freshness, ask report (markdown)."""
    from cce_knowledge.action.workflow_commands import md_code, md_table

    out: list[str] = []
    name = md_code(st.corpus) if st.corpus else "(corpus unresolved)"
    if st.failure:
        status = "❌ failed"
    elif st.published:
        status = "✅ published"
    elif st.dry_run:
        status = "🔍 dry-run (nothing published)"
    else:
        status = "not published"
    out.append(f"## cce-knowledge: {name} — {status}\n")
    if st.failure:
        out.append("```text\n" + st.failure.replace("```", "`\u200b``") + "\n```\n")
    rows = [
        ["snapshot", md_code(st.snapshot) if st.snapshot else "—"],
        ["records", str(st.records) if st.records is not None else "—"],
        ["chunks", str(st.chunks) if st.chunks is not None else "—"],
        ["data as of", md_code(st.data_as_of) if st.data_as_of else "—"],
        ["published", "true" if st.published else "false"],
    ]
    if st.pushed:
        rows.append(["artifact key", md_code(st.pushed.key)])
        if st.pushed.pushed_at:
            rows.append(["pushed at", md_code(st.pushed.pushed_at)])
        if st.pushed.retention:
            rows.append(["retention", md_code(st.pushed.retention)])
    out.append(md_table(["", ""], rows))
    rep = st.report
    if rep is not None:
        out.append("\n### Diff against the remote\n")
        if rep.kind == "first":
            out.append(
                f"First publish of this corpus: {st.distinct_ids} record(s) would be added.\n"
            )
        elif rep.kind == "same":
            out.append("The remote `current` already names this snapshot with identical content.\n")
        elif rep.kind == "conflict":
            out.append(
                "The remote already has this snapshot id with **different** content "
                "(a different `max_section_tokens` or redactor version).\n"
            )
        else:
            out.append(
                f"Outgoing {md_code(rep.snapshot)} vs remote current {md_code(rep.remote_snapshot)}\n\n"
            )
            out.append(
                md_table(
                    ["", "count", "records"],
                    [
                        ["added", str(rep.added), _ids_cell(rep.added, rep.added_ids)],
                        ["removed", str(rep.removed), _ids_cell(rep.removed, rep.removed_ids)],
                        ["changed", str(rep.changed), _ids_cell(rep.changed, rep.changed_ids)],
                    ],
                )
            )
    if st.feed_errors:
        out.append(f"\n### Feed problems ({len(st.feed_errors)})\n")
        rows = [
            [
                str(e.get("line", "")),
                md_code(str(e.get("path", ""))),
                md_code(str(e.get("message", ""))),
            ]
            for e in st.feed_errors[:_MAX_ANNOTATIONS]
        ]
        out.append(md_table(["line", "field", "problem"], rows))
    if st.ask is not None:
        a = st.ask
        verdict = "❌ regression" if st.ask_failed else "✅ all proven"
        out.append(f"\n### Ask suite — {a.get('proven')}/{a.get('queries')} proven ({verdict})\n")
        rows = []
        for c in a.get("cases") or []:
            if not isinstance(c, dict):
                continue
            rank = c.get("first_hit_rank")
            rows.append(
                [
                    md_code(str(c.get("id", ""))),
                    str(c.get("precision_at_k", "")),
                    str(c.get("recall", "")),
                    str(c.get("mrr", "")),
                    "-" if rank is None else str(rank),
                    "yes" if c.get("proven") else "**NO**",
                ]
            )
        rows.append(
            [
                "mean",
                str(a.get("precision_at_k", "")),
                str(a.get("recall", "")),
                str(a.get("mrr", "")),
                "",
                "",
            ]
        )
        out.append(md_table(["query", "P@k", "recall", "MRR", "rank", "proven"], rows))
    elif st.ask_failed:
        out.append("\n### Ask suite\nThe suite could not be run (see the log).\n")
    if st.notes:
        out.append(
            "\n"
            + "\n".join(f"- {md_code(n) if n.startswith('warning') else n}" for n in st.notes)
            + "\n"
        )
    return "\n".join(s.rstrip("\n") for s in out) + "\n"


# --------------------------------------------------------------------------- CLI


def run_from_args(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    inputs: dict[str, str] = {}
    for inp in INPUTS:
        flag = getattr(args, inp.replace("-", "_"), None)
        inputs[inp] = flag if flag is not None else env.get(env_name(inp), "")
    return Driver(inputs, env).run()
