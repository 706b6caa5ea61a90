"""Text analysis for the default ranking: words, identifier sub-words, stopwords, stemming.

Deterministic and keyless: ASCII word runs, ASCII-only lowercasing, a fixed stopword
list and a small suffix stemmer (written for this project; no external model).
`getUserName` yields `getusername get user name`; `aws_eks_cluster` yields
`aws_eks_cluster aws eks cluster` — the whole identifier stays searchable.
"""

from __future__ import annotations

import re
from itertools import chain, pairwise
from operator import itemgetter

_WORD = re.compile(r"[A-Za-z0-9_]+")
# Sub-word boundaries inside one identifier: lower→Upper, ACRONYMWord, letter↔digit.
_SUBWORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}

STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing done down during each few
for from further had has have having he her here hers herself him himself his how i if
in into is it its itself just me more most my myself no nor not now of off on once only
or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under
until up very was we were what when where which while who whom why will with would you
your yours yourself yourselves get got us let lets want wants way ways thing things
something anything happen happens happened mean means s t don should now also whether
instead actually rather either neither e g eg ie etc via per shall may might must
""".split()
)

_VOWELS = frozenset("aeiouy")


def _has_vowel(s: str) -> bool:
    return any(ch in _VOWELS for ch in s)


#: Derivational and inflectional endings, tried in this order; the first that ends the
#: word is the only one considered.
_SUFFIXES = (
    "ational",
    "ation",
    "ations",
    "ator",
    "ness",
    "ment",
    "ingly",
    "edly",
    "ly",
    "ing",
    "ed",
)


def stem(w: str) -> str:
    """A light English suffix stemmer (plurals, -ing/-ed/-ly, a few derivations).

    Built so inflections of one word meet: make/makes/making/made→mak is not attempted
    (irregulars stay apart); locks/locked/locking→lock, lifetimes→lifetim,
    allocations/allocation/allocate→alloc.
    """
    if len(w) <= 3 or not w.isalpha():
        return w
    return _tidy(_strip_suffix(_singular(w)))


def _singular(w: str) -> str:
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def _strip_suffix(w: str) -> str:
    for suf in _SUFFIXES:
        if not w.endswith(suf):
            continue
        base = w[: -len(suf)]
        if len(base) < 3 or not _has_vowel(base):
            return w
        if (
            suf in ("ing", "ed")
            and len(base) >= 4
            and base[-1] == base[-2]
            and base[-1] not in "lsz"
        ):
            return base[:-1]  # undouble: running→run, stopped→stop
        return base
    return w


def _tidy(w: str) -> str:
    if w.endswith("ize") or w.endswith("ise"):
        w = w[:-3] if len(w) > 5 else w
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 4 and w.endswith("y"):
        w = w[:-1] + "i"
    return w


_STEM_CACHE: dict[str, str] = {}


def _term(low: str) -> str | None:
    if low in STOPWORDS:
        return None
    t = _STEM_CACHE.get(low)
    if t is None:
        t = stem(low)
        if len(_STEM_CACHE) < 500_000:
            _STEM_CACHE[low] = t
    return t


_SPLIT_CACHE: dict[str, tuple[str, ...]] = {}


def _token_terms(tok: str) -> tuple[str, ...]:
    r = _SPLIT_CACHE.get(tok)
    if r is not None:
        return r
    low = tok.translate(_LOWER)
    out: list[str] = []
    parts = [p for seg in tok.split("_") for p in _SUBWORD.findall(seg)]
    # An identifier (several sub-words) is kept verbatim; a plain word is stemmed.
    whole = (low if low not in STOPWORDS else None) if len(parts) > 1 else _term(low)
    if whole is not None:
        out.append(whole)
    if len(parts) > 1:
        for p in parts:
            t = _term(p.translate(_LOWER))
            if t is not None and t != whole:
                out.append(t)
    r = tuple(out)
    if len(_SPLIT_CACHE) < 500_000:
        _SPLIT_CACHE[tok] = r
    return r


#: Pairs of neighbouring words (stopwords removed) are indexed as extra terms
#: `"a b"`, so a record that says "lock file" beats one that mentions "lock" and
#: "file" pages apart. A space never occurs inside a word term.
BIGRAMS = True

_chain = chain.from_iterable
_first = itemgetter(0)


def analyze(text: str) -> list[str]:
    """Index/query terms of `text`, in order (duplicates kept): words, sub-words, pairs."""
    toks = _WORD.findall(text)
    # Every step maps or joins in C: an index build analyses every token of the store,
    # and a Python-level loop per token was most of its cost.
    tt: list[tuple[str, ...] | None] = list(map(_SPLIT_CACHE.get, toks))
    if None in tt:
        tt = [t if t is not None else _token_terms(k) for t, k in zip(tt, toks, strict=True)]
    runs: list[tuple[str, ...]] = list(filter(None, tt))
    out = list(_chain(runs))
    if BIGRAMS and len(runs) > 1:
        out += map(" ".join, pairwise(map(_first, runs)))
    return out


def is_pair(term: str) -> bool:
    return " " in term


def query_terms(query: str) -> list[str]:
    """Unique terms of a query in first-occurrence order."""
    seen: set[str] = set()
    out: list[str] = []
    for t in analyze(query):
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out
