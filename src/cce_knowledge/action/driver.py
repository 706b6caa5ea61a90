"""The GitHub Action's step driver (behind `cce action run|validate|index|guard|push|pull`).

The root action.yml and each composable sub-action hand their inputs to this driver
through `CCE_IN_*` environment variables (never by splicing `${{ inputs.* }}` into
shell). The driver composes the same `cce` commands a person would run, reads their
`--json` reports (never their human text), and is the one place that turns those
reports into step outputs, annotations and the job summary.

`run` (the all-in-one root Action) is extract → validate → pull the published store →
index (incremental) → push --dry-run (the shrink guard) → ask gate → push
--skip-unchanged; each sub-action runs its own slice of the same steps.

Each child process gets only the token it needs: the source token (as GITHUB_TOKEN)
reaches `extract` alone, the cache token (as CCE_SYNC_TOKEN) reaches push/pull alone.
Child output is logged between `::stop-commands::` markers, and every other line of
untrusted text the driver prints is escaped or fenced the same way, so feed or cache
content can never be read as a workflow command.

Imported only when `cce action` runs, so other commands never pay for it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from cce_knowledge.action import workflow_commands as actions
from cce_knowledge.action.interface import (  # noqa: F401 (re-exported)
    INPUTS,
    OUTPUTS,
    STEP_INPUTS,
    STEP_OUTPUTS,
)
from cce_knowledge.action.push_report import PushReport, ReportError
from cce_knowledge.action.state import RunState
from cce_knowledge.action.summary import diff_section, render_summary
from cce_knowledge.config.check import retention_problem
from cce_knowledge.config.reader import config_path
from cce_knowledge.config.settings import load_settings
from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.errors import CceError
from cce_knowledge.core.rustcompat import rs_is_blank
from cce_knowledge.core.secrets import EMBED_API_KEY_ENV
from cce_knowledge.core.secrets import scrub as scrub_forms
from cce_knowledge.core.secrets import secret_forms as key_forms
from cce_knowledge.store import snapshots
from cce_knowledge.store.chunkmap import adopt_map, export_map
from cce_knowledge.store.view import open_view
from cce_knowledge.sync.remote import secret_forms

# Tokens that must never reach a child that does not need them.
_TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN", "CCE_SYNC_TOKEN", "CCE_SIGNING_KEY")
_MAX_ANNOTATIONS = 50
#: argparse's last stderr line: `prog: error: message`.
_ARGPARSE_ERROR = re.compile(r"^\S.*?: error: .*$", re.M)
#: The validate sub-action's default: every feed, suite and manifest in the tree.
DEFAULT_VALIDATE_FILES = "**/*.jsonl **/*.manifest.json"
_SKIPPED_DIRS = frozenset({"node_modules", "vendor"})
#: Set by action.yml (root and index/): the directory the workflow's actions/cache
#: restores before the step and saves after it, holding the builder's chunk maps.
CHUNK_MAPS_ENV = "CCE_ACTION_CHUNK_MAPS"
#: A cached chunk map is 36 bytes a record: 1 GiB is ~30M records, far past any corpus.
_MAX_CACHED_MAP = 1 << 30
#: `cce knowledge pull`'s words when there is nothing to pull yet (a first publish).
_NOTHING_PUBLISHED = ("has anything been pushed", "holds no corpus yet", "is not in the cache")


def env_name(inp: str) -> str:
    return "CCE_IN_" + inp.upper().replace("-", "_")


class StepFailed(Exception):
    """A pipeline step refused; the message is safe to show (no tokens)."""


class StepStopped(Exception):
    """The pipeline stopped early without failing — `extract` reached the source's rate
    limit (exit 3) and the next scheduled run resumes: a warning, nothing published."""


EXIT_RATE_LIMITED = 3  # `cce knowledge extract github`: stopped cleanly at the rate limit


def store_facts(root: str) -> tuple[str, int, int, int, str]:
    """(snapshot, records, chunks, distinct record ids, data_as_of) of the active store.

    Read through the mapped store view (no float decoding), which falls back to the
    full loader for a store not in the pinned layout.
    """

    view = open_view(snapshots.store_path(root, snapshots.read_current(root)))
    return (
        view.snapshot,
        view.records,
        view.chunk_count,
        len(set(view.record_ids)),
        view.data_as_of() or "",
    )


def err_text(proc: subprocess.CompletedProcess[str]) -> str:
    """Why a child failed, in one message: argparse's `error:` line rather than its
    usage line, a crash by its last line, else the refusal without its `error: `."""
    text = proc.stderr.strip() or proc.stdout.strip() or f"exit code {proc.returncode}"
    if text.startswith("Traceback"):
        # A crash, not a refusal: the last line names the exception; the log has the rest.
        last = [ln for ln in text.split("\n") if ln.strip()][-1].strip()
        return f"crashed (exit {proc.returncode}): {last}"
    if text.startswith("usage:") and (m := _ARGPARSE_ERROR.findall(text)):
        return m[-1].strip()
    return text.removeprefix("error: ")


_TRUST_LINE = re.compile(
    r"^extract [a-z]+: (trust: .*|hidden text removed from \d+ record\(s\): .*|"
    r"[^ ]+ is (?:public|private): --authors .*)$"
)


def trust_lines(stderr: str) -> list[str]:
    """The lines of `cce knowledge extract`'s stderr that say what it left out (the
    lockdown mode and counts, the hidden-text total) — for the job summary."""
    out = []
    for line in stderr.splitlines():
        m = _TRUST_LINE.match(line)
        if m:
            out.append(m.group(1))
        elif line.startswith("warning: cannot read whether"):
            out.append(line)
    return out


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return None


class Driver:
    def __init__(self, inputs: dict[str, str], env: dict[str, str], step: str = "run") -> None:
        self.inputs = inputs
        self.env = env
        self.step = step
        self.state = RunState(step=step)
        # Whether `index` builds the derived search index (the all-in-one pipeline
        # skips it when nothing after it searches).
        self.search_index = True

        # Every encoding a token can come back in (raw, cased, percent-encoded, base64,
        # basic-auth base64): each is masked in the runner's log and scrubbed from
        # child output. The embedding key comes from the job's env, never an input.
        self.secrets = [
            form
            for v in (inputs.get("cache-token", ""), inputs.get("source-token", ""))
            if v
            for form in secret_forms(v)
        ]
        # The signing key is multi-line: the runner masks (and we scrub) line by line.
        key = inputs.get("signing-key", "")
        self.secrets += sorted(
            {ln.strip() for ln in key.split("\n") if len(ln.strip()) >= 4},
            key=lambda ln: (-len(ln), ln),
        )
        if env.get(EMBED_API_KEY_ENV):
            self.secrets += key_forms(env[EMBED_API_KEY_ENV])
        self.root = "."
        #: chunk maps to keep in the CI cache for the next run (snapshot → bytes)
        self.kept_maps: dict[str, bytes] = {}

    # -- helpers ---------------------------------------------------------------------------
    def inp(self, name: str) -> str:
        return self.inputs.get(name, "").strip()

    def _bool(self, name: str, default: bool = False) -> bool:
        try:
            return actions.parse_bool_input(name, self.inputs.get(name), default)
        except actions.ActionsError as e:
            raise StepFailed(str(e)) from None

    def _scrub(self, text: str) -> str:
        return scrub_forms(text, self.secrets)

    def _child_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            k: v
            for k, v in self.env.items()
            if not k.startswith("CCE_IN_") and k not in _TOKEN_VARS
        }
        # Children print plain text; we emit annotations ourselves from their JSON output.
        env.pop("GITHUB_ACTIONS", None)
        # `semantic-url`/`semantic-model`: index and pull embed against that provider
        # (e.g. a service container), push publishes the vectors (docs/semantic.md).
        for name, var in (("semantic-url", "CCE_EMBED_URL"), ("semantic-model", "CCE_EMBED_MODEL")):
            if v := self.inputs.get(name, "").strip():
                env[var] = v
        env.update(extra or {})
        return env

    def cce(
        self, title: str, args: list[str], extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `cce ARGS` in this interpreter, log its output safely, return it."""
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

    def _workspace_relative(self, path: str) -> str:
        ws = self.env.get("GITHUB_WORKSPACE")
        p = Path(path).resolve()
        if ws:
            try:
                return p.relative_to(Path(ws).resolve()).as_posix()
            except ValueError:
                pass
        return str(p)

    def _cache_env(self) -> dict[str, str]:
        tok = self.inputs.get("cache-token", "")
        return {"CCE_SYNC_TOKEN": tok} if tok else {}

    def _signing_env(self) -> dict[str, str]:
        """The key text goes to `cce knowledge push` alone, through its environment."""
        key = self.inputs.get("signing-key", "")
        return {"CCE_SIGNING_KEY": key} if key.strip() else {}

    def _check_signer_allowed(self) -> None:
        """With both `signing-key` and `allowed-signers`: refuse to publish with a key
        consumers would refuse (a rotated key missing from the file). The signing
        modules are imported here: only such a run pays for loading `cryptography`."""
        key_text, path = self.inputs.get("signing-key", ""), self.inp("allowed-signers")
        if not key_text.strip() or not path:
            return
        from cce_knowledge.sync import sshsig
        from cce_knowledge.sync.signing import load_allowed, load_signing_key

        try:
            key = load_signing_key(self.root, None, None, {"CCE_SIGNING_KEY": key_text})
            allowed = load_allowed(self.root, path, None)
        except CceError as e:
            raise StepFailed(f"signing: {self._scrub(e.message)}") from None
        if key is not None and allowed is not None:
            corpus = self.inp("corpus") or None
            if allowed.find(key.public, sshsig.NAMESPACE) is None:
                raise StepFailed(
                    f"signing: the signing key ({key.signer}) may not sign in namespace "
                    f"`{sshsig.NAMESPACE}` according to {path}: consumers verifying with it "
                    "would refuse this publish. Add the key's line, or use the listed key."
                )
            if (
                corpus is not None
                and allowed.find(key.public, sshsig.NAMESPACE, principal=corpus) is None
            ):
                raise StepFailed(
                    f"signing: no line of {path} lets the signing key ({key.signer}) publish "
                    f"corpus `{corpus}`: consumers verifying with it would refuse this publish. "
                    f"Add the corpus to the principals of the key's line (e.g. `{corpus}` or `*`)."
                )

    def _push_args(self) -> list[str]:
        args = ["knowledge", "push", "--dir", self.root, "--json"]
        if c := self.inp("corpus"):
            args += ["--corpus", c]
        if r := self.inp("remote"):
            args += ["--remote", r]
        return args

    def _push_report(self, step: str, proc: subprocess.CompletedProcess[str]) -> PushReport:
        """The push (or dry-run) report; its corpus becomes the run's corpus."""
        try:
            rep = PushReport.from_json(proc.stdout)
        except ReportError as e:
            raise StepFailed(
                f"{step}: unreadable `cce knowledge push --json` report: {e}"
            ) from None
        self.state.corpus = rep.corpus
        return rep

    def _begin(self) -> None:
        """Read the inputs every step shares, then enter the working directory."""
        st, names = self.state, STEP_INPUTS[self.step]
        st.dry_run = "dry-run" in names and self._bool("dry-run")
        st.force = "force" in names and self._bool("force")
        st.corpus = self.inp("corpus")
        wd = self.inp("working-directory") or "."
        Path(wd).mkdir(parents=True, exist_ok=True)
        os.chdir(wd)

    def _load_store_facts(self) -> None:
        try:
            facts = store_facts(self.root)
        except Exception as e:  # a store we just wrote must be readable; say so plainly if not
            raise StepFailed(f"no readable knowledge store here: {e}") from None
        st = self.state
        st.snapshot, st.records, st.chunks, st.distinct_ids, st.data_as_of = facts

    # -- entry -----------------------------------------------------------------------------
    def run(self) -> int:
        for s in self.secrets:
            actions.add_mask(s)
        try:
            self.STEPS[self.step](self)
            rc = 0
        except StepFailed as e:
            self.fail(str(e))
            rc = 1
        except StepStopped as e:
            self.warn(str(e))
            rc = 0
        self._write_outputs()
        self._write_summary()
        return rc

    def fail(self, message: str) -> None:
        """Record the failure, annotate it (escaped: one command line, whatever the
        text) and log it inside a stop-commands window."""
        self.state.failure = message
        _announce("error", message)

    def warn(self, message: str) -> None:
        """A warning annotation (escaped) and a summary note; the job does not fail."""
        self.state.notes.append(f"warning: {message}")
        _announce("warning", message)

    # -- pipelines (one per action) --------------------------------------------------------
    def pipeline_run(self) -> None:
        """The all-in-one root Action."""
        st = self.state
        self._begin()
        retention = self._retention_input()
        # Nothing in this pipeline searches unless an ask suite runs: the derived search
        # index (never pushed) would be the nightly build's largest cost in memory.
        self.search_index = bool(self.inp("ask-suite"))
        self.step_feed()
        if retention:
            self.write_retention(retention)
        self.step_guard(fail_on_shrink=True)
        if suite := self.inp("ask-suite"):
            self.step_ask(suite)
        self._check_signer_allowed()
        if st.dry_run:
            st.notes.append("dry-run: nothing was published")
            return
        self.step_push(skip_unchanged=True)

    def pipeline_validate(self) -> None:
        self._begin()
        self.step_validate_files(self.inp("files") or DEFAULT_VALIDATE_FILES)

    def pipeline_index(self) -> None:
        self._begin()
        self.step_feed()

    def pipeline_guard(self) -> None:
        fail_on_shrink = self._bool("fail-on-shrink", True)
        self._begin()
        self._load_store_facts()
        self.step_guard(fail_on_shrink=fail_on_shrink)

    def pipeline_push(self) -> None:
        skip_unchanged = self._bool("skip-unchanged", True)
        self._begin()
        retention = self._retention_input()
        self._load_store_facts()
        if retention:
            self.write_retention(retention)
        if suite := self.inp("ask-suite"):
            self.step_ask(suite)
        self.step_push(skip_unchanged=skip_unchanged)

    def pipeline_pull(self) -> None:
        self._begin()
        self.step_pull()

    STEPS: ClassVar[dict[str, Callable[[Driver], None]]] = {
        "run": pipeline_run,
        "validate": pipeline_validate,
        "index": pipeline_index,
        "guard": pipeline_guard,
        "push": pipeline_push,
        "pull": pipeline_pull,
    }

    # -- steps -----------------------------------------------------------------------------
    def _retention_input(self) -> str:
        retention = self.inp("retention")
        # The same words as `cce knowledge push` says of the config key.
        if retention and (why := retention_problem(retention)) is not None:
            raise StepFailed(f"input `retention`: {why}")
        return retention

    def step_feed(self) -> None:
        """Optional extract, then validate and index the feed; fills the store facts."""
        feed, manifest, extract = self.inp("feed"), self.inp("manifest"), self.inp("extract")
        if extract:
            feed = feed or str(
                Path(self.env.get("RUNNER_TEMP") or ".cce-action") / "cce-knowledge" / "feed.jsonl"
            )
            manifest = manifest or feed + ".manifest.json"
            self.step_extract(extract, feed, manifest)
        if not feed:
            raise StepFailed("input `feed` is required unless `extract` produces one")
        if not Path(feed).is_file():
            wd = self.inp("working-directory") or "."
            raise StepFailed(f"feed not found: {feed} (relative to working-directory {wd})")
        self.state.feed = feed
        self.step_validate_feed(feed)
        if self._bool("incremental", True):
            self.step_previous_store()
        self.step_index(feed, manifest)
        self.save_chunk_maps()

    def _full_index(self, why: str, *, warn: bool = False) -> None:
        """Say why this run's index is a full one (the log, the summary; a warning
        annotation when something is wrong rather than merely absent)."""
        note = f"full index: {why}"
        if warn:
            self.warn(note)
        else:
            self.state.notes.append(note)
            with actions.stop_commands():
                print(f"note: {note}", flush=True)

    def _remote_known(self) -> bool:
        if self.inp("remote"):
            return True
        try:
            s = load_settings(self.root)
        except CceError:
            return False  # index reports a broken config with its own error
        return bool(s.knowledge.sync.remote or s.sync.remote)

    def step_previous_store(self) -> None:
        """A CI runner starts empty: install the corpus's published snapshot (the normal
        `pull`, every check included) so that `index` copies the chunks of every record
        whose line is unchanged, then adopt that store's chunk map from the CI cache.
        Anything missing (a first publish, an unreachable cache, an evicted map) only
        makes the index a full one, and says so."""
        if not self._remote_known():
            self._full_index("no cache remote to pull the published store from")
            return
        # Only the store is wanted (the index step builds the search index next).
        args = ["knowledge", "pull", "--dir", self.root, "--json", "--no-search-index"]
        for flag, name in (("--corpus", "corpus"), ("--remote", "remote")):
            if v := self.inp(name):
                args += [flag, v]
        proc = self.cce("previous store (pull)", args, self._cache_env())
        if proc.returncode != 0:
            why = err_text(proc)
            if any(s in why for s in _NOTHING_PUBLISHED):
                self._full_index(f"nothing is published yet ({why})")
            else:
                self._full_index(f"the published store could not be installed: {why}", warn=True)
            return
        doc = _json_or_none(proc.stdout)
        snapshot = str(doc.get("snapshot") or "") if isinstance(doc, dict) else ""
        maps = self.env.get(CHUNK_MAPS_ENV, "").strip()
        if not maps or not snapshot:
            return  # index says why it is full, when it is
        data = _read_cached_map(Path(maps) / f"{snapshot}.map")
        if data is None:
            self._full_index(
                f"the CI cache holds no chunk map of snapshot {snapshot} (a first run, or "
                "the cache entry was evicted)"
            )
            return
        why_not = adopt_map(self.root, data)
        if why_not is not None:
            self._full_index(why_not, warn=True)
            return
        self.kept_maps[snapshot] = data
        with actions.stop_commands():
            print(f"chunk map of snapshot {snapshot} restored from the CI cache", flush=True)

    def save_chunk_maps(self) -> None:
        """Leave in the CI cache directory the chunk maps the next run may need: the
        new store's, and the published one's (the next run pulls it again when this
        snapshot is not published). Everything else there is dropped."""
        maps = self.env.get(CHUNK_MAPS_ENV, "").strip()
        if not maps or not self.state.snapshot:
            return
        keep = dict(self.kept_maps)
        if (data := export_map(self.root, self.state.snapshot)) is not None:
            keep[self.state.snapshot] = data
        dest = Path(maps)
        tmp = dest.with_name(dest.name + ".new")
        try:
            _remove(tmp)
            tmp.mkdir(parents=True)
            for snap, blob in sorted(keep.items()):
                (tmp / f"{snap}.map").write_bytes(blob)
            _remove(dest)
            os.replace(tmp, dest)
        except OSError as e:
            # The cache is an optimisation: the next run indexes in full.
            self.warn(f"could not keep the chunk maps for the next run: {e}")

    def step_extract(self, extract: str, feed: str, manifest: str) -> None:
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
        if proc.returncode == EXIT_RATE_LIMITED:
            raise StepStopped(
                "extract stopped at the source's rate limit; nothing was published this run "
                f"(with --checkpoint the next run resumes): {err_text(proc)}"
            )
        if proc.returncode != 0:
            raise StepFailed(f"extract failed: {err_text(proc)}")
        self.state.trust = trust_lines(proc.stderr)

    def _validate(self, title: str, files: list[str], what: str) -> None:
        """`cce knowledge validate --json FILES`; its problems annotated and kept; raise
        StepFailed naming `what` when any file is invalid."""
        proc = self.cce(title, ["knowledge", "validate", "--json", "--", *files])
        doc = _json_or_none(proc.stdout)
        if isinstance(doc, dict):
            doc = doc.get("errors")
        errors = [e for e in doc if isinstance(e, dict)] if isinstance(doc, list) else []
        self.state.feed_errors = errors
        for e in errors[:_MAX_ANNOTATIONS]:
            line = e.get("line")
            path = str(e.get("path") or "")
            msg = f"{path}: {e.get('message', '')}" if path else str(e.get("message", ""))
            print(
                actions.annotation(
                    "error",
                    msg,
                    file=self._workspace_relative(str(e.get("file") or files[0])),
                    line=line if isinstance(line, int) else None,
                    title="invalid cce.knowledge contract file",
                ),
                flush=True,
            )
        if proc.returncode != 0:
            reason = f"{len(errors)} problem(s)" if errors else err_text(proc)
            raise StepFailed(f"{what} failed validation: {reason}")

    def step_validate_feed(self, feed: str) -> None:
        self._validate("validate feed", [feed], f"feed {feed}")

    def step_validate_files(self, patterns: str) -> None:
        files = expand_files(patterns)
        self.state.files = files
        if not files:
            self.state.notes.append(f"no file matched {patterns!r}")
            return
        self._validate(f"validate {len(files)} file(s)", files, f"{len(files)} file(s)")

    def step_index(self, feed: str, manifest: str) -> None:
        # An empty feed is a valid store, but in a builder it almost always means an
        # extraction that failed quietly: refuse before the store is replaced, unless
        # the workflow says an empty corpus is intended.
        if not self._bool("allow-empty") and _feed_is_empty(feed):
            raise StepFailed(
                f"the feed {feed} has no records; an empty corpus would replace the "
                "published one. Set `allow-empty: true` if that is intended"
            )
        args = ["knowledge", "index", feed, "--dir", self.root]
        if not self.search_index:
            args.append("--no-search-index")
        if manifest:
            args += ["--manifest", manifest]
        if self.inp("chunk-policy"):
            args += ["--chunk-policy", self.inp("chunk-policy")]
        proc = self.cce("index", args)
        if proc.returncode != 0:
            raise StepFailed(f"index failed: {err_text(proc)}")
        self._load_store_facts()

    def write_retention(self, retention: str) -> None:
        """Set knowledge.sync.retention in <root>/.cce/config, keeping the rest of the file."""
        from ruamel.yaml import YAML  # the round-trip parser is paid only by this edit

        path = config_path(self.root)
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
        buf = io.StringIO()
        yaml.dump(doc, buf)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, buf.getvalue().encode("utf-8"))

    def step_guard(self, *, fail_on_shrink: bool) -> None:
        """`push --dry-run --json`: the diff against the remote `current`; refuses a
        shrink or a divergent snapshot unless `force` (or a dry-run / fail_on_shrink off)."""
        st = self.state
        proc = self.cce(
            "shrink guard (push --dry-run)", [*self._push_args(), "--dry-run"], self._cache_env()
        )
        if proc.returncode != 0:
            if st.force and not st.dry_run and st.step == "run":
                st.notes.append(
                    "shrink guard could not run; `force` pushes without it: " + err_text(proc)
                )
                return
            raise StepFailed(f"shrink guard failed: {err_text(proc)}")
        rep = st.report = self._push_report("shrink guard", proc)
        if st.force or st.dry_run or not fail_on_shrink:
            return
        if rep.guard == "divergent":
            raise StepFailed(
                f"corpus {rep.corpus}@{rep.snapshot} is already published with different content; "
                "set `force: true` to overwrite it"
            )
        if rep.removed:
            raise StepFailed(
                f"refusing to publish: {rep.removed} record{'s' if rep.removed != 1 else ''} live on "
                f"the remote would be dropped from corpus {rep.corpus}. Set `force: true` for an "
                "intentional shrink, or `dry-run: true` to inspect." + _left_out_why(rep)
            )

    def step_ask(self, suite: str) -> None:
        proc = self.cce("ask gate", ["knowledge", "ask", suite, "--dir", self.root, "--json"])
        doc = _json_or_none(proc.stdout)
        self.state.ask = doc if isinstance(doc, dict) else None
        if proc.returncode != 0:
            self.state.ask_failed = True
            raise StepFailed(f"ask gate failed: {err_text(proc)}")

    def step_push(self, *, skip_unchanged: bool) -> None:
        st = self.state
        args = self._push_args()
        if st.force:
            args.append("--force")
        if skip_unchanged:
            args.append("--skip-unchanged")
        proc = self.cce("push", args, {**self._cache_env(), **self._signing_env()})
        if proc.returncode != 0:
            raise StepFailed(f"push failed: {err_text(proc)}")
        rep = st.pushed = self._push_report("push", proc)
        st.published = rep.published
        if rep.unchanged_skipped:
            st.notes.append(
                f"unchanged: the remote `current` already names snapshot {rep.snapshot}; "
                "nothing was published (set `force: true` to re-publish)"
            )
        if rep.retention_warning:
            st.notes.append(f"warning: retention prune failed — {rep.retention_warning}")

    def step_pull(self) -> None:
        st = self.state
        args = ["knowledge", "pull", "--dir", self.root, "--json"]
        for flag, name in (
            ("--corpus", "corpus"),
            ("--remote", "remote"),
            ("--snapshot", "snapshot"),
            ("--allowed-signers", "allowed-signers"),
        ):
            if v := self.inp(name):
                args += [flag, v]
        proc = self.cce("pull", args, self._cache_env())
        if proc.returncode != 0:
            raise StepFailed(f"pull failed: {err_text(proc)}")
        doc = _json_or_none(proc.stdout)
        if not isinstance(doc, dict):
            raise StepFailed("pull: unreadable `cce knowledge pull --json` report")
        st.pulled = doc
        st.corpus = str(doc.get("corpus_id") or st.corpus)
        self._load_store_facts()

    # -- reporting --------------------------------------------------------------------------
    def _write_outputs(self) -> None:
        diff_md = diff_section(self.state) if "diff-markdown" in STEP_OUTPUTS[self.step] else ""
        all_outputs = self.state.outputs(diff_md)
        outputs = {k: all_outputs[k] for k in STEP_OUTPUTS[self.step]}
        if not self.env.get("GITHUB_OUTPUT"):
            # Outside Actions: name=value on stdout; the values may hold feed text.
            with actions.stop_commands():
                for k, v in outputs.items():
                    print(f"{k}={v}")
            return
        for k, v in outputs.items():
            actions.set_output(k, v, self.env["GITHUB_OUTPUT"])

    def _write_summary(self) -> None:
        path = self.env.get("GITHUB_STEP_SUMMARY")
        if path:
            actions.append_summary(render_summary(self.state), path)


def expand_files(patterns: str) -> list[str]:
    """Whitespace-separated paths or globs (`**` recurses), relative to the working
    directory, in sorted order without duplicates. Hidden directories, vendor/ and
    node_modules/ are skipped, as by the docs adapter."""
    found: dict[str, None] = {}
    for pat in patterns.split():
        if not any(ch in pat for ch in "*?["):
            found.setdefault(pat, None)
            continue
        for p in sorted(Path(".").glob(pat)):
            parts = p.parts[:-1]
            if p.is_file() and not any(x.startswith(".") or x in _SKIPPED_DIRS for x in parts):
                found.setdefault(p.as_posix(), None)
    return list(found)


# --------------------------------------------------------------------------- CLI


def run_from_args(args: argparse.Namespace) -> int:
    step = args.action_command or "run"
    env = dict(os.environ)
    inputs: dict[str, str] = {}
    for inp in STEP_INPUTS[step]:
        flag = getattr(args, inp.replace("-", "_"), None)
        inputs[inp] = flag if flag is not None else env.get(env_name(inp), "")
    return Driver(inputs, env, step).run()


def _announce(level: str, message: str) -> None:
    """`message` as an annotation of `level` on stdout and as `level: message` on stderr,
    the latter inside a stop-commands window so no line of it runs as a command."""
    print(actions.annotation(level, message, title="cce-knowledge"), flush=True)
    with actions.stop_commands(sys.stderr):
        print(f"{level}: {message}", file=sys.stderr, flush=True)


def _read_cached_map(path: Path) -> bytes | None:
    """A regular file restored by the CI cache (never through a symlink), bounded."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(_MAX_CACHED_MAP + 1)
    return data if len(data) <= _MAX_CACHED_MAP else None


def _remove(path: Path) -> None:
    """Remove a file, symlink (not its target) or directory tree; absent is fine."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _feed_is_empty(feed: str) -> bool:
    """True when no line of `feed` has anything but whitespace (0 records). A missing or
    unreadable feed is not "empty": index reports it with its own error. Blank as the
    feed parser judges it (Unicode whitespace, e.g. U+00A0, not only ASCII)."""
    try:
        with open(feed, "rb") as f:
            return all(rs_is_blank(line.decode("utf-8", "replace")) for line in f)
    except OSError:
        return False


def _left_out_why(rep: PushReport) -> str:
    """Why records drop when lockdown left them out of the feed (issue 35 §9), and the
    two ways on; empty otherwise."""
    if not rep.left_out_ids:
        return ""
    from cce_knowledge.sync.guard import format_id_list  # ids shown redacted, capped

    listed = format_id_list(rep.left_out_ids).replace("`", "'")
    return (
        f" Of them, {listed} were left out by the extractor: their authors are "
        f"outside `--authors {rep.left_out_authors}` (lockdown, the default for a public "
        "repository). To keep them, add `--authors all` to the `extract` input; to drop "
        "them on purpose, set `force: true`."
    )
