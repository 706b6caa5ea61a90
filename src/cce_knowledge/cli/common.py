"""Small helpers shared by command modules."""

from __future__ import annotations

import argparse


def add_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        default=".",
        metavar="ROOT",
        help="project root holding .cce/ (default: the current directory)",
    )


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (a bar on a terminal, a line every few seconds otherwise)",
    )
