"""Byte-pinned primitives shared by ingest and retrieval (no CLI, no git, no network)."""
