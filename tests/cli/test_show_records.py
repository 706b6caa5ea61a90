"""`cce knowledge show RECORD_ID` prints a whole record and `record:start-end` a range
across its sections (issue 35 §4); the closest-record hint stays bounded on a store of
look-alike ids (issue 34 §6). Real `cce` processes."""

from __future__ import annotations

import difflib
import itertools
import json
import time
from pathlib import Path

import pytest

from cce_knowledge.core import nearest
from tests.helpers.cce_proc import run_cce

BODY = (
    "Intro line about retries.\n\n## Backoff\n\nWe back off exponentially.\n"
    "The cap is 30 s.\n\n## Clock\n\nA negative elapsed time after an NTP change "
    "showed -990 ms.\nWe use the monotonic clock now."
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("show-records")
    (d / ".cce").mkdir()
    # A tiny section budget: every heading starts a section.
    (d / ".cce" / "config").write_text("markdown:\n  max_section_tokens: 10\n")
    rec = {"id": "docs/retries.md", "title": "Retries", "body": BODY, "source": "docs"}
    other = {"id": "gh:acme/shop#101", "title": "Lock", "body": "Locked.", "source": "docs"}
    feed = d / "feed.jsonl"
    feed.write_text("".join(json.dumps(r) + "\n" for r in (rec, other)))
    r = run_cce("knowledge", "index", str(feed), "--dir", str(d), "-q")
    assert r.returncode == 0, r.stderr
    return d


def test_a_record_id_prints_every_section_with_line_numbers(root: Path) -> None:
    r = run_cce("knowledge", "show", "docs/retries.md", "--dir", str(root))
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        "docs/retries.md:1-3  # Retries\n"
        " 1: # Retries\n 2: \n 3: Intro line about retries.\n"
        "\n"
        "docs/retries.md:5-8  # Retries › ## Backoff\n"
        " 5: ## Backoff\n 6: \n 7: We back off exponentially.\n 8: The cap is 30 s.\n"
        "\n"
        "docs/retries.md:10-13  # Retries › ## Clock\n"
        "10: ## Clock\n11: \n"
        "12: A negative elapsed time after an NTP change showed -990 ms.\n"
        "13: We use the monotonic clock now.\n"
    )


def test_a_range_spans_sections_and_keeps_only_its_lines(root: Path) -> None:
    r = run_cce("knowledge", "show", "docs/retries.md:7-12", "--dir", str(root))
    assert r.returncode == 0, r.stderr
    numbered = [ln.split(":", 1)[0].strip() for ln in r.stdout.splitlines() if ": " in ln]
    assert [n for n in numbered if n.isdigit()] == ["7", "8", "10", "11", "12"]
    assert "docs/retries.md:5-8  # Retries › ## Backoff" in r.stdout
    assert "13: " not in r.stdout and " 5: " not in r.stdout
    doc = json.loads(
        run_cce("knowledge", "show", "docs/retries.md:7-12", "--dir", str(root), "--json").stdout
    )
    assert doc["lines"] == [7, 12] and doc["record_id"] == "docs/retries.md"
    assert [s["lines"] for s in doc["sections"]] == [[5, 8], [10, 13]]
    assert [s["shown_lines"] for s in doc["sections"]] == [[7, 8], [10, 12]]
    assert doc["sections"][1]["content"].endswith("showed -990 ms.")


def test_an_exact_section_still_prints_its_stored_text_alone(root: Path) -> None:
    r = run_cce("knowledge", "show", "docs/retries.md:5-8", "--dir", str(root))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "## Backoff\n\nWe back off exponentially.\nThe cap is 30 s.\n"


def test_misses_name_the_closest_record_or_its_sections(root: Path) -> None:
    r = run_cce("knowledge", "show", "docs/retrys.md", "--dir", str(root))
    assert r.returncode == 1 and r.stdout == ""
    assert "no record `docs/retrys.md` in the installed store; the closest record is " in r.stderr
    assert "docs/retries.md (docs/retries.md:1-3, docs/retries.md:5-8" in r.stderr
    r = run_cce("knowledge", "show", "docs/retries.md:20-30", "--dir", str(root))
    assert r.returncode == 1
    assert "record docs/retries.md has no lines 20-30; its sections: " in r.stderr


# ------------------------------------------------- the closest-record hint, bounded


def _look_alikes(n: int) -> list[str]:
    """`n` ids of 160 characters that differ only in their last digits: difflib's
    cheap bounds reject none of them."""
    return [("docs/" + "design-notes-" * 12)[:151] + f"{i:09d}" for i in range(n)]


def test_the_hint_compares_a_bounded_number_of_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = difflib.SequenceMatcher.ratio

    def counted(self: difflib.SequenceMatcher[str]) -> float:
        nonlocal calls
        calls += 1
        return real(self)

    monkeypatch.setattr(difflib.SequenceMatcher, "ratio", counted)
    ids = _look_alikes(50_000)
    # A typo early on: the sorted neighbours by suffix hold the right one.
    typo = ids[31_337][:40] + "X" + ids[31_337][41:]
    assert nearest.closest(typo, ids) == ids[31_337]
    assert calls <= 4 * 64 + 1  # was one per id: 50,000
    # Few candidates are all compared (the exact answer, whatever the typo).
    mid = ids[13][:70] + "X" + ids[13][71:]
    assert nearest.closest(mid, ids[:100]) == ids[13]


def test_the_hint_grows_linearly_with_look_alike_ids() -> None:
    def timed(n: int) -> float:
        ids = _look_alikes(n)
        t = time.perf_counter()
        nearest.closest(ids[n // 2][:-3] + "zzz", ids)
        return time.perf_counter() - t

    sizes = [10_000, 40_000, 160_000]
    times = [min(timed(n) for _ in range(3)) for n in sizes]
    # 4x the ids: ~4x the time when linear (one sort: a little more), 16x if quadratic.
    assert all(b / a < 8 for a, b in itertools.pairwise(times)), times
    assert times[-1] < 5, times  # was ~2 ms per id compared: 160,000 ids ≈ 5 minutes


def test_show_names_the_closest_of_many_look_alike_records(tmp_path: Path) -> None:
    ids = _look_alikes(3000)
    feed = tmp_path / "feed.jsonl"
    feed.write_text(
        "".join(
            json.dumps({"id": i, "title": "T", "body": "b", "source": "docs"}) + "\n" for i in ids
        )
    )
    assert run_cce("knowledge", "index", str(feed), "--dir", str(tmp_path), "-q").returncode == 0
    typo = ids[1234][:40] + "X" + ids[1234][41:]
    r = run_cce("knowledge", "show", f"{typo}:1-3", "--dir", str(tmp_path))
    assert r.returncode == 1
    assert f"the closest record is {ids[1234]} ({ids[1234]}:1-3)" in r.stderr
