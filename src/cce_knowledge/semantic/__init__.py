"""Semantic retrieval: embedding providers, the derived vectors store, hybrid ranking.

Vectors are derived data, like the search index: they live under
`.cce/knowledge/vectors/`, never change the store or `.cck` bytes, and are safe to
delete (`cce knowledge embed` rebuilds them). See docs/semantic.md.
"""
