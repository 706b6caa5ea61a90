"""Corpus sync through a git cache repository (docs/spec/sync.md)."""
