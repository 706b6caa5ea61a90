"""`cce knowledge search` shows the answer, and `cce knowledge show` prints a cited
section (issue 21 §1). Real `cce` processes: piped, and on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.pty_run import run_in_pty

# A long record whose answer sits deep in its only section, behind unrelated lines.
FILLER = [f"Paragraph {i} talks about unrelated billing matters and invoices." for i in range(30)]
DEEP_BODY = "\n\n".join(
    [*FILLER[:20], "The session cookie expires after thirty idle minutes.", *FILLER[20:]]
)
HOSTILE = (
    "Rotate the signing key \x1b[2J\x1b]0;owned\x07 every quarter.\n\n"
    "Bidi \u202etxt.exe\u202c and a bell \x07 in the rotation notes."
)


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
    d = tmp_path_factory.mktemp("search-answer")
    feed = d / "feed.jsonl"
    feed.write_text(
        "\n".join(
            [
                _record("docs/sessions.md", "Sessions", DEEP_BODY),
                _record("docs/keys.md", "Key rotation", HOSTILE),
                _record(
                    "gh:acme/shop#101",
                    "Lock accounts after five failed login attempts",
                    "After five consecutive failed login attempts the account is locked.",
                ),
            ]
        )
        + "\n"
    )
    r = _cce("knowledge", "index", str(feed), "--dir", str(d))
    assert r.returncode == 0, r.stderr
    return d


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CCE_PROGRESS")}
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra)
    return env


def _cce(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cce_knowledge", *argv],
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=120,
    )


def test_each_hit_shows_its_best_lines_with_line_numbers(root: Path) -> None:
    r = _cce("knowledge", "search", "when does the session cookie expire", "--dir", str(root))
    assert r.returncode == 0, r.stderr
    first = r.stdout.split("\n\n")[0].splitlines()
    assert first[1].startswith("    docs/sessions.md:1-")
    # The answer, 40 lines into the section, under the hit, with its line number.
    assert "    43: The session cookie expires after thirty idle minutes." in first
    assert len(first) == 2 + 3  # header, citation, three lines
    assert "\x1b" not in r.stdout  # a pipe: plain text


def test_full_prints_the_whole_section(root: Path) -> None:
    r = _cce(
        "knowledge", "search", "session cookie expire", "--dir", str(root), "--full", "-k", "1"
    )
    assert r.returncode == 0, r.stderr
    body = r.stdout.splitlines()[2:]
    assert body[0] == "     1: # Sessions"
    assert "    43: The session cookie expires after thirty idle minutes." in body
    assert body[-1].endswith(FILLER[-1])


def test_json_hits_carry_the_snippet_and_the_section(root: Path) -> None:
    r = _cce("knowledge", "search", "session cookie expire", "--dir", str(root), "--json")
    hit = json.loads(r.stdout)[0]
    assert hit["snippet"][1] == {
        "line": 43,
        "text": "The session cookie expires after thirty idle minutes.",
    }
    assert [s["line"] for s in hit["snippet"]] == [41, 43, 45]
    assert hit["content"].startswith("# Sessions\n\n") and DEEP_BODY in hit["content"]


def test_stored_control_characters_are_escaped_never_printed(root: Path) -> None:
    r = _cce("knowledge", "search", "rotation signing key", "--dir", str(root), "-k", "1")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\u202e" not in r.stdout
    assert "key \\x1b[2J\\x1b]0;owned\\x07 every quarter." in r.stdout
    # Bidi controls are hidden text: the default redaction removed them at index time.
    assert "Bidi txt.exe and a bell \\x07" in r.stdout
    shown = _cce("knowledge", "show", "docs/keys.md:1-5", "--dir", str(root))
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\\x1b[2J" in shown.stdout


@pytest.mark.slow
def test_terms_are_highlighted_on_a_terminal_unless_no_color(root: Path) -> None:
    argv = [sys.executable, "-m", "cce_knowledge", "knowledge", "search"]
    argv += ["session cookie expire", "--dir", str(root), "-k", "1"]
    rc, text = run_in_pty(argv, _env())
    assert rc == 0, text
    assert "The \x1b[1;31msession\x1b[0m \x1b[1;31mcookie\x1b[0m \x1b[1;31mexpires\x1b[0m" in text
    rc, text = run_in_pty(argv, _env(NO_COLOR="1"))
    assert rc == 0, text
    assert "\x1b[" not in text
    assert "43: The session cookie expires after thirty idle minutes." in text
    # Stored escape sequences stay escaped on a terminal too: the only ESC is ours.
    rc, text = run_in_pty([*argv[:5], "rotation signing key", *argv[6:]], _env())
    assert rc == 0, text
    assert "\x1b[2J" not in text and "\x1b]0;" not in text and "\\x1b[2J" in text


def test_show_prints_the_cited_section_exactly(root: Path) -> None:
    r = _cce("knowledge", "search", "failed login attempts", "--dir", str(root), "--json")
    hit = json.loads(r.stdout)[0]
    citation = f"{hit['record_id']}:{hit['lines'][0]}-{hit['lines'][1]}"
    assert citation == "gh:acme/shop#101:1-3"
    shown = _cce("knowledge", "show", citation, "--dir", str(root))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == hit["content"] + "\n"
    # A chunk id, as the hit's header prints it (`#…`) and as MCP's expand_chunk takes it.
    by_id = _cce("knowledge", "show", "#" + hit["chunk_id"], "--dir", str(root))
    assert by_id.stdout == shown.stdout
    doc = json.loads(
        _cce("knowledge", "show", hit["chunk_id"], "--dir", str(root), "--json").stdout
    )
    assert doc["content"] == hit["content"] and doc["citation"] == citation
    assert doc["lines"] == [1, 3] and doc["chunk_id"] == hit["chunk_id"]


def test_show_names_the_closest_record_or_the_records_sections(root: Path) -> None:
    r = _cce("knowledge", "show", "gh:acme/shop#11:1-3", "--dir", str(root))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (
        "error: no record `gh:acme/shop#11` in the installed store; the closest record is "
        "gh:acme/shop#101 (gh:acme/shop#101:1-3) — `cce knowledge search` prints citations\n"
    )
    r = _cce("knowledge", "show", "gh:acme/shop#101:5-9", "--dir", str(root))
    assert r.returncode == 1
    assert "record gh:acme/shop#101 has no lines 5-9; its sections: " in r.stderr
    assert "gh:acme/shop#101:1-3" in r.stderr
    r = _cce("knowledge", "show", "#0123456789abcdef", "--dir", str(root))
    assert r.returncode == 1 and "is not a chunk id of the installed store" in r.stderr
    r = _cce("knowledge", "show", "nonsense", "--dir", str(root))
    assert r.returncode == 1 and "no record `nonsense` in the installed store" in r.stderr
    r = _cce("knowledge", "show", "x:1-2", "--dir", str(root / "nowhere"))
    assert r.returncode == 1 and "no knowledge store under" in r.stderr
