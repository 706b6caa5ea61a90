"""The lines under a hit: does the top hit's snippet hold the query's rarest word?

    python bench/eval_snippets.py CORPUS.jsonl SUITE.ask.jsonl [SUITE2 …] [--before REF]

For each question, the default ranking's top hit (no floor). The question counts when
that hit's section holds at least one query word; its *rarest* word is the query word
the section holds with the lowest document frequency in the search index (ties: the
first in sorted order). Reported per suite, before and after in the same run: the share
of counted questions whose three-line snippet holds that word, and the warm in-process
p50 of search + choosing the lines for every hit (k = 8), interleaved.

*Before* is `retrieval/snippet.py` as committed at `--before` (default 7060dc7, the last commit before the change), read
with `git show` and loaded beside the current module; *after* is the current module,
given the corpus idf as `cce knowledge search` gives it. Pass development suites only
(docs/ranking.md#the-lines-under-a-hit-snippets).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any


def _old_module(ref: str) -> types.ModuleType:
    src = subprocess.run(
        ["git", "show", f"{ref}:src/cce_knowledge/retrieval/snippet.py"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    mod = types.ModuleType("snippet_before")
    mod.__dict__["__name__"] = "snippet_before"
    sys.modules["snippet_before"] = mod  # dataclasses look their module up by name
    exec(compile(src, f"{ref}:snippet.py", "exec"), mod.__dict__)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("corpus")
    ap.add_argument("suite", nargs="+")
    ap.add_argument("--before", default="7060dc7", help="git ref of the old snippet.py")
    ap.add_argument("--repeat", type=int, default=5, help="latency rounds per question")
    ap.add_argument("--show", action="store_true", help="list the questions that changed")
    a = ap.parse_args()

    from cce_knowledge.contract.asksuite import parse_suite
    from cce_knowledge.retrieval import snippet as new
    from cce_knowledge.retrieval.analyze import analyze, is_pair, query_terms
    from cce_knowledge.retrieval.search_index import SearchIndex, build_bytes
    from cce_knowledge.store.ingest import ingest_feed

    old = _old_module(a.before)
    store = ingest_feed(Path(a.corpus).read_bytes(), 400)
    fi = SearchIndex(Path("mem"), build_bytes(store), lambda: store)

    def lines_old(q: str, hits: list[Any]) -> list[list[str]]:
        query = old.Query(q)
        return [[ln.text for ln in old.best_lines(h.content, h.start_line, query)] for h in hits]

    def lines_new(q: str, hits: list[Any]) -> list[list[str]]:
        query = new.Query(q, fi.idfs(query_terms(q)))
        return [[ln.text for ln in new.best_lines(h.content, h.start_line, query)] for h in hits]

    print(f"corpus {a.corpus}: {store.records} records, {len(store.chunks)} chunks")
    print(f"before: {a.before}:src/cce_knowledge/retrieval/snippet.py; after: this tree")
    print()
    print("| suite | questions counted | before | after | p50 before | p50 after |")
    print("|---|---|---|---|---|---|")
    totals = [0, 0, 0]
    all_t: tuple[list[float], list[float]] = ([], [])
    for path in a.suite:
        cases = parse_suite(Path(path).read_text(encoding="utf-8")).cases
        counted = got_old = got_new = 0
        t_old: list[float] = []
        t_new: list[float] = []
        for c in cases:
            hits = fi.search(c.query, 1, 0.0, ranking="default")
            if not hits:
                continue
            words = sorted({t for t in query_terms(c.query) if not is_pair(t)})
            held = set(analyze(hits[0].content))
            present = [w for w in words if w in held]
            if not present:
                continue
            idfs = fi.idfs(present)
            rare = present[0]  # `present` is sorted: a tie keeps the first
            for w in present[1:]:
                if idfs[w] > idfs[rare]:
                    rare = w
            counted += 1
            before = lines_old(c.query, hits)[0]
            after = lines_new(c.query, hits)[0]
            hb = any(rare in analyze(t) for t in before)
            ha = any(rare in analyze(t) for t in after)
            got_old += hb
            got_new += ha
            if a.show and hb != ha:
                print(f"  {c.id}: rarest {rare!r}: {'lost' if hb else 'gained'}", file=sys.stderr)
            for _ in range(a.repeat):  # interleaved, so drift hits both alike
                for fn, ts in ((lines_old, t_old), (lines_new, t_new)):
                    t0 = time.perf_counter()
                    fn(c.query, fi.search(c.query, 8, 0.0, ranking="default"))
                    ts.append(time.perf_counter() - t0)
        totals[0] += counted
        totals[1] += got_old
        totals[2] += got_new
        all_t[0].extend(t_old)
        all_t[1].extend(t_new)
        _row(Path(path).name, counted, got_old, got_new, t_old, t_new)
    if len(a.suite) > 1:
        _row("all", totals[0], totals[1], totals[2], all_t[0], all_t[1])
    return 0


def _row(name: str, n: int, b: int, f: int, tb: list[float], tf: list[float]) -> None:
    def share(x: int) -> str:
        return f"{x}/{n} = {x / n:.3f}" if n else "—"

    def p50(ts: list[float]) -> str:
        return f"{statistics.median(ts) * 1000:.2f} ms" if ts else "—"

    print(f"| {name} | {n} | {share(b)} | {share(f)} | {p50(tb)} | {p50(tf)} |")


if __name__ == "__main__":
    raise SystemExit(main())
