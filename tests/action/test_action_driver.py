"""The Action's driver (`cce action <step>`): push --json reports, outputs, summary,
input handling, and what it prints when a child fails."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cce_knowledge.action import driver as ac
from cce_knowledge.action.push_report import PushReport, ReportError
from cce_knowledge.action.summary import render_summary
from cce_knowledge.sync.push import PushResult
from tests.helpers.cce_proc import run_cce
from tests.helpers.paths import TESTS
from tests.helpers.sync import isolated_git_home


def _report(**fields: object) -> str:
    """A `cce knowledge push --json` report (the fields the CLI prints)."""
    doc: dict[str, object] = {
        "added": [],
        "changed": [],
        "checksum": "0" * 64,
        "chunks": 5,
        "corpus_id": "c1",
        "data_as_of": None,
        "dry_run": True,
        "guard": "diff",
        "key": "knowledge/v1/c1/1111111111111111.cck",
        "published": False,
        "pruned": [],
        "pushed_at": None,
        "records": 3,
        "remote": "file:///cache.git",
        "remote_snapshot": "2222222222222222",
        "removed": [],
        "report": "human text the driver never reads",
        "retention": None,
        "retention_warning": None,
        "snapshot": "1111111111111111",
        "unchanged_skipped": False,
    }
    doc.update(fields)
    return json.dumps(doc)


D_REPORT = _report(added=["kn:9"], removed=["kn:1", "kn:2"])


def test_push_report_from_json() -> None:
    rep = PushReport.from_json(D_REPORT)
    assert (rep.guard, rep.corpus, rep.snapshot, rep.remote_snapshot) == (
        "diff",
        "c1",
        "1111111111111111",
        "2222222222222222",
    )
    assert (rep.added, rep.removed, rep.changed) == (1, 2, 0)
    assert rep.removed_ids == ["kn:1", "kn:2"]
    assert rep.data_as_of == "" and rep.pushed_at == ""


def test_push_report_reads_the_real_cli_json(tmp_path: Path) -> None:
    """The fields the driver needs are the ones `cce knowledge push --json` prints."""
    from cce_knowledge.cli import sync_cmds
    from cce_knowledge.cli.report import Report, emit

    res = PushResult(
        corpus_id="c1",
        snapshot="s" * 16,
        key="k",
        checksum="c",
        records=1,
        chunks=1,
        data_as_of=None,
        published=True,
        pushed_at="2026-01-01T00:00:00Z",
        guard="unchanged",
        remote_snapshot="s" * 16,
        retention="keep-last-2",
        pruned=["old"],
    )
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        # What `push --json` prints: the push data through the json reporter.
        report = Report(lambda: res.report, lambda: sync_cmds._push_data(res, dry_run=False))
        emit(argparse.Namespace(json=True), report)
    rep = PushReport.from_json(buf.getvalue())
    assert (rep.guard, rep.published, rep.retention, rep.pruned) == (
        "unchanged",
        True,
        "keep-last-2",
        ["old"],
    )


@pytest.mark.parametrize(
    "text",
    [
        "Pushed corpus c1@abcdef0123456789\n",  # the human report is not accepted
        "[]",
        _report(guard="maybe"),
        _report(removed="kn:1"),
        _report(removed=[1]),
        _report(published="true"),
        _report(corpus_id=None),
    ],
)
def test_push_report_rejects_anything_else(text: str) -> None:
    with pytest.raises(ReportError):
        PushReport.from_json(text)


def test_outputs_for_each_outcome() -> None:
    st = ac.RunState(snapshot="s", records=3, chunks=7, distinct_ids=3)
    assert st.outputs()["published"] == "false"
    assert st.outputs()["removed"] == ""  # no guard ran
    st.report = PushReport.from_json(D_REPORT)
    out = st.outputs()
    assert (out["added"], out["removed"], out["changed"]) == ("1", "2", "0")
    st.report = PushReport.from_json(_report(guard="first-publish", remote_snapshot=""))
    assert st.outputs()["added"] == "3"
    st.pushed = PushReport.from_json(
        _report(guard="first-publish", published=True, key="knowledge/v1/c1/s.cck")
    )
    st.published = True
    out = st.outputs()
    assert out["published"] == "true" and out["artifact-key"] == "knowledge/v1/c1/s.cck"
    assert out["status"] == "published"
    assert set(ac.OUTPUTS) <= set(out)
    for step, names in ac.STEP_OUTPUTS.items():
        assert set(names) <= set(out), step


def test_unchanged_push_outputs_and_summary() -> None:
    st = ac.RunState(corpus="c1", snapshot="1111111111111111", records=3, chunks=3)
    st.report = PushReport.from_json(_report(guard="unchanged"))
    st.pushed = PushReport.from_json(_report(guard="unchanged", unchanged_skipped=True))
    out = st.outputs()
    assert (out["published"], out["artifact-key"], out["status"]) == ("false", "", "unchanged")
    md = render_summary(st)
    assert "unchanged (snapshot `1111111111111111`" in md
    assert "published" not in md.split("\n", 1)[0].replace("nothing published", "")


def test_summary_has_counts_diff_freshness_and_ask_report() -> None:
    st = ac.RunState(
        corpus="c1",
        snapshot="abcd",
        records=3,
        chunks=7,
        data_as_of="2026-02-01T00:00:00Z",
        dry_run=True,
    )
    st.report = PushReport.from_json(D_REPORT)
    st.ask = {
        "proven": 1,
        "queries": 2,
        "precision_at_k": "0.500000",
        "recall": "0.500000",
        "mrr": "0.500000",
        "cases": [
            {
                "id": "q-ok",
                "precision_at_k": "1.000000",
                "recall": "1.000000",
                "mrr": "1.000000",
                "first_hit_rank": 1,
                "proven": True,
            },
            {
                "id": "q|bad",
                "precision_at_k": "0.000000",
                "recall": "0.000000",
                "mrr": "0.000000",
                "first_hit_rank": None,
                "proven": False,
            },
        ],
    }
    st.ask_failed = True
    md = render_summary(st)
    assert "dry-run" in md
    assert "| records | 3 |" in md and "| chunks | 7 |" in md
    assert "`2026-02-01T00:00:00Z`" in md
    assert "| removed | 2 | `kn:1`, `kn:2` |" in md
    assert "1/2 proven" in md and "**NO**" in md
    assert "`q\\|bad`" in md  # a pipe in an id cannot split the table


def test_summary_of_a_failure_shows_the_reason() -> None:
    st = ac.RunState(failure="refusing to publish: 2 records ```boom")
    md = render_summary(st)
    assert "failed" in md and "refusing to publish" in md
    # The failure text cannot close the code block it is shown in.
    assert md.count("```") == 2


def _run_driver(
    tmp_path: Path, extra_env: dict[str, str] | None = None, **inputs: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCE_IN_", "GITHUB_"))}
    env.update(extra_env or {})
    env["GITHUB_OUTPUT"] = str(tmp_path / "out")
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    for k, v in inputs.items():
        env[ac.env_name(k.replace("_", "-"))] = v
    return run_cce("action", "run", cwd=tmp_path, env=env)


def test_driver_rejects_bad_boolean_and_retention_with_outputs_and_summary(tmp_path: Path) -> None:
    p = _run_driver(tmp_path, dry_run="yes", feed="f.jsonl")
    assert p.returncode == 1
    assert "input `dry-run`" in p.stderr
    assert "::error title=cce-knowledge::input `dry-run`" in p.stdout
    out = (tmp_path / "out").read_text()
    assert "published<<" in out
    assert "failed" in (tmp_path / "summary.md").read_text()
    p = _run_driver(tmp_path, retention="keep-last-x", feed="f.jsonl")
    assert p.returncode == 1 and "input `retention`" in p.stderr


def test_driver_needs_a_feed(tmp_path: Path) -> None:
    p = _run_driver(tmp_path)
    assert p.returncode == 1 and "input `feed` is required" in p.stderr
    p = _run_driver(tmp_path, feed="missing.jsonl")
    assert p.returncode == 1 and "feed not found: missing.jsonl" in p.stderr


def test_driver_masks_tokens_and_never_prints_them(tmp_path: Path) -> None:
    secret = "ghs_SuperSecretToken123"
    p = _run_driver(tmp_path, cache_token=secret, feed="missing.jsonl")
    assert p.returncode == 1
    assert f"::add-mask::{secret}" in p.stdout
    rest = p.stdout.replace(f"::add-mask::{secret}", "")
    assert secret not in rest and secret not in p.stderr
    assert secret not in (tmp_path / "summary.md").read_text()


def test_driver_refuses_out_in_extract(tmp_path: Path) -> None:
    p = _run_driver(tmp_path, extract="docs ./x --out y.jsonl")
    assert p.returncode == 1 and "leave out --out" in p.stderr


def test_child_env_strips_tokens_and_inputs() -> None:
    d = ac.Driver(
        {"cache-token": "tok"},
        {
            "PATH": "/bin",
            "GITHUB_TOKEN": "g",
            "CCE_SYNC_TOKEN": "c",
            "CCE_IN_FEED": "f",
            "GITHUB_ACTIONS": "true",
        },
    )
    env = d._child_env()
    assert env == {"PATH": "/bin"}
    assert d._child_env(d._cache_env())["CCE_SYNC_TOKEN"] == "tok"


def test_semantic_inputs_reach_the_children_as_embed_settings() -> None:
    d = ac.Driver(
        {"semantic-url": " http://localhost:11434 ", "semantic-model": "nomic-embed-text"},
        {"PATH": "/bin", "CCE_IN_SEMANTIC_URL": "x"},
    )
    assert d._child_env() == {
        "PATH": "/bin",
        "CCE_EMBED_URL": "http://localhost:11434",
        "CCE_EMBED_MODEL": "nomic-embed-text",
    }
    assert "CCE_EMBED_URL" not in ac.Driver({}, {"PATH": "/bin"})._child_env()


FIXTURES = TESTS / "act" / "fixtures"


def _parse_outputs(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        if "<<" in lines[i]:
            name, _, delim = lines[i].partition("<<")
            j = lines.index(delim, i + 1)
            out[name] = "\n".join(lines[i + 1 : j])  # later writes win, as on the runner
            i = j
        i += 1
    return out


@pytest.mark.slow
def test_driver_publishes_then_refuses_a_shrink_without_act(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same pipeline as the act tests, driven directly (fast feedback, no act)."""
    bare = isolated_git_home(tmp_path, monkeypatch)
    common = {"corpus": "c1", "remote": bare.as_uri(), "working_directory": "root"}

    p = _run_driver(
        tmp_path,
        feed=str(FIXTURES / "feed-v1.jsonl"),
        ask_suite=str(FIXTURES / "ask-pass.jsonl"),
        **common,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    o = _parse_outputs(tmp_path / "out")
    assert o["published"] == "true" and o["records"] == "3" and o["added"] == "3"
    knowledge = tmp_path / "root" / ".cce" / "knowledge"

    def indexed(snapshot: str) -> bool:
        d = knowledge / "search"
        return d.is_dir() and any(p.name.startswith(snapshot) for p in d.glob("*.idx"))

    # The ask suite searched: the index step built the search index.
    assert indexed((knowledge / "current").read_text().strip())
    refs = subprocess.run(
        ["git", "for-each-ref"], cwd=bare, capture_output=True, text=True, check=True
    ).stdout
    assert refs

    # The same feed again (a nightly with no change): nothing published, no cache commit.
    (tmp_path / "out").write_text("")
    (tmp_path / "summary.md").write_text("")
    p = _run_driver(tmp_path, feed=str(FIXTURES / "feed-v1.jsonl"), **common)
    assert p.returncode == 0, p.stdout + p.stderr
    o = _parse_outputs(tmp_path / "out")
    assert (o["published"], o["artifact-key"], o["added"], o["removed"]) == ("false", "", "0", "0")
    assert "--skip-unchanged" in p.stdout
    assert "unchanged (snapshot `" in (tmp_path / "summary.md").read_text()
    again = subprocess.run(
        ["git", "for-each-ref"], cwd=bare, capture_output=True, text=True, check=True
    ).stdout
    assert again == refs

    (tmp_path / "out").write_text("")
    p = _run_driver(tmp_path, feed=str(FIXTURES / "feed-shrunk.jsonl"), **common)
    assert p.returncode == 1
    o = _parse_outputs(tmp_path / "out")
    assert (o["published"], o["removed"], o["artifact-key"]) == ("false", "1", "")
    assert "refusing to publish: 1 record live on the remote" in p.stderr
    after = subprocess.run(
        ["git", "for-each-ref"], cwd=bare, capture_output=True, text=True, check=True
    ).stdout
    assert after == refs
    summary = (tmp_path / "summary.md").read_text()
    assert "`gh:acme/shop#103`" in summary and "❌ failed" in summary
    # Nothing in that run searched: the new store came without a search index.
    assert not indexed((knowledge / "current").read_text().strip())


def test_err_text_reports_a_crash_by_its_last_line() -> None:
    crash = subprocess.CompletedProcess(
        ["x"],
        1,
        "",
        "Traceback (most recent call last):\n  File x\nImportError: cannot import name '_b'\n",
    )
    assert ac.err_text(crash) == "crashed (exit 1): ImportError: cannot import name '_b'"
    refusal = subprocess.CompletedProcess(["x"], 1, "", "error: feed does not match its manifest\n")
    assert ac.err_text(refusal) == "feed does not match its manifest"
    silent = subprocess.CompletedProcess(["x"], 3, "", "")
    assert ac.err_text(silent) == "exit code 3"


def test_store_facts_match_the_full_loader(tmp_path: Path) -> None:
    from cce_knowledge.store import snapshots as store

    root = tmp_path / "root"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "cce_knowledge",
            "knowledge",
            "index",
            str(FIXTURES / "feed-v1.jsonl"),
            "--dir",
            str(root),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    s = store.load_current(root)
    stamps = [c.updated_at for c in s.chunks if c.updated_at]
    expected = (
        s.snapshot,
        s.records,
        len(s.chunks),
        len({c.record_id for c in s.chunks}),
        max(stamps),
    )
    assert ac.store_facts(str(root)) == expected
    assert expected[4] == "2026-03-02T12:30:00Z"


def test_err_text_gives_argparse_error_line_not_the_usage_line() -> None:
    usage = subprocess.CompletedProcess(
        ["x"],
        2,
        "",
        "usage: cce knowledge extract docs [-h] (--root DIR | --repo GIT_URL)\n"
        "                                  [--ref R]\n"
        "cce knowledge extract docs: error: one of the arguments --root --repo is required\n",
    )
    assert ac.err_text(usage) == (
        "cce knowledge extract docs: error: one of the arguments --root --repo is required"
    )


def test_failure_text_can_never_issue_a_workflow_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Untrusted text in a failure (e.g. a hostile cache pointer quoted by the guard)
    is escaped in the annotation and fenced by stop-commands on stderr."""
    hostile = "guard: bad pointer abc\n::add-mask::x\r::warning title=t::pwn 100%\n"
    d = ac.Driver({}, {}, "guard")
    d.fail(hostile)
    out, err = capsys.readouterr()
    out_lines = out.splitlines()
    assert out_lines == [
        "::error title=cce-knowledge::guard: bad pointer abc%0A::add-mask::x%0D"
        "::warning title=t::pwn 100%25%0A"
    ]
    lines = err.split("\n")
    m = re.fullmatch(r"::stop-commands::(cce-[0-9a-f]{32})", lines[0])
    assert m, lines[0]
    end = lines.index(f"::{m[1]}::")
    # Every `::` line the text produced sits inside the window; nothing after it.
    assert all(not ln.startswith("::") for ln in lines[end + 1 :])
    assert "error: guard: bad pointer abc" in lines[1:end]


def test_extract_stopped_by_the_rate_limit_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    """`extract github` exits 3 when the API budget is spent: the driver annotates a
    warning, publishes nothing, and the job passes so the next schedule resumes."""
    from tests.helpers.fake_github import FakeGitHub, make_large_tracker

    tracker = make_large_tracker(issues=300, prs=0, comments=0, seed=2)
    # --authors all: no visibility request, so the budget of 2 buys two list pages
    extract = "github --repo acme/widgets --checkpoint ck.json --max-wait 1 --authors all"
    with FakeGitHub(tracker, budget=2) as gh:
        p = _run_driver(tmp_path, {"GITHUB_API_URL": gh.url}, extract=extract, corpus="c1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "::warning title=cce-knowledge::extract stopped at the source's rate limit" in p.stdout
    assert "::error" not in p.stdout
    assert "published<<" in (tmp_path / "out").read_text()
    assert "false" in _parse_outputs(tmp_path / "out")["published"]
    summary = (tmp_path / "summary.md").read_text()
    assert "rate limit" in summary and "failed" not in summary
    assert json.loads((tmp_path / "ck.json").read_text())["run"]["pages"] == 2


@pytest.mark.parametrize(
    ("raw", "empty"),
    [
        (b"\n  \n", True),
        ("\u00a0\n\t\u3000\r\n".encode(), True),  # blank to the parser too
        (b'{"id": "a"}\n', False),
        (b"\xff\n", False),  # not blank: index names the bad line
    ],
)
def test_feed_is_empty_agrees_with_the_feed_parser(tmp_path: Path, raw: bytes, empty: bool) -> None:
    from cce_knowledge.action.driver import _feed_is_empty
    from cce_knowledge.contract.ndjson import iter_feed

    feed = tmp_path / "f.jsonl"
    feed.write_bytes(raw)
    assert _feed_is_empty(str(feed)) is empty
    assert (not list(iter_feed(raw.decode("utf-8", "replace")))) is empty
    assert _feed_is_empty(str(tmp_path / "missing.jsonl")) is False


def test_empty_feed_fails_the_step_unless_allow_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n  \n")
    p = _run_driver(tmp_path, feed="empty.jsonl", dry_run="true")
    assert p.returncode == 1
    assert "::error title=cce-knowledge::the feed empty.jsonl has no records" in p.stdout
    assert "allow-empty: true" in p.stderr
    assert not (tmp_path / ".cce" / "knowledge").exists()  # nothing was indexed
    # intended: the empty store is built (a dry run publishes nothing; there is no remote)
    p = _run_driver(tmp_path, feed="empty.jsonl", allow_empty="true", dry_run="true")
    assert "has no records" not in p.stdout + p.stderr
    assert (tmp_path / ".cce" / "knowledge" / "current").exists()
    out = (tmp_path / "out").read_text()
    assert "records<<" in out and "\n0\n" in out


def test_signing_key_reaches_only_the_push_child_and_is_masked() -> None:
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    d = ac.Driver({"signing-key": key}, {"PATH": "/bin", "CCE_SIGNING_KEY": "inherited"})
    assert d._child_env() == {"PATH": "/bin"}  # never inherited by other children
    assert d._child_env(d._signing_env())["CCE_SIGNING_KEY"] == key
    assert "b3BlbnNzaC1rZXktdjEAAAAA" in d.secrets
    assert d._scrub("x b3BlbnNzaC1rZXktdjEAAAAA y") == "x *** y"
    # Not an option of `cce action run|push`: a key never goes in argv.
    from cce_knowledge.cli.main import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["action", "push", "--signing-key", "x"])


@pytest.mark.slow
def test_driver_signs_with_the_key_input_and_checks_it_against_allowed_signers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.sshkeys import allowed_line, make_key

    monkeypatch.setenv("CCE_HOME", str(tmp_path / "cce-home"))
    bare = tmp_path / "cache.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    key = make_key(tmp_path, "ed25519", "signer")
    other = make_key(tmp_path, "ed25519", "other")
    text = key.read_text()
    body = "".join(text.strip().split("\n")[1:-1])
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "allowed").write_text(allowed_line(other, "other@example.com"))
    common = {"corpus": "c1", "remote": bare.as_uri(), "working_directory": "root"}
    feed = str(FIXTURES / "feed-v1.jsonl")
    # A key the consumers' file does not list: refused before anything is published.
    p = _run_driver(tmp_path, feed=feed, signing_key=text, allowed_signers="allowed", **common)
    assert p.returncode == 1
    assert "consumers verifying with it would refuse this publish" in p.stderr
    assert subprocess.run(["git", "for-each-ref"], cwd=bare, capture_output=True,
                          text=True).stdout == ""  # fmt: skip
    # Listed, but its principals do not name the corpus (issue 34): refused too.
    (tmp_path / "root" / "allowed").write_text(allowed_line(key, "ci@example.com"))
    p = _run_driver(tmp_path, feed=feed, signing_key=text, allowed_signers="allowed", **common)
    assert p.returncode == 1 and "publish corpus `c1`" in p.stderr, p.stderr
    (tmp_path / "root" / "allowed").write_text(allowed_line(key, "ci@example.com,c1"))
    p = _run_driver(tmp_path, feed=feed, signing_key=text, allowed_signers="allowed", **common)
    assert p.returncode == 0, p.stdout + p.stderr
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", "main"], cwd=bare,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert ".statement.json.sig" in names
    # Every key line is masked; the log shows none of it elsewhere.
    lines = [ln for ln in text.split("\n") if len(ln.strip()) >= 4]
    for ln in lines:
        assert f"::add-mask::{ln}" in p.stdout
    rest = p.stdout
    for ln in lines:
        rest = rest.replace(f"::add-mask::{ln}", "")
    assert body[100:140] not in rest and body[100:140] not in p.stderr
    assert "  signed by  : ED25519 SHA256:" in p.stdout


def test_extract_lockdown_counts_reach_the_job_summary(tmp_path: Path) -> None:
    """The default lockdown on a public repository: the job summary says which mode ran
    and what it left out."""
    from tests.helpers.fake_github import FakeGitHub, make_tracker

    tracker = make_tracker(40, seed=3)
    tracker.associations = {"hubot": "NONE", "bob": "CONTRIBUTOR"}
    with FakeGitHub(tracker) as gh:
        p = _run_driver(
            tmp_path,
            {"GITHUB_API_URL": gh.url},
            extract="github --repo acme/widgets --include-comments",
            corpus="c1",
            dry_run="true",
        )
    summary = (tmp_path / "summary.md").read_text()
    assert "### Trust boundary" in summary, p.stdout + p.stderr
    assert "acme/widgets is public: --authors collaborators" in summary
    hubot = sum(1 for it in tracker.items.values() if it.user == "hubot")
    assert f"left out {hubot} item(s) and " in summary


def test_index_step_passes_the_chunk_policy_input(tmp_path: Path) -> None:
    """`chunk-policy` reaches `cce knowledge index --chunk-policy`; a bad policy fails
    the step with the file and JSON path, before a store exists."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    shutil.copy(fixtures / "feeds" / "policy_mixed.jsonl", tmp_path / "feed.jsonl")
    shutil.copy(fixtures / "chunk_policies" / "discussions.json", tmp_path / "policy.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCE_IN_", "GITHUB_"))}
    env |= {
        "GITHUB_OUTPUT": str(tmp_path / "out"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "CCE_IN_FEED": "feed.jsonl",
        "CCE_IN_CHUNK_POLICY": "policy.json",
    }

    def index_step() -> subprocess.CompletedProcess[str]:
        return run_cce("action", "index", cwd=tmp_path, env=env)

    bad = json.loads((tmp_path / "policy.json").read_text())
    bad["rules"][0]["policy"]["primary_level"] = 3
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    env["CCE_IN_CHUNK_POLICY"] = "bad.json"
    p = index_step()
    assert p.returncode == 1
    assert "invalid chunk policy bad.json: $.rules[0].policy.fallback_level" in p.stdout
    assert not (tmp_path / ".cce" / "knowledge").exists()

    env["CCE_IN_CHUNK_POLICY"] = "policy.json"
    p = index_step()
    assert p.returncode == 0, p.stdout + p.stderr
    from cce_knowledge.store.snapshots import load_current

    kinds = [c.kind for c in load_current(tmp_path).chunks]
    assert "Discussion Map" in kinds
