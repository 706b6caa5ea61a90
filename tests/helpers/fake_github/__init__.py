"""A local HTTP server that speaks the GitHub REST API's response shapes (tests/bench)."""

from .server import FakeGitHub, Tracker, make_large_tracker, make_tracker

__all__ = ["FakeGitHub", "Tracker", "make_large_tracker", "make_tracker"]
