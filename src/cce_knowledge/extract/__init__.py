"""Reference adapters that emit `cce.knowledge/v1` feeds (GitHub, Markdown docs, OKF wikis).

Adapters know the contract and nothing of the store: they produce feed bytes (and an
optional manifest sidecar); `cce knowledge index` does the rest.
"""
