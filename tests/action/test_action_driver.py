"""The Action's driver (`cce action run`): push-report parsing, outputs, summary, input handling.

The report texts below are the byte-pinned push texts of docs/spec/sync.md §4.5/§4.6.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cce_knowledge.action import driver as ac
from tests.helpers.paths import TESTS

D_REPORT = (
    "Corpus c1 — outgoing 1111111111111111 vs remote current 2222222222222222\n"
    "  records : 3 local · 4 remote\n"
    "  added   : 1 — kn:9\n"
    "  removed : 2 — kn:1, kn:2\n"
    "  changed : 0\n"
    "Nothing pushed (--dry-run).\n"
)


def _many(n: int) -> str:
    ids = [f"kn:{i:02d}" for i in range(n)]
    shown = ", ".join(ids[:20])
    return f"{n} — {shown} … and {n - 20} more" if n > 20 else f"{n} — {shown}"


def test_parse_diff_report() -> None:
    rep = ac.parse_push_report(D_REPORT)
    assert (rep.kind, rep.corpus, rep.snapshot, rep.remote_snapshot) == (
        "diff",
        "c1",
        "1111111111111111",
        "2222222222222222",
    )
    assert (rep.added, rep.removed, rep.changed) == (1, 2, 0)
    assert rep.removed_ids == ["kn:1", "kn:2"]
    assert rep.added_ids == ["kn:9"]


def test_parse_diff_report_truncated_list_keeps_the_full_count() -> None:
    text = D_REPORT.replace("  changed : 0", "  changed : " + _many(25))
    rep = ac.parse_push_report(text)
    assert rep.changed == 25
    assert rep.changed_ids == [f"kn:{i:02d}" for i in range(20)]


def test_parse_refusal_on_stderr() -> None:
    body = D_REPORT.replace("Nothing pushed (--dry-run).\n", "")
    text = (
        "error: "
        + body
        + (
            "refusing to push: 2 records live on the remote would be dropped (the `removed` list above). "
            "Pass --force to shrink corpus c1, or --dry-run to inspect without pushing.\n"
        )
    )
    rep = ac.parse_push_report(text)
    assert rep.kind == "diff" and rep.removed == 2


def test_parse_first_same_conflict() -> None:
    first = ac.parse_push_report(
        "Dry-run: corpus c1@abcdef0123456789 — no remote `current` pointer; this would be the first "
        "publish (2 records · 5 chunks).\nNothing pushed (--dry-run).\n"
    )
    assert (first.kind, first.corpus, first.snapshot) == ("first", "c1", "abcdef0123456789")
    same = ac.parse_push_report(
        "Dry-run: corpus c1@abcdef0123456789 — the remote `current` already names this snapshot; "
        "a push would re-publish it unchanged.\nNothing pushed (--dry-run).\n"
    )
    assert same.kind == "same"
    conflict = ac.parse_push_report(
        "Dry-run: corpus c1@abcdef0123456789 is already published with DIFFERENT content (remote checksum "
        "aa, outgoing bb). The snapshot id …\nA real `--force` push would overwrite it.\nNothing pushed (--dry-run).\n"
    )
    assert conflict.kind == "conflict"


def test_parse_success_report() -> None:
    text = (
        "Pushed corpus c1@abcdef0123456789\n"
        "  key        : knowledge/v1/c1/abcdef0123456789.cck\n"
        f"  checksum   : {'0' * 64}\n"
        "  records    : 2 · chunks : 5\n"
        "  data as-of : -\n"
        "  pushed at  : 2026-01-01T00:00:00Z\n"
        "  retention  : pruned 1 snapshot (keep-last-2)\n"
    )
    rep = ac.parse_push_report(text)
    assert rep.kind == "pushed"
    assert rep.key == "knowledge/v1/c1/abcdef0123456789.cck"
    assert rep.checksum == "0" * 64
    assert rep.data_as_of == ""
    assert rep.pushed_at == "2026-01-01T00:00:00Z"
    assert rep.retention == "pruned 1 snapshot (keep-last-2)"


def test_parse_unknown_text_raises() -> None:
    with pytest.raises(ValueError):
        ac.parse_push_report("something else\n")


def test_outputs_for_each_outcome() -> None:
    st = ac.RunState(snapshot="s", records=3, chunks=7, distinct_ids=3)
    assert st.outputs()["published"] == "false"
    assert st.outputs()["removed"] == ""  # no guard ran
    st.report = ac.parse_push_report(D_REPORT)
    out = st.outputs()
    assert (out["added"], out["removed"], out["changed"]) == ("1", "2", "0")
    st.report = ac.PushReport("first", corpus="c1", snapshot="s")
    assert st.outputs()["added"] == "3"
    st.pushed = ac.parse_push_report("Pushed corpus c1@s\n  key        : knowledge/v1/c1/s.cck\n")
    st.published = True
    out = st.outputs()
    assert out["published"] == "true" and out["artifact-key"] == "knowledge/v1/c1/s.cck"
    assert set(out) == set(ac.OUTPUTS)


def test_summary_has_counts_diff_freshness_and_ask_report() -> None:
    st = ac.RunState(
        corpus="c1",
        snapshot="abcd",
        records=3,
        chunks=7,
        data_as_of="2026-02-01T00:00:00Z",
        dry_run=True,
    )
    st.report = ac.parse_push_report(D_REPORT)
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
    md = ac.render_summary(st)
    assert "dry-run" in md
    assert "| records | 3 |" in md and "| chunks | 7 |" in md
    assert "`2026-02-01T00:00:00Z`" in md
    assert "| removed | 2 | `kn:1`, `kn:2` |" in md
    assert "1/2 proven" in md and "**NO**" in md
    assert "`q\\|bad`" in md  # a pipe in an id cannot split the table


def test_summary_of_a_failure_shows_the_reason() -> None:
    st = ac.RunState(failure="refusing to publish: 2 records ```boom")
    md = ac.render_summary(st)
    assert "failed" in md and "refusing to publish" in md
    # The failure text cannot close the code block it is shown in.
    assert md.count("```") == 2


def _run_driver(tmp_path: Path, **inputs: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCE_IN_", "GITHUB_"))}
    env["GITHUB_OUTPUT"] = str(tmp_path / "out")
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    for k, v in inputs.items():
        env[ac.env_name(k.replace("_", "-"))] = v
    return subprocess.run(
        [sys.executable, "-m", "cce_knowledge", "action", "run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


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
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CCE_HOME", str(tmp_path / "cce-home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k, v in (("user.name", "t"), ("user.email", "t@localhost")):
        subprocess.run(["git", "config", "--global", k, v], check=True)
    bare = tmp_path / "cache.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
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
    refs = subprocess.run(
        ["git", "for-each-ref"], cwd=bare, capture_output=True, text=True, check=True
    ).stdout
    assert refs

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


def test_err_text_reports_a_crash_by_its_last_line() -> None:
    crash = subprocess.CompletedProcess(
        ["x"],
        1,
        "",
        "Traceback (most recent call last):\n  File x\nImportError: cannot import name '_b'\n",
    )
    assert ac.Driver._err_text(crash) == "crashed (exit 1): ImportError: cannot import name '_b'"
    refusal = subprocess.CompletedProcess(["x"], 1, "", "error: feed does not match its manifest\n")
    assert ac.Driver._err_text(refusal) == "feed does not match its manifest"
    silent = subprocess.CompletedProcess(["x"], 3, "", "")
    assert ac.Driver._err_text(silent) == "exit code 3"


def test_store_facts_match_the_full_loader(tmp_path: Path) -> None:
    from cce_knowledge.store import store_file as store

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
