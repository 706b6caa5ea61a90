"""The lines under a hit hold the query's rare word, not the section's intro
(issue 35 §5). A real `cce` process over a real indexed store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.cce_proc import run_cce
from tests.helpers.paths import REPO

# The intro repeats the query's common words; the answer, further down, holds the rare
# one ("NTP"), which only this record of the corpus uses.
CLOCKS = "\n".join(
    [
        "# Elapsed time",
        "",
        "A negative elapsed time after a change of step is an error.",
        "Elapsed time is measured between two readings of the time source.",
        "A negative elapsed time after a change is reported, then the step retries.",
        "Timers keep running while the process sleeps.",
        "Readings are taken on the thread that started the timer.",
        "Each step reports its own duration as well.",
        "",
        "Once the wall clock jumped back after an NTP sync: -990 ms.",
        "The monotonic clock is used since, so the jump no longer shows.",
    ]
)
# Other records use the common words and pairs, so they are common in the corpus.
OTHERS = [f"Step {i}: a negative elapsed time after a change is an error." for i in range(8)]


def _record(rid: str, title: str, body: str) -> str:
    return json.dumps(
        {
            "id": rid,
            "title": title,
            "body": body,
            "source": "docs",
            "updated_at": "2026-03-01T00:00:00Z",
        }
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("rare-snippet")
    feed = d / "feed.jsonl"
    lines = [_record("docs/clocks.md", "Clocks", CLOCKS)]
    lines += [_record(f"docs/step{i}.md", f"Step {i}", b) for i, b in enumerate(OTHERS)]
    feed.write_text("\n".join(lines) + "\n")
    r = run_cce("knowledge", "index", str(feed), "--dir", str(d), env=_env())
    assert r.returncode == 0, r.stderr
    return d


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CCE_PROGRESS")}
    env["PYTHONPATH"] = str(REPO / "src")
    return env


def test_the_snippet_holds_the_rare_word_further_down(root: Path) -> None:
    q = "negative elapsed time after an NTP change"
    r = run_cce("knowledge", "search", q, "--dir", str(root), "--json", "-k", "3", env=_env())
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    hit = next(h for h in hits if h["record_id"] == "docs/clocks.md")
    texts = [s["text"] for s in hit["snippet"]]
    assert any("NTP" in t and "-990 ms" in t for t in texts), texts
    assert not any(t.startswith("#") for t in texts)
    text = run_cce("knowledge", "search", q, "--dir", str(root), "-k", "3", env=_env())
    assert text.returncode == 0, text.stderr
    assert "-990 ms" in text.stdout
