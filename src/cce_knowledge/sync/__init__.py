"""Corpus sync through a git cache repository (conformance-sync.md)."""
