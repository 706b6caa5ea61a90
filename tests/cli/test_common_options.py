"""cli/common.py: options declared once — the help layout every parser inherits, the
command groups, on/off switches and durations."""

from __future__ import annotations

import argparse

import pytest

from cce_knowledge.cli.common import HelpFormatter, Parser, add_group, add_seconds, add_switches


def test_every_subcommand_parser_inherits_the_help_layout() -> None:
    top = Parser(prog="t").add_subparsers(dest="group")
    sub = add_group(top, "g", "a group", "The group.")
    leaf = sub.add_parser("leaf", description="line one\n  kept as written")
    assert isinstance(leaf, Parser)
    assert leaf.formatter_class is HelpFormatter
    assert "line one\n  kept as written" in leaf.format_help()


def test_a_group_run_bare_names_its_own_parser() -> None:
    p = Parser(prog="t")
    sub = add_group(p.add_subparsers(dest="group"), "g", "a group", "The group.")
    sub.add_parser("leaf")
    args = p.parse_args(["g"])
    assert args._parser.prog == "t g"
    assert p.parse_args(["g", "leaf"]).command == "leaf"


def test_switches_and_seconds() -> None:
    p = Parser(prog="t")
    add_switches(p, ("--dry-run", "say what would change"), ("--force", "skip the guard"))
    add_seconds(p, "--timeout", 8, "give up after this long")
    assert vars(p.parse_args([])) == {"dry_run": False, "force": False, "timeout": 8.0}
    got = p.parse_args(["--force", "--timeout", "2.5"])
    assert (got.dry_run, got.force, got.timeout) == (False, True, 2.5)
    text = p.format_help()
    assert text.index("--dry-run") < text.index("--force")
    assert "give up after this long (default: 8)" in " ".join(text.split())


def test_seconds_take_their_own_parser() -> None:
    def positive(text: str) -> float:
        v = float(text)
        if v <= 0:
            raise argparse.ArgumentTypeError("must be positive")
        return v

    p = Parser(prog="t", exit_on_error=False)
    add_seconds(p, "--call-timeout", 60, "bound", type=positive)
    assert p.parse_args([]).call_timeout == 60.0
    with pytest.raises(argparse.ArgumentError):
        p.parse_args(["--call-timeout", "0"])
