"""The knowledge store: feed -> store bytes (ingest), the on-disk store file, and its mapped view."""
