"""Output as values: a command hands its result to the reporter of the format the user
chose (`--json` picks `json`, else `text`), one reporter per format, chosen by name.

A command describes its result once, as a `Report` (how to render it for people, and
the data programs get); it never branches on the format itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TextIO

from cce_knowledge.core.jsonout import pretty


@dataclass(frozen=True)
class Report:
    """A command's result: `text()` for people, `data()` for programs."""

    text: Callable[[], str]
    data: Callable[[], object]
    #: JSON object keys sorted (most reports) or in declaration order (kept as they were)
    sort_keys: bool = True


class Reporter(Protocol):
    name: str

    def emit(self, report: Report, out: TextIO) -> None: ...


class TextReporter:
    name = "text"

    def emit(self, report: Report, out: TextIO) -> None:
        out.write(report.text())


class JsonReporter:
    name = "json"

    def emit(self, report: Report, out: TextIO) -> None:
        out.write(pretty(report.data(), sort_keys=report.sort_keys) + "\n")


REPORTERS: dict[str, Reporter] = {r.name: r for r in (TextReporter(), JsonReporter())}


def reporter_for(args: argparse.Namespace) -> Reporter:
    """The reporter the command line chose."""
    return REPORTERS["json" if getattr(args, "json", False) else "text"]


def emit(args: argparse.Namespace, report: Report, out: TextIO | None = None) -> None:
    """Write `report` in the format the command line chose."""
    reporter_for(args).emit(report, out if out is not None else sys.stdout)
