"""Shared test helpers: paths, fake servers, store strategies, sync fixtures."""
