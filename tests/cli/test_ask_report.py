"""The human `ask` report says what ranked instead of a missed id, sums up each `kind`
of case, and leaves out P@k when every case expects one id (issue 35 §8). Real `cce`
processes; the JSON report is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.cce_proc import run_cce


def _rec(rid: str, title: str, body: str) -> dict[str, str]:
    return {"id": rid, "title": title, "body": body, "source": "docs"}


def _suite(tmp_path: Path, cases: list[dict[str, object]]) -> Path:
    feed = tmp_path / "corpus.jsonl"
    recs = [
        _rec("docs/lockout.md", "Account lockout", "Accounts lock after five failed logins."),
        _rec("docs/sessions.md", "Sessions", "The session cookie expires after thirty minutes."),
        _rec("docs/backoff.md", "Retry backoff", "Retries back off exponentially, capped."),
        _rec("docs/clock.md", "Clocks", "Elapsed time uses the monotonic clock."),
    ]
    feed.write_text("".join(json.dumps(r) + "\n" for r in recs))
    suite = tmp_path / "suite.ask.jsonl"
    head = {"schema": "cce.knowledge.ask/v1", "corpus": "corpus.jsonl"}
    suite.write_text("".join(json.dumps(x) + "\n" for x in [head, *cases]))
    return suite


CASES: list[dict[str, object]] = [
    {
        "id": "lockout",
        "query": "account lockout",
        "expect": ["docs/lockout.md"],
        "k": 5,
        "kind": "named",
    },
    {
        "id": "cookie",
        "query": "how long does a session cookie last",
        "k": 5,
        "expect": ["docs/sessions.md"],
        "kind": "reworded",
    },
    {
        "id": "wrong",
        "query": "failed logins lock accounts",
        "expect": ["docs/clock.md"],
        "k": 5,
        "kind": "reworded",
    },
]


def test_a_miss_lists_what_ranked_instead_and_kinds_are_summed(tmp_path: Path) -> None:
    r = run_cce("knowledge", "ask", str(_suite(tmp_path, CASES)))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    miss = next(i for i, ln in enumerate(lines) if ln.startswith("  wrong "))
    assert lines[miss].endswith("  NO")
    assert lines[miss + 1].startswith("      ranked instead: 1. docs/lockout.md")
    assert "  by kind:" in lines
    assert "    named: 1/1 proven, recall 1.000000, MRR 1.000000" in lines
    assert any(ln.startswith("    reworded: 1/2 proven, recall 0.500000") for ln in lines)


def test_p_at_k_is_left_out_when_every_case_expects_one_id(tmp_path: Path) -> None:
    r = run_cce("knowledge", "ask", str(_suite(tmp_path, CASES[:2])))
    assert r.returncode == 0, r.stderr
    header = next(ln for ln in r.stdout.splitlines() if ln.startswith("  query"))
    assert header == "  query                           recall       MRR    rank  proven"
    # Two expected ids: P@k says something again.
    two = [{"id": "two", "query": "login", "expect": ["docs/lockout.md", "docs/sessions.md"]}]
    r = run_cce("knowledge", "ask", str(_suite(tmp_path, two)))
    assert "P@k" in r.stdout


def test_the_json_report_carries_no_new_member(tmp_path: Path) -> None:
    r = run_cce("knowledge", "ask", str(_suite(tmp_path, CASES)), "--json")
    doc = json.loads(r.stdout)
    assert set(doc["cases"][0]) == {
        "expected",
        "f1",
        "first_hit_rank",
        "id",
        "k",
        "mrr",
        "precision_at_k",
        "proven",
        "recall",
    }
