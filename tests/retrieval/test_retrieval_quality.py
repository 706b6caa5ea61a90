"""Default ranking quality on the shipped ask suites (issue #3), against the reference.

Corpus: tests/fixtures/quality/rfcs-lead.jsonl.gz — the 647 Rust RFC records of the
bench corpus cut to their first ~3000 characters (title, summary, motivation), so
the test is self-contained. Suites: examples/rfcs-dev-suite.ask.jsonl (70) and the
held-out examples/rfcs-holdout.ask.jsonl (50), rfcs-holdout2.ask.jsonl,
rfcs-holdout3.ask.jsonl and rfcs-holdout4.ask.jsonl (60 each, each about RFCs no
earlier suite uses). rfcs-holdout5.ask.jsonl and rfcs-holdout6.ask.jsonl (60 each,
mostly reworded) were written to judge the hybrid ranking, each read once for that
(docs/ranking.md#hybrid); only the overlap check sees them here. The assertion is a
margin over the
reference ranking on each suite and an absolute floor well below the measured
figures, not pinned numbers: a change that breaks ranking fails, tuning noise does not.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest

from cce_knowledge.contract.asksuite import parse_suite
from cce_knowledge.retrieval.search_index import SearchIndex, build_bytes
from cce_knowledge.store.ingest import ingest_feed
from tests.helpers.paths import REPO

ROOT = REPO
CORPUS = ROOT / "tests" / "fixtures" / "quality" / "rfcs-lead.jsonl.gz"
SUITES = [
    "rfcs-dev-suite.ask.jsonl",
    "rfcs-holdout.ask.jsonl",
    "rfcs-holdout2.ask.jsonl",
    "rfcs-holdout3.ask.jsonl",
    "rfcs-holdout4.ask.jsonl",
]
#: Absolute hit@5 floors, well below the measured figures on the cut corpus (dev 0.96,
#: held-out 0.92, held-out 2 0.83 — the harder suite gets a lower floor; held-out 3
#: and 4 were added after the ranking was final, with the same floor as held-out 2).
HIT_FLOOR = {SUITES[0]: 0.80, SUITES[1]: 0.80, SUITES[2]: 0.75, SUITES[3]: 0.75, SUITES[4]: 0.75}
#: The hybrid ranking's judging suites: checked for independence only (no test ranks
#: them, so a test run never reads them with a ranking).
UNREAD = ["rfcs-holdout5.ask.jsonl", "rfcs-holdout6.ask.jsonl"]


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    store = ingest_feed(gzip.decompress(CORPUS.read_bytes()), 400)
    return SearchIndex(Path("mem"), build_bytes(store), lambda: store)


def _measure(rank: Callable[[str], list[str]], suite: str) -> tuple[float, float]:
    cases = parse_suite((ROOT / "examples" / suite).read_text(encoding="utf-8")).cases
    hits, rr = 0, 0.0
    for c in cases:
        recs: list[str] = []
        for r in rank(c.query):
            if r not in recs:
                recs.append(r)
        first = next((i for i, r in enumerate(recs[:10], 1) if r in c.expect), None)
        hits += first is not None and first <= 5
        rr += 1.0 / first if first else 0.0
    return hits / len(cases), rr / len(cases)


@pytest.mark.parametrize("suite", SUITES)
def test_default_beats_reference_with_a_margin(index: SearchIndex, suite: str) -> None:
    d_hit, d_mrr = _measure(lambda q: [h.record_id for h in index.search(q, 10, 0.0)], suite)
    r_hit, r_mrr = _measure(
        lambda q: [h.record_id for h in index.search(q, 30, 0.0, ranking="reference")], suite
    )
    assert d_hit >= r_hit + 0.10, (suite, d_hit, r_hit)
    assert d_mrr >= r_mrr + 0.15, (suite, d_mrr, r_mrr)
    assert d_hit >= HIT_FLOOR[suite] and d_mrr >= 0.65, (suite, d_hit, d_mrr)


def test_suites_do_not_overlap() -> None:
    """The held-out suites stay independent: no shared question ids or query texts, and
    each suite after the first held-out one expects none of the records any earlier
    suite expects."""
    names = SUITES + UNREAD
    suites = [parse_suite((ROOT / "examples" / s).read_text(encoding="utf-8")).cases for s in names]
    for i, a in enumerate(suites):
        for b in suites[i + 1 :]:
            assert not {c.id for c in a} & {c.id for c in b}
            assert not {c.query for c in a} & {c.query for c in b}
    for n in range(2, len(suites)):
        earlier = {e for cases in suites[:n] for c in cases for e in c.expect}
        assert not earlier & {e for c in suites[n] for e in c.expect}, names[n]
